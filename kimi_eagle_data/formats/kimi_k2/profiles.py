"""Kimi-K2.5's profiles as the registry (kimi_eagle_data/profile.py) holds them: `kimi-k2.5` and `tiny-kimi`, every
model fact as plain data (`ModelProfile`, model_profile.py), and the embedded tiny model's directory.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path

from kimi_eagle_data.model_profile import ModelProfile, SamplingDefaults

MEDIA_TOKENS = ("<|media_start|>", "<|media_begin|>", "<|media_content|>", "<|media_end|>", "<|media_pad|>",
                "<|kimi_k25_video_placeholder|>")

KIMI_K25 = ModelProfile(
    name="kimi-k2.5",
    model_path="moonshotai/Kimi-K2.5",
    generation_prompt="<|im_assistant|>assistant<|im_middle|><think>",
    end_of_turn="<|im_end|>",
    think_open="<think>",
    think_close="</think>",
    forbidden_in_completion=(
        "<|im_user|>", "<|im_system|>", "<|im_assistant|>", "<|im_middle|>", "[BOS]", "[EOS]",
        *MEDIA_TOKENS,
    ),
    # Media token names differ between sources (K2.5's public template writes <|media_begin|>):
    # whichever the tokenizer has is forbidden, a name it lacks is skipped.
    optional_tokens=MEDIA_TOKENS,
    tool_calls_section_begin="<|tool_calls_section_begin|>",
    tool_calls_section_end="<|tool_calls_section_end|>",
    tool_call_begin="<|tool_call_begin|>",
    tool_call_argument_begin="<|tool_call_argument_begin|>",
    tool_call_end="<|tool_call_end|>",
    turn_tokens={"system": "<|im_system|>", "user": "<|im_user|>", "assistant": "<|im_assistant|>"},
    turn_header_end="<|im_middle|>",
    tool_call_id_regex=r"^\s*functions\.(?P<name>[A-Za-z0-9_\-\.]+):(?P<index>\d+)\s*$",
    # Moonshot's recommended sampling per mode: thinking temperature 1.0, top_p 0.95 (its K2.5 benchmark
    # settings, platform.kimi.ai/docs/guide/benchmark-best-practice, and its API's fixed K2.5 top_p,
    # platform.kimi.ai/docs/api/models-overview); instant temperature 0.6, top_p 0.95 (the Kimi-K2.5 model card's
    # instant-mode recommendation; the API's non-thinking K2 default is 0.6 too). docs/data-format.md, "Modes".
    sampling=SamplingDefaults(max_new_tokens=10240, temperature=1.0, top_p=0.95),
    instant_generation_prompt="<|im_assistant|>assistant<|im_middle|><think></think>",
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
