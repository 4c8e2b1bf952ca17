from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Tests never reach the network: the Hub stays offline unless a test points HF_ENDPOINT at a local server.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def run_cli(*args: str, check: bool = True, timeout: float = 900, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
    """Run the real `kimi-data` CLI (`python -m kimi_eagle_data`) in a subprocess."""
    env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "kimi_eagle_data", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"kimi-data {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def tree_hashes(root: Path) -> dict[str, str]:
    from kimi_eagle_data.workdir import file_sha256

    return {str(p.relative_to(root)): file_sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}


def copy_run(src: Path, dst: Path) -> Path:
    """A workdir with the demo's prompts and completions, nothing validated or emitted."""
    dst.mkdir()
    for name in ("prepared", "generations.sqlite", "run.json"):
        (shutil.copytree if (src / name).is_dir() else shutil.copy2)(src / name, dst / name)
    return dst


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One full `kimi-data demo` shared by the tests that inspect its output."""
    workdir = tmp_path_factory.mktemp("demo") / "work"
    proc = run_cli("demo", "--workdir", str(workdir), "--no-progress")
    return workdir, proc


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from kimi_eagle_data.profile import TINY_MODEL_DIR
    from kimi_eagle_data.prompts.tokenizer import load_tokenizer

    return load_tokenizer(str(TINY_MODEL_DIR))
