"""`kimi-data` in a child forked from the test process, with the heavy imports already done.

Each CLI run of the suite in a fresh interpreter spends most of its CPU time importing torch and transformers
(about 5 s of CPU a run, hundreds of runs). A forked child is still a process of its own, as `python -m
kimi_eagle_data` is: its own pid, stdin from /dev/null, stdout and stderr in pipes, the exit status the kernel
reports (a signal's is negative, as with subprocess), a traceback printed by the child itself, workdir locks
of its own (workdir_lock forgets the parent's in a forked child). The child is put back into the state a
fresh interpreter starts in where the test process changed it: environment, argv, signal dispositions,
warnings, logging handlers."""

from __future__ import annotations

import importlib
import io
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
import traceback
import warnings

# A fresh interpreter's warning filters (python -W unset, no -X dev).
FRESH_WARNING_FILTERS = [("default", None, DeprecationWarning, "__main__", 0),
                         ("ignore", None, DeprecationWarning, None, 0),
                         ("ignore", None, PendingDeprecationWarning, None, 0),
                         ("ignore", None, ImportWarning, None, 0),
                         ("ignore", None, ResourceWarning, None, 0)]

# What nearly every command imports (torch and transformers: most of a fresh interpreter's start).
WARM_MODULES = ("kimi_eagle_data.cli.main", "kimi_eagle_data.pipeline", "kimi_eagle_data.prompts.tokenizer", "torch",
                "transformers.generation.utils")

_warm = False


def warm_up() -> None:
    """Import what nearly every command imports, once, in this process (the parent of every child)."""
    global _warm
    if _warm:
        return
    columns = os.environ.pop("COLUMNS", None)   # the consoles then read COLUMNS as they print: the child's
    try:
        for name in WARM_MODULES:
            importlib.import_module(name)
        transformers = importlib.import_module("transformers")
        transformers.AutoTokenizer, transformers.AutoModelForCausalLM   # lazily imported on first use
    finally:
        if columns is not None:
            os.environ["COLUMNS"] = columns
    _warm = True


def run_forked(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    warm_up()
    command = [sys.executable, "-m", "kimi_eagle_data", *args]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:   # the child: never returns
        try:
            os.close(out_r)
            os.close(err_r)
            _run_cli_in_child(args, env, out_w, err_w)
        finally:
            os._exit(70)
    os.close(out_w)
    os.close(err_w)
    try:
        out, err = _read_until_closed(out_r, err_r, time.monotonic() + timeout)
    except subprocess.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise subprocess.TimeoutExpired(command, timeout) from None
    _, status = os.waitpid(pid, 0)
    return subprocess.CompletedProcess(command, os.waitstatus_to_exitcode(status), out.decode(errors="replace"),
                                       err.decode(errors="replace"))


def _read_until_closed(out_fd: int, err_fd: int, deadline: float) -> tuple[bytes, bytes]:
    """Both pipes to their end (every writer gone), as subprocess.run's communicate reads them."""
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        try:
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired("kimi-data", 0)
                for key, _ in sel.select(timeout=left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
        finally:
            os.close(out_fd)
            os.close(err_fd)
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd])


def _run_cli_in_child(args: list[str], env: dict[str, str], out_w: int, err_w: int) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (devnull, out_w, err_w):
        os.close(fd)
    stale = {id(s) for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    os.environ.clear()
    os.environ.update(env)
    import kimi_eagle_data

    sys.argv = [os.path.join(os.path.dirname(kimi_eagle_data.__file__), "__main__.py"), *args]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    warnings.filters[:] = FRESH_WARNING_FILTERS
    warnings._filters_mutated()
    warnings.showwarning = _show_warning
    _log_to_this_stderr(stale)
    code = 0
    try:
        from kimi_eagle_data.cli.main import main

        main(args, prog_name="python -m kimi_eagle_data")
    except SystemExit as e:   # as the interpreter turns it into an exit status
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _log_to_this_stderr(stale: set[int]) -> None:
    """Logging as a fresh process has it: no test-runner handlers; stream handlers write to this stderr."""
    loggers = [logging.getLogger(), *(x for x in logging.Logger.manager.loggerDict.values()
                                      if isinstance(x, logging.Logger))]
    for logger in loggers:
        for handler in list(logger.handlers):
            if type(handler).__module__.startswith("_pytest"):
                logger.removeHandler(handler)
            elif isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler) \
                    and id(handler.stream) in stale:
                handler.setStream(sys.stderr)
