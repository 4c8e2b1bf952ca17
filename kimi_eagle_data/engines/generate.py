"""Stage 2, generate: PromptRecords -> engine -> Completions committed to the checkpoint.

Work already in the checkpoint is skipped, so a rerun (or a restart after a crash) continues
where the last one stopped. A completion the engine could not produce (`abort`, exhausted
retries) is recorded as a failure with its reason; `retry_failed` tries those again.

Requests ask for the log-prob of every sampled token (`return_logprob`); the checkpoint keeps their
sums per sample (`logprob_stats`), so `kimi-data score` compares the upstream answers with the target's
own completions without scoring those again.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from kimi_eagle_data.engines.checkpoint import Checkpoint
from kimi_eagle_data.engines.base import Engine, GenerationRequest, SamplingParams
from kimi_eagle_data.records import Completion, PromptRecord

FAILED_FINISH = ("abort", "error")


@dataclass
class GenerateReport:
    requested: int = 0
    skipped_done: int = 0
    skipped_failed: int = 0
    completed: int = 0
    failed: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    finish: Counter = field(default_factory=Counter)

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.seconds if self.seconds else 0.0


def request_seed(id_: str) -> int:
    return int(id_.rsplit("-", 1)[-1][:8], 16) if "-" in id_ else 0


def logprob_stats(c: Completion, reasoning_length: Callable[[list[int]], int] | None) -> dict | None:
    """Per-sample sums of the log-probs the engine reported for `c.output_ids` (None without them):
    n, sum, top1 (tokens that were the target's top-1) over the completion, and the same over the
    reasoning, its first `reasoning_length(ids)` tokens (the completion grammar's boundary; the rest is the
    answer)."""
    lps = c.output_logprobs
    if lps is None or len(lps) != len(c.output_ids) or not len(lps):
        return None
    ids = [int(t) for t in c.output_ids]
    top = c.output_top1_ids if c.output_top1_ids is not None and len(c.output_top1_ids) == len(ids) else None
    k = 0 if reasoning_length is None else reasoning_length(ids)
    hits = [int(t == a) for t, a in zip(ids, top)] if top is not None else None
    return {"n": len(ids), "sum": float(sum(lps)), "top1": sum(hits) if hits is not None else None,
            "reasoning_n": k, "reasoning_sum": float(sum(lps[:k])),
            "reasoning_top1": sum(hits[:k]) if hits is not None else None}


def record_sampling(sampling: SamplingParams, record: PromptRecord) -> SamplingParams:
    """The run's sampling with the prompt's own temperature and top_p (its mode's and its partition's mix,
    sources/modes.py); a prompt prepared before modes has none and takes the run's."""
    own = {k: v for k, v in (("temperature", record.temperature), ("top_p", record.top_p)) if v is not None}
    return replace(sampling, **own) if own else sampling


def generate_records(records: list[PromptRecord], engine: Engine, checkpoint: Checkpoint, sampling: SamplingParams,
                     *, done: set[str] | None = None, failed: dict | None = None, retry_failed: bool = False,
                     console: Console | None = None, show_progress: bool = True,
                     reasoning_length: Callable[[list[int]], int] | None = None) -> GenerateReport:
    """Generate every record not in `done` (nor in `failed`, unless `retry_failed`); commit each result."""
    report = GenerateReport()
    done = checkpoint.done_ids() if done is None else done
    failed = checkpoint.failures() if failed is None else failed
    config_of = {r.id: r.config for r in records}
    instant = {r.id for r in records if r.mode == "instant"}   # no reasoning: the whole completion is answer
    todo = []
    for r in records:
        if r.id in done:
            report.skipped_done += 1
        elif r.id in failed and not retry_failed:
            report.skipped_failed += 1
        else:
            todo.append(GenerationRequest(r.id, r.prompt_ids, record_sampling(sampling, r), seed=request_seed(r.id),
                                          return_logprob=True))
    report.requested = len(todo)
    if not todo:
        return report

    console = console or Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]generate"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[tps]:>7.0f} tok/s"), TextColumn("{task.fields[flight]}"),
        TextColumn("{task.fields[reasons]}"),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        console=console, disable=not show_progress, transient=False,
    )
    t0 = time.perf_counter()
    with progress:
        task = progress.add_task("generate", total=len(todo), tps=0.0, reasons="", flight="")
        for c in engine.generate(todo):
            config = config_of[c.id]
            if c.finish_reason in FAILED_FINISH:
                attempts = int(c.finish_detail.get("attempts", 1))
                message = str(c.finish_detail.get("message", c.finish_reason))
                reason = str(c.finish_detail.get("reason", c.finish_reason))   # e.g. http_500, connection, abort
                checkpoint.record_failure(config, c.id, reason, message, attempts)
                report.failed += 1
            else:
                c.logprob_stats = logprob_stats(c, None if c.id in instant else reasoning_length)
                checkpoint.commit(config, c)
                report.completed += 1
                report.output_tokens += len(c.output_ids)
            report.finish[c.finish_reason] += 1
            elapsed = time.perf_counter() - t0
            in_flight = engine.in_flight()
            progress.update(task, advance=1, tps=report.output_tokens / elapsed if elapsed else 0.0,
                            flight="" if in_flight is None else f"in flight {in_flight}",
                            reasons=" ".join(f"{k}={v}" for k, v in sorted(report.finish.items())))
    report.seconds = time.perf_counter() - t0
    return report
