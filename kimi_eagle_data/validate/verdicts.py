"""Validation in parallel: chunks of consecutive samples judged by the run format's validator in worker processes.

The main process reads the checkpoint and the prepared prompts into contiguous buffers, cuts them into
chunks and writes the results; workers run what costs per token: the validator (whose `SegmentDecoder` is the one
decode, through the tokenizer's fastest correct path) and the `messages` column built from its verdicts.
Token ids go to the workers but never come back (the main process has them): pickling through a pipe costs
more than building the token columns.
Results come back in submission order, so what is written never depends on the number of workers.

Workers are forked: they inherit the loaded tokenizer and validator (no re-import of transformers, no
tokenizer reload). Where fork is unavailable, validation runs in the calling process.

Workers never outlive the process that forked them: on Linux the kernel kills each one when its parent dies
(PR_SET_PDEATHSIG), even by `kill -9`; an orphan would hold the checkpoint's WAL files and the caller's stdout.
They ignore SIGINT and SIGTERM: Ctrl-C and a scheduler's SIGTERM reach the whole process group, and the
parent, which handles them, ends the pool itself. While a pool lives, the parent defers SIGTERM to safe points
(stopping.py): between chunks, and when the pool closes, after its workers have ended.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import multiprocessing as mp
import os
import signal
import sys
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import orjson
import pyarrow as pa

from kimi_eagle_data.chat_format import FormatValidator
from kimi_eagle_data.store.checkpoint import CompletionBatch
from kimi_eagle_data.schema import ROW_SCHEMA, message_chars, normalize_message
from kimi_eagle_data.stopping import DeferredStop, check_stop

MESSAGES_TYPE = ROW_SCHEMA.field("messages").type


@dataclass
class Chunk:
    """Samples to judge: prompt ids as (offsets, values) buffers, the completions as read from the checkpoint
    (their checksums are verified here, in the worker), the rest as JSON text."""

    prompt_offsets: np.ndarray     # int64, n + 1
    prompt_values: np.ndarray      # int32
    completions: CompletionBatch
    messages: list[str]            # JSON: the prompt turns
    tools: list[str]               # JSON, "" when none


@dataclass
class Judged:
    """A chunk's verdicts and everything of its rows that is not a token id (what goes back to the main
    process is small: the ids stay there)."""

    valid: np.ndarray              # bool
    reasoning_len: np.ndarray      # int32
    num_tool_calls: np.ndarray     # int32
    finish_reason: list[str]       # as reported (a `length` that ends with end-of-turn is `stop`)
    issues: list[list[str]]
    messages: pa.Array             # list<MESSAGE>: the prompt turns + the generated turn decoded from ids
    prompt_chars: np.ndarray       # int64
    completion_chars: np.ndarray
    mode: list[str] = field(default_factory=list)   # thinking / instant, read from each prompt's end


def judge(validator: FormatValidator, chunk: Chunk) -> Judged:
    out = chunk.completions
    out.verify()
    n = len(out)
    valid = np.zeros(n, dtype=bool)
    reasoning = np.zeros(n, dtype=np.int32)
    calls = np.zeros(n, dtype=np.int32)
    p_chars = np.zeros(n, dtype=np.int64)
    c_chars = np.zeros(n, dtype=np.int64)
    finish, issues, messages, modes = [], [], [], []
    tools = [orjson.loads(t) if t else None for t in chunk.tools]
    details = [orjson.loads(d) for d in out.finish_detail]
    verdicts = validator.validate_many(chunk.prompt_offsets, chunk.prompt_values, out.offsets, out.values,
                                       out.finish_reason, details, tools)
    for i, v in enumerate(verdicts):
        valid[i], reasoning[i], calls[i] = v.valid, v.reasoning_len, v.num_tool_calls
        finish.append(v.finish_reason)
        modes.append(v.mode)
        issues.append(list(v.issues))
        prompt = [normalize_message(m) for m in orjson.loads(chunk.messages[i])]
        generated = normalize_message(v.assistant)
        p_chars[i] = sum(message_chars(m) for m in prompt)
        c_chars[i] = message_chars(generated)
        messages.append(prompt + [generated])
    return Judged(valid, reasoning, calls, finish, issues, pa.array(messages, type=MESSAGES_TYPE), p_chars, c_chars,
                  modes)


_WORKER_VALIDATOR: FormatValidator | None = None


PR_SET_PDEATHSIG = 1   # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux; elsewhere only the check below).
    A worker holds nothing to save: results are written by the parent."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:   # the parent died before the line above took effect
        os._exit(1)


def _init_worker(validator: FormatValidator, parent_pid: int) -> None:
    global _WORKER_VALIDATOR
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _WORKER_VALIDATOR = validator


def _judge_in_worker(chunk: Chunk) -> Judged:
    return judge(_WORKER_VALIDATOR, chunk)


def default_workers() -> int:
    """The machine's cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not Linux
        return max(1, os.cpu_count() or 1)


class VerdictPool:
    """Judges chunks with `workers` processes (1: in this process), results in submission order. From creation
    to close(), SIGTERM stops it between chunks (Terminated from map()), or at close() if it came later."""

    def __init__(self, validator: FormatValidator, workers: int | None = None):
        self.validator = validator
        self.workers = default_workers() if workers is None else max(1, int(workers))
        self._executor: ProcessPoolExecutor | None = None
        if self.workers > 1 and "fork" in mp.get_all_start_methods():
            # The tokenizers library warns (and turns its own threads off) in a forked child; we decode
            # one segment at a time, so say so up front and keep the output clean.
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            # Workers share the parent's pages (torch, transformers, the tokenizer: ~300 MB) copy-on-write.
            # The cyclic GC writes to every object it scans, in both processes, which would unshare those
            # pages bit by bit over a long run: freeze what exists now so that neither side scans it.
            gc.freeze()
            self._executor = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("fork"),
                                                 initializer=_init_worker, initargs=(validator, os.getpid()))
        self._stop = DeferredStop().start()

    def map(self, items: Iterable[tuple[Any, Chunk]]) -> Iterator[tuple[Any, Judged]]:
        """(context, chunk) -> (context, judged), in order; the context stays in this process."""
        if self._executor is None:
            for ctx, c in items:
                check_stop()
                yield ctx, judge(self.validator, c)
            return
        ahead = 2 * self.workers          # chunks in flight: every worker busy, memory bounded
        pending: deque[tuple[Any, Future]] = deque()
        for ctx, c in items:
            check_stop()
            pending.append((ctx, self._executor.submit(_judge_in_worker, c)))
            if len(pending) >= ahead:
                ctx0, fut = pending.popleft()
                yield ctx0, fut.result()
        while pending:
            check_stop()
            ctx0, fut = pending.popleft()
            yield ctx0, fut.result()

    def submit(self, fn: Callable[..., Any], *args) -> Future:
        """Any other picklable work (the card's plots) on the same processes; in this process without a pool."""
        if self._executor is not None:
            return self._executor.submit(fn, *args)
        done: Future = Future()
        done.set_result(fn(*args))
        return done

    def close(self) -> None:
        """Workers ended first; then a SIGTERM that came after the last check raises Terminated here."""
        try:
            if self._executor is not None:
                self._executor.shutdown(wait=True, cancel_futures=True)
                self._executor = None
                gc.unfreeze()
        finally:
            self._stop.end()

    def __enter__(self) -> "VerdictPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
