"""The drafter: speculators' EAGLE-3 model (`Eagle3DraftModel`), with its config defaults and its loss.

speculators is an optional extra (`pip install 'kimi-eagle-data[probe]'`, see docs/probe.md): it pulls torchvision and
torchaudio built for another torch, which break transformers' imports beside the CPU torch, so they are removed after
it installs. `require_speculators` says so in one line when it is missing or broken.

The model is built as speculators' trainer builds it (`create_transformer_layer_config` from the target, then
`Eagle3DraftModel.from_training_args` with the EAGLE-3 defaults of speculators' train config: 1 layer, norm before the
residual, norm before fc, norm on the output, 3 TTT steps, sliding window 2048), with eager attention and the eager
`kl_div` loss, which run on CPU (the default flex attention and the fused loss need a GPU and Triton).

This is the one module that knows speculators' internals, checked against speculators 0.9.0 (`require_speculators`
refuses another version in one line): which auxiliary layers its EAGLE-3 reads (`aux_layer_ids`), how it saves a
drafter (`save_drafter`), and `Eagle3Drafter.propose`, which drafts with the trained model for the in-process decoder
(probe/decode.py) through the model's own modules and private members (`_build_attn_mask`, `sliding_window_indices`,
`uses_full_attn`, `d2t`, `fc_norm`): the steps of the model's own forward (fc over the target's auxiliary states, then per draft token: embedding beside the previous
hidden state, the decoder layers, the norm, lm_head), one draft token at a time with a KV cache, instead of the
forward's training-time unrolling, which feeds the reference tokens (teacher forcing) rather than its own drafts;
and `trainer_device`, which lets speculators' own `Trainer` run on CPU (its local rank, its step timer's synchronize).
"""

from __future__ import annotations

import json
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version as installed_version
from pathlib import Path
from typing import Any

import torch

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.probe.decode import DraftState

SPECULATORS_VERSION = "0.9.0"
INSTALL = (f"pip install 'speculators=={SPECULATORS_VERSION}' torch==2.13.0 && pip uninstall -y torchvision "
           "torchaudio")
# speculators' EAGLE-3 defaults (speculators/train/config/schema.py, 0.9.0)
LAYERS = 1
TTT_STEPS = 3
LEARNING_RATE = 1e-3
SLIDING_WINDOW = 2048
PROVENANCE = "provenance.json"
DTYPE = torch.bfloat16         # saved weights (half the bytes of float32; the engines serve bf16, the probe decodes fp32)


class ProbeSetupError(KimiDataError):
    """What the probe needs is not installed (one line: what, and the command that installs it)."""


def require_speculators() -> None:
    """ProbeSetupError unless speculators imports (with transformers beside it) at the version whose internals this
    module uses (`Eagle3Drafter.propose`, `trainer_device`)."""
    try:
        import speculators.models.eagle3  # noqa: F401
    except ImportError as e:
        raise ProbeSetupError(f"kimi-data probe trains speculators' EAGLE-3 model and cannot import it ({e}); "
                              f"install it: {INSTALL}") from None
    except Exception as e:  # noqa: BLE001 - torchvision beside the CPU torch fails with RuntimeError/ModuleNotFound…
        raise ProbeSetupError(f"speculators is installed but does not import ({type(e).__name__}: "
                              f"{' '.join(str(e).split())[:160]}); torchvision/torchaudio built for another torch "
                              f"break it: {INSTALL}") from None
    try:
        found = installed_version("speculators")
    except PackageNotFoundError:      # importable without its metadata (a source tree on the path)
        found = None
    if found != SPECULATORS_VERSION:
        raise ProbeSetupError(f"kimi-data probe drafts through speculators {SPECULATORS_VERSION}'s EAGLE-3 internals and "
                              f"found speculators {found or '(no version)'}; install the one it was checked against: "
                              f"{INSTALL}")


@dataclass(frozen=True)
class DrafterSpec:
    """What builds a drafter: the target, its auxiliary layers, and the drafter's shape."""

    target_path: str
    aux_layers: tuple[int, ...]
    layers: int = LAYERS
    ttt_steps: int = TTT_STEPS

    def describe(self, model) -> dict[str, Any]:
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        cfg = model.config.transformer_layer_config
        return {"model": "speculators Eagle3DraftModel", "speculators": SPECULATORS_VERSION, "layers": self.layers,
                "hidden_size": int(cfg.hidden_size), "draft_vocab_size": int(model.draft_vocab_size),
                "trainable_parameters": int(trainable), "aux_layers": list(self.aux_layers),
                "ttt_steps": self.ttt_steps, "loss": "kl_div (eager)", "attention": "eager"}


def new_drafter(spec: DrafterSpec, seed: int):
    """A freshly initialised drafter (seeded), its embeddings and lm_head loaded from the target."""
    from loguru import logger
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.train.cli import create_transformer_layer_config
    from transformers import AutoConfig

    logger.disable("speculators")     # its loading notes (a tied lm_head "not found") are not the probe's output

    vocab = AutoConfig.from_pretrained(spec.target_path).vocab_size
    layer_config = create_transformer_layer_config(spec.target_path, num_layers=spec.layers, draft_arch="llama",
                                                   hidden_act=None, sliding_window=SLIDING_WINDOW,
                                                   full_attention_indices=[])
    torch.manual_seed(seed)
    return Eagle3DraftModel.from_training_args(
        layer_config, t2d=None, d2t=None, target_layer_ids=list(spec.aux_layers),
        verifier_name_or_path=spec.target_path, draft_vocab_size=vocab, norm_before_residual=True,
        norm_before_fc=True, norm_output=True, ttt_steps=spec.ttt_steps, draft_attn_impl="eager")


