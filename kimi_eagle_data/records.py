"""Typed records at the stage boundaries. Data flows one way:

    source row --adapter--> SourcePrompt --prepare--> PromptRecord --generate--> Completion
    --validate--> Sample (the emitted row)

An engine answers each request with its result (a Completion, a score) or a RequestFailure.

Messages and tools use the OpenAI/HF chat shape that `apply_chat_template` takes:
messages `[{"role": "system"|"user"|"assistant"|"tool", "content": str, ...}]`, tools
`[{"type": "function", "function": {"name", "description", "parameters"}}]`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
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
    # Policy own_history: the source's messages after the prompt (what continues the conversation once the
    # model answered, kimi_eagle_data/conversation/). None under the other policies.
    script: list[dict[str, Any]] | None = None


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
    mode: str = "thinking"                 # thinking / instant (model_profile.MODES): how the prompt was rendered
    # The thinking effort the prompt announces (a profile with efforts: Kimi-K3); None in instant mode, for a
    # profile without efforts, and for a prompt prepared before efforts (its profile's default).
    effort: str | None = None
    # The prompt's own sampling (sources/modes.py); None: the run's (prepared before modes).
    temperature: float | None = None
    top_p: float | None = None
    # Policy own_history (kimi_eagle_data/conversation/): the source's messages after the first prompt (on
    # turn 1 only), the conversation (its first turn's id) and this prompt's turn in it (1-based). A prompt of
    # another policy is turn 1 of a conversation of its own.
    script: list[dict[str, Any]] | None = None
    conversation_id: str | None = None
    turn: int = 1

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)

    @property
    def conversation(self) -> str:
        return self.conversation_id or self.id


# Why a conversation ends (ConversationEnd.reason): conversation/next_turn.py decides, the card and `inspect` say
# what each code means.
END_REASONS = {
    "source_exhausted": "the source has no next user turn or tool result",
    "max_turns": "the partition's max_turns turns were generated",
    "call_diverged": "the model's tool calls are not the source's (name, JSON-equal arguments), so the source's "
                     "tool results do not answer them",
    "turn_rejected": "the validator rejected the turn (its row's `issues` say why): only a valid turn is sent back",
    "turn_truncated": "the turn was cut at max_new_tokens: there is no whole turn to send back",
    "next_prompt_too_long": "the next prompt + max_new_tokens is over max_seq_len",
    "next_prompt_error": "the next prompt cannot be rendered (chat template or tool declarations)",
}


@dataclass(frozen=True)
class ConversationEnd:
    """Why a conversation regenerated on the model's own turns has no turn after `turn` (reason codes:
    END_REASONS), stored with that turn's completion."""

    conversation_id: str
    config: str
    turn: int                              # the conversation's last turn
    reason: str
    message: str                           # one human line


@dataclass
class Rejection:
    """An item dropped by a stage, kept with its reason."""

    config: str
    stage: str                             # prepare / generate
    source_id: str
    reason: str                            # machine-readable code
    message: str                           # one human line
    id: str = ""


@dataclass(frozen=True)
class RequestFailure:
    """A request the engine gave up on (retries spent, refused, aborted): data, not an exception. The stores
    keep it as the request's failure row, and a rerun skips it until `--retry-failed`."""

    id: str                                # the request's id
    reason: str                            # machine-readable: http_500, connection, abort, bad_response, ...
    message: str                           # the last one human line
    attempts: int = 1                      # tries made (0: never sent)


