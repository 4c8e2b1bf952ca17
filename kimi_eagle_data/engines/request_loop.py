"""The one request loop, shared by `generate` and `score`: send the engine every request whose result is not
stored yet, take each result as it comes back (in any order), keep it — each in its own transaction, done by
the caller's `keep` — or record its failure, and report progress (progress.py: the caller's `Progress` gets a
snapshot after each answer).

An engine answers each request with its result or a `RequestFailure`; the caller's `keep` and `fail` store
them. The loop knows neither how requests are answered nor how results are kept.

A kept result may name follow-up jobs (`Kept.follow`: a conversation's next turn, whose prompt holds this
result): they are sent once it is kept. An engine that takes new requests while others run (`streaming`) reads
one feed that yields them as they appear, so the server stays full across conversations; any other engine gets
them in rounds (the initial jobs, then the follow-ups that round produced, and so on).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Iterator, Protocol, TypeVar

from kimi_eagle_data.progress import NoProgress, Progress, Snapshot
from kimi_eagle_data.records import RequestFailure


class Job(Protocol):
    """One unit of work: the request sent (its `id` names the result) and the key its result is stored under."""

    key: Hashable
    request: Any


J = TypeVar("J", bound=Job)


@dataclass(frozen=True)
class Kept:
    """A result stored: the tokens it holds (generated or scored), its outcome (a finish reason) and the jobs
    to send now that it is stored (`follow`: e.g. the next turn of its conversation)."""

    tokens: int
    outcome: str
    follow: tuple = ()


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


class Feed:
    """The requests of a streaming run, pulled by the engine (from any one thread): each waiting follow-up first,
    then the next initial one. A follow-up goes out the moment its job is kept (a conversation's next turn as soon
    as the turn before is stored), so only the follow-ups of answers not yet pulled wait here, at most as many as
    requests are in flight, and few conversations are left half done when a run stops. The caller orders the
    initial requests (longest chains first keeps the server full at the end). It ends once every request it gave
    out has been answered and none waits; until then a pull blocks. `close` ends it at once (the consumer
    stopped)."""

    def __init__(self, initial: Iterable[Any]):
        self._initial = iter(initial)
        self._follow: deque = deque()
        self._outstanding = 0          # given out, not answered yet
        self._closed = False
        self._changed = threading.Condition()
        self._consumer = threading.get_ident()   # the thread that reads the answers

    def __iter__(self) -> "Feed":
        return self

    def __next__(self) -> Any:
        with self._changed:
            while (request := self._take()) is None:
                if threading.get_ident() == self._consumer:   # its answers would never come: a deadlock
                    raise RuntimeError("the engine reads all its requests before answering any; run it with "
                                       "streaming=False (Engine.streams_requests)")
                self._changed.wait()    # an answer may still add follow-ups
            return request

    def poll(self) -> Any:
        """The next request without waiting: None when one may still come (answers outstanding); StopIteration
        at the end. (A puller takes what is there at once and waits in a thread only when it must.)"""
        with self._changed:
            return self._take()

    def _take(self) -> Any:
        if self._closed:
            raise StopIteration
        request = self._follow.popleft() if self._follow else next(self._initial, None)
        if request is None and not self._outstanding:
            raise StopIteration
        if request is not None:
            self._outstanding += 1
        return request

    def answered(self, follow: list[Any]) -> None:
        """One request given out is answered; `follow` (its follow-ups' requests) wait to be sent. One step, so
        a pull never sees the answer without its follow-ups."""
        with self._changed:
            self._follow.extend(follow)
            self._outstanding -= 1
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()



def run_requests(label: str, jobs: list[J], send: Callable[[Iterable[Any]], Iterator[Any]],
                 keep: Callable[[J, Any], Kept | RequestFailure], fail: Callable[[J, RequestFailure], None],
                 run: RequestRun, *, in_flight: Callable[[], int | None] = lambda: None,
                 progress: Progress | None = None, streaming: bool = True) -> RequestRun:
    """Send every job's request (`send`: requests -> results or RequestFailures, any order); `keep` stores a
    result (or says why it cannot be kept: then it is a failure) and names the jobs that follow it, `fail`
    records a failure. `streaming`: `send` is called once, with a Feed that also yields each follow-up as it
    appears (an engine that takes requests while others run); else in rounds, one per generation of follow-ups
    (an engine that wants all its requests up front). `progress` gets a Snapshot after each answer."""
    if not jobs:
        return run
    by_id = {job.request.id: job for job in jobs}      # the jobs not answered yet
    sent = set(by_id)                                  # every request id of this run (follow-ups are new ids)
    run.requested = len(jobs)
    progress = progress or NoProgress()
    answered = 0
    t0 = time.perf_counter()
    progress.start(label, len(jobs))
    try:
        def take(result: Any) -> list[Any]:
            """Keep or fail one result; the requests of the jobs that follow it (registered, counted)."""
            nonlocal answered
            job = by_id.pop(result.id)        # an answered job is let go: a long run holds only what is in flight
            kept = result if isinstance(result, RequestFailure) else keep(job, result)
            follow: list[Any] = []
            if isinstance(kept, RequestFailure):
                fail(job, kept)
                run.failed += 1
                run.outcomes[kept.reason] += 1
            else:
                run.completed += 1
                run.tokens += kept.tokens
                run.outcomes[kept.outcome] += 1
                follow = [_register(by_id, sent, j) for j in kept.follow]
                run.requested += len(follow)
            answered += 1
            elapsed = time.perf_counter() - t0
            progress.update(Snapshot(label, answered, run.requested,
                                     run.tokens / elapsed if elapsed else 0.0, in_flight(), dict(run.outcomes)))
            return follow

        requests = [job.request for job in jobs]
        if streaming:
            feed = Feed(requests)
            with _closing(send(feed), feed) as results:
                for result in results:
                    feed.answered(take(result))
        else:
            while requests:
                follow = []
                with _closing(send(requests)) as results:
                    for result in results:
                        follow += take(result)
                requests = follow
    finally:
        progress.stop()
    run.seconds = time.perf_counter() - t0
    return run


def _register(by_id: dict, sent: set, job: Job) -> Any:
    if job.request.id in sent:
        raise ValueError(f"follow-up request id {job.request.id!r} was already sent in this run; ids must be unique")
    by_id[job.request.id] = job
    sent.add(job.request.id)
    return job.request


@contextmanager
def _closing(results: Iterator[Any], feed: Feed | None = None) -> Iterator[Iterator[Any]]:
    """`results`, and on leaving (however: done, an exception, Ctrl-C) the feed closed first, so a thread
    blocked pulling from it wakes and ends, then the results stream (the engine stops sending)."""
    try:
        yield results
    finally:
        if feed is not None:
            feed.close()
        close = getattr(results, "close", None)
        if close is not None:
            close()
