"""The failure path: two processes on one workdir, SIGTERM, and emit killed with its workers running (a full
disk: test_disk_full.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import error_lines, popen_cli, run_cli, tmp_files, tree_hashes
from tests.helpers.servers import wait_for
from tests.helpers.workdirs import completions, generate_in_flight

@pytest.fixture(scope="module")
def emitted(emitted_b6) -> Path:
    return emitted_b6


# -- two processes on one workdir --------------------------------------------------------------------

WRITERS = [("generate",), ("build",), ("emit",), ("validate",), ("prepare",), ("score", "--limit", "2")]
READERS = [("stats", "--workdir", "{w}"), ("inspect", "{w}", "B6", "--random"), ("plan", "--workdir", "{w}")]


@pytest.mark.parametrize("args", WRITERS, ids=[a[0] for a in WRITERS])
def test_a_second_writer_is_refused_naming_the_holder(args, emitted, tmp_path):
    from kimi_eagle_data.store.lock import WorkdirLock

    w = tmp_path / "w"
    shutil.copytree(emitted, w)
    held = WorkdirLock(w.resolve())     # this test process is the writer at work
    try:
        before = {p: p.stat().st_mtime_ns for p in w.rglob("*") if p.is_file() and p.name != ".lock"}
        proc = run_cli(*args, "--workdir", str(w), check=False)
    finally:
        held.release()
    assert proc.returncode == 1 and len(error_lines(proc)) == 1, proc.stderr
    assert "is in use by" in proc.stderr and f"(pid {os.getpid()})" in proc.stderr, proc.stderr
    assert {p: p.stat().st_mtime_ns for p in w.rglob("*") if p.is_file() and p.name != ".lock"} == before


@pytest.mark.parametrize("args", READERS, ids=[a[0] for a in READERS])
def test_readers_work_while_a_writer_holds_the_workdir(args, emitted):
    from kimi_eagle_data.store.lock import WorkdirLock

    held = WorkdirLock(emitted.resolve())
    try:
        proc = run_cli(*(a.format(w=emitted) for a in args), check=False)
    finally:
        held.release()
    assert proc.returncode == 0, proc.stderr


def test_two_generates_one_refused_and_kill_9_never_leaves_it_locked(tmp_path):
    with generate_in_flight(tmp_path) as run:
        w, n, first = run.workdir, run.prepared, run.proc
        second = run_cli("generate", "--workdir", str(w), check=False)
        assert first.poll() is None, "the first generate ended before the second tried; slow the server down"
        assert second.returncode == 1 and len(error_lines(second)) == 1, second.stderr
        assert f"in use by `kimi-data generate` (pid {first.pid})" in second.stderr, second.stderr
        first.kill()        # SIGKILL: no cleanup runs; the kernel drops the lock with the process
        first.wait()
        done = len(completions(w))
        final = run_cli("generate", "--workdir", str(w))
        assert f"{n - done} completed, 0 failed, {done} already done" in final.stdout
        assert len(set(completions(w))) == len(completions(w)) == n


def test_shard_generates_share_the_workdir_but_not_a_shard(tmp_path):
    from kimi_eagle_data.store.lock import WorkdirLock

    w = tmp_path.resolve()
    code = ("from pathlib import Path; from kimi_eagle_data.store.lock import WorkdirLock; "
            f"WorkdirLock(Path({str(w)!r}), {{}}); print('locked')")

    def other_process(shard: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code.format(shard)], capture_output=True, text=True)

    held = [WorkdirLock(w, (0, 2))]
    assert other_process("(1, 2)").stdout == "locked\n"          # another shard: side by side
    for shard in ("(0, 2)", "None"):                              # the same shard, or a whole-workdir writer
        proc = other_process(shard)
        assert "WorkdirBusyError" in proc.stderr and f"pid {os.getpid()}" in proc.stderr, proc.stderr
    held[0].release()
    held = [WorkdirLock(w)]                                       # a build: no shard may start
    proc = other_process("(1, 2)")
    assert "WorkdirBusyError" in proc.stderr and f"pid {os.getpid()}" in proc.stderr, proc.stderr
    held[0].release()
    assert other_process("None").stdout == "locked\n"


# -- SIGTERM -------------------------------------------------------------------------------------------

def test_sigterm_stops_generate_as_ctrl_c_does_exit_143(tmp_path):
    with generate_in_flight(tmp_path, output=True) as run:
        w, n, proc = run.workdir, run.prepared, run.proc
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, f"exit {proc.returncode}\nstdout: {out}\nstderr: {err}"
        assert "interrupted by SIGTERM" in err and "rerun the same command to resume" in err, err
        assert "Traceback" not in err
        done = len(completions(w))
        assert 0 < done < n
        final = run_cli("generate", "--workdir", str(w))
        assert f"{n - done} completed, 0 failed, {done} already done" in final.stdout
        assert len(set(completions(w))) == len(completions(w)) == n


DEFERRED_STOP = """
import os, signal, sys
from kimi_eagle_data.stopping import DeferredStop, Terminated, check_stop, stop_on_sigterm

