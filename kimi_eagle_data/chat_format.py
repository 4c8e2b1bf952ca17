"""What a stage asks a model's chat format: the `ChatFormat` base class (its core, its optional members with their
defaults), the one shape of a format's tokens (`FormatTokens`), and the facts every Kimi format shares.

A profile (`model_profile.ModelProfile`) names its format (`chat_format`); `formats.format_of(profile)` is the
unbound object (`formats/`: Kimi-K2.5's, Kimi-K3's, and any format registered with `formats.register_format`), and
`bind(profile, tokenizer)` the one a run uses. The run's context holds the bound format (`RunContext.format`,
required) and every stage takes it from there or as a required argument: no stage names a model, none falls back to
one, and none passes the profile or tokenizer to a format's member.

This module imports nothing of the package: the stages import it for the type, the formats subclass it. It sits
below the stages because the formats sit above them (they render with prompts/ and validate with validate/).
"""

from __future__ import annotations

import abc
import copy
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Protocol, Sequence

# Facts the same for every Kimi format, read where no run's format is at hand: the tool names a source row may
# declare (sources/filters.py) and the ids a source adapter gives the calls of a history it reads
# (sources/glaive.py). Kimi-K2.5's tokens write call ids so (formats/kimi_k2/tokens.py, `tool_call_id_format`).
TOOL_NAME_REGEX = r"^[A-Za-z0-9_.\-]{1,128}$"      # a tool name the model's call ids can carry
TOOL_CALL_ID_FORMAT = "functions.{name}:{index}"    # IDX counts calls across the whole conversation


def history_tool_call_id(name: str, index: int) -> str:
    """The id of a history call as every Kimi format writes it (what a source adapter gives the calls it reads)."""
    return TOOL_CALL_ID_FORMAT.format(name=name, index=index)


class ToolSchemaUnsupported(ValueError):
    """A tool schema the format's renderer cannot declare as the model's own code would (Kimi-K2.5's encoder raises
    or falls back on it): prepare counts the row out as `tool_schema_unsupported`. One-line message."""


@dataclass(frozen=True)
class FormatTokens:
    """A format's structural tokens resolved to one tokenizer's ids: one shape for every format (K2.5's roles are
    `<think>`, `</think>` and the tool-call section tokens; K3's its open, close and separator markers).
    `tokens.end_of_turn`, `tokens.think_close`, …: the id of that role."""

    ids: Mapping[str, int]                          # every token string the served tokenizer must agree on -> id
    roles: Mapping[str, int]                        # role -> id; every format names "end_of_turn" (the stop id)
    generation_prompts: Mapping[str, tuple[int, ...]]   # mode -> what every prompt of that mode ends with
    forbidden_ids: frozenset[int] = frozenset()     # ids no completion may hold

    def __getattr__(self, role: str) -> int:
        roles = self.__dict__.get("roles")          # absent while copy/pickle rebuild the object
        if roles is not None and role in roles:
            return roles[role]
        raise AttributeError(role)

    @property
    def end_of_turn(self) -> int:
        """The stop id: a `stop` completion ends with it."""
        return self.roles["end_of_turn"]

    def token_name(self, token_id: int) -> str:
        """The format's name of one of its token ids (for messages)."""
        return next(t for t, i in self.ids.items() if i == token_id)


@dataclass
class Verdict:
    """One sample as a format's validator judges it: what validate, emit, `check` and conversations read."""

    issues: list[str] = field(default_factory=list)      # reason codes (keys of reason_descriptions); empty = valid
    details: list[str] = field(default_factory=list)     # one human line per issue, same order
    reasoning_len: int = 0                               # completion tokens before the reasoning's end
    num_tool_calls: int = 0                              # tool calls the completion begins
    args_valid: bool = True                              # every parsed tool call's arguments are a JSON object
    assistant: dict[str, Any] = field(default_factory=dict)   # the generated turn decoded from tokens
    # The finish reason the sample is reported with: `stop` for a `length` completion that ends with
    # the end-of-turn token (its turn is whole), else the engine's.
    finish_reason: str = ""
    mode: str = "thinking"                               # read from the prompt's generation prompt

    @property
    def valid(self) -> bool:
        return not self.issues


