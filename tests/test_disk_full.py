"""A full disk at every stage: one line naming the mount and the file, nothing half-written, nothing committed
lost, and a clean resume once space is freed. The tests mount a small tmpfs (root, as in CI); they fail, not skip,
where that is impossible."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from tests.helpers.cli import error_lines, run_cli, tmp_files
from tests.helpers.workdirs import completions, prepared_count


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


def tableless_checkpoints(root: Path) -> list[str]:
    bad = []
    for f in root.glob("*.sqlite"):
        tables = {r[0] for r in sqlite3.connect(f).execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "completions" not in tables and "scores" not in tables:
            bad.append(f.name)
    return bad


# (command, bytes left free, the workdir it starts from). 40 KB for emit: its dataset alone is about 85 KB. 98 KB
# for generate and build: room for the first few completions (3 when it was chosen), so the disk fills mid-run.
DISK_FULL_CASES = [("generate", 98 << 10, "prepared_b6"), ("generate", 0, "prepared_b6"),
                   ("emit", 40 << 10, "generated_b6"), ("emit", 0, "generated_b6"),
                   ("build", 98 << 10, "prepared_b6"), ("build", 0, "prepared_b6")]


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
        run_cli(command, "--workdir", str(w))
        done = completions(w)
        assert len(done) == len(set(done)) == prepared_count(w) and set(after) <= set(done)
        if command != "generate":
            assert (w / "dataset" / "manifest.json").is_file() and tmp_files(w) == []
        print(f"{command} with {free} bytes free: {lines[0]}; {len(after) - len(before)} committed before it, "
              f"resumed: {len(done)} of {prepared_count(w)}")


def test_a_new_checkpoint_is_never_left_without_tables(tmp_path):
    """0 bytes free: the checkpoint cannot be created; no empty or table-less file is left to be mistaken for one."""
    from kimi_eagle_data.diskfull import DiskFullError
    from kimi_eagle_data.store.checkpoint import Checkpoint

    with small_disk(tmp_path / "disk", size="64k") as disk:
        fill(disk, 0)
        with pytest.raises(DiskFullError, match=f"no space left on {disk} writing {disk}/generations.sqlite"):
            Checkpoint(disk / "generations.sqlite")
        assert not list(disk.glob("generations.sqlite*"))


def test_sqlite_full_is_never_called_corrupt(tmp_path):
    from kimi_eagle_data.diskfull import DiskFullError
    from kimi_eagle_data.store.checkpoint import Checkpoint
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


@pytest.mark.parametrize("error, full", [
    (OSError(28, "No space left on device", "/x/f"), True),
    (OSError(122, "Disk quota exceeded"), True),
    (OSError("Error writing bytes to file. Detail: [errno 28] No space left on device"), True),   # pyarrow's form
    (sqlite3.OperationalError("database or disk is full"), True),
    (OSError(13, "Permission denied"), False),
    (sqlite3.DatabaseError("file is not a database"), False),
])
def test_every_form_of_a_full_disk_is_recognised(error, full, tmp_path):
    from kimi_eagle_data.diskfull import DiskFullError, is_disk_full, writing

    assert is_disk_full(error) is full
    with pytest.raises(DiskFullError if full else type(error)) as caught:
        with writing(tmp_path / "f.parquet"):
            raise error
    if full:
        mount = next(p for p in (tmp_path, *tmp_path.parents) if os.path.ismount(p))
        assert str(caught.value) == f"no space left on {mount} writing {tmp_path}/f.parquet; free space and rerun"


# -- export: vocab_mapping.pt (torch's writer) and the speculators directory (datasets' writers) ---------------

PAGE = 4096    # tmpfs counts space in pages


def pages(n: int) -> int:
    return -(-n // PAGE) * PAGE


def assert_export_disk_full(proc, disk: Path, written: Path) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "unexpected pos" not in proc.stderr, proc.stderr
    lines = error_lines(proc)
    assert lines == [f"error: no space left on {disk} writing {written}; free space and rerun"], proc.stderr


def test_disk_full_while_export_writes_vocab_mapping_is_one_line(emitted_b6, tmp_path):
    """The rows fit, SpecForge's vocab_mapping.pt beside them does not (torch's own file writer fails then with
    two chained errors): one line naming it, no temp file; the rerun after freeing space writes it."""
    sizes = tmp_path / "sizes"
    run_cli("export", str(emitted_b6), "--out", str(sizes / "rows.jsonl"), "--draft-vocab-size", "1024")
    rows, mapping = (sizes / "rows.jsonl").stat().st_size, (sizes / "vocab_mapping.pt").stat().st_size
    assert mapping > PAGE, mapping      # so one page short of it is a full disk mid-file
    with small_disk(tmp_path / "disk") as disk:
        filler = fill(disk, pages(rows) + pages(mapping) - PAGE)
        out = disk / "rows.jsonl"
        proc = run_cli("export", str(emitted_b6), "--out", str(out), "--draft-vocab-size", "1024", check=False)
        assert_export_disk_full(proc, disk, disk / "vocab_mapping.pt")
        assert out.stat().st_size == rows and tmp_files(disk) == [] and not (disk / "vocab_mapping.pt").exists()
        filler.unlink()
        run_cli("export", str(emitted_b6), "--out", str(out), "--draft-vocab-size", "1024")
        assert (disk / "vocab_mapping.pt").read_bytes() == (sizes / "vocab_mapping.pt").read_bytes()


@pytest.mark.parametrize("share", [0, 0.5])
def test_disk_full_during_the_speculators_export_names_mount_and_directory(share, emitted_b6, tmp_path):
    """No space at all, or half of what the export takes: one line naming the mount and the output directory,
    and no temp directory left beside it."""
    sizes = tmp_path / "sizes"
    run_cli("export", str(emitted_b6), "--format", "speculators", "--out", str(sizes / "spec"))
    need = sum(pages(p.stat().st_size) for p in (sizes / "spec").iterdir())
    with small_disk(tmp_path / "disk") as disk:
        filler = fill(disk, pages(int(need * share)))
        out = disk / "spec"
        proc = run_cli("export", str(emitted_b6), "--format", "speculators", "--out", str(out), check=False)
        assert_export_disk_full(proc, disk, out)
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
        filler.unlink()
        run_cli("export", str(emitted_b6), "--format", "speculators", "--out", str(out))
        assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in (sizes / "spec").iterdir())


# -- a checkpoint that holds nothing ------------------------------------------------------------------

def test_an_empty_checkpoint_file_is_a_missing_one(prepared_b6, tmp_path):
    """A 0-byte generations.sqlite (what a first generate stopped by a full disk was reported to leave, issue 43):
    stats reads it as empty and build makes it anew and continues; nothing calls it unreadable."""
    w = tmp_path / "w"
    shutil.copytree(prepared_b6, w)
    (w / "generations.sqlite").touch()
    stats = run_cli("stats", "--workdir", str(w), check=False)
    assert stats.returncode == 0 and "not a readable" not in stats.stderr, stats.stderr
    run_cli("build", "--workdir", str(w))
    done = completions(w)
    assert len(done) == len(set(done)) == prepared_count(w) and (w / "dataset" / "manifest.json").is_file()
    assert tmp_files(w) == [] and tableless_checkpoints(w) == []


def test_a_store_with_rows_or_a_damaged_one_is_never_taken_for_empty(tmp_path):
    from kimi_eagle_data.records import Completion
    from kimi_eagle_data.store.checkpoint import Checkpoint
    from kimi_eagle_data.store.sqlite import CorruptCheckpointError, holds_nothing

    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert holds_nothing(empty) and Checkpoint(empty, readonly=True).done_ids() == set()
    Checkpoint(empty).commit("B6", Completion(id="B6-1", output_ids=[1, 2], finish_reason="stop"))
    assert not holds_nothing(empty) and Checkpoint(empty, readonly=True).done_ids() == {"B6-1"}
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all" * 100)
    assert not holds_nothing(garbage)
    with pytest.raises(CorruptCheckpointError, match="is not a readable SQLite database"):
        Checkpoint(garbage)
    assert garbage.read_bytes() == b"not a database at all" * 100


# -- a file-size limit (ulimit -f) ----------------------------------------------------------------------

def run_limited(limit: int, *args: str) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter under a file-size limit of `limit` bytes, as `ulimit -f` sets it. SIGXFSZ
    ignored there as the CLI sees it: CPython ignores it at start-up (subprocess resets it to the default before
    the exec), so a write past the limit fails with EFBIG instead of killing the process."""
    import resource
    import signal
    import sys

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run([sys.executable, "-m", "kimi_eagle_data", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, preexec_fn=limited, timeout=900)


def limit_line(limit: int, file: Path) -> str:
    return (f"error: file-size limit of {limit} bytes (ulimit -f) reached writing {file}; what was committed is kept: "
            "raise the limit (ulimit -f unlimited) and rerun")


@pytest.mark.parametrize("limit, committed", [(8 << 10, False), (64 << 10, True)])
def test_a_file_size_limit_is_one_line_naming_it_and_the_rerun_continues(limit, committed, prepared_b6, tmp_path):
    """At the checkpoint's first write (8 KiB: its schema alone is 44 KiB) and mid-run (64 KiB: its write-ahead
    log reaches the limit after a few completions): one line naming the limit and the file, no traceback, no
    "corrupt" advice, nothing committed lost; the rerun without the limit makes the rest."""
    w = tmp_path / "w"
    shutil.copytree(prepared_b6, w)
    proc = run_limited(limit, "generate", "--workdir", str(w), "--batch-size", "1")
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "move it aside" not in proc.stderr, proc.stderr
    assert error_lines(proc) == [limit_line(limit, w / "generations.sqlite")], proc.stderr
    before = completions(w)
    assert tmp_files(w) == [] and tableless_checkpoints(w) == []
    assert (0 < len(before) < prepared_count(w)) if committed else not (w / "generations.sqlite").exists()
    run_cli("generate", "--workdir", str(w))
    done = completions(w)
    assert len(done) == len(set(done)) == prepared_count(w) and set(before) <= set(done)
    print(f"limit {limit}: {error_lines(proc)[0]}; {len(before)} committed before it")


def test_a_full_disk_at_every_page_before_the_first_commit_leaves_a_checkpoint_every_reader_opens(tmp_path):
    """Every amount of free space, page by page, from none to room for the first commits: the checkpoint generate
    writes (open, meta, commits) fails with DiskFullError or not at all, and what it leaves is absent or opens for
    readers and for the next writer, which commits once space is freed."""
    from kimi_eagle_data.diskfull import DiskFullError
    from kimi_eagle_data.records import Completion
    from kimi_eagle_data.store.checkpoint import Checkpoint

    sample = [Completion(id=f"B6-{i:08x}", output_ids=list(range(96)), finish_reason="stop") for i in range(40)]
    for free_pages in range(0, 26):
        with small_disk(tmp_path / f"disk{free_pages}", size="512k") as disk:
            filler = fill(disk, free_pages * PAGE)
            path = disk / "generations.sqlite"
            with pytest.raises(DiskFullError):
                ckpt = Checkpoint(path)
                try:
                    ckpt.set_meta("engine", {"engine": "local"})
                    for c in sample:
                        ckpt.commit("B6", c)
                finally:
                    ckpt.close()
            filler.unlink()
            assert tmp_files(disk) == []
            if path.exists():
                reader = Checkpoint(path, readonly=True)
                kept = reader.done_ids()
                reader.close()
            else:
                kept = set()
            writer = Checkpoint(path)
            writer.commit("B6", sample[-1])
            assert kept | {sample[-1].id} == writer.done_ids(), free_pages
            writer.close()


def committed_ids(checkpoint: Path) -> list[str]:
    """The checkpoint's completion ids, read without touching its files (a connection of our own that closed
    last would fold the write-ahead log in and delete it with its index)."""
    with closing(sqlite3.connect(f"file:{checkpoint}?mode=ro&immutable=1", uri=True)) as db:
        return sorted(r[0] for r in db.execute("SELECT id FROM completions"))


@pytest.mark.parametrize("limit", [8 << 10, 30 << 10])
@pytest.mark.parametrize("command", ["generate", "validate", "emit", "stats"])
def test_a_file_size_limit_below_an_existing_checkpoints_size_is_its_own_line(command, limit, request, tmp_path):
    """A checkpoint already larger than the limit, as a run leaves it (its write-ahead log beside it): opening it
    writes the log's index (the -shm file, 32 KiB), which the limit refuses. That is the limit's line, for writers
    and readers alike, never "check the disk"; the checkpoint stays as it was, and the same command without the
    limit works. (stats reads the checkpoint while nothing is validated yet.)"""
    w = tmp_path / "w"
    shutil.copytree(request.getfixturevalue("generated_b6" if command == "stats" else "emitted_b6"), w)
    ckpt = w / "generations.sqlite"
    assert ckpt.stat().st_size > limit and (w / "generations.sqlite-wal").exists()
    before = committed_ids(ckpt)
    extra = ("--no-plots",) if command == "stats" else ()
    proc = run_limited(limit, command, "--workdir", str(w), *extra)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "check the disk" not in proc.stderr, proc.stderr
    assert error_lines(proc) == [limit_line(limit, ckpt)], proc.stderr
    assert committed_ids(ckpt) == before and tmp_files(w) == []
    run_cli(command, "--workdir", str(w), *extra)