stop_on_sigterm()
deferred = DeferredStop().start()
os.kill(os.getpid(), signal.SIGTERM)       # its handler runs before kill returns: the stop is only recorded
os.kill(os.getpid(), signal.SIGTERM)       # a second one changes nothing
print("recorded")
try:
    check_stop() if sys.argv[1] == "check_stop" else deferred.end()
except Terminated:
    print("Terminated from", sys.argv[1])
check_stop()                               # raised once: nothing pending any more
deferred.end()
print("ignored after the stop:", signal.getsignal(signal.SIGTERM) == signal.SIG_IGN)
"""


@pytest.mark.parametrize("safe_point", ["check_stop", "end"])
def test_a_deferred_sigterm_is_raised_at_the_next_safe_point_only(safe_point):
    proc = subprocess.run([sys.executable, "-c", DEFERRED_STOP, safe_point], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["recorded", f"Terminated from {safe_point}", "ignored after the stop: True"]


LATE_SIGTERM = """
import atexit, os, signal
from kimi_eagle_data.cli.common import friendly_errors

# A scheduler's SIGTERM that arrives once the command's work is done, while the interpreter exits.
atexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))
friendly_errors(lambda: print("done"))()
print("handler restored:", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, flush=True)
"""


def test_a_sigterm_after_the_command_finished_ends_the_process_without_a_traceback():
    """A job stopped just as its command finished (Slurm requeues a task that is exiting): the process ends by the
    signal, as an idle one would, instead of a Terminated raised inside an exit handler."""
    proc = subprocess.run([sys.executable, "-c", LATE_SIGTERM], capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines() == ["done", "handler restored: True"]
    assert proc.returncode == -signal.SIGTERM and "Traceback" not in proc.stderr, proc.stderr


# -- emit's workers die with it ------------------------------------------------------------------------

def children(pid: int) -> set[int]:
    """Live (not zombie) processes whose parent is `pid`."""
    found = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(d.name))
    return found


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_emit_killed_leaves_no_worker_running(sig, generated_b6, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(generated_b6, w)
    proc = popen_cli("emit", "--workdir", str(w), "--workers", "2", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers: set[int] = set()

    def pool_started() -> bool:
        workers.update(children(proc.pid))
        return len(workers) >= 2

    wait_for(pool_started, 300, "emit's workers never started", proc=proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == (-9 if sig == signal.SIGKILL else 143), (proc.returncode, err)
    wait_for(lambda: not any(alive(p) for p in workers), 60, f"workers {sorted(workers)} outlived emit")
    if sig == signal.SIGTERM:
        assert "interrupted by SIGTERM" in err and "Traceback" not in err, err
        assert tmp_files(w) == []
    run_cli("emit", "--workdir", str(w))    # nothing left locked; what a kill -9 left half-written is gone
    assert (w / "dataset" / "manifest.json").is_file() and tmp_files(w) == []


# -- a --merge workdir is only read ----------------------------------------------------------------------

@contextlib.contextmanager
def read_only_view(src: Path, where: Path):
    """`src` seen at `where` through a read-only bind mount (root cannot write there either; chmod alone does not
    stop root, as in CI), with its files' write bits off too."""
    for p in [src, *src.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    where.mkdir()
    for cmd in (["mount", "--bind", str(src), str(where)], ["mount", "-o", "remount,bind,ro", str(where)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            subprocess.run(["umount", str(where)], capture_output=True)
            pytest.fail(f"cannot make a read-only bind mount ({proc.stderr.strip()}); run this test as root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        for p in [src, *src.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)


def test_a_merge_source_is_opened_read_only_and_never_migrated(prepared_b6, generated_b6, tmp_path):
    """Another node's workdir, on a read-only mount, with a checkpoint from before log-probs were recorded (an
    older schema, which a writable open would migrate): validate, and build (generate, validate, emit), read it,
    nothing there changes, and every completion counts: none is generated again."""
    import sqlite3

    src = tmp_path / "other"
    shutil.copytree(generated_b6, src)
    with contextlib.closing(sqlite3.connect(src / "generations.sqlite")) as db, db:
        db.execute("ALTER TABLE completions DROP COLUMN logprob_stats")
    before = tree_hashes(src)
    assert "generations.sqlite" in before and "generations.sqlite-wal" not in before   # closed whole
    w = tmp_path / "w"
    shutil.copytree(prepared_b6, w)
    with read_only_view(src, tmp_path / "ro") as ro:
        proc = run_cli("validate", "--workdir", str(w), "--merge", str(ro), check=False)
        assert proc.returncode == 0, proc.stderr
        n = len(completions(generated_b6))
        counts = json.loads((w / "validated" / "B6.json").read_text())
        assert counts["generated"] == n and counts["pending"] == 0, counts
        proc = run_cli("build", "--workdir", str(w), "--merge", str(ro), check=False)
        assert proc.returncode == 0, proc.stderr
        assert f"generate: 0 completed, 0 failed, {n} already done" in proc.stdout, proc.stdout
        assert (w / "dataset" / "manifest.json").is_file()
    assert tree_hashes(src) == before          # no byte changed, no -wal or -shm left, no column added
    assert not list(w.glob("generations*.sqlite"))      # nor a checkpoint of its own made in the workdir
