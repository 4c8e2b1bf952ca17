"""Kimi-K2.5's tokens: their strings and roles (`K2TokenNames`, the one value `K2_TOKENS`, which every profile of the
format shares: K2.6's tokenizer is K2.5's, the embedded tiny one names the same tokens) and those strings resolved to
one tokenizer's ids (`k2_tokens`, a `FormatTokens`). No id is hard-coded: the same strings serve the real Kimi-K2.5
tokenizer (163,840 ids) and the embedded tiny one (2,048 ids)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kimi_eagle_data.chat_format import TOOL_CALL_ID_FORMAT, FormatTokens
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.model_profile import INSTANT, THINKING


class TokenLookupError(KimiDataError, ValueError):
    pass


@dataclass(frozen=True)
class K2TokenNames:
    """Kimi-K2.5's tokens named by string, in the roles the grammar, the validator and the renderer read them."""

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

    def special_tokens(self) -> tuple[str, ...]:
        """What the tokenizer must round-trip: every token the validator and decoder look up, and the forbidden
        ones (a profile's `special_tokens`)."""
        return tuple(dict.fromkeys((*self.structural_tokens().values(), *self.forbidden_in_completion)))

    def describe(self, template: str) -> str:
        """A description written with `{think_close}`-style fields, in these token names."""
        forbidden = ", ".join(f"`{t}`" for t in self.forbidden_in_completion if t not in self.optional_tokens)
        return template.format(**self.structural_tokens(), forbidden=forbidden + ", media tokens",
                               tool_call_id_shape=self.tool_call_id("NAME", 0).replace(":0", ":IDX"))

    def generation_prompt_text(self, mode: str = THINKING) -> str:
        return self.instant_generation_prompt if mode == INSTANT else self.generation_prompt

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

K2_TOKENS = K2TokenNames(
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
    instant_generation_prompt="<|im_assistant|>assistant<|im_middle|><think></think>",
)


def k2_tokens(tokenizer, names: K2TokenNames = K2_TOKENS, model: str = "kimi-k2") -> FormatTokens:
    """`names` resolved to `tokenizer`'s ids; one line naming the tokens it lacks (`model`: the profile's name, for
    that line). Roles: `structural_tokens`'; generation prompts: each mode's text as the tokenizer encodes it."""
    vocab = tokenizer.get_vocab()
    wanted = set(names.structural_tokens().values()) | set(names.forbidden_in_completion)
    ids: dict[str, int] = {}
    missing = []
    for tok in sorted(wanted):
        if tok in vocab:
            ids[tok] = vocab[tok]
        elif tok not in names.optional_tokens:
            missing.append(tok)
    if missing:
        raise TokenLookupError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} lacks the {model} tokens "
            f"{missing}; use a tokenizer of that model or pick another --profile"
        )
    values = list(ids.values())
    if len(set(values)) != len(values):
        raise TokenLookupError(f"tokenizer maps several {model} special tokens to one id: {ids}")
    texts = {mode: names.generation_prompt_text(mode) for mode in (THINKING, INSTANT)}
    prompts = {mode: tuple(tokenizer.encode(text, add_special_tokens=False)) if text else ()
               for mode, text in texts.items()}
    return FormatTokens(ids=ids, roles={role: ids[t] for role, t in names.structural_tokens().items()},
                        generation_prompts=prompts,
                        forbidden_ids=frozenset(ids[t] for t in names.forbidden_in_completion if t in ids))
