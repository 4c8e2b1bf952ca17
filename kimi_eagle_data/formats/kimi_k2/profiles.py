"""The profiles of the models that speak Kimi-K2.5's format, as the registry (kimi_eagle_data/registry.py) holds
them: `kimi-k2.5` and `tiny-kimi`, `kimi-k2.6` and `tiny-kimi-k2.6`, every model fact as plain data
(`ModelProfile`s; the format's tokens are the format's, tokens.py), and the embedded tiny model's directory.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path

from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
from kimi_eagle_data.model_profile import ModelProfile, SamplingDefaults


KIMI_K25 = ModelProfile(
    name="kimi-k2.5",
    model_path="moonshotai/Kimi-K2.5",
    chat_format="kimi-k2",
    special_tokens=K2_TOKENS.special_tokens(),
    # Moonshot's recommended sampling per mode: thinking temperature 1.0, top_p 0.95 (its K2.5 benchmark
    # settings, platform.kimi.ai/docs/guide/benchmark-best-practice, and its API's fixed K2.5 top_p,
    # platform.kimi.ai/docs/api/models-overview); instant temperature 0.6, top_p 0.95 (the Kimi-K2.5 model card's
    # instant-mode recommendation; the API's non-thinking K2 default is 0.6 too). docs/data-format.md, "Modes".
    sampling=SamplingDefaults(max_new_tokens=10240, temperature=1.0, top_p=0.95),
    instant_sampling=SamplingDefaults(max_new_tokens=10240, temperature=0.6, top_p=0.95),
    max_seq_len=16384,
    vocab_size=163840,
    display_name="Kimi-K2.5",
    card_tags=("kimi-k2.5",),
    sglang_flags=("--trust-remote-code", "--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi_k2"),
    # vLLM's parser names for Kimi-K2.x are kimi_k2 too (vllm/tool_parsers, vllm/reasoning); a tool-call parser
    # acts on chat requests only with --enable-auto-tool-choice.
    vllm_flags=("--trust-remote-code", "--tool-call-parser", "kimi_k2", "--enable-auto-tool-choice",
                "--reasoning-parser", "kimi_k2"),
    # lightseekorg's EAGLE-3 drafter for K2.5, served as its card does (3 steps, top-k 1, 4 draft tokens).
    draft_model="lightseekorg/kimi-k2.5-eagle3",
)

TINY_MODEL_DIR = Path(str(resources.files("kimi_eagle_data") / "assets" / "tiny-kimi"))

# The embedded tiny model speaks Kimi-K2.5's format but has a 1024-token context (room for a second or third
# turn on its own history): the demo uses the same profile with lengths scaled down (max_seq_len = context - 2,
# as SGLang needs).
TINY_KIMI = replace(
    KIMI_K25,
    name="tiny-kimi",
    model_path=str(TINY_MODEL_DIR),
    sampling=SamplingDefaults(max_new_tokens=192, temperature=1.0, top_p=0.95),
    instant_sampling=SamplingDefaults(max_new_tokens=192, temperature=0.6, top_p=0.95),
    max_seq_len=1022,
    vocab_size=None,     # its own: the tokenizer's length
    is_test_model=True,
    shipped_drafter=str(TINY_MODEL_DIR.parent / "tiny-kimi-eagle3"),
)

# Kimi-K2.6: K2.5's tokenizer (its files byte-identical), tokens and tool format; its chat template takes one
# argument more, `preserve_thinking` (default false: earlier assistant turns render as K2.5's do; true: each keeps
# `<think>REASONING</think>` before its content), and its config stops on `<|im_end|>` (163586, K2.5's end of turn)
# where K2.5's named `[EOS]`. tinker-cookbook's K2.6 renderer tests pin both against the model's own template.
KIMI_K26 = replace(
    KIMI_K25,
    name="kimi-k2.6",
    model_path="moonshotai/Kimi-K2.6",
    display_name="Kimi-K2.6",
    card_tags=("kimi-k2.6",),
    draft_model="",
    template_options={"preserve_thinking": False},
)

# The embedded tiny model under K2.6's template options: its template (assets/tiny-kimi/chat_template.jinja) honours
# `preserve_thinking` as K2.6's does, and renders as K2.5's without it.
TINY_KIMI_K26 = replace(
    TINY_KIMI,
    name="tiny-kimi-k2.6",
    display_name="Kimi-K2.6",
    card_tags=("kimi-k2.6",),
    template_options={"preserve_thinking": False},
)