class FormatValidator(Protocol):
    """A format's completion grammar and rules: each sample's `Verdict`."""

    max_seq_len: int

    def validate(self, prompt_ids, output_ids, finish_reason: str, finish_detail: dict | None,
                 tools: list[dict] | None) -> Verdict:
        """One sample's verdict."""

    def validate_many(self, prompt_offsets, prompt_values, output_offsets, output_values, finish_reasons,
                      finish_details, tools) -> Iterator[Verdict]:
        """The verdicts of packed samples (`id_buffers.pack`), in order: what validate and emit run."""

    def judge_turn(self, prompt_ids, output_ids, finish_reason: str, finish_detail: dict | None,
                   tools: list[dict] | None) -> tuple[Verdict, Any, bool]:
        """One sample's verdict, its parse (what `ChatFormat.assistant_message` reads) and whether the completion
        is a whole turn: what a conversation's next turn and `probe`'s history arm ask."""


@dataclass(frozen=True)
class CardText:
    """What the dataset card says of a format, in the format's own tokens (`ChatFormat.card_text`)."""

    rules: str                  # what a `train` row satisfies, one paragraph (docs/token-rules.md)
    reasoning_end: str          # the text that ends a thinking completion's reasoning (`reasoning_len` counts to it)
    thinking_prompt: str        # what a thinking-mode prompt ends with, as text
    instant_prompt: str         # what an instant-mode prompt ends with, as text
    history_reasoning: str = ""  # how the history's assistant turns' reasoning is rendered ("": not said)


def with_partition_options(chat_format: "ChatFormat", options: Mapping[str, Any]) -> "ChatFormat":
    """The run's format passing a partition's chat-template arguments over the run's (a partition's
    `preserve_thinking`); the run's own format where the partition sets none. Only a format whose profiles name
    template arguments gets any (the partition config is checked against the profile)."""
    if not options:
        return chat_format
    return chat_format.with_template_options({**chat_format.template_options, **options})


class FormatNotBound(RuntimeError):
    """A member that needs a profile and tokenizer asked of a format not bound to them (`ChatFormat.bind`)."""


