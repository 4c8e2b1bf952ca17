"""The default profile's tokenizer is a Hub id: without the Hub, every command that loads it fails at once with
one line naming `--tokenizer DIR` / `--profile tiny-kimi`, and leaves no workdir behind."""

from __future__ import annotations

import socket
import threading

import pytest
from click.testing import CliRunner

from kimi_eagle_data.formats.kimi_k2 import KIMI_K25
from kimi_eagle_data.prompts.tokenizer import tokenizer_hint

TOKENIZER_HINT = tokenizer_hint(KIMI_K25.model_path)     # the hint under the default profile

from tests.helpers.cli import run_cli


class CountingListener:
    """A TCP port that accepts each connection and closes it at once without a byte: a Hub endpoint that never
    answers. Counts the connections, so a test can tell one probe from a download's retries."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:       # closed by close()
                return
            self.connections += 1
            conn.close()

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)     # wakes the blocked accept()
        self.sock.close()
        self._thread.join(timeout=10)


@pytest.fixture
def silent_hub():
    listener = CountingListener()
    yield listener
    listener.close()


def test_unreachable_hub_fails_after_one_probe_and_leaves_no_workdir(tmp_path, silent_hub):
    workdir = tmp_path / "w"
    env = {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{silent_hub.port}",
           "HF_HOME": str(tmp_path / "hf-home")}    # an empty cache: the id cannot come from there either
    proc = run_cli("build", "B4", "--samples", "--workdir", str(workdir), "--no-progress", check=False, env=env)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: cannot load tokenizer 'moonshotai/Kimi-K2.5'")
    assert "cannot be reached" in lines[0] and TOKENIZER_HINT in lines[0]
    # one probe, not the download's retry storm (it reconnects five times and more)
    assert 1 <= silent_hub.connections <= 2, silent_hub.connections
    assert not workdir.exists()


def _hint_commands(tmp_path):
    row = tmp_path / "row.json"
    row.write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"messages": [{"role": "user", "content": "hi"}], "completion": "hello"}\n')
    wd = str(tmp_path / "w")
    return [
        ["build", "B4", "--samples", "--workdir", wd, "--no-progress"],
        ["prepare", "B4", "--samples", "--workdir", wd],
        ["prepare", "B4", "--samples", "--workdir", wd, "--dry-run"],
        ["render", str(row)],
        ["check", str(rows)],
    ]


def test_every_tokenizer_command_gives_the_same_hint_offline(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from kimi_eagle_data.cli.main import main

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)    # what HF_HUB_OFFLINE=1 sets (tests/conftest.py)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for args in _hint_commands(tmp_path):
        result = CliRunner().invoke(main, args)
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert result.exit_code == 1, (args, result.output)
        assert len(lines) == 1 and "HF_HUB_OFFLINE is set" in lines[0] and TOKENIZER_HINT in lines[0], (args, lines)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        assert not (tmp_path / "w").exists(), args


def test_a_stage_over_no_run_says_so_before_any_tokenizer_offline(tmp_path, monkeypatch):
    """generate, validate and emit work on what an earlier stage left: over a folder with no run.json they say
    there is no run there, before any tokenizer is looked for (so no offline hint, no Hub probe)."""
    from huggingface_hub import constants

    from kimi_eagle_data.cli.main import main

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    wd = str(tmp_path / "w")
    for args in (["generate", "--workdir", wd], ["validate", "--workdir", wd], ["emit", "--workdir", wd]):
        result = CliRunner().invoke(main, args)
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert result.exit_code == 1, (args, result.output)
        assert len(lines) == 1 and lines[0].startswith(f"error: no run in {wd}"), (args, lines)
        assert "HF_HUB_OFFLINE" not in lines[0], (args, lines)
        assert not (tmp_path / "w").exists(), args


def test_the_offline_hint_under_k3_names_k3s_tiny_model(tmp_path, monkeypatch):
    """Under --profile kimi-k3 the hint points at the embedded model that speaks K3's format (tiny-kimi-k3), not
    K2.5's: a new user following it gets a run in the format they asked for."""
    from huggingface_hub import constants

    from kimi_eagle_data.cli.main import main

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for args in _hint_commands(tmp_path):
        args = [*args, "--profile", "kimi-k3"]
        result = CliRunner().invoke(main, args)
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert result.exit_code == 1, (args, result.output)
        assert len(lines) == 1 and "'moonshotai/Kimi-K3'" in lines[0], (args, lines)
        assert lines[0].endswith("or --profile tiny-kimi-k3 for the embedded test model"), (args, lines)
        assert not (tmp_path / "w").exists(), args
