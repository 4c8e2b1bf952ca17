"""Stage 2, generate: PromptRecords -> engine -> Completions committed to the checkpoint.

Work already in the checkpoint is skipped, so a rerun (or a restart after a crash) continues
where the last one stopped. A request the engine gave up on (`abort`, exhausted retries) comes back
as a RequestFailure and is recorded with its reason; `retry_failed` tries those again. The loop itself
(send, keep each result in its own transaction, progress) is request_loop.py's, shared with `score`.

A conversation's turn (policy own_history) is followed by its next turn: `next_turn(record, completion)` says
what follows it (the next turn's prompt or the conversation's end), stored in the completion's transaction, and
the next turn is sent as soon as that is stored (request_loop.py: `Kept.follow`).

Requests ask for the log-prob of every sampled token (`return_logprob`); the checkpoint keeps their
sums per sample (`logprob_stats`), so `kimi-data score` compares the upstream answers with the target's
own completions without scoring those again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from kimi_eagle_data.engines.base import Engine, GenerationRequest, SamplingParams
from kimi_eagle_data.engines.request_loop import Kept, RequestRun, pending, run_requests
from kimi_eagle_data.progress import Progress
from kimi_eagle_data.records import Completion, ConversationEnd, LogprobSums, PromptRecord, RequestFailure
from kimi_eagle_data.store.checkpoint import Checkpoint
from kimi_eagle_data.store.prompt_hash import prompt_hash


@dataclass
class GenerateReport(RequestRun):
    """What a generate pass did; its tokens are the generated ones."""

    @property
    def output_tokens(self) -> int:
        return self.tokens


@dataclass(frozen=True)
class GenerationJob:
    key: str                       # the sample id
    config: str
    request: GenerationRequest
    record: PromptRecord

    @classmethod
    def of(cls, record: PromptRecord, sampling: SamplingParams) -> "GenerationJob":
        return cls(record.id, record.config,
                   GenerationRequest(record.id, record.prompt_ids, record_sampling(sampling, record),
                                     seed=request_seed(record.id), return_logprob=True,
                                     conversation=record.conversation), record)


# What follows a conversation's turn once its completion is in (conversation/next_turn.py); None: nothing (a
# prompt of another policy).
NextTurnFn = Callable[[PromptRecord, Completion], "PromptRecord | ConversationEnd | None"]


def request_seed(id_: str) -> int:
    return int(id_.rsplit("-", 1)[-1][:8], 16) if "-" in id_ else 0


def logprob_stats(c: Completion, reasoning_length: Callable[[list[int]], int] | None) -> dict | None:
    """The per-sample sums (LogprobSums) of the log-probs the engine reported for `c.output_ids`, as stored
    (None without them); the reasoning is the first `reasoning_length(ids)` tokens."""
    lps = c.output_logprobs
    if lps is None or len(lps) != len(c.output_ids) or not len(lps):
        return None
    ids = [int(t) for t in c.output_ids]
    k = 0 if reasoning_length is None else reasoning_length(ids)
    return LogprobSums.of(ids, lps, c.output_top1_ids, k).as_dict()


def record_sampling(sampling: SamplingParams, record: PromptRecord) -> SamplingParams:
    """The run's sampling with the prompt's own temperature and top_p (its mode's and its partition's mix,
    sources/modes.py); a prompt prepared before modes has none and takes the run's."""
    own = {k: v for k, v in (("temperature", record.temperature), ("top_p", record.top_p)) if v is not None}
    return replace(sampling, **own) if own else sampling


def generate_records(records: list[PromptRecord], engine: Engine, checkpoint: Checkpoint, sampling: SamplingParams,
                     *, done: set[str] | None = None, failed: dict | None = None, retry_failed: bool = False,
                     progress: Progress | None = None,
                     reasoning_length: Callable[[list[int]], int] | None = None,
                     next_turn: NextTurnFn | None = None, origins: dict[str, str] | None = None) -> GenerateReport:
    """Generate every record not in `done` (nor in `failed`, unless `retry_failed`); commit each result with
    the hash of its prompt, and with it what `next_turn` says follows it (with its conversation's origin from
    `origins`, store/prompt_hash.py); a next turn is generated in the same pass."""
    report = GenerateReport()
    jobs = pending((GenerationJob.of(r, sampling) for r in records),
                   checkpoint.done_ids() if done is None else done,
                   checkpoint.failures() if failed is None else failed,
                   retry_failed=retry_failed, run=report)

    def keep(job: GenerationJob, c: Completion) -> Kept:
        instant = job.record.mode == "instant"    # no reasoning: the whole completion is answer
        c.logprob_stats = logprob_stats(c, None if instant else reasoning_length)
        follow = next_turn(job.record, c) if next_turn is not None else None
        checkpoint.commit(job.config, c, follow, prompt_hash=prompt_hash(job.record.prompt_ids),
                          origin=(origins or {}).get(job.record.conversation))
        return Kept(len(c.output_ids), c.finish_reason,
                    follow=(GenerationJob.of(follow, sampling),) if isinstance(follow, PromptRecord) else ())

    def fail(job: GenerationJob, failure: RequestFailure) -> None:
        checkpoint.record_failure(job.config, failure)

    return run_requests("generate", jobs, engine.generate, keep, fail, report, in_flight=engine.in_flight,
                        progress=progress, streaming=engine.streams_requests)
