"""Running the real `kimi-data` CLI from a test, and reading what it left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, check: bool = True, timeout: float = 900, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
    """Run the real `kimi-data` CLI (`python -m kimi_eagle_data`) in a subprocess."""
    env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "kimi_eagle_data", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"kimi-data {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    """The `error…` lines a command printed on stderr (a user error is exactly one)."""
    return [line for line in proc.stderr.splitlines() if line.startswith("error")]


def tree_hashes(root: Path) -> dict[str, str]:
    from kimi_eagle_data.workdir import file_sha256

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
