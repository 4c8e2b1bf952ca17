"""What a run does before its first request to a server: it waits where the user can see it (a line at once and
every ~15 s, Ctrl-C stops it), names the engine it found when it is not the one asked for, and checks the
settings the server can refute before the workdir is bound to them."""

from __future__ import annotations

import json
import signal
import subprocess

from tests.helpers.cli import error_lines, popen_cli, read_until, run_cli
from tests.helpers.servers import TINY, Server, free_port

# A run against a server that is not up must say so within this many seconds (issue: a silent 600 s wait).
WAITING_LINE_S = 20


def build_args(workdir, engine: str, url: str, *extra: str) -> list[str]:
    return ["build", "B6", "--samples", "--limit", "2", "--profile", "tiny-kimi", "--model", TINY, "--workdir",
            str(workdir), "--engine", engine, "--server", url, "--no-progress", *extra]


def test_a_run_against_a_port_where_nothing_listens_says_it_waits_and_stops_on_ctrl_c(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    proc = popen_cli(*build_args(tmp_path / "w", "sglang", url), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        waiting = read_until(proc, f"waiting for the sglang server at {url}: connection refused", WAITING_LINE_S)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert "Ctrl-C stops" in waiting
    assert proc.returncode == 130, waiting + err
    rest = [line for line in err.splitlines() if not line.startswith("waiting for")]
    assert len(rest) == 1 and rest[0].startswith("interrupted"), waiting + err


def test_a_max_seq_len_beyond_the_servers_context_fails_before_the_workdir_is_bound(tmp_path):
    """The stand-in reports a context of 1000 tokens; the tiny profile's max_seq_len 1022 needs 1024 on SGLang. The
    first build refuses before it binds (or even makes) the workdir; the corrected rerun there works."""
    server = Server("--context-length", "1000").start()
    w = tmp_path / "w"
    try:
        proc = run_cli(*build_args(w, "sglang", server.url), check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "context length 1000 is below the 1024 tokens max_seq_len 1022 needs" in proc.stderr, proc.stderr
        assert len(error_lines(proc)) == 1 and not w.exists() and server.served() == 0
        rerun = run_cli(*build_args(w, "sglang", server.url, "--max-seq-len", "998"))
        assert "generate: 2 completed, 0 failed" in rerun.stdout, rerun.stdout
        assert json.loads((w / "run.json").read_text())["max_seq_len"] == 998
    finally:
        server.kill()
