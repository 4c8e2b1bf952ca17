"""Typed records at the stage boundaries. Data flows one way:

    source row --adapter--> SourcePrompt --prepare--> PromptRecord --generate--> Completion
    --validate--> Sample (the emitted row)

Messages and tools use the OpenAI/HF chat shape that `apply_chat_template` takes:
messages `[{"role": "system"|"user"|"assistant"|"tool", "content": str, ...}]`, tools
`[{"type": "function", "function": {"name", "description", "parameters"}}]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


class SourceRowError(ValueError):
    """A source row that cannot become a prompt. `code` is machine-readable (e.g. `empty_user_turn`)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class SourcePrompt:
    """What an adapter makes of one upstream row."""

    source_id: str                         # upstream row key (stable across runs)
    messages: list[dict[str, Any]]         # the prompt turns, ending with the turn to answer
    tools: list[dict[str, Any]] | None = None
    # The upstream answer that followed the prompt, when the source has one (`kimi-data score`):
    # {"reasoning": str | None, "content": str[, "tool_calls": [...]]}. Never part of the prompt or its id.
    answer: dict[str, Any] | None = None


@dataclass
class PromptRecord:
    """A rendered prompt, ready for generation."""

    id: str
    config: str
    source: str
    source_id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    prompt_ids: list[int]
    answer: dict[str, Any] | None = None   # the upstream answer (SourcePrompt.answer), for `kimi-data score`
    mode: str = "thinking"                 # thinking / instant (profile.MODES): how the prompt was rendered
    # The prompt's own sampling (sources/modes.py); None: the run's (prepared before modes).
    temperature: float | None = None
    top_p: float | None = None

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)


@dataclass
class Rejection:
    """An item dropped by a stage, kept with its reason."""

    config: str
    stage: str                             # prepare / generate
    source_id: str
    reason: str                            # machine-readable code
    message: str                           # one human line
    id: str = ""


@dataclass
class Completion:
    """One engine answer for one prompt, exactly as produced."""

    id: str
    output_ids: Sequence[int]              # engines give lists; the checkpoint gives int32 numpy views
    finish_reason: str                     # stop / length / abort
    finish_detail: dict[str, Any] = field(default_factory=dict)   # SGLang's finish_reason object
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    engine: str = ""
    latency_s: float | None = None
    # The target's log-probability of each generated token (natural log) and its top-1 token id at that
    # position, when the engine reports them. Transient: the checkpoint keeps only their sums
    # (`logprob_stats`), never per-token lists.
    output_logprobs: Sequence[float] | None = None
    output_top1_ids: Sequence[int] | None = None
    output_top1_logprobs: Sequence[float] | None = None   # the top-1 token's log-prob (protocol server)
    # Their per-sample sums (generate.logprob_stats), what the checkpoint stores: {"n", "sum", "top1"} over
    # the whole completion, and "reasoning_n", "reasoning_sum", "reasoning_top1" over its reasoning (the
    # completion grammar's `reasoning_length`). None when the engine reported no log-probs (or an older checkpoint).
    logprob_stats: dict[str, Any] | None = None
