from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli
from tests.helpers.workdirs import next_stage

# Tests never reach the network: the Hub stays offline unless a test points HF_ENDPOINT at a local server.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One full `kimi-data demo` shared by the tests that inspect its output."""
    workdir = tmp_path_factory.mktemp("demo") / "work"
    proc = run_cli("demo", "--workdir", str(workdir), "--no-progress")
    return workdir, proc


@pytest.fixture(scope="session")
def k3_demo_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One `kimi-data demo --profile tiny-kimi-k3 --limit 2` shared by the tests that inspect its output."""
    workdir = tmp_path_factory.mktemp("k3-demo") / "w"
    proc = run_cli("demo", "--profile", "tiny-kimi-k3", "--workdir", str(workdir), "--limit", "2", "--no-progress",
                   check=False, timeout=600)
    return workdir, proc


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
    from kimi_eagle_data.prompts.tokenizer import load_tokenizer

    return load_tokenizer(str(TINY_MODEL_DIR), KIMI_K2_FORMAT)   # as a run loads it: K2.5's self-check passed


# The bundled B6 prompts through each stage with the local engine (tiny model, in the CLI's own process): the
# workdirs that failure tests copy and then break (a full disk, a second writer, a kill).
LOCAL_B6 = ("B6", "--profile", "tiny-kimi", "--model", "{tiny}", "--samples", "--max-new-tokens", "64")


@pytest.fixture(scope="session")
def prepared_b6(tmp_path_factory) -> Path:
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    w = tmp_path_factory.mktemp("prepared-b6") / "w"
    run_cli("prepare", *(a.format(tiny=TINY_MODEL_DIR) for a in LOCAL_B6), "--workdir", str(w))
    return w


@pytest.fixture(scope="session")
def generated_b6(prepared_b6, tmp_path_factory) -> Path:
    return next_stage(prepared_b6, tmp_path_factory.mktemp("generated-b6") / "w", "generate")


@pytest.fixture(scope="session")
def emitted_b6(generated_b6, tmp_path_factory) -> Path:
    return next_stage(generated_b6, tmp_path_factory.mktemp("emitted-b6") / "w", "emit")


@pytest.fixture(scope="session")
def conversation_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A built workdir with own_history conversations (C1) and single-turn prompts (C2): helpers/conversations.py."""
    from tests.helpers.conversations import build_conversations

    return build_conversations(tmp_path_factory.mktemp("conversations"))
