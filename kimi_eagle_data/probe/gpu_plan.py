"""`kimi-data probe --dry-run`: the probe of a real target on a GPU node, projected and written out as commands.

On a GPU node the arms' hidden states come from vLLM through speculators' extraction (its scripts/launch_vllm.py,
then scripts/data_generation_offline.py), speculators' own trainer (scripts/train.py) trains each arm's drafter per
seed, and `kimi-data probe --drafter ARM=DIR --engine vllm` serves every drafter with the target and measures its
acceptance on the held-out prompts. Each arm's rows come from `kimi-data probe --write-arms DIR` on the workdir built
for that model. Nothing here runs them.

The target's shape (layers, hidden size) comes from its config.json: the workdir's model, a Hub id or local directory
(`--model`), or a profile's model (`--profile`). The token counts come from the workdir's dataset (every probed
config's train rows), or `--tokens N` with the dataset's share of loss tokens: so a K2.5 or K3 run can be projected
from the demo's workdir. What is projected, per arm and in all:
- the tokens each arm's extraction reads (own: the data; upstream: the same prompts with the source's answers, counted
  as long as the own rows; the learning curve's ¼ and ½: those shares of the own rows);
- the hidden-state bytes (tokens × (3 auxiliary + the last) layers × hidden size × 2 bytes, bf16);
- each drafter's loss tokens (`--budget`, default one pass over the own arm's loss tokens, equal for every arm) and its
  training steps (the tokens read to reach them, packed into speculators' 8,192-token sequences, one per GPU);
- given rates, the wall time of extraction (`--prefill-rate`) and training (`--train-rate`).
The history arms (own_history configs) are not part of it: their source-history turns are answered by the target
in-process, which a GPU node's target does not fit.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.probe.arms import CURVE
from kimi_eagle_data.probe.drafter import aux_layer_ids

BYTES_PER_VALUE = 2      # bf16, as vLLM writes them
TOTAL_SEQ_LEN = 8192     # speculators' train.py default (--total-seq-len): tokens packed into one step per GPU
UPSTREAM, OWN = "upstream", "own"


class ModelConfigError(KimiDataError):
    """The target's config.json cannot be read (one line: which model, why, what to do)."""


@dataclass(frozen=True)
class Shape:
    model: str
    layers: int
    hidden: int


def model_shape(model: str) -> Shape:
    """Layers and hidden size of `model` (a local directory or a Hub id) from its config.json (a multimodal
    checkpoint's `text_config`); read as JSON, so no model code runs."""
    path = Path(model)
    try:
        if path.is_dir():
            file = path / "config.json"
            if not file.is_file():
                raise ModelConfigError(f"{model} has no config.json; give --model a Hub id or a model directory")
        else:
            from huggingface_hub import hf_hub_download

            file = Path(hf_hub_download(model, "config.json"))
        cfg = json.loads(file.read_text(encoding="utf-8"))
    except ModelConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - hub errors (not found, offline, bad id) and JSON errors alike: one line
        why = " ".join(str(e).split()).split(". ")[0][:160]
        raise ModelConfigError(f"cannot read the config.json of model {model!r} ({type(e).__name__}: {why}); give "
                               "--model an existing Hub id (reachable from here, or in the Hub cache) or a directory "
                               "holding its config.json") from None
    text = cfg.get("text_config") or cfg
    try:
        return Shape(model, int(text["num_hidden_layers"]), int(text["hidden_size"]))
    except (KeyError, TypeError, ValueError):
        raise ModelConfigError(f"the config.json of {model!r} names no num_hidden_layers and hidden_size; is it a "
                               "causal language model's?") from None


