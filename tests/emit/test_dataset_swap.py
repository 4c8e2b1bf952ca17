"""The dataset folder is replaced as a whole (store/swap.py): a re-emit stopped at any point leaves the old dataset
or the new one, never a manifest and card over another emit's (or no) shards."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import popen_cli, run_cli, tmp_files, tree_hashes
from tests.helpers.servers import wait_for

STAGING = ".dataset.new"


def rows_being_written(w: Path) -> bool:
    """The observable point: the new dataset's rows are being written beside the old dataset."""
    return any((w / STAGING / "data").rglob("*"))


@pytest.fixture
def reemit(emitted_b6, tmp_path):
    """A complete dataset (version 0.1.0), and the tree a re-emit as 0.2.0 makes (emitted in a copy)."""
    w, done = tmp_path / "w", tmp_path / "done"
    shutil.copytree(emitted_b6, w)
    shutil.copytree(emitted_b6, done)
    run_cli("emit", "--workdir", str(done), "--dataset-version", "0.2.0")
    old, new = tree_hashes(w / "dataset"), tree_hashes(done / "dataset")
    assert old != new and json.loads((done / "dataset" / "manifest.json").read_text())["version"] == "0.2.0"
    return w, old, new


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_a_reemit_stopped_while_writing_rows_leaves_the_old_dataset_whole(sig, reemit):
    w, old, new = reemit
    proc = popen_cli("emit", "--workdir", str(w), "--dataset-version", "0.2.0", "--workers", "1",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: rows_being_written(w), 300, "emit never started writing its rows", proc=proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (143 if sig == signal.SIGTERM else -9), (proc.returncode, err)
    assert tree_hashes(w / "dataset") == old             # every file of the old dataset, and nothing else
    if sig == signal.SIGTERM:
        assert "interrupted by SIGTERM" in err and "Traceback" not in err, err
        assert not (w / STAGING).exists() and tmp_files(w) == []
    check = run_cli("check", str(w / "dataset"), "--no-progress", check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    run_cli("emit", "--workdir", str(w), "--dataset-version", "0.2.0")   # the rerun: the new one, nothing left over
    assert tree_hashes(w / "dataset") == new
    assert sorted(p.name for p in w.iterdir() if p.name.startswith(".dataset")) == []


def test_a_reader_during_a_reemit_sees_the_old_dataset_or_the_new_one(reemit):
    """Polled while the re-emit runs (every state the reader can observe): each manifest read lists exactly the files
    the folder holds, with their hashes."""
    from kimi_eagle_data.store.workdir import file_sha256

    w, old, new = reemit
    proc = popen_cli("emit", "--workdir", str(w), "--dataset-version", "0.2.0", "--workers", "1")
    seen = set()

    def consistent_snapshot() -> bool:
        dataset = w / "dataset"
        try:
            manifest = json.loads((dataset / "manifest.json").read_text())
            files = {p.relative_to(dataset).as_posix(): file_sha256(p) for p in dataset.rglob("*") if p.is_file()}
        except FileNotFoundError:    # the folder swapped while this read walked it: read again
            return False
        listed = {**manifest["files"], "manifest.json": files.get("manifest.json")}
        if files == listed:
            seen.add(manifest["version"])
        else:
            pytest.fail(f"a mix: manifest {manifest['version']} over {sorted(set(files) ^ set(listed))}")
        return proc.poll() is not None

    wait_for(consistent_snapshot, 300, "the re-emit did not end")
    assert proc.wait() == 0
    assert "0.2.0" in seen and tree_hashes(w / "dataset") == new


@pytest.mark.parametrize("atomic", [True, False], ids=["exchange", "two-renames"])
def test_replace_dir_swaps_whole_folders(atomic, tmp_path):
    from kimi_eagle_data.store.swap import replace_dir

    target, new = tmp_path / "dataset", tmp_path / STAGING
    (target / "data").mkdir(parents=True)
    (target / "data" / "old.parquet").write_text("old")
    new.mkdir()
    (new / "manifest.json").write_text("new")
    replace_dir(new, target, atomic=atomic)
    assert [p.name for p in target.iterdir()] == ["manifest.json"]
    assert (new / "data" / "old.parquet").read_text() == "old"       # the old one, for the caller to remove
    assert not (tmp_path / ".dataset.old").exists()


def test_the_next_writer_puts_back_a_dataset_a_stopped_swap_moved_aside(tmp_path):
    """A fallback swap stopped between its two renames (kill -9): no dataset/, the old one aside, the new one
    staged. The next writer restores the old one and removes the rest."""
    from kimi_eagle_data.store.workdir import Workdir

    aside, staged = tmp_path / ".dataset.old", tmp_path / STAGING
    for d, name in ((aside, "old"), (staged, "new")):
        d.mkdir()
        (d / "manifest.json").write_text(name)
    Workdir(tmp_path).remove_stale_temp_files()
    assert (tmp_path / "dataset" / "manifest.json").read_text() == "old"
    assert not aside.exists() and not staged.exists()


def test_an_emit_with_nothing_to_emit_keeps_the_old_dataset(reemit):
    """Every sample failed since (here: the completions removed): the warning, and the old dataset as it was."""
    import sqlite3
    from contextlib import closing

    w, old, _ = reemit
    with closing(sqlite3.connect(w / "generations.sqlite")) as db, db:
        db.execute("DELETE FROM completions")
    proc = run_cli("emit", "--workdir", str(w), "--dataset-version", "0.2.0", check=False)
    assert proc.returncode == 1 and "nothing to emit" in proc.stderr, proc.stderr
    assert tree_hashes(w / "dataset") == old and not (w / STAGING).exists()
    assert os.listdir(w / "dataset")