class ChatFormat(abc.ABC):
    """Everything format-specific a stage asks for, bound once to a run's profile and tokenizer.

    A format object is first unbound (what the registry holds: `formats.format_of(profile)`); `bind(profile,
    tokenizer)` gives a copy bound to them, which the run's context holds (`RunContext.format`) and whose members take
    neither. A format subclasses this class and writes the core (`resolve_tokens`, `render_prompt`, `render_text`,
    `validator`, `reasoning_length`, `render_answer`, `assistant_message`, `reason_descriptions`, `card_text`, and
    the facts `name`, `tool_encoder_version`); every other member has a default here, which a format overrides where
    it does more (tests/formats/toy_format.py writes the core only; docs/architecture.md, "Adding a model").
    """

    # -- unbound facts (the registry's object answers them) --
    name: str = ""
    tool_encoder_version: str = ""              # run.json binds it: a change to how tools are declared re-prepares
    efforts: tuple[str, ...] = ()               # thinking efforts a prompt may announce (none: K2.5)
    refused_efforts: Mapping[str, str] = MappingProxyType({})   # effort name a user may expect -> why refused
    default_effort: str | None = None           # what a thinking prompt announces without an efforts table
    history_note_descriptions: Mapping[str, str] = MappingProxyType({})
    template_options: Mapping[str, Any] = MappingProxyType({})  # the chat template's arguments beyond the mode

    _profile: Any = None
    _tokenizer: Any = None
    _tokens: FormatTokens | None = None

    def bind(self, profile, tokenizer) -> "ChatFormat":
        """A copy of this format bound to `profile` and `tokenizer`, its tokens resolved (`resolve_tokens`); this
        format itself where it is bound to those already."""
        if self._tokens is not None and self._profile is profile and self._tokenizer is tokenizer:
            return self
        bound = copy.copy(self)
        bound._profile, bound._tokenizer = profile, tokenizer
        bound._tokens = bound.resolve_tokens()
        return bound

    def with_template_options(self, options: Mapping) -> "ChatFormat":
        """This format passing `options` to the chat template (the same grammar, tokens and validator)."""
        changed = copy.copy(self)
        changed.template_options = MappingProxyType(dict(options))
        return changed

    @property
    def bound(self) -> bool:
        return self._tokens is not None

    def _needs_binding(self):
        raise FormatNotBound(f"chat format {self.name!r} is not bound to a profile and tokenizer; "
                             "call its bind(profile, tokenizer) first")

    @property
    def profile(self):
        return self._profile if self._tokenizer is not None else self._needs_binding()

    @property
    def tokenizer(self):
        return self._tokenizer if self._tokenizer is not None else self._needs_binding()

    @property
    def tokens(self) -> FormatTokens:
        """Its structural tokens resolved to the tokenizer's ids (`end_of_turn`: the stop id; `ids`)."""
        return self._tokens if self._tokens is not None else self._needs_binding()

    # -- the core: what every format writes --
    @abc.abstractmethod
    def reason_descriptions(self) -> dict[str, str]:
        """Every reason code its validator gives, with its one-line description."""
        raise NotImplementedError

    @abc.abstractmethod
    def card_text(self) -> CardText:
        """What the dataset card says of the format: its rules paragraph, reasoning end and generation prompts."""
        raise NotImplementedError

    @abc.abstractmethod
    def resolve_tokens(self) -> FormatTokens:
        """Bound: the structural tokens of `self.tokenizer` (run once, by `bind`); one line where it lacks them."""
        raise NotImplementedError

    @abc.abstractmethod
    def render_prompt(self, messages, tools, mode: str = "thinking", effort: str | None = None) -> list[int]:
        """Bound: a prompt's ids as the model renders them, its generation prompt last."""
        raise NotImplementedError

    @abc.abstractmethod
    def render_text(self, messages, tools, mode: str = "thinking", effort: str | None = None) -> str:
        """Bound: the same prompt as text (`kimi-data render`)."""
        raise NotImplementedError

    @abc.abstractmethod
    def validator(self, max_seq_len: int, keep_truncated: bool = False,
                  vocab_size: int | None = None) -> FormatValidator:
        """Bound: the completion grammar and its rules (`vocab_size` None: the profile's, `model_vocab_size`)."""
        raise NotImplementedError

    @abc.abstractmethod
    def reasoning_length(self, ids: Sequence[int], instant: bool = False) -> int:
        """Bound: completion tokens before the reasoning's end."""
        raise NotImplementedError

    @abc.abstractmethod
    def render_answer(self, answer, instant: bool = False) -> tuple[list[int], int]:
        """Bound: an answer ({"reasoning", "content", "tool_calls"}) as the completion the model writes, and how
        many of its ids are reasoning."""
        raise NotImplementedError

    @abc.abstractmethod
    def assistant_message(self, parsed, first_index: int = 0) -> dict:
        """Bound: a turn its validator accepted (the parse `FormatValidator.judge_turn` gives) as the assistant
        message a client sends back; its calls count on from `first_index`, the history's call count. A turn that
        cannot continue the conversation raises `conversation.messages.TurnError`."""
        raise NotImplementedError

    # -- derived from the core --
    def generation_prompt_ids(self, mode: str = "thinking") -> list[int]:
        """Bound: what every prompt of `mode` ends with (the tokens' `generation_prompts`)."""
        return list(self.tokens.generation_prompts[mode])

    # -- optional capabilities, with their defaults --
    def history_notes(self, messages) -> set[str]:
        """Codes of what a history holds that the format renders but its completion grammar never accepts (keys of
        `history_note_descriptions`). Default: none."""
        return set()

    def check_tokenizer(self, tokenizer) -> None:
        """Unbound: what the format asks of a tokenizer before any prompt is rendered with it (`load_tokenizer`
        runs it): raises with one line where it would not render prompts as the model does. Default: nothing."""

    def special_text(self) -> Any:
        """Bound: the finder of text the tokenizer reads as special tokens (`prompts.tokenizer.special_text`);
        None where typed special-token text stays text. Default: None."""
        return None

    def segmenter(self) -> Any:
        """Bound: what splits a sequence into `inspect`'s segments (`spans`, `mode`, `decode`). Default: none,
        `inspect` says so."""
        raise NotImplementedError(f"chat format {self.name!r} has no segmenter: `inspect` cannot show its rows")

    def declared_tools(self, prompt_ids) -> list[dict] | None:
        """Bound: the tools (names only) a rendered prompt declares, read back from its ids, for rows that come
        without their `tools` (a SpecForge export); None where it declares none or the format does not read them
        back. Default: None."""
        return None

    def check_renderer(self, records, where: str) -> None:
        """Bound: prepare's check of a checkpoint's own chat code against this renderer. Default: nothing."""

    def fingerprint(self) -> dict[str, str]:
        """Bound: what run.json binds beside the tokenizer's hashes. Default: nothing."""
        return {}
