"""The one request loop, shared by `generate` and `score`: send the engine every request whose result is not
stored yet, take each result as it comes back (in any order), keep it — each in its own transaction, done by
the caller's `keep` — or record its failure, and show progress.

An engine answers each request with its result or a `RequestFailure`; the caller's `keep` and `fail` store
them. The loop knows neither how requests are answered nor how results are kept.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Iterator, Protocol, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from kimi_eagle_data.records import RequestFailure


class Job(Protocol):
    """One unit of work: the request sent (its `id` names the result) and the key its result is stored under."""

    key: Hashable
    request: Any


J = TypeVar("J", bound=Job)


@dataclass(frozen=True)
class Kept:
    """A result stored: the tokens it holds (generated or scored) and its outcome (a finish reason)."""

    tokens: int
    outcome: str


@dataclass
class RequestRun:
    """What one pass of the loop did."""

    requested: int = 0
    skipped_done: int = 0          # stored before
    skipped_failed: int = 0        # failed before, not retried
    completed: int = 0
    failed: int = 0
    tokens: int = 0                # in the kept results
    seconds: float = 0.0
    outcomes: Counter = field(default_factory=Counter)   # a kept result's outcome, a failure's reason

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def pending(jobs: Iterable[J], done, failed, *, retry_failed: bool, run: RequestRun) -> list[J]:
    """The jobs whose key is neither `done` nor `failed` (unless `retry_failed`); the others counted in `run`."""
    todo = []
    for job in jobs:
        if job.key in done:
            run.skipped_done += 1
        elif job.key in failed and not retry_failed:
            run.skipped_failed += 1
        else:
            todo.append(job)
    run.requested = len(todo)
    return todo


def run_requests(label: str, jobs: list[J], send: Callable[[list[Any]], Iterator[Any]],
                 keep: Callable[[J, Any], Kept | RequestFailure], fail: Callable[[J, RequestFailure], None],
                 run: RequestRun, *, in_flight: Callable[[], int | None] = lambda: None,
                 console: Console | None = None, show_progress: bool = True) -> RequestRun:
    """Send every job's request (`send`: requests -> results or RequestFailures, any order); `keep` stores a
    result (or says why it cannot be kept: then it is a failure), `fail` records a failure."""
    if not jobs:
        return run
    by_id = {job.request.id: job for job in jobs}
    progress = Progress(
        TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[tps]:>7.0f} tok/s"), TextColumn("{task.fields[flight]}"),
        TextColumn("{task.fields[outcomes]}"),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        console=console or Console(stderr=True), disable=not show_progress, transient=False,
    )
    t0 = time.perf_counter()
    with progress:
        task = progress.add_task(label, total=len(jobs), tps=0.0, outcomes="", flight="")
        for result in send([job.request for job in jobs]):
            job = by_id[result.id]
            kept = result if isinstance(result, RequestFailure) else keep(job, result)
            if isinstance(kept, RequestFailure):
                fail(job, kept)
                run.failed += 1
                run.outcomes[kept.reason] += 1
            else:
                run.completed += 1
                run.tokens += kept.tokens
                run.outcomes[kept.outcome] += 1
            elapsed = time.perf_counter() - t0
            flight = in_flight()
            progress.update(task, advance=1, tps=run.tokens / elapsed if elapsed else 0.0,
                            flight="" if flight is None else f"in flight {flight}",
                            outcomes=" ".join(f"{k}={v}" for k, v in sorted(run.outcomes.items())))
    run.seconds = time.perf_counter() - t0
    return run
