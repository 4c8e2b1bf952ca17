"""`kimi-data slurm submit` / `status` on a real one-host Slurm cluster (scripts/slurm/run_tier.sh): B4 and B6 (its
conversations continued on the model's own turns) with the tiny model, three generate tasks. Each run's dataset must
hold the rows of a one-process `build` with the same settings (the tiny model samples each request from its own
id, one request per batch: where a sample is made does not change it), after a requeue in the middle of a shard,
and after a shard that failed for good was submitted again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.sources.partitions import DEMO_CONFIG
from kimi_eagle_data.store.shard_split import deal
from tests.helpers.cli import REPO, run_cli
from tests.helpers.servers import TINY, wait_for

pytestmark = pytest.mark.slurm

SHARDS = 3
# B6 continues its conversations (policy own_history in the demo's partition config); 8 source rows per config make
# 16 prompts, dealt 6, 5 and 5 to the three shards (store/shard_split.py).
RUN = ["B4", "B6", "--config", str(DEMO_CONFIG), "--samples", "--profile", "tiny-kimi", "--model", TINY,
       "--limit", "8", "--max-new-tokens", "64"]
DEADLINE_S = 600


def status(workdir: Path) -> tuple[dict, subprocess.CompletedProcess]:
    proc = run_cli("slurm", "status", "--workdir", str(workdir), "--json", check=False)
    return json.loads(proc.stdout), proc


def submit(workdir: Path, *extra: str) -> dict[str, str]:
    run_cli("slurm", "submit", *RUN, "--workdir", str(workdir), "--nodes", str(SHARDS), *extra)
    return json.loads((workdir / "slurm" / "submit.json").read_text())["jobs"]


def standin_setup(tmp_path: Path) -> str:
    """--setup lines under which a task's `kimi-data serve` is the tests' stand-in (tests/helpers/standin_server.py:
    the same server with fault injection, which the user's `serve` has not), given serve's options less those the
    stand-in has no use for; every other command is this environment's kimi-data."""
    bin_dir = Path(sys.executable).parent
    wrapper = tmp_path / "standin-bin" / "kimi-data"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "args = sys.argv[1:]\n"
        "if args[:1] != ['serve']:\n"
        f"    os.execv({str(bin_dir / 'kimi-data')!r}, [{str(bin_dir / 'kimi-data')!r}, *args])\n"
        "kept, skip = [], False\n"
        "for a in args[1:]:\n"
        "    if skip:\n"
        "        skip = False\n"
        "    elif a in ('--engine', '--profile', '--health-timeout'):\n"
        "        skip = True\n"
        "    elif not a.startswith(('--engine=', '--profile=', '--health-timeout=')):\n"
        "        kept.append(a)\n"
        f"os.environ['PYTHONPATH'] = {str(REPO)!r}\n"
        f"os.execv(sys.executable, [sys.executable, '-m', 'tests.helpers.standin_server', *kept])\n")
    wrapper.chmod(0o755)
    return f'export PATH={wrapper.parent}:{bin_dir}:"$PATH"'