def dataset_tokens(dataset: Path, configs: list[str] | None = None) -> tuple[int, int]:
    """(tokens, loss tokens) of a dataset's train rows, in `configs` (every config when None or empty)."""
    manifest = json.loads((dataset / "manifest.json").read_text())
    tokens = loss = 0
    for config, entry in manifest["configs"].items():
        if configs and config not in configs:
            continue
        for name in (entry["splits"].get("train") or {}).get("files", []):
            t = pq.read_table(dataset / "data" / config / name, columns=["input_ids", "loss_mask"])
            tokens += int(pc.sum(pc.list_value_length(t.column("input_ids"))).as_py() or 0)
            loss += int(pc.sum(pc.list_flatten(t.column("loss_mask"))).as_py() or 0)
    return tokens, loss


def _size(n: float) -> str:
    if n >= 2**40:
        return f"{n / 2**40:,.1f} TiB"
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"


def duration(seconds: float) -> str:
    """A projected time as a reader takes it in: seconds under 6 s, minutes under an hour, hours above."""
    if seconds < 3600:
        return f"{seconds / 60:.1f} min" if seconds >= 6 else f"{seconds:.0f} s"
    return f"{seconds / 3600:.2f} h"


def arm_slug(arm: str) -> str:
    """An arm's name as a folder name (`own 0.25` -> `own-0.25`)."""
    return arm.replace(" ", "-")


@dataclass(frozen=True)
class Arm:
    name: str
    share: float        # of the own rows' tokens that its extraction reads (upstream: 1, counted as the own rows)

    @property
    def slug(self) -> str:
        return arm_slug(self.name)


def gpu_arms(upstream: bool = True, curve: bool = True) -> list[Arm]:
    arms = [Arm(OWN, 1.0)] + ([Arm(UPSTREAM, 1.0)] if upstream else [])
    return arms + ([Arm(f"own {s:g}", s) for s in CURVE[:-1]] if curve else [])


@dataclass(frozen=True)
class Projection:
    shape: Shape
    tokens: int                  # the own data's
    loss_tokens: int             # the own data's
    arms: list[Arm]
    seeds: int
    budget: int                  # loss tokens per drafter
    gpus: int

    @property
    def aux(self) -> list[int]:
        return aux_layer_ids(self.shape.layers)

    def arm_tokens(self, arm: Arm) -> int:
        return round(self.tokens * arm.share)

    @property
    def extraction_tokens(self) -> int:
        return sum(self.arm_tokens(a) for a in self.arms)

    @property
    def hidden_state_bytes(self) -> int:
        return self.extraction_tokens * (len(self.aux) + 1) * self.shape.hidden * BYTES_PER_VALUE

    @property
    def drafters(self) -> int:
        return len(self.arms) * self.seeds

    @property
    def training_tokens(self) -> int:
        """Tokens a drafter reads to reach its loss-token budget, at the data's share of loss tokens."""
        return math.ceil(self.budget * self.tokens / max(1, self.loss_tokens))

    @property
    def steps(self) -> int:
        return math.ceil(self.training_tokens / (TOTAL_SEQ_LEN * self.gpus))

    def epochs(self, arm: Arm) -> int:
        """Passes over the arm's rows that hold its steps (speculators' --max-steps stops it within the last)."""
        return max(1, math.ceil(self.training_tokens / max(1, self.arm_tokens(arm))))


def project(shape: Shape, tokens: int, loss_tokens: int, *, seeds: int, budget: int | None, gpus: int,
            upstream: bool = True, curve: bool = True) -> Projection:
    if tokens <= 0 or loss_tokens <= 0:
        raise KimiDataError("nothing to project: the data has no training token with loss; emit the dataset first "
                            "(`kimi-data emit`), or give --tokens with a workdir whose dataset has loss tokens")
    return Projection(shape, tokens, loss_tokens, gpu_arms(upstream, curve), seeds, budget or loss_tokens, gpus)


