"""What `kimi-data slurm status` and a generate task say, without Slurm (the tier, tests/slurm, asks a real one):
an exit status a signal caused, said as such; a finished run said to be done; the line a task stopped by SIGTERM
leaves in its log."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

from kimi_eagle_data.executors.slurm.status import RunStatus, ShardStatus, _exit_words
from kimi_eagle_data.sources.partitions import DEMO_CONFIG
from tests.executors.test_slurm_scripts import dry_run
from tests.helpers.cli import run_cli
from tests.helpers.servers import TINY, Server, wait_for

RUN = ["B4", "--config", str(DEMO_CONFIG), "--samples", "--profile", "tiny-kimi", "--model", TINY, "--limit", "4",
       "--max-new-tokens", "32"]


def record_submit(w: Path, shards: int, configs: list[str]) -> None:
    """DIR/slurm/submit.json as `slurm submit` records it (job ids Slurm would have given)."""
    (w / "slurm").mkdir(exist_ok=True)
    (w / "slurm" / "submit.json").write_text(json.dumps({
        "submitted_at": time.time() - 60, "shards": shards, "configs": configs,
        "jobs": {"prepare": "11", "generate": "12", "finalize": "13"}}))


def run_task(w: Path, shard: int, **kw) -> subprocess.Popen:
    """The generate script run by bash with the variables Slurm sets, in a process group of its own (Slurm
    signals the whole task)."""
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(shard), "SLURM_ARRAY_JOB_ID": "77", "SLURM_RESTART_COUNT": "0"}
    return subprocess.Popen(["bash", str(w / "slurm" / "generate.sbatch")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True, **kw)


def test_an_exit_status_a_signal_caused_is_said_as_such():
    assert _exit_words("137:0") == "exit 137: killed by SIGKILL (128 + 9)"
    assert _exit_words("143:0") == "exit 143: stopped by SIGTERM (128 + 15)"
    assert _exit_words("0:9") == "killed by signal 9 (SIGKILL)"
    assert _exit_words("3:0") == "exit 3" and _exit_words("0:0") == ""


def test_a_shard_whose_task_exited_137_reads_as_killed_by_sigkill(tmp_path):
    """Where Slurm keeps no accounting and forgot the task, status reads the task's own end (rc 137: its generate
    killed by SIGKILL)."""
    w = tmp_path / "w"
    dry_run(w, "B4", "--nodes", "2", "--engine", "local")
    record_submit(w, 2, ["B4"])
    events = w / "slurm" / "events"
    (events / "shard-0-of-2.jsonl").write_text(
        json.dumps({"event": "start", "time": time.time() - 50, "host": "node1", "restarts": 0}) + "\n"
        + json.dumps({"event": "end", "time": time.time() - 40, "host": "node1", "restarts": 0, "rc": 137}) + "\n")
    proc = run_cli("slurm", "status", "--workdir", str(w), "--json", check=False)
    shard = json.loads(proc.stdout)["shards"][0]
    assert proc.returncode == 1 and shard["state"] == "failed", proc.stdout
    assert shard["detail"].startswith("exit 137: killed by SIGKILL (128 + 9)"), shard
    assert "shard 0 failed: exit 137: killed by SIGKILL" in proc.stderr


def test_the_progress_line_says_done_running_or_stalled():
    def status(*states: str, eta: float | None = None, rate: float = 0.0) -> RunStatus:
        shards = [ShardStatus(i, s) for i, s in enumerate(states)]
        return RunStatus("w", shards, [], True, total=10, done=10 if eta is None else 4, tokens_per_s=rate,
                         eta_s=eta)

    done = status("done", "done").progress_line()
    assert done == "completions: 10 of 10 (100%), 0 failed; generate is done"
    assert "tok/s" not in done and "ETA" not in done
    assert status("running", "done", eta=125.0, rate=40.0).progress_line().endswith("40 output tok/s; ETA 2m 5s")
    assert status("queued", "failed", eta=None).progress_line().endswith("no shard is running now")


def test_a_finished_run_says_generate_is_done(tmp_path):
    """Both tasks of a 2-shard submit run as Slurm runs them: status says generate is done, not "0 output tok/s;
    ETA unknown"."""
    w = tmp_path / "w"
    dry_run(w, *RUN, "--nodes", "2", "--engine", "local", "--batch-size", "2")
    run_cli("prepare", *RUN, "--workdir", str(w))
    for shard in (0, 1):
        task = run_task(w, shard)
        out, _ = task.communicate(timeout=600)
        assert task.returncode == 0, out
    record_submit(w, 2, ["B4"])
    proc = run_cli("slurm", "status", "--workdir", str(w))
    assert "completions: 4 of 4 (100%), 0 failed; generate is done" in proc.stdout, proc.stdout
    assert "0 output tok/s" not in proc.stdout and "ETA unknown" not in proc.stdout


def test_a_task_stopped_by_sigterm_says_slurm_resumes_it(tmp_path):
    """Slurm stops a task it requeues (preemption, `scontrol requeue`, the time limit's USR1) with SIGTERM to the
    whole task: generate's line in the task's log says that Slurm resumes it, not to rerun a command by hand."""
    w = tmp_path / "w"
    server = Server("--delay", "0.5", "--max-batch", "1").start()
    try:
        dry_run(w, *RUN, "--nodes", "1", "--engine", "sglang", "--server", server.url, "--concurrency", "1")
        run_cli("prepare", *RUN, "--workdir", str(w))
        task = run_task(w, 0)
        checkpoint = w / "generations.shard-0-of-1.sqlite"

        def committed() -> bool:
            if not checkpoint.exists():
                return False
            try:
                with closing(sqlite3.connect(checkpoint)) as db:
                    return db.execute("SELECT count(*) FROM completions").fetchone()[0] > 0
            except sqlite3.OperationalError:      # created this instant, no table yet
                return False

        wait_for(committed, 300, "the task committed nothing", proc=task)
        os.killpg(task.pid, signal.SIGTERM)
        out, _ = task.communicate(timeout=120)
    finally:
        server.kill()
    assert task.returncode == 143, out
    line = next(x for x in out.splitlines() if x.startswith("interrupted by SIGTERM"))
    assert "Slurm task 77_0 resumes where it stopped by itself if Slurm requeued it" in line, out
    assert "rerun the same command" not in out