def save_drafter(model, out: Path, profile_name: str, provenance: dict[str, Any]) -> None:
    """`model` saved as speculators saves a drafter, its verifier named by profile, and its provenance beside it."""
    import copy

    out.mkdir(parents=True, exist_ok=True)
    shipped = copy.deepcopy(model).to(DTYPE)
    shipped.config.speculators_config.verifier.name_or_path = profile_name
    shipped.save_pretrained(out)
    drop_config_code(out)
    (out / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")


def drop_config_code(out: Path) -> None:
    """Remove the copy of speculators' config class that `save_pretrained` writes beside the config (`config.py`,
    named by `auto_map`): no third-party model code ships with us, and speculators (so `load_drafter`) and vLLM
    read the config through speculators' own registered class."""
    (out / "config.py").unlink(missing_ok=True)
    config_path = out / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.pop("auto_map", None) is not None:
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def aux_layer_ids(num_layers: int) -> list[int]:
    """speculators' default auxiliary layers ([2, N//2, N-3]), or, on a target too shallow for those to be distinct
    (the tiny models have 4 layers: [2, 2, 1]), low/mid/high spread over it."""
    default = [2, num_layers // 2, num_layers - 3]
    if len(set(default)) == 3 and min(default) >= 0:
        return default
    return [1, num_layers // 2, num_layers - 1]


def loss_config():
    from speculators.losses import resolve_loss_config

    return resolve_loss_config("kl_div", implementation="eager")


class Eagle3Drafter:
    """A trained Eagle3DraftModel as the decoder's drafter."""

    def __init__(self, model):
        self.model = model.eval()

    @torch.no_grad()
    def propose(self, state: DraftState, k: int) -> list[int]:
        from transformers import DynamicCache

        m = self.model
        if k <= 0 or len(state.ids) < 2:
            return []
        # (token i+1, target state i) pairs, as speculators' shift_batch aligns them; positions start at 1
        ids = torch.tensor([state.ids[1:]], dtype=torch.long)
        n = ids.shape[1]
        positions = torch.arange(1, n + 1).unsqueeze(0)
        hidden = state.aux.unsqueeze(0).to(m.fc.weight.dtype)
        if m.input_norm is not None:
            hidden = m.input_norm(hidden)
        if m.fc_norm is not None:
            hidden = torch.cat([norm(c) for norm, c in zip(m.fc_norm, hidden.chunk(len(m.fc_norm), dim=-1))], dim=-1)
        hidden = m.fc(hidden)
        doc = torch.zeros(n, dtype=torch.long)
        masks = {"full": m._build_attn_mask(doc, n, "cpu") if m.uses_full_attn else None,
                 "sliding": m._build_attn_mask(doc, n, "cpu", m.sliding_window) if m.uses_sliding_window_attn
                 else None}
        cache = DynamicCache()
        drafts: list[int] = []
        for step in range(k):
            x = torch.cat([m.embed_tokens(ids), hidden], dim=-1)
            embeddings = m.rotary_emb(x, positions)
            start = 0 if step == 0 else n + step - 1
            cache_position = torch.arange(start, start + x.shape[1])
            for i, layer in enumerate(m.layers):
                mask = (masks["sliding"] if i in m.sliding_window_indices else masks["full"]) if step == 0 else None
                x = layer(x, attention_mask=mask, position_ids=positions, past_key_values=cache,
                          cache_position=cache_position, position_embeddings=embeddings)
            if m.config.norm_output:
                x = m.norm(x)
                logits = m.lm_head(x)
            else:
                logits = m.lm_head(m.norm(x))
            token = int(logits[0, -1].argmax())
            if m.use_draft_vocab:                 # a draft-vocabulary id to the target's (speculators' d2t offsets)
                token += int(m.d2t[token])
            drafts.append(token)
            ids = torch.tensor([[token]])
            hidden = x[:, -1:]
            positions = positions[:, -1:] + 1
        return drafts




@contextmanager
def trainer_device(device: str):
    """speculators' `Trainer` on `device`. Its 0.9.0 release assumes an accelerator: it moves the model and each batch
    to `speculators.train.distributed.get_local_rank()` (0: the first accelerator) and times every logged step with
    `torch.accelerator.synchronize()`; without an accelerator both fail ("RuntimeError: Cannot access accelerator
    device when none is available", measured: docs/probe.md). On "cpu", while it trains, the local rank is the CPU
    device and the synchronize a no-op (nothing to wait for); on an accelerator nothing changes."""
    if device != "cpu":
        yield
        return
    import speculators.train.distributed as distributed

    rank, synchronize = distributed._local_rank, torch.accelerator.synchronize   # noqa: SLF001
    distributed._local_rank = torch.device("cpu")                                 # noqa: SLF001
    torch.accelerator.synchronize = lambda *a, **k: None
    try:
        with warnings.catch_warnings():     # its autocast names CUDA's device type, which torch disables on CPU
            warnings.filterwarnings("ignore", message="CUDA is not available", category=UserWarning)
            yield
    finally:
        distributed._local_rank, torch.accelerator.synchronize = rank, synchronize  # noqa: SLF001


def load_drafter(drafter_dir: str | Path, target_path: str):
    """A shipped drafter as speculators loads one (`from_pretrained`), its verifier the installed model at
    `target_path`, in float32 and in eval mode."""
    from loguru import logger
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

    logger.disable("speculators")
    config = Eagle3SpeculatorConfig.from_pretrained(str(drafter_dir))
    config.speculators_config.verifier.name_or_path = target_path
    config.transformer_layer_config._attn_implementation = "eager"      # noqa: SLF001 - as trained: CPU, no flex
    model = Eagle3DraftModel.from_pretrained(str(drafter_dir), config=config, dtype=torch.float32)
    return model.eval()