def gpu_plan(p: Projection, workdir: str, prefill_rate: float | None = None, train_rate: float | None = None,
             configs: list[str] | None = None, workdir_is_model: bool = True) -> str:
    """The projection and the commands, one per line (comments start with #)."""
    model, layers, ids = p.shape.model, p.shape.layers, " ".join(map(str, p.aux))
    q = shlex.quote
    wd = q(workdir) if workdir_is_model else "WORKDIR"
    parts = " ".join(map(q, configs or []))
    extract_s = p.extraction_tokens / prefill_rate if prefill_rate else None
    train_s = p.drafters * p.training_tokens / train_rate if train_rate else None
    wall = [f"{duration(extract_s)} of extraction at {prefill_rate:,.0f} prefill tokens/s" if extract_s is not None
            else "extraction: give --prefill-rate (the node's prefill tokens/s; `kimi-data plan` shows the pilot's)",
            f"{duration(train_s)} of training at {train_rate:,.0f} tokens/s" if train_s is not None
            else "training: give --train-rate (drafter training tokens/s on the node)"]
    total = (f"; in all {duration(extract_s + train_s)} before serving" if extract_s is not None and train_s is not None
             else "")
    lines = [
        f"# probe on a GPU node (not run here): target {model}, {layers} layers, hidden {p.shape.hidden}, "
        f"{p.gpus} GPUs",
        f"# {len(p.arms)} arms ({', '.join(a.name for a in p.arms)}) x {p.seeds} seeds = {p.drafters} drafters; "
        f"the own data: {p.tokens:,} tokens, {p.loss_tokens:,} loss tokens",
        f"# each drafter: {p.budget:,} loss tokens ({p.training_tokens:,} tokens read), {p.steps:,} training steps "
        f"of {TOTAL_SEQ_LEN:,} tokens per GPU",
        f"# extraction: {p.extraction_tokens:,} tokens -> {_size(p.hidden_state_bytes)} of hidden states "
        f"({len(p.aux)} auxiliary layers {p.aux} + the last, bf16); upstream counted as long as the own rows",
        f"# wall: {'; '.join(wall)}{total}; serving: one vLLM start per drafter",
    ]
    if not workdir_is_model:
        lines.append(f"# WORKDIR: the workdir built for {model} (its dataset emitted) on the GPU node")
    lines += [
        f"kimi-data probe {parts + ' ' if parts else ''}--workdir {wd} --write-arms probe-arms"
        + ("" if any(a.name == UPSTREAM for a in p.arms) else " --no-upstream")
        + ("" if any(a.share < 1 for a in p.arms) else " --no-curve") + " --no-history",
        f"python scripts/launch_vllm.py {q(model)} --hidden-states-path probe-hs --target-layer-ids {ids} {layers} "
        f"-- --tensor-parallel-size {p.gpus} --port 8000 --trust-remote-code &",
    ]
    drafter_flags = []
    for arm in p.arms:
        lines.append(f"# arm {arm.name}: {p.arm_tokens(arm):,} tokens to extract, data probe-arms/{arm.slug}")
        lines.append(f"python scripts/data_generation_offline.py --preprocessed-data probe-arms/{arm.slug} "
                     f"--endpoint http://localhost:8000/v1 --output probe-hs/{arm.slug} --concurrency 32 "
                     "--validate-outputs")
        epochs = p.epochs(arm)
        for seed in range(p.seeds):
            out = f"probe-drafters/{arm.slug}-seed{seed}"
            lines.append(f"torchrun --standalone --nproc_per_node {p.gpus} scripts/train.py --verifier-name-or-path "
                         f"{q(model)} --data-path probe-arms/{arm.slug} --hidden-states-path probe-hs/{arm.slug} "
                         f"--save-path {out} --target-layer-ids {ids} --num-layers 1 --epochs {epochs} "
                         f"--max-steps {p.steps} --seed {seed} --on-missing raise")
            # speculators saves each epoch's drafter under SAVE_PATH/EPOCH: the last one is the trained drafter
            drafter_flags.append(f"--drafter {q(arm.name + '=' + out + '/' + str(epochs - 1))}")
    lines.append("# stop the extraction server, then: each drafter served by vLLM with the target in turn, its "
                 "held-out acceptance measured, and the report written")
    lines.append(f"kimi-data probe {parts + ' ' if parts else ''}--workdir {wd} --engine vllm --tp {p.gpus} "
                 + " ".join(drafter_flags))
    return "\n".join(lines)
