"""What a stage asks a model's chat format: the `ChatFormat` protocol, typed, and the facts every Kimi format shares.

A profile (`model_profile.ModelProfile`) names its format (`chat_format`); `formats.format_of(profile)` is the object
(`formats/`: Kimi-K2.5's, Kimi-K3's, and any format registered with `formats.register_format`). The run's context
holds it (`RunContext.format`, required) and every stage takes it from there or as a required argument: no stage
names a model, none falls back to one.

This module imports nothing of the package: the stages import it for the type, the formats implement it. It sits
below the stages because the formats sit above them (they render with prompts/ and validate with validate/).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Protocol, Sequence, runtime_checkable

# Facts the same for every Kimi format, read where no run's format is at hand: the tool names a source row may
# declare (sources/filters.py) and the ids a source adapter gives the calls of a history it reads
# (sources/glaive.py). A profile's `tool_call_id_format` (how its model writes an id) defaults to the latter.
TOOL_NAME_REGEX = r"^[A-Za-z0-9_.\-]{1,128}$"      # a tool name the model's call ids can carry
TOOL_CALL_ID_FORMAT = "functions.{name}:{index}"    # IDX counts calls across the whole conversation


def history_tool_call_id(name: str, index: int) -> str:
    """The id of a history call as every Kimi format writes it (what a source adapter gives the calls it reads)."""
    return TOOL_CALL_ID_FORMAT.format(name=name, index=index)


class ToolSchemaUnsupported(ValueError):
    """A tool schema the format's renderer cannot declare as the model's own code would (Kimi-K2.5's encoder raises
    or falls back on it): prepare counts the row out as `tool_schema_unsupported`. One-line message."""


class FormatTokens(Protocol):
    """A format's tokens resolved to one tokenizer (K2.5: `formats.kimi_k2.tokens.K2Tokens`; K3: `K3Tokens`)."""

    profile: Any
    ids: Mapping[str, int]               # every token string the served tokenizer must agree on -> its id
    forbidden_ids: frozenset[int]

    @property
    def end_of_turn(self) -> int:
        """The stop id: a `stop` completion ends with it."""

    def token_name(self, token_id: int) -> str:
        """The format's name of one of its token ids (for messages)."""


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
    return chat_format.with_template_options({**getattr(chat_format, "template_options", {}), **options})


@runtime_checkable
class ChatFormat(Protocol):
    """Everything format-specific a stage asks for. `formats/kimi_k2/format.py` documents each member at length."""

    name: str
    efforts: tuple[str, ...]                    # thinking efforts a prompt may announce (none: K2.5)
    refused_efforts: Mapping[str, str]          # effort name a user may expect -> why the format refuses it
    default_effort: str | None                  # what a thinking prompt announces without an efforts table
    history_note_descriptions: Mapping[str, str]
    tool_encoder_version: str                   # run.json binds it: a change to how tools are declared re-prepares

    def tokens(self, profile, tokenizer) -> FormatTokens:
        """Its structural tokens resolved to the tokenizer's ids (`end_of_turn`: the stop id; `ids`)."""

    def render_prompt(self, tokenizer, messages, tools, mode: str = "thinking",
                      effort: str | None = None) -> list[int]:
        """A prompt's ids as the model renders them, its generation prompt last."""

    def render_text(self, tokenizer, messages, tools, mode: str = "thinking", effort: str | None = None) -> str:
        """The same prompt as text (`kimi-data render`)."""

    def generation_prompt_ids(self, profile, tokenizer, mode: str = "thinking") -> list[int]:
        """What every prompt of `mode` ends with."""

    def special_text(self, tokenizer) -> Any:
        """The finder of text the tokenizer reads as special tokens; None where typed markers stay text."""

    def history_notes(self, messages) -> set[str]:
        """Codes of what a history holds that the format renders but its completion grammar never accepts."""

    def validator(self, tokens, tokenizer, max_seq_len: int, keep_truncated: bool = False,
                  vocab_size: int | None = None) -> FormatValidator:
        """The completion grammar and its rules."""

    def reason_descriptions(self, profile) -> dict[str, str]:
        """Every reason code its validator gives, with its one-line description."""

    def reasoning_length(self, ids: Sequence[int], tokens, instant: bool = False) -> int:
        """Completion tokens before the reasoning's end."""

    def render_answer(self, answer, tokenizer, tokens, instant: bool = False) -> tuple[list[int], int]:
        """An answer ({"reasoning", "content", "tool_calls"}) as the completion the model writes, and how many
        of its ids are reasoning."""

    def assistant_message(self, parsed, profile, first_index: int = 0) -> dict:
        """A turn its validator accepted (the parse `FormatValidator.judge_turn` gives) as the assistant message a
        client sends back; its calls count on from `first_index`, the history's call count. A turn that cannot
        continue the conversation raises `conversation.messages.TurnError`."""

    def segmenter(self, profile, tokenizer) -> Any:
        """What splits a sequence into `inspect`'s segments (`spans`, `mode`, `decode`)."""

    def declared_tools(self, profile, tokenizer, prompt_ids) -> list[dict] | None:
        """The tools (names only) a rendered prompt declares, read back from its ids, for rows that come without
        their `tools` (a SpecForge export); None where it declares none or the format does not read them back."""

    def check_tokenizer(self, tokenizer) -> None:
        """What the format asks of a tokenizer before any prompt is rendered with it (`load_tokenizer` runs it):
        raises with one line where the tokenizer would not render prompts as the model does."""

    def check_renderer(self, tokenizer, records, where: str) -> None:
        """Prepare's check of a checkpoint's own chat code against this renderer (nothing where there is none)."""

    def fingerprint(self, tokenizer) -> dict[str, str]:
        """What run.json binds beside the tokenizer's hashes."""

    def card_text(self, profile) -> CardText:
        """What the dataset card says of the format: its rules paragraph, reasoning end and generation prompts."""
