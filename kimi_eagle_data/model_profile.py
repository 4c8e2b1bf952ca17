"""What a model profile is: the `ModelProfile` record (every model fact as plain data), the modes, the sampling
defaults and a K2.5-shaped profile's tokens resolved to one tokenizer (`ProfileTokens`).

A profile names tokens by *string*; ids are looked up from the tokenizer at run time
(`ProfileTokens.from_tokenizer`) and never hard-coded, so the same profile serves the real
Kimi-K2.5 tokenizer (163,840 ids) and the embedded tiny one (2,048 ids).

This module imports no format: each format folder (formats/) builds its profiles from these types, and the
registry (profile.py) imports those folders and registers their profiles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kimi_eagle_data.chat_format import TOOL_CALL_ID_FORMAT
from kimi_eagle_data.errors import KimiDataError


@dataclass(frozen=True)
class SamplingDefaults:
    max_new_tokens: int = 10240
    temperature: float = 1.0
    top_p: float = 0.95


# The two ways of calling the model (docs/data-format.md, `mode`): thinking (the chat template's default: the
# generation prompt ends with `<think>`, the completion is reasoning, `</think>`, the answer) and instant
# (`thinking=False`: the generation prompt ends with `<think></think>`, the completion is the answer directly).
THINKING, INSTANT = "thinking", "instant"
MODES = (THINKING, INSTANT)


@dataclass(frozen=True)
class ModelProfile:
    name: str
    model_path: str                      # what production loads (HF id or directory)
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
    # The model's embedding size: every generated id must be below it (the tokenizer may name a few more).
    # None: the tokenizer's length.
    vocab_size: int | None = None
    # Chat turns: role -> the token that opens its header, and the token that ends the header.
    turn_tokens: dict[str, str] = field(default_factory=dict)
    turn_header_end: str = ""
    # The system turn that declares the tools (its header name), and the pattern that finds each declared
    # tool's name in the TypeScript declarations (formats/kimi_k2/render.py, `declared_tool_names`).
    tool_declare_role: str = "tool_declare"
    tool_declare_namespace: str = "namespace functions {"
    tool_declare_name_regex: str = r"(?m)^type (?P<name>.+?) = \(_: "
    sampling: SamplingDefaults = field(default_factory=SamplingDefaults)
    # The generation prompt in instant mode (the template's `thinking=False`): thinking's, then `think_close`.
    instant_generation_prompt: str = ""
    # Sampling defaults in instant mode (max_new_tokens: `sampling`'s).
    instant_sampling: SamplingDefaults = field(default_factory=SamplingDefaults)
    max_seq_len: int = 16384
    # SGLang launch flags specific to this model.
    sglang_flags: tuple[str, ...] = ()
    # vLLM launch flags specific to this model (`kimi-data serve --engine vllm`).
    vllm_flags: tuple[str, ...] = ()
    # A published EAGLE-3 drafter the engine can run while it generates (`kimi-data serve --draft`), and the
    # speculation it is served with: draft steps (tokens proposed per step chain), the tree's top-k per step, and
    # the draft tokens verified per step (SGLang's --speculative-num-steps / -eagle-topk / -num-draft-tokens; vLLM's
    # num_speculative_tokens is the steps).
    draft_model: str = ""
    # The small EAGLE-3 drafter shipped for an embedded test model (a directory in speculators' format, trained by
    # scripts/train_tiny_drafter.py): the demo reports its acceptance on the data it built. Empty: none.
    shipped_drafter: str = ""
    draft_steps: int = 3
    draft_topk: int = 1
    draft_tokens: int = 4
    # How the dataset card names the model, and its Hub tags.
    display_name: str = ""
    card_tags: tuple[str, ...] = ()
    # A test stand-in (the embedded tiny model): its card says "do not train on it".
    is_test_model: bool = False
    # The chat format's name: `kimi_eagle_data.formats.format_of(profile)` is what stages ask for everything
    # format-specific (renderer, generation prompts, grammar and validator, stop id, special-token text). A name,
    # not the object: the formats sit above this module (they read profiles and run the validators).
    chat_format: str = "kimi-k2"

    def describe(self, template: str) -> str:
        """A description written with `{think_close}`-style fields, in this profile's token names."""
        forbidden = ", ".join(f"`{t}`" for t in self.forbidden_in_completion if t not in self.optional_tokens)
        return template.format(**self.structural_tokens(), forbidden=forbidden + ", media tokens",
                               tool_call_id_shape=self.tool_call_id("NAME", 0).replace(":0", ":IDX"))

    def generation_prompt_ids(self, tokenizer, mode: str = THINKING) -> list[int]:
        """The generation prompt of `mode` as `tokenizer` encodes its text (K2.5's way; a stage asks
        `format_of(profile).generation_prompt_ids`, which is this for K2.5 and per-segment ids for K3): what every prompt of that mode ends with
        (prepare checks each rendered prompt against it, the validator reads a sample's mode from it, inspect
        finds it to split it off)."""
        text = self.instant_generation_prompt if mode == INSTANT else self.generation_prompt
        return list(tokenizer.encode(text, add_special_tokens=False))

    def mode_sampling(self, mode: str) -> SamplingDefaults:
        """The sampling defaults of `mode` (a partition's or the run's settings override them)."""
        return self.instant_sampling if mode == INSTANT else self.sampling

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


def model_vocab_size(profile: ModelProfile, tokenizer) -> int:
    """The one bound on token ids, used by prepare (prompts), the engines (requests and answers) and the
    validator: the model's embedding size, i.e. the profile's `vocab_size` when it names one (Kimi-K2.5's
    tokenizer names a few ids past the model's 163,840), else the tokenizer's length. An id at or above it
    cannot be embedded: real SGLang and vLLM crash on such a prompt id."""
    return int(profile.vocab_size or len(tokenizer))


class TokenLookupError(KimiDataError, ValueError):
    pass


@dataclass(frozen=True)
class ProfileTokens:
    """A profile's token strings resolved to ids of one concrete tokenizer."""

    profile: ModelProfile
    ids: dict[str, int]           # token string -> id
    forbidden_ids: frozenset[int]

    def __getattr__(self, role: str) -> int:
        # tokens.end_of_turn, tokens.think_close, ... -> id
        structural = self.profile.structural_tokens()
        if role in structural:
            return self.ids[structural[role]]
        raise AttributeError(role)

    def token_name(self, token_id: int) -> str:
        """The profile's name of one of its token ids (for messages)."""
        return next(t for t, i in self.ids.items() if i == token_id)

    @classmethod
    def from_tokenizer(cls, profile: ModelProfile, tokenizer) -> "ProfileTokens":
        vocab = tokenizer.get_vocab()
        wanted = set(profile.structural_tokens().values()) | set(profile.forbidden_in_completion)
        ids: dict[str, int] = {}
        missing = []
        for tok in sorted(wanted):
            if tok in vocab:
                ids[tok] = vocab[tok]
            elif tok not in profile.optional_tokens:
                missing.append(tok)
        if missing:
            raise TokenLookupError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} lacks the {profile.name} tokens "
                f"{missing}; use a tokenizer of that model or pick another --profile"
            )
        values = list(ids.values())
        if len(set(values)) != len(values):
            raise TokenLookupError(f"tokenizer maps several {profile.name} special tokens to one id: {ids}")
        forbidden = frozenset(ids[t] for t in profile.forbidden_in_completion if t in ids)
        return cls(profile=profile, ids=ids, forbidden_ids=forbidden)
