"""`kimi-data` in a child forked from the test process, with the heavy imports already done.

Each CLI run of the suite in a fresh interpreter spent most of its time importing torch and transformers (a
`generate` of 27 prompts under py-spy: 70% of its samples in imports), over hundreds of runs. A forked child is
still a process of its own, as `python -m kimi_eagle_data` is: its own pid, stdin from /dev/null, stdout and stderr
in pipes, the exit status the kernel reports (a signal's is negative, as with subprocess), a traceback printed by
the child itself, workdir locks of its own (store/lock.py forgets the parent's in a forked child). The child is put
back into the state a fresh interpreter starts in where the test process changed it: environment, argv, signal
dispositions, faulthandler, warnings, logging handlers. tests/test_forked_cli.py compares forked and fresh runs."""

from __future__ import annotations

import faulthandler
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
WARM_MODULES = ("kimi_eagle_data.cli.main", "kimi_eagle_data.runs", "kimi_eagle_data.prompts.tokenizer", "torch",
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
    """subprocess.run(…, capture_output=True, text=True, timeout=…) of `kimi-data ARGS`, forked."""
    proc = ForkedCli(args, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class ForkedCli:
    """`kimi-data ARGS` (or `python -m MODULE ARGS` of another click command's module, its `main`) forked from this
    process, with what the tests use of subprocess.Popen (text mode): pid, poll, wait, send_signal, terminate, kill,
    communicate, returncode. stdout and stderr: PIPE or DEVNULL."""

    def __init__(self, args: list[str], env: dict[str, str], *, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL, module: str = "kimi_eagle_data"):
        warm_up()
        self.args = [sys.executable, "-m", module, *args]
        self.returncode: int | None = None
        self._pipes: dict[str, int] = {}
        child_fds = {}
        for name, how in (("stdout", stdout), ("stderr", stderr)):
            if how == subprocess.PIPE:
                self._pipes[name], child_fds[name] = os.pipe()
            elif how == subprocess.DEVNULL:
                child_fds[name] = os.open(os.devnull, os.O_WRONLY)
            else:
                raise ValueError(f"{name}: PIPE or DEVNULL, not {how!r}")
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:   # the child: never returns
            try:
                for fd in self._pipes.values():
                    os.close(fd)
                _run_cli_in_child(args, env, child_fds["stdout"], child_fds["stderr"], module)
            finally:
                os._exit(70)
        for fd in child_fds.values():
            os.close(fd)

    def fileno(self, name: str) -> int:
        """The reading end of the child's `name` (stdout or stderr) when it is a PIPE."""
        return self._pipes[name]

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and timeout is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        deadline = time.monotonic() + (timeout or 0)
        while self.poll() is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str | None, str | None]:
        """Both pipes read to their end (every writer gone), then the exit status, as Popen.communicate."""
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        chunks: dict[int, list[bytes]] = {fd: [] for fd in self._pipes.values()}
        with selectors.DefaultSelector() as sel:
            for fd in chunks:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                for key, _ in sel.select(timeout=left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
                        os.close(key.fd)
        texts = {name: b"".join(chunks[fd]).decode(errors="replace") for name, fd in self._pipes.items()}
        self._pipes = {}
        self.wait(max(0.0, deadline - time.monotonic()) if timeout is not None else None)
        return texts.get("stdout"), texts.get("stderr")


def _run_cli_in_child(args: list[str], env: dict[str, str], out_fd: int, err_fd: int, module: str) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    for fd in (devnull, out_fd, err_fd):
        os.close(fd)
    stale = {id(s) for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    os.environ.clear()
    os.environ.update(env)
    if module == "kimi_eagle_data":
        import kimi_eagle_data

        sys.argv = [os.path.join(os.path.dirname(kimi_eagle_data.__file__), "__main__.py"), *args]
    else:
        sys.argv = [importlib.import_module(module).__file__, *args]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    faulthandler.disable()   # the test runner's, writing to its own stderr
    warnings.filters[:] = FRESH_WARNING_FILTERS
    warnings._filters_mutated()
    warnings.showwarning = _show_warning
    _log_to_this_stderr(stale)
    code = 0
    try:
        if module == "kimi_eagle_data":
            from kimi_eagle_data.cli.main import main
        else:
            main = importlib.import_module(module).main
        main(args, prog_name=f"python -m {module}")
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
