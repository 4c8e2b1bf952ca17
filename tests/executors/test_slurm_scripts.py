"""The job scripts `kimi-data slurm submit --dry-run` writes, read and run without Slurm (the Slurm tier,
tests/slurm, runs them on a real cluster): what each job runs, that bash accepts them, that the engine a generate
task starts is Kimi-K2.5 launched with the profile's flags, and one generate task run by hand as Slurm would."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from kimi_eagle_data.sources.partitions import DEMO_CONFIG
from tests.helpers.cli import error_lines, run_cli
from tests.helpers.servers import TINY


def dry_run(workdir: Path, *args: str) -> dict[str, str]:
    proc = run_cli("slurm", "submit", "--workdir", str(workdir), *args, "--dry-run")
    scripts = {job: (workdir / "slurm" / f"{job}.sbatch").read_text() for job in ("prepare", "generate", "finalize")}
    for job, text in scripts.items():
        assert text in proc.stdout, f"{job}'s script is not printed as written"
    assert not (workdir / "slurm" / "submit.json").exists(), "a dry run recorded a submit"
    return scripts


def sbatch_lines(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_a_kimi_k25_submit_on_four_nodes_starts_sglang_with_the_profiles_flags(tmp_path):
    w = tmp_path / "k25"
    s = dry_run(w, "B4", "B6", "--nodes", "4", "--engine", "sglang", "--partition", "gpu", "--time", "24:00:00",
                "--setup", "module load cuda\nsource /shared/venv/bin/activate", "--sbatch-arg=--mem=0")
    for text in s.values():
        subprocess.run(["bash", "-n"], input=text, text=True, check=True)
        assert "module load cuda\nsource /shared/venv/bin/activate" in text
        assert {"--partition=gpu", "--time=24:00:00", "--mem=0"} <= set(sbatch_lines(text))
    gen = sbatch_lines(s["generate"])
    assert {"--array=0-3", "--gpus-per-node=8", "--exclusive", "--requeue", "--signal=B:USR1@120"} <= set(gen)
    assert not any(line.startswith("--gpus") for line in sbatch_lines(s["prepare"]) + sbatch_lines(s["finalize"]))
    assert f"kimi-data prepare B4 B6 --workdir {w}\n" in s["prepare"]
    assert (f'kimi-data generate B4 B6 --workdir {w} --engine sglang --no-progress --health-timeout 3600 --server '
            '"http://127.0.0.1:$port" --shard "$shard/4"') in s["generate"]
    # Finalize never prepares or generates: nothing pending (else one line, exit 1), then emit.
    assert f"kimi-data slurm task check --workdir {w} --shards 4 B4 B6\nkimi-data emit B4 B6 --workdir {w}\n" \
        in s["finalize"]
    assert "kimi-data build" not in s["finalize"] and "kimi-data generate" not in s["finalize"]
    # The task waits for its server once (generate's wait); the scripts spell no engine's health route.
    assert "curl" not in s["generate"] and "/health" not in s["generate"]

    # The engine the task starts, asked for its launch command: Kimi-K2.5 on 8 GPUs with the profile's flags, a
    # context that fits the profile's max_seq_len (16384) plus SGLang's 2 tokens.
    serve = next(line for line in s["generate"].splitlines() if line.startswith("kimi-data serve"))
    args = shlex.split(serve.split(">>")[0].replace('"$port"', "30002"))
    launch = run_cli(*args[1:], "--dry-run").stdout.split()
    flags = dict(zip(launch, launch[1:]))
    assert launch[:3] == ["python", "-m", "sglang.launch_server"]
    assert flags["--model-path"] == "moonshotai/Kimi-K2.5" and flags["--tp"] == "8" and flags["--port"] == "30002"
    assert flags["--tool-call-parser"] == "kimi_k2" and flags["--reasoning-parser"] == "kimi_k2"
    assert flags["--context-length"] == "16386" and "--trust-remote-code" in launch


def test_every_job_loads_the_plug_ins_the_submit_loaded(tmp_path, monkeypatch):
    """An installed plug-in is found by the `kimi-data` on the jobs' PATH (the submit's environment); the modules
    KIMI_DATA_PLUGINS names are exported to every job, with --setup too."""
    monkeypatch.setenv("KIMI_DATA_PLUGINS", "my_formats.k26, other")
    for args in ((), ("--setup", "source /shared/venv/bin/activate")):
        s = dry_run(tmp_path / f"w{len(args)}", "B4", "--nodes", "1", "--server", "http://127.0.0.1:30000", *args)
        for text in s.values():
            assert "export KIMI_DATA_PLUGINS='my_formats.k26, other'" in text
            subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    monkeypatch.delenv("KIMI_DATA_PLUGINS")
    assert "KIMI_DATA_PLUGINS" not in dry_run(tmp_path / "w", "B4", "--nodes", "1", "--server",
                                                "http://127.0.0.1:30000")["prepare"]


def test_vllm_tasks_start_vllm_and_named_servers_start_nothing(tmp_path):
    s = dry_run(tmp_path / "v", "B4", "--nodes", "2", "--engine", "vllm", "--time", "4:00:00", "--requeue-margin",
                "600")
    assert "kimi-data serve --engine vllm" in s["generate"]
    assert "--signal=B:USR1@600" in sbatch_lines(s["generate"]) and "600 s before the time limit" in s["generate"]
    assert "--context-length 16384 " in s["generate"]       # vLLM needs no margin beside max_seq_len
    s = dry_run(tmp_path / "g", "B4", "--nodes", "2", "--engine", "sglang", "--server", "http://gateway:8000")
    assert "kimi-data serve" not in s["generate"] and "--gpus-per-node" not in s["generate"]
    assert "--server http://gateway:8000 --no-progress --shard" in s["generate"]


def test_push_repo_names_the_repo_in_the_card_and_pushes(tmp_path):
    w = tmp_path / "p"
    s = dry_run(w, "B4", "--nodes", "2", "--push-repo", "my-org/kimi-eagle")
    assert f"kimi-data emit B4 --workdir {w} --repo my-org/kimi-eagle" in s["finalize"]
    assert f"kimi-data push {w} --repo my-org/kimi-eagle" in s["finalize"]


@pytest.mark.parametrize("args, hint", [
    (["--shard", "0/2"], "--shard"),
    (["--engine", "vllm", "--serve-engine", "local"], "--serve-engine"),
    (["--engine", "sglang", "--server", "http://h:1", "--serve-engine", "sglang"], "--serve-engine"),
    (["--push-repo", "no-slash"], "--push-repo"),
])
def test_a_submit_that_cannot_work_is_a_usage_error(args, hint, tmp_path):
    proc = run_cli("slurm", "submit", "B4", "--workdir", str(tmp_path / "w"), "--nodes", "2", *args, "--dry-run",
                   check=False)
    assert proc.returncode == 2 and hint in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "w").exists()


def test_a_workdir_path_sbatch_cannot_hold_is_one_error_line(tmp_path):
    proc = run_cli("slurm", "submit", "B4", "--workdir", str(tmp_path / "my run"), "--nodes", "2", "--dry-run",
                   check=False)
    assert proc.returncode == 1 and len(error_lines(proc)) == 1 and "#SBATCH" in proc.stderr


def test_status_without_a_submit_says_how_to_submit(tmp_path):
    proc = run_cli("slurm", "status", "--workdir", str(tmp_path), check=False)
    assert proc.returncode == 1 and len(error_lines(proc)) == 1 and "kimi-data slurm submit" in proc.stderr


def test_a_generate_task_run_as_slurm_runs_it_marks_its_shard_and_then_does_nothing(tmp_path):
    """The generate script run by bash with the variables Slurm sets: the task generates its shard, writes its
    marker and its events; run again it does nothing; prompts prepared anew (another --limit) make the marker
    stale."""
    w = tmp_path / "w"
    run = ["B4", "--config", str(DEMO_CONFIG), "--samples", "--profile", "tiny-kimi", "--model", TINY, "--limit", "4",
           "--max-new-tokens", "32"]
    dry_run(w, *run, "--nodes", "2", "--engine", "local", "--batch-size", "3")
    run_cli("prepare", *run, "--workdir", str(w))
    run_json = (w / "run.json").read_bytes()
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_JOB_ID": "77", "SLURM_RESTART_COUNT": "0"}

    def task() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(w / "slurm" / "generate.sbatch")], capture_output=True, text=True, env=env,
                              timeout=600)

    first = task()
    assert first.returncode == 0, first.stdout + first.stderr
    assert re.search(r"generate: \d+ completed, 0 failed", first.stdout), first.stdout
    marker = w / "slurm" / "done" / "shard-1-of-2"
    report = json.loads((w / "prepared" / "B4.json").read_text())
    assert json.loads(marker.read_text()) == {"B4": report["fingerprint"]}     # JSON, written by Python
    # No Slurm here, so no accounting: the task keeps its own record of how it ended.
    events = [json.loads(line) for line in (w / "slurm" / "events" / "shard-1-of-2.jsonl").read_text().splitlines()]
    assert [(e["event"], e["restarts"], e.get("rc")) for e in events] == [("start", 0, None), ("end", 0, 0)]
    assert (w / "generations.shard-1-of-2.sqlite").exists() and not (w / "generations.shard-0-of-2.sqlite").exists()
    # The shard's options are its own: run.json, which every shard and the next submit read, is as prepare left it.
    assert (w / "run.json").read_bytes() == run_json

    again = task()
    assert again.returncode == 0 and "is done" in again.stdout and "nothing to do" in again.stdout
    assert len((w / "slurm" / "events" / "shard-1-of-2.jsonl").read_text().splitlines()) == 2

    run_cli("prepare", *run[:-4], "--limit", "6", "--max-new-tokens", "32", "--workdir", str(w))
    third = task()
    assert third.returncode == 0 and "nothing to do" not in third.stdout, third.stdout


def test_finalize_with_a_pending_completion_is_one_line_and_generates_nothing(tmp_path):
    """The finalize script run by bash before any shard generated: one error line naming what is pending, exit 1;
    no checkpoint made, no dataset."""
    w = tmp_path / "w"
    run = ["B4", "--config", str(DEMO_CONFIG), "--samples", "--profile", "tiny-kimi", "--model", TINY, "--limit", "4"]
    dry_run(w, *run, "--nodes", "2", "--engine", "local")
    run_cli("prepare", *run, "--workdir", str(w))
    proc = subprocess.run(["bash", str(w / "slurm" / "finalize.sbatch")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = error_lines(proc)
    assert len(errors) == 1 and "4 completions" in errors[0] and "not made yet" in errors[0] \
        and "(shard " in errors[0] and "submit" in errors[0], proc.stderr
    assert not list(w.glob("generations*.sqlite")) and not (w / "dataset").exists()


def test_a_server_that_stops_ends_its_task_in_one_line(tmp_path):
    """The task's `kimi-data serve` exits at once (an option it does not know): the task does not wait out the
    health timeout; it stops generate and ends with exit 1 and a line naming the server's log."""
    w = tmp_path / "w"
    run = ["B4", "--config", str(DEMO_CONFIG), "--samples", "--profile", "tiny-kimi", "--model", TINY, "--limit", "2"]
    dry_run(w, *run, "--nodes", "1", "--engine", "sglang", "--serve-engine", "local", "--serve-arg=--no-such-option")
    run_cli("prepare", *run, "--workdir", str(w))
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": "78"}
    proc = subprocess.run(["bash", str(w / "slurm" / "generate.sbatch")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"error: the server stopped \(exit 2\) before generate finished; see .*server-0\.log",
                     proc.stdout), proc.stdout
    assert "No such option" in (w / "slurm" / "logs" / "server-0.log").read_text()
    assert not (w / "slurm" / "done" / "shard-0-of-1").exists()


def test_a_shard_speaks_of_reusing_only_its_own_completions(tmp_path):
    """Shards share a workdir: shard 1 starting after shard 0 finished reuses nothing of its own (shard 0's work is
    not "from an earlier run" of it); shard 0 run again reuses exactly its own."""
    w = tmp_path / "w"
    run_cli("prepare", "B4", "--samples", "--profile", "tiny-kimi", "--model", TINY, "--limit", "6",
            "--max-new-tokens", "8", "--workdir", str(w))

    def shard(i: int) -> str:
        proc = run_cli("generate", "B4", "--workdir", str(w), "--shard", f"{i}/2", "--engine", "local", "--no-progress")
        return proc.stdout + proc.stderr

    first = shard(0)
    made = int(re.search(r"generate: (\d+) completed", first).group(1))
    assert 0 < made < 6 and "reusing" not in first
    assert "reusing" not in shard(1)
    assert f"reusing {made} completed samples from an earlier run" in shard(0)
