"""The bridge between the caller's thread and the HTTP engines' asyncio loop: the loop runs in a worker thread,
its results come back through a bounded queue (checkpoint commits stay in the caller's thread: SQLite), and the
requests it sends are pulled from the caller's iterable one per freed slot, in a thread of their own when pulling
may block (the request loop's feed waits for answers that add a conversation's next turn)."""

from __future__ import annotations

import asyncio
import gc
import queue
import threading
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterable, Iterator


class LoopFailed(Exception):
    """The loop of `results_of_loop` raised `error`."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def results_of_loop(produce: Callable[[queue.Queue], Awaitable[None]], *, maxsize: int, name: str,
                    on_stop: Callable[[], None], on_abandon: Callable[[], None]) -> Iterator:
    """Run `produce(out)` on an asyncio loop in a thread of its own and yield what it puts in `out` (a queue of
    `maxsize`), in that order. When the caller stops taking (Ctrl-C, SIGTERM, a consumer that breaks) or the loop
    ends, `on_stop` is called, and `on_abandon` too when the loop had not ended; the thread gets 5 s to end. An
    error of the loop is raised here as LoopFailed."""
    out: queue.Queue = queue.Queue(maxsize=maxsize)
    done = object()
    error: list[BaseException] = []

    def worker():
        try:
            asyncio.run(produce(out))
        except BaseException as e:  # surfaced in the caller's thread
            error.append(e)
        finally:
            out.put(done)

    thread = threading.Thread(target=worker, name=name, daemon=True)
    finished = False
    with spaced_collections():
        thread.start()
        try:
            while (item := out.get()) is not done:
                yield item
            finished = True
        finally:
            on_stop()
            if not finished:
                on_abandon()
            thread.join(timeout=5)
    if error:
        raise LoopFailed(error[0])


# While requests stream, Python's young-generation collection runs once per this many new objects (default 700).
# Every answer brings token id lists thousands of ints long, and each young collection walks every element of those
# still alive; the client makes almost no cyclic garbage (refcounts free it), so collecting 70x less often costs
# little memory and keeps the loop from stalling while the servers' queues drain (bench_scheduler, conversations).
STREAM_GC_THRESHOLD = 50_000


@contextmanager
def spaced_collections():
    """Young collections spaced to STREAM_GC_THRESHOLD for the duration; the thresholds as they were after."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], STREAM_GC_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


class Puller:
    """The next item of an iterable, for an asyncio loop. What is there is taken at once (a list; a feed's `poll`);
    what may block (the request loop's feed waiting for answers) is pulled in a thread of its own, so the loop
    runs meanwhile. A daemon thread: one left blocked never holds up the interpreter's exit."""

    def __init__(self, items: Iterable, end: Any, name: str):
        self._loop = asyncio.get_running_loop()
        self._end = end
        self._items = iter(items)
        self._ready = self._items if isinstance(items, (list, tuple)) else None
        self._poll = getattr(items, "poll", None)
        self._asks: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        if self._ready is None:
            self._thread = threading.Thread(target=self._pull, args=(self._items, end), name=name, daemon=True)
            self._thread.start()

    async def next(self) -> Any:
        """The next item, or `end` after the last."""
        if self._ready is not None:
            return next(self._ready, self._end)
        if self._poll is not None:
            try:
                item = self._poll()
            except StopIteration:
                return self._end
            if item is not None:
                return item
        answer = self._loop.create_future()
        self._asks.put(answer)
        return await answer

    def close(self) -> None:
        self._asks.put(None)

    def _pull(self, items: Iterator, end: Any) -> None:
        while (answer := self._asks.get()) is not None:
            try:
                item, error = next(items, end), None
            except BaseException as e:   # raised in the loop's thread, by `next`
                item, error = None, e
            try:
                self._loop.call_soon_threadsafe(_settle, answer, item, error)
            except RuntimeError:          # the loop has ended (its run stopped): nobody waits
                return


def _settle(answer: asyncio.Future, item: Any, error: BaseException | None) -> None:
    if answer.done():            # cancelled: the run stopped
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(item)
