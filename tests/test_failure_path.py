"""The failure path: a full disk, two processes on one workdir, SIGTERM, and emit killed with workers running.

The disk-full tests mount a small tmpfs (root, as in CI); they fail, not skip, where that is impossible."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from kimi_eagle_data.profile import TINY_MODEL_DIR

from tests.conftest import run_cli
from tests.engines.test_sglang_engine import Server, completions, prepared_count, sglang_args, wait_for

BASE = ("B6", "--profile", "tiny-kimi", "--model", str(TINY_MODEL_DIR), "--samples", "--max-new-tokens", "64",
        "--no-progress")


def error_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error")]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("prepared") / "w"
    run_cli("prepare", *BASE, "--workdir", str(w))
    return w


@pytest.fixture(scope="module")
def generated(prepared, tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("generated") / "w"
    shutil.copytree(prepared, w)
    run_cli("generate", "--workdir", str(w))
    return w


@pytest.fixture(scope="module")
def emitted(generated, tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("emitted") / "w"
    shutil.copytree(generated, w)
    run_cli("emit", "--workdir", str(w))
    return w


# -- a full disk -------------------------------------------------------------------------------------

@contextmanager
def small_disk(where: Path, size: str = "4m"):
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if proc.returncode:
        pytest.fail(f"cannot mount a tmpfs for the disk-full tests ({proc.stderr.strip()}); run them as root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A file taking all of `disk`'s space but `leave` bytes."""
    st = os.statvfs(disk)
    filler = disk / "filler"
    with open(filler, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize - leave)
    assert abs(os.statvfs(disk).f_bavail * st.f_frsize - leave) < 8192
    return filler