def job_state(job: str) -> str:
    """scontrol's JobState of a job or array task ("" once Slurm forgot it)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True).stdout
    return next((f.split("=", 1)[1] for f in out.split() if f.startswith("JobState=")), "")


def wait_finished(workdir: Path, jobs: dict[str, str]) -> dict:
    """The status once the finalize job ended (COMPLETED, or cancelled because a job before it failed)."""
    wait_for(lambda: job_state(jobs["finalize"]) not in ("", "PENDING", "RUNNING", "COMPLETING", "CONFIGURING"),
             DEADLINE_S, "the finalize job did not end")
    return status(workdir)[0]


def dataset_rows(workdir: Path) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for f in sorted((workdir / "dataset" / "data").glob("*/*.parquet")):
        for r in pq.read_table(f).to_pylist():
            assert r["id"] not in rows, f"{r['id']} twice in the dataset"
            rows[r["id"]] = r
    return rows


def checkpoint_ids(workdir: Path) -> list[str]:
    ids: list[str] = []
    for f in sorted(workdir.glob("generations*.sqlite")):
        with closing(sqlite3.connect(f)) as db:
            ids += [r[0] for r in db.execute("SELECT id FROM completions")]
    return ids


def commit_stamps(checkpoint: Path) -> dict[str, float]:
    if not checkpoint.exists():
        return {}
    try:
        with closing(sqlite3.connect(checkpoint)) as db:
            return dict(db.execute("SELECT id, created_at FROM completions").fetchall())
    except sqlite3.OperationalError:      # created this instant, no table yet
        return {}


def pending_turns(checkpoint: Path) -> set[str]:
    """Later turns of conversations the checkpoint holds (stored with the turn before) that have no completion yet."""
    with closing(sqlite3.connect(checkpoint)) as db:
        return {r[0] for r in db.execute("SELECT id FROM turns WHERE id NOT IN (SELECT id FROM completions)")}


def conversation_shards(workdir: Path) -> dict[str, set[int]]:
    """{conversation: the shards whose checkpoint file holds later turns of it}."""
    found: dict[str, set[int]] = {}
    for i in range(SHARDS):
        with closing(sqlite3.connect(workdir / f"generations.shard-{i}-of-{SHARDS}.sqlite")) as db:
            for (c,) in db.execute("SELECT DISTINCT conversation_id FROM turns"):
                found.setdefault(c, set()).add(i)
    return found


def prepared_ids(workdir: Path) -> set[str]:
    return {i for c in ("B4", "B6") for i in pq.read_table(workdir / "prepared" / f"{c}.parquet",
                                                           columns=["id"]).column("id").to_pylist()}


def batch_shell(array_job: str, task: int) -> int:
    """The pid of the batch script of task `task` of job array `array_job` (slurmd runs it as `slurm_script`, in a
    session and process group of its own)."""
    want = {f"SLURM_ARRAY_JOB_ID={array_job}".encode(), f"SLURM_ARRAY_TASK_ID={task}".encode()}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"slurm_script" in (proc / "cmdline").read_bytes() and \
                    want <= set((proc / "environ").read_bytes().split(b"\0")):
                return int(proc.name)
        except OSError:      # ended meanwhile
            continue
    raise AssertionError(f"no batch script of {array_job}_{task} runs")


def task_tree(root: int) -> list[int]:
    """`root` and every process under it (by parent pid), root first."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) if proc.name.isdigit() else None
        except (OSError, IndexError, ValueError):
            continue
        if ppid is not None:
            children.setdefault(ppid, []).append(int(proc.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def events(workdir: Path, shard: int) -> list[dict]:
    path = workdir / "slurm" / "events" / f"shard-{shard}-of-{SHARDS}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> dict[str, dict]:
    """The rows of a one-process build with the same settings."""
    w = tmp_path_factory.mktemp("one-process") / "w"
    run_cli("build", *RUN, "--workdir", str(w), "--batch-size", "1", "--no-progress")
    return dataset_rows(w)


def assert_complete(workdir: Path, one_process: dict[str, dict]) -> None:
    """Every prepared id once in the dataset, each completion stored once, `kimi-data check` passes on the train
    rows, and the rows are the one-process build's."""
    rows = dataset_rows(workdir)
    assert prepared_ids(workdir) <= rows.keys()
    # A conversation's turns stay on one shard (a pilot's conversations, finished, stay where the pilot made them)
    assert all(len(shards) == 1 for shards in conversation_shards(workdir).values())
    stored = checkpoint_ids(workdir)
    assert len(stored) == len(set(stored)) == len(rows)
    train = sorted((workdir / "dataset" / "data").glob("*/train-*.parquet"))
    assert train
    for f in train:
        run_cli("check", str(f), "--profile", "tiny-kimi", "--model", TINY, "--no-progress")
    assert rows.keys() == one_process.keys()
    assert rows == one_process


def test_a_submit_runs_every_job_and_makes_the_rows_of_a_one_process_build(one_process, tmp_path):
    w = tmp_path / "w"
    jobs = submit(w, "--engine", "local", "--batch-size", "1")
    first, _ = status(w)       # prepare has not finished: nothing generated yet, every shard waits
    assert [s["state"] for s in first["shards"]] == ["queued"] * SHARDS
    assert first["done"] == 0
    final = wait_finished(w, jobs)
    assert [s["state"] for s in final["shards"]] == ["done"] * SHARDS, final
    assert {j["job"]: j["state"] for j in final["jobs"]} == {"prepare": "COMPLETED", "finalize": "COMPLETED"}
    assert final["done"] == final["total"] == len(one_process) and final["failed"] == 0
    assert final["dataset"] == str(w / "dataset") and not final["problems"]
    assert all(s["done"] > 0 for s in final["shards"]), "a shard had nothing to do: the split went untested"
    assert all(s["tokens_per_s"] > 0 for s in final["shards"]), "a shard that is done shows no speed"
    # The shards are balanced (16 prompts on 3 shards: 6/5/5) and each conversation is on its dealt shard.
    owner = deal(prepared_ids(w), SHARDS)
    assert sorted(list(owner.values()).count(i) for i in range(SHARDS)) == [5, 5, 6]
    assert all(shards == {owner[c]} for c, shards in conversation_shards(w).items())
    assert_complete(w, one_process)
    # Finalize prepared nothing: the markers still name the prompts prepared now.
    assert "ended without its marker" not in json.dumps(status(w)[0])


def busiest_shard(one_process: dict[str, dict]) -> int:
    """The shard whose conversations have the most later turns in a one-process build (the requeue must stop one
    between two turns)."""
    rows = [r["conversation_id"] or i for i, r in one_process.items()]
    owner = deal(rows, SHARDS)
    later = [sum(rows.count(c) - 1 for c in set(rows) if owner[c] == i) for i in range(SHARDS)]
    return later.index(max(later))


def test_a_requeued_task_resumes_its_shard_without_generating_anything_twice(one_process, tmp_path):
    """Each task starts its own server (the SGLang-protocol stand-in, slowed down so a shard takes seconds); once
    the shard with the most later turns committed its first completion, `scontrol requeue` stops it (SIGTERM: exit 143) and puts it back in the
    queue; it resumes, keeps what it had committed, and the dataset is the one-process build's."""
    w = tmp_path / "w"
    jobs = submit(w, "--engine", "sglang", "--serve-engine", "local", "--serve-arg=--max-batch=1",
                  "--serve-arg=--delay=0.5", "--setup", standin_setup(tmp_path), "--concurrency", "1")
    shard = busiest_shard(one_process)
    checkpoint = w / f"generations.shard-{shard}-of-{SHARDS}.sqlite"
    wait_for(lambda: commit_stamps(checkpoint), DEADLINE_S, f"shard {shard} committed nothing")
    subprocess.run(["scontrol", "requeue", f"{jobs['generate']}_{shard}"], check=True)
    wait_for(lambda: any(e["event"] == "end" for e in events(w, shard)), 120, "the requeued task did not stop")
    stopped = events(w, shard)
    assert [e["event"] for e in stopped] == ["start", "end"] and stopped[1]["rc"] == 143, stopped
    before = commit_stamps(checkpoint)
    # Stopped in the middle of a conversation: a turn was answered, the next one not yet.
    interrupted = pending_turns(checkpoint)
    assert interrupted, "the requeue found no conversation between two turns"
    mid, _ = status(w)        # back in the queue (Slurm holds a requeued job a few seconds), its work counted
    s = mid["shards"][shard]
    assert s["state"] in ("queued", "running") and s["restarts"] == 1 and "requeued 1 time" in s["detail"], s
    assert 0 < s["done"] < s["total"], s

    final = wait_finished(w, jobs)
    assert [e["event"] for e in events(w, shard)] == ["start", "end", "start", "end"]
    assert events(w, shard)[2]["restarts"] == 1 and events(w, shard)[3]["rc"] == 0
    assert final["shards"][shard]["state"] == "done" and final["shards"][shard]["restarts"] == 1
    after = commit_stamps(checkpoint)
    assert {i: after[i] for i in before} == before, "a completion committed before the requeue was made again"
    assert interrupted <= after.keys(), "a conversation the requeue interrupted did not continue"
    assert_complete(w, one_process)


def test_a_shard_that_fails_for_good_holds_finalize_back_until_submitted_again(one_process, tmp_path):
    """Shard 1's node lacks the environment (kimi-data is not on its PATH): its task fails, finalize never runs,
    status names the shard and why and exits 1. Submitting again reruns only shard 1."""
    w = tmp_path / "w"
    path = f'export PATH={Path(sys.executable).parent}:"$PATH"'     # what submit puts there without --setup
    broken = path + '\nif [ "${SLURM_ARRAY_TASK_ID:-}" = 1 ]; then export PATH=/usr/bin:/bin; fi'
    jobs = submit(w, "--engine", "local", "--batch-size", "1", "--setup", broken)
    final = wait_finished(w, jobs)
    assert job_state(jobs["finalize"]) == "CANCELLED"
    assert job_state(f"{jobs['generate']}_1") == "FAILED"
    assert [s["state"] for s in final["shards"]] == ["done", "failed", "done"], final
    assert "exit 127" in final["shards"][1]["detail"] and "kimi-data: command not found" in final["shards"][1]["detail"]
    assert final["dataset"] is None and not (w / "dataset").exists()
    _, proc = status(w)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "shard 1 failed" in errors[0] and "command not found" in errors[0], proc.stderr
    done_before = {i: events(w, i) for i in (0, 2)}

    # Finalize run by hand while shard 1 is pending: one line, exit 1, nothing generated or emitted.
    stored = checkpoint_ids(w)
    finalize = subprocess.run(["sbatch", "--parsable", str(w / "slurm" / "finalize.sbatch")], capture_output=True,
                              text=True, check=True).stdout.strip().split(";")[0]
    wait_for(lambda: job_state(finalize) not in ("", "PENDING", "RUNNING", "COMPLETING", "CONFIGURING"), DEADLINE_S,
             "the finalize job run by hand did not end")
    assert job_state(finalize) == "FAILED"
    log = (w / "slurm" / "logs" / "finalize.log").read_text()
    errors = [line for line in log.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "not made yet" in errors[0] and "shard 1:" in errors[0], log
    assert checkpoint_ids(w) == stored and not (w / "dataset").exists()

    jobs = submit(w, "--engine", "local", "--batch-size", "1", "--setup", path)
    final = wait_finished(w, jobs)
    assert [s["state"] for s in final["shards"]] == ["done"] * SHARDS and final["dataset"], final
    assert {i: events(w, i) for i in (0, 2)} == done_before, "a finished shard ran again"
    assert "nothing to do" in (w / "slurm" / "logs" / "generate-0.log").read_text()
    # Without kimi-data on its PATH the first task could record nothing of itself (Slurm did: FAILED, exit 127).
    assert [e["event"] for e in events(w, 1)] == ["start", "end"]
    assert_complete(w, one_process)


def test_pilot_then_full_run_then_a_killed_shard_all_by_the_same_submit(one_process, tmp_path):
    """Each task starts its own server (the stand-in, slowed down). A pilot (--limit 4) runs to its dataset; the same
    submit with --limit 8 reuses the pilot's completions (no shard wrote its server into run.json); shard 2's task,
    killed by SIGKILL in the middle, reads as killed; the same submit once more finishes the run, and the dataset
    is the one-process build's."""
    w = tmp_path / "w"
    serve = ["--engine", "sglang", "--serve-engine", "local", "--serve-arg=--max-batch=1", "--serve-arg=--delay=0.5",
             "--setup", standin_setup(tmp_path), "--concurrency", "1"]
    pilot = [a if a != "8" else "4" for a in RUN]
    run_cli("slurm", "submit", *pilot, "--workdir", str(w), "--nodes", str(SHARDS), *serve)
    jobs = json.loads((w / "slurm" / "submit.json").read_text())["jobs"]
    first = wait_finished(w, jobs)
    assert [s["state"] for s in first["shards"]] == ["done"] * SHARDS and first["dataset"], first
    run_json = json.loads((w / "run.json").read_text())
    assert run_json["options"]["servers"] == [], "a shard wrote its own server into run.json"
    piloted = commit_stamps(w / f"generations.shard-2-of-{SHARDS}.sqlite")

    jobs = submit(w, *serve)
    shard = 2
    checkpoint = w / f"generations.shard-{shard}-of-{SHARDS}.sqlite"
    wait_for(lambda: len(commit_stamps(checkpoint)) > len(piloted), DEADLINE_S, "shard 2 committed nothing new")
    for pid in task_tree(batch_shell(jobs["generate"], shard)):    # the task and all it started, as a lost node
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: job_state(f"{jobs['generate']}_{shard}") not in ("RUNNING", "COMPLETING"), 120,
             "the killed task did not end")
    killed = wait_finished(w, jobs)
    wait_for(lambda: all(job_state(f"{jobs['generate']}_{i}") not in ("PENDING", "RUNNING", "COMPLETING")
                         for i in range(SHARDS)), DEADLINE_S, "the other shards did not end")
    killed = status(w)[0]
    s = killed["shards"][shard]
    assert s["state"] == "failed" and "killed by signal 9 (SIGKILL)" in s["detail"], s
    assert "healthy" not in s["detail"] and "starting the server" not in s["detail"], s
    assert killed["dataset"] is None and job_state(jobs["finalize"]) == "CANCELLED"
    before = commit_stamps(checkpoint)
    assert {i: before[i] for i in piloted} == piloted

    jobs = submit(w, *serve)
    final = wait_finished(w, jobs)
    assert [s["state"] for s in final["shards"]] == ["done"] * SHARDS and final["dataset"], final
    after = commit_stamps(checkpoint)
    assert {i: after[i] for i in before} == before, "a completion committed before the kill was made again"
    assert_complete(w, one_process)


def test_source_rows_edited_between_pilot_and_full_run_give_the_one_process_rows_of_the_final_sources(tmp_path):
    """Own sources (copies of the samples): a pilot by submit, then a B4 row and B6's first user turn and a later
    user turn edited in place (same ids), then the full run by the same submit. A completion answers the exact prompt
    it was made for: the dataset is a one-process build's on the final sources, row for row."""
    from kimi_eagle_data.sources.partitions import SAMPLES_DIR

    src = tmp_path / "src"
    src.mkdir()
    files = {"B4": src / "B4.jsonl", "B6": src / "B6.jsonl"}
    files["B4"].write_bytes((SAMPLES_DIR / "B4-mixturethoughts.jsonl").read_bytes())
    files["B6"].write_bytes((SAMPLES_DIR / "B6-ultrachat.jsonl").read_bytes())
    config = tmp_path / "mine.toml"
    config.write_text(f'[partitions.B4]\nsource = "{files["B4"]}"\ninstant_share = 0.3\n'
                      f'[partitions.B6]\nsource = "{files["B6"]}"\npolicy = "own_history"\nmax_turns = 3\n'
                      'instant_share = 0.3\n')
    run = ["B4", "B6", "--config", str(config), "--profile", "tiny-kimi", "--model", TINY, "--max-new-tokens", "64",
           "--engine", "local", "--batch-size", "1"]
    w = tmp_path / "w"
    run_cli("slurm", "submit", *run, "--limit", "4", "--workdir", str(w), "--nodes", str(SHARDS))
    first = wait_finished(w, json.loads((w / "slurm" / "submit.json").read_text())["jobs"])
    assert first["dataset"], first
    piloted = dataset_rows(w)

    def edit(path: Path, change) -> None:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        change(rows)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def b4(rows):
        rows[0]["messages"][0]["content"] += " Show every step."

    def b6(rows):
        rows[0]["messages"][0]["content"] += " Answer briefly."
        users = [m for m in rows[1]["messages"] if m["role"] == "user"]
        users[1]["content"] += " And why?"

    edit(files["B4"], b4)
    edit(files["B6"], b6)
    run_cli("slurm", "submit", *run, "--limit", "8", "--workdir", str(w), "--nodes", str(SHARDS))
    final = wait_finished(w, json.loads((w / "slurm" / "submit.json").read_text())["jobs"])
    assert [s["state"] for s in final["shards"]] == ["done"] * SHARDS and final["dataset"], final

    one = tmp_path / "one-process"
    run_cli("build", *run, "--limit", "8", "--workdir", str(one), "--no-progress")
    rows, expected = dataset_rows(w), dataset_rows(one)
    assert rows.keys() == expected.keys()
    assert rows == expected
    # The pilot answered some prompts the edits changed: those rows are not the pilot's any more.
    assert any(piloted[i]["input_ids"] != rows[i]["input_ids"] for i in piloted.keys() & rows.keys())


def test_dry_run_scripts_are_accepted_by_sbatch(tmp_path):
    """The scripts of a 4-node Kimi-K2.5 submit (no GPU on this cluster: --gpus-per-node 0), checked by Slurm
    without running them."""
    w = tmp_path / "k25"
    proc = run_cli("slurm", "submit", "--workdir", str(w), "--nodes", "4", "--engine", "sglang", "--partition",
                   "debug", "--time", "1:00:00", "--gpus-per-node", "0", "--sbatch-arg=--mem=1000", "--dry-run")
    assert "not run: --dry-run" in proc.stdout and not (w / "slurm" / "submit.json").exists()
    for job in ("prepare", "generate", "finalize"):
        test = subprocess.run(["sbatch", "--test-only", str(w / "slurm" / f"{job}.sbatch")], capture_output=True,
                              text=True)
        assert test.returncode == 0 and "to start at" in test.stderr, (job, test.stderr)


def test_the_cluster_script_records_only_daemons_that_run():
    """scripts/slurm/cluster.sh records each daemon it started (stop kills those pids): every recorded pid is a
    running process of that daemon, never one that exited at once (munged forks away from the process su starts)."""
    folder = Path(os.environ.get("KIMI_SLURM_DIR", "/tmp/kimi-slurm"))
    recorded = {d: (folder / f"{d}.started").read_text().split() for d in ("munged", "slurmctld", "slurmd")
                if (folder / f"{d}.started").exists()}
    assert recorded.keys() >= {"slurmctld", "slurmd"}, recorded
    for daemon, pids in recorded.items():
        assert pids, daemon
        for pid in pids:
            assert (Path("/proc") / pid / "comm").read_text().strip() == daemon, (daemon, pid)
