"""The profiles of the models that speak Kimi-K2.5's format, as the registry (kimi_eagle_data/registry.py) holds
them: `kimi-k2.5` and `tiny-kimi`, `kimi-k2.6` and `tiny-kimi-k2.6`, every model fact as plain data (`K2Profile`: a
`ModelProfile` with K2.5's tokens by string and their roles), and the embedded tiny model's directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from kimi_eagle_data.chat_format import TOOL_CALL_ID_FORMAT
from kimi_eagle_data.model_profile import INSTANT, THINKING, ModelProfile, SamplingDefaults


@dataclass(frozen=True, kw_only=True)
class K2Profile(ModelProfile):
    """A model that speaks Kimi-K2.5's format: its tokens named by string (ids are looked up in the tokenizer at run
    time: tokens.py), the roles the grammar, the validator and the renderer read them in."""

    chat_format: str = "kimi-k2"
    # The chat template's generation prompt in thinking mode; the last prompt token must be `think_open`.
    generation_prompt: str
    end_of_turn: str                     # the stop token; a `stop` completion ends with it
    think_open: str
    think_close: str
    # Tokens that may never appear in a completion (roles, control, media).
    forbidden_in_completion: tuple[str, ...]
    # Optional tokens (may be absent from a tokenizer, e.g. media tokens in the tiny one).
    optional_tokens: tuple[str, ...]
    tool_calls_section_begin: str
    tool_calls_section_end: str
    tool_call_begin: str
    tool_call_argument_begin: str
    tool_call_end: str
    # A tool-call id between `tool_call_begin` and `tool_call_argument_begin`.
    tool_call_id_regex: str
    # How the model writes a call id; IDX counts calls across the whole conversation (history included).
    tool_call_id_format: str = TOOL_CALL_ID_FORMAT
    # Chat turns: role -> the token that opens its header, and the token that ends the header.
    turn_tokens: dict[str, str] = field(default_factory=dict)
    turn_header_end: str = ""
    # The system turn that declares the tools (its header name), and the pattern that finds each declared
    # tool's name in the TypeScript declarations (render.py, `declared_tool_names`).
    tool_declare_role: str = "tool_declare"
    tool_declare_namespace: str = "namespace functions {"
    tool_declare_name_regex: str = r"(?m)^type (?P<name>.+?) = \(_: "
    # The generation prompt in instant mode (the template's `thinking=False`): thinking's, then `think_close`.
    instant_generation_prompt: str = ""

    def __post_init__(self) -> None:
        # What the tokenizer must round-trip: every token the validator and decoder look up, and the forbidden ones.
        object.__setattr__(self, "special_tokens",
                           tuple(dict.fromkeys((*self.structural_tokens().values(), *self.forbidden_in_completion))))

    def describe(self, template: str) -> str:
        """A description written with `{think_close}`-style fields, in this profile's token names."""
        forbidden = ", ".join(f"`{t}`" for t in self.forbidden_in_completion if t not in self.optional_tokens)
        return template.format(**self.structural_tokens(), forbidden=forbidden + ", media tokens",
                               tool_call_id_shape=self.tool_call_id("NAME", 0).replace(":0", ":IDX"))

    def generation_prompt_ids(self, tokenizer, mode: str = THINKING) -> list[int]:
        """The generation prompt of `mode` as `tokenizer` encodes its text: what every prompt of that mode ends with
        (prepare checks each rendered prompt against it, the validator reads a sample's mode from it, inspect
        finds it to split it off)."""
        text = self.instant_generation_prompt if mode == INSTANT else self.generation_prompt
        return list(tokenizer.encode(text, add_special_tokens=False))

    def tool_call_id(self, name: str, index: int) -> str:
        return self.tool_call_id_format.format(name=name, index=index)

    @property
    def tool_call_id_pattern(self) -> re.Pattern[str]:
        return re.compile(self.tool_call_id_regex)

    def structural_tokens(self) -> dict[str, str]:
        """Role -> token string for every token the validator and decoder look up."""
        return {
            "end_of_turn": self.end_of_turn,
            "think_open": self.think_open,
            "think_close": self.think_close,
            "tool_calls_section_begin": self.tool_calls_section_begin,
            "tool_calls_section_end": self.tool_calls_section_end,
            "tool_call_begin": self.tool_call_begin,
            "tool_call_argument_begin": self.tool_call_argument_begin,
            "tool_call_end": self.tool_call_end,
        }


MEDIA_TOKENS = ("<|media_start|>", "<|media_begin|>", "<|media_content|>", "<|media_end|>", "<|media_pad|>",
                "<|kimi_k25_video_placeholder|>")

KIMI_K25 = K2Profile(
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