def tmp_files(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp")]


def tableless_checkpoints(root: Path) -> list[str]:
    bad = []
    for f in root.glob("*.sqlite"):
        tables = {r[0] for r in sqlite3.connect(f).execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "completions" not in tables and "scores" not in tables:
            bad.append(f.name)
    return bad


# (command, bytes left free, the workdir it starts from). 40 KB for emit: its dataset alone is about 85 KB.
DISK_FULL_CASES = [("generate", 98 << 10, "prepared"), ("generate", 0, "prepared"), ("emit", 40 << 10, "generated"),
                   ("emit", 0, "generated"), ("build", 98 << 10, "prepared"), ("build", 0, "prepared")]


@pytest.mark.parametrize("command, free, start", DISK_FULL_CASES)
def test_disk_full_is_one_line_leaves_nothing_half_written_and_resumes(command, free, start, request, tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        w = disk / "w"
        shutil.copytree(request.getfixturevalue(start), w)
        before = set(completions(w))
        filler = fill(disk, free)
        proc = run_cli(command, "--workdir", str(w), check=False)
        assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and "not a readable" not in proc.stderr, proc.stderr
        lines = error_lines(proc)
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"error: no space left on {disk} writing {w}/") and \
            lines[0].endswith("; free space and rerun"), lines
        assert tmp_files(w) == [] and tableless_checkpoints(w) == []      # nothing half-written
        after = completions(w)
        assert before <= set(after) and len(after) == len(set(after))     # nothing committed lost
        filler.unlink()
        again = run_cli(command, "--workdir", str(w))
        done = completions(w)
        assert len(done) == len(set(done)) == prepared_count(w) and set(after) <= set(done)
        if command != "generate":
            assert (w / "dataset" / "manifest.json").is_file() and tmp_files(w) == []
            assert f"{prepared_count(w)} already done" in again.stdout or command == "emit"


def test_a_new_checkpoint_is_never_left_without_tables(prepared, tmp_path):
    """0 bytes free: the checkpoint cannot be created; no empty or table-less file is left to be mistaken for one."""
    from kimi_eagle_data.diskfull import DiskFullError
    from kimi_eagle_data.engines.checkpoint import Checkpoint

    with small_disk(tmp_path / "disk", size="64k") as disk:
        fill(disk, 0)
        with pytest.raises(DiskFullError, match=f"no space left on {disk} writing {disk}/generations.sqlite"):
            Checkpoint(disk / "generations.sqlite")
        assert not list(disk.glob("generations.sqlite*"))


def test_sqlite_full_is_never_called_corrupt(tmp_path):
    from kimi_eagle_data.diskfull import DiskFullError
    from kimi_eagle_data.engines.checkpoint import Checkpoint
    from kimi_eagle_data.records import Completion

    with small_disk(tmp_path / "disk", size="256k") as disk:
        ck = Checkpoint(disk / "generations.sqlite")
        sample = [Completion(id=f"B6-{i:08x}", output_ids=list(range(2000)), finish_reason="stop") for i in range(1000)]
        for c in sample[:3]:
            ck.commit("B6", c)
        fill(disk, 0)
        with pytest.raises(DiskFullError, match=f"no space left on {disk} writing {disk}/generations.sqlite"):
            for c in sample[3:]:
                ck.commit("B6", c)
        ck.close()
        (disk / "filler").unlink()
        kept = Checkpoint(disk / "generations.sqlite")
        assert {c.id for c in sample[:3]} <= kept.done_ids() and len(kept.done_ids()) < 1000
        kept.commit("B6", sample[-1])      # writable again once space is freed


# -- two processes on one workdir --------------------------------------------------------------------

WRITERS = [("generate",), ("build",), ("emit",), ("validate",), ("prepare",), ("score", "--limit", "2")]
READERS = [("stats", "--workdir", "{w}"), ("inspect", "{w}", "B6", "--random"), ("plan", "--workdir", "{w}")]


@pytest.mark.parametrize("args", WRITERS, ids=[a[0] for a in WRITERS])
def test_a_second_writer_is_refused_naming_the_holder(args, emitted, tmp_path):
    from kimi_eagle_data.workdir_lock import WorkdirLock

    w = tmp_path / "w"
    shutil.copytree(emitted, w)
    held = WorkdirLock(w.resolve())     # this test process is the writer at work
    try:
        before = {p: p.stat().st_mtime_ns for p in w.rglob("*") if p.is_file() and p.name != ".lock"}
        proc = run_cli(*args, "--workdir", str(w), check=False)
    finally:
        held.release()
    assert proc.returncode == 1 and len(error_lines(proc)) == 1, proc.stderr
    assert f"is in use by" in proc.stderr and f"(pid {os.getpid()})" in proc.stderr, proc.stderr
    assert {p: p.stat().st_mtime_ns for p in w.rglob("*") if p.is_file() and p.name != ".lock"} == before
    run_cli(*args, "--workdir", str(w))     # released: the same command runs


@pytest.mark.parametrize("args", READERS, ids=[a[0] for a in READERS])
def test_readers_work_while_a_writer_holds_the_workdir(args, emitted):
    from kimi_eagle_data.workdir_lock import WorkdirLock

    held = WorkdirLock(emitted.resolve())
    try:
        proc = run_cli(*(a.format(w=emitted) for a in args), check=False)
    finally:
        held.release()
    assert proc.returncode == 0, proc.stderr


def test_two_generates_one_refused_and_kill_9_never_leaves_it_locked(tmp_path):
    slow = Server("--delay", "1.0", "--max-batch", "2").start()
    w = tmp_path / "w"
    try:
        run_cli("prepare", *sglang_args(w, slow.url))
        n = prepared_count(w)
        first = subprocess.Popen([sys.executable, "-m", "kimi_eagle_data", "generate", "--workdir", str(w),
                                  "--concurrency", "2", "--no-progress"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: completions(w), 300, "no completion committed", proc=first)
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
    finally:
        slow.kill()


def test_shard_generates_share_the_workdir_but_not_a_shard(tmp_path):
    from kimi_eagle_data.workdir_lock import WorkdirLock

    w = tmp_path.resolve()
    code = ("from pathlib import Path; from kimi_eagle_data.workdir_lock import WorkdirLock; "
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
    slow = Server("--delay", "1.0", "--max-batch", "2").start()
    w = tmp_path / "w"
    try:
        run_cli("prepare", *sglang_args(w, slow.url))
        n = prepared_count(w)
        proc = subprocess.Popen([sys.executable, "-m", "kimi_eagle_data", "generate", "--workdir", str(w),
                                 "--concurrency", "2", "--no-progress"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: completions(w), 300, "no completion committed", proc=proc)
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
    finally:
        slow.kill()


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
def test_emit_killed_leaves_no_worker_running(sig, generated, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(generated, w)
    proc = subprocess.Popen([sys.executable, "-m", "kimi_eagle_data", "emit", "--workdir", str(w), "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    run_cli("emit", "--workdir", str(w))    # nothing left locked
    assert (w / "dataset" / "manifest.json").is_file() and tmp_files(w) == []