@dataclass(frozen=True)
class LogprobSums:
    """The target's log-probs of a run of sampled or scored tokens, summed: `n` tokens, their log-prob `sum`
    (natural log), `top1` of them the target's own top-1 (None when the engine named no top-1 ids); the same
    over the reasoning, the first `reasoning_n` tokens (the completion grammar's boundary; the rest is the
    answer)."""

    n: int
    sum: float
    top1: int | None
    reasoning_n: int
    reasoning_sum: float
    reasoning_top1: int | None

    @classmethod
    def of(cls, ids: Sequence[int], logprobs: Sequence[float], top1_ids: Sequence[int] | None,
           reasoning_n: int) -> "LogprobSums":
        """Sums of `logprobs` (one per id of `ids`); `top1_ids` that do not line up with `ids` count as none."""
        hits = [int(t == a) for t, a in zip(ids, top1_ids)] \
            if top1_ids is not None and len(top1_ids) == len(ids) else None
        k = min(reasoning_n, len(ids))
        return cls(n=len(ids), sum=float(sum(logprobs)), top1=sum(hits) if hits is not None else None,
                   reasoning_n=k, reasoning_sum=float(sum(logprobs[:k])),
                   reasoning_top1=sum(hits[:k]) if hits is not None else None)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (`Completion.logprob_stats`, the score report)."""
        return {"n": self.n, "sum": self.sum, "top1": self.top1, "reasoning_n": self.reasoning_n,
                "reasoning_sum": self.reasoning_sum, "reasoning_top1": self.reasoning_top1}


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
    # Target verify steps the engine ran for it with a drafter (SGLang's meta_info.spec_verify_ct); None: no drafter,
    # or not reported. completion_tokens / spec_verify_ct is the tokens each target step produced (acceptance).
    spec_verify_ct: int | None = None
    engine: str = ""
    latency_s: float | None = None
    # The target's log-probability of each generated token (natural log) and its top-1 token id at that
    # position, when the engine reports them. Transient: the checkpoint keeps only their sums
    # (`logprob_stats`), never per-token lists.
    output_logprobs: Sequence[float] | None = None
    output_top1_ids: Sequence[int] | None = None
    output_top1_logprobs: Sequence[float] | None = None   # the top-1 token's log-prob (protocol server)
    # Their per-sample sums (LogprobSums.as_dict()), what the checkpoint stores: {"n", "sum", "top1"} over
    # the whole completion, and "reasoning_n", "reasoning_sum", "reasoning_top1" over its reasoning (the
    # completion grammar's `reasoning_length`). None when the engine reported no log-probs (or an older checkpoint).
    logprob_stats: dict[str, Any] | None = None


# -- what a run records of the drafter its engine generated with (engines/drafter.py reads them from the engines;
# the stats, plan, the card and emit read them from the checkpoint and the manifest) -------------------------------

@dataclass(frozen=True)
class SpecDecodeCounts:
    """vLLM's speculative-decoding counters, summed over a server's engines (and over servers): what `generate`
    keeps in the checkpoint's meta (`spec_decode`)."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0

    def __add__(self, other: "SpecDecodeCounts") -> "SpecDecodeCounts":
        return SpecDecodeCounts(*(a + b for a, b in zip(self.astuple(), other.astuple())))

    def __sub__(self, other: "SpecDecodeCounts") -> "SpecDecodeCounts":
        return SpecDecodeCounts(*(a - b for a, b in zip(self.astuple(), other.astuple())))

    def astuple(self) -> tuple[int, int, int]:
        return self.drafts, self.draft_tokens, self.accepted_tokens

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Any) -> "SpecDecodeCounts | None":
        if not isinstance(d, dict) or not all(type(d.get(k)) is int for k in ("drafts", "draft_tokens",
                                                                            "accepted_tokens")):
            return None
        return cls(d["drafts"], d["draft_tokens"], d["accepted_tokens"])


def tokens_per_verify_step(counts: SpecDecodeCounts) -> float | None:
    """vLLM's mean acceptance length: each verify step's accepted draft tokens plus the target's own one."""
    return round(1 + counts.accepted_tokens / counts.drafts, 4) if counts.drafts > 0 else None


def describe_drafter(server_args: dict[str, Any]) -> dict[str, Any] | None:
    """The drafter an engine's recorded server_args name, in one shape for both engines: {algorithm, model,
    num_steps, topk, num_draft_tokens}; None when it ran none (or did not say)."""
    vllm = server_args.get("speculative_config")
    if isinstance(vllm, dict):
        return {"algorithm": vllm.get("method"), "model": vllm.get("model"),
                "num_steps": vllm.get("num_speculative_tokens"), "topk": None,
                "num_draft_tokens": vllm.get("num_speculative_tokens")}
    algorithm = server_args.get("speculative_algorithm")
    if not algorithm or str(algorithm).upper() == "NONE":
        return None
    return {"algorithm": algorithm, "model": server_args.get("speculative_draft_model_path"),
            "num_steps": server_args.get("speculative_num_steps"), "topk": server_args.get("speculative_eagle_topk"),
            "num_draft_tokens": server_args.get("speculative_num_draft_tokens")}
