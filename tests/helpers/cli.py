"""Running the real `kimi-data` CLI from a test, and reading what it left behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _forkable(full_env: dict[str, str]) -> bool:
    """A run with this process's own environment can be forked from it (forked_cli.py): modules read the
    environment as they are imported, so another environment needs a fresh interpreter."""
    return full_env == {**os.environ, "COLUMNS": "200"} and not os.environ.get("KIMI_TEST_FRESH_CLI")


def run_cli(*args: str, check: bool = True, timeout: float = 900, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
    """Run the real `kimi-data` CLI (`python -m kimi_eagle_data`) in a process of its own.

    With this process's environment (the usual case) the process is forked from a warm copy of this one
    (forked_cli.py: the interpreter start and the torch/transformers imports, most of each command's CPU time,
    are paid once per test process); with another environment it is a fresh interpreter.
    KIMI_TEST_FRESH_CLI=1 makes every run a fresh interpreter."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    if _forkable(full_env):
        from tests.helpers.forked_cli import run_forked

        proc = run_forked(list(args), full_env, timeout)
    else:
        proc = subprocess.run([sys.executable, "-m", "kimi_eagle_data", *args], capture_output=True, text=True,
                              timeout=timeout, env=full_env)
    if check and proc.returncode != 0:
        raise AssertionError(f"kimi-data {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def popen_cli(*args: str, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, module: str = "kimi_eagle_data"):
    """`kimi-data ARGS` (or `python -m MODULE ARGS`, MODULE's click command `main`) started in a process of its own
    and left running (text mode, as run_cli): a forked one (forked_cli.ForkedCli, with what the tests use of Popen),
    or with KIMI_TEST_FRESH_CLI=1 a Popen."""
    full_env = {**os.environ, "COLUMNS": "200"}
    if _forkable(full_env):
        from tests.helpers.forked_cli import ForkedCli

        return ForkedCli(list(args), full_env, stdout=stdout, stderr=stderr, module=module)
    # SIGINT as a terminal delivers it, even to a test run started in the background (`cmd &` ignores it).
    # Another module (one of tests/) from the repository's root, where it is importable.
    return subprocess.Popen([sys.executable, "-m", module, *args], stdout=stdout, stderr=stderr, text=True,
                            env=full_env, cwd=None if module == "kimi_eagle_data" else REPO,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def read_until(proc, text: str, timeout_s: float, stream: str = "stderr") -> str:
    """What a running `proc` (popen_cli's, or a Popen) wrote on `stream` (a PIPE), read until a whole line holds
    `text`. Fails after `timeout_s`, or at once when the stream ends first. What it did not read stays in the
    pipe (`communicate` reads it)."""
    import select
    import time

    fd = proc.fileno(stream) if hasattr(proc, "fileno") else getattr(proc, stream).fileno()
    deadline = time.monotonic() + timeout_s
    got = b""
    while True:
        lines = got.decode(errors="replace").splitlines(keepends=True)
        if any(text in line and line.endswith("\n") for line in lines):
            return "".join(lines)
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no line with {text!r} on {stream} within {timeout_s:.0f}s; it wrote:\n"
                                 f"{got.decode()}")
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise AssertionError(f"{stream} ended before a line with {text!r}; it wrote:\n{got.decode()}")
            got += chunk


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    """The `error…` lines a command printed on stderr (a user error is exactly one)."""
    return [line for line in proc.stderr.splitlines() if line.startswith("error")]


def tree_hashes(root: Path) -> dict[str, str]:
    from kimi_eagle_data.store.workdir import file_sha256

    return {str(p.relative_to(root)): file_sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}


def copy_run(src: Path, dst: Path) -> Path:
    """A workdir with the demo's prompts and completions, nothing validated or emitted."""
    dst.mkdir()
    for name in ("prepared", "generations.sqlite", "run.json"):
        (shutil.copytree if (src / name).is_dir() else shutil.copy2)(src / name, dst / name)
    return dst


def tmp_files(root: Path) -> list[str]:
    """Half-written files (`*.tmp`) anywhere under `root`."""
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp")]
