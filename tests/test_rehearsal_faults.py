"""Faults the production-size rehearsal met (issue 50), each ending in one line or the behaviour a user launching
a week-long run expects: options checked before anything is written, a local source that is what the rows say
they came from, a local model's positions, a config file's own partitions, and nothing silent."""

from __future__ import annotations

from tests.helpers.cli import error_lines, run_cli
from tests.helpers.servers import TINY

LOCAL_B4 = ["B4", "--profile", "tiny-kimi", "--model", TINY, "--max-new-tokens", "16"]


def one_line(proc, exit_code: int = 1) -> str:
    assert proc.returncode == exit_code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = error_lines(proc) or [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, proc.stderr
    return " ".join(lines[0].split())


# -- options are checked before anything is written ------------------------------------------------------

def test_a_merge_directory_that_does_not_exist_is_a_usage_error_and_makes_nothing(tmp_path):
    w = tmp_path / "w"
    line = one_line(run_cli("build", *LOCAL_B4, "--samples", "--limit", "2", "--no-progress", "--workdir", str(w),
                            "--merge", str(tmp_path / "nowhere"), check=False), 2)
    assert "--merge" in line and "does not exist" in line, line
    assert not w.exists()


def test_a_merge_directory_without_a_checkpoint_is_one_line_and_makes_nothing(tmp_path):
    w, other = tmp_path / "w", tmp_path / "other"
    other.mkdir()
    line = one_line(run_cli("build", *LOCAL_B4, "--samples", "--limit", "2", "--no-progress", "--workdir", str(w),
                            "--merge", str(other), check=False))
    assert line.startswith(f"error: --merge {other}: no generations*.sqlite there"), line
    assert not w.exists()


# -- --samples and --source ----------------------------------------------------------------------------

def test_samples_beside_a_source_for_the_same_config_warns_and_the_rows_name_the_file(tmp_path):
    """`--source B4=FILE` takes B4's rows from FILE, so `--samples` does not apply to B4: one warning says so, and
    the rows' `source` names the file they came from (its name: a published dataset carries no local path), not
    the Hub dataset. The file here holds the bundled rows, so only the naming can differ."""
    import shutil

    import pyarrow.parquet as pq

    from kimi_eagle_data.sources.partitions import SAMPLES_DIR

    rows = tmp_path / "my-b4.jsonl"
    shutil.copy(SAMPLES_DIR / "B4-mixturethoughts.jsonl", rows)
    w = tmp_path / "w"
    proc = run_cli("prepare", *LOCAL_B4, "--samples", "--source", f"B4={rows}", "--limit", "3", "--workdir", str(w))
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning") and "--samples" in line]
    assert len(warnings) == 1 and "B4" in warnings[0] and str(rows) in warnings[0], proc.stderr
    assert set(pq.read_table(w / "prepared" / "B4.parquet").column("source").to_pylist()) == {"my-b4.jsonl"}


# -- the local engine's model positions ------------------------------------------------------------------

def test_a_max_seq_len_beyond_the_local_models_positions_is_refused_before_anything_is_written(tmp_path):
    """The tiny model has 1,024 positions: --max-seq-len 4000 would let prepare accept prompts the model cannot
    hold (each then answered with 0 tokens, counted truncated). `build` refuses it in one line before the
    workdir is made, as a server engine's context is checked; the line names the bound."""
    w = tmp_path / "w"
    line = one_line(run_cli("build", *LOCAL_B4, "--samples", "--limit", "2", "--no-progress", "--engine", "local",
                            "--max-seq-len", "4000", "--workdir", str(w), check=False))
    assert "1,024" in line and "max_seq_len 4,000" in line and "--max-seq-len 1,022" in line, line
    assert not w.exists()


def test_generate_with_the_local_engine_refuses_a_bound_max_seq_len_beyond_its_positions(tmp_path):
    """A workdir prepared with --max-seq-len 4000 (prepare names no engine): generate with the local engine refuses
    it in one line, and generates nothing."""
    w = tmp_path / "w"
    run_cli("prepare", *LOCAL_B4, "--samples", "--limit", "2", "--max-seq-len", "4000", "--workdir", str(w))
    line = one_line(run_cli("generate", "--engine", "local", "--no-progress", "--workdir", str(w), check=False))
    assert "1,024" in line and "max_seq_len 4,000" in line, line
    assert not (w / "generations.sqlite").exists()


# -- a config file without config names ------------------------------------------------------------------

def test_a_config_file_without_names_runs_its_own_partitions(tmp_path):
    """`prepare --config mine.toml` with no config names and no `configs` in the file prepares the partitions the
    file defines, not every built-in one beside them (which, offline, would try eight Hub downloads first)."""
    import json

    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(
        {"id": f"m{i}", "messages": [{"role": "user", "content": f"Question number {i}, about rivers?"}]}) + "\n"
        for i in range(4)))
    (tmp_path / "mine.toml").write_text('[partitions.C1]\nsource = "mine.jsonl"\nn = 4\n')
    w = tmp_path / "w"
    proc = run_cli("prepare", "--config", str(tmp_path / "mine.toml"), "--profile", "tiny-kimi", "--model", TINY,
                   "--max-new-tokens", "16", "--workdir", str(w), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (w / "prepared").glob("*.parquet")) == ["C1.parquet"]
    assert json.loads((w / "run.json").read_text())["options"]["configs"] == ["C1"]


# -- a second writer on the same shard ---------------------------------------------------------------------

def test_a_second_generate_of_the_same_shard_names_that_shards_holder_and_advises_waiting(prepared_b6, tmp_path):
    """Shards share a workdir: a second `generate --shard 0/2` is refused naming the process that generates shard
    0/2 (not shard 1/2's), and advised to wait or run another shard, never to use another --workdir."""
    import os
    import shutil
    import subprocess
    import sys

    from kimi_eagle_data.store.lock import WorkdirLock

    w = tmp_path / "w"
    shutil.copytree(prepared_b6, w)
    other = subprocess.Popen([sys.executable, "-c", "import sys; from pathlib import Path; from kimi_eagle_data.store"
                              f".lock import WorkdirLock; lock = WorkdirLock(Path({str(w.resolve())!r}), (1, 2)); "
                              "print('locked', flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline() == "locked\n"      # shard 1/2 is held by the other process
        held = WorkdirLock(w.resolve(), (0, 2))             # shard 0/2 by this one
        try:
            line = one_line(run_cli("generate", "--shard", "0/2", "--no-progress", "--workdir", str(w), check=False))
        finally:
            held.release()
    finally:
        other.communicate("", timeout=60)
    assert f"pid {os.getpid()}" in line and f"pid {other.pid}" not in line and "shard 0/2" in line, line
    assert "another --workdir" not in line and "another shard" in line, line


# -- rejects.jsonl names a row by its id -------------------------------------------------------------------

def test_a_row_rejected_whole_is_named_by_its_id_when_it_has_a_readable_one(tmp_path):
    """A row the adapter cannot read as a whole (its messages are not a list) but whose id column reads is named
    by that id in rejects.jsonl; a row without one, or not JSON at all, by its row number (`row:N`)."""
    import json

    good = [json.dumps({"id": f"ok-{i}", "messages": [{"role": "user", "content": f"Tell me about lake {i}."}]})
            for i in range(3)]
    bad = [json.dumps({"id": "broken-7", "messages": "not a list"}), json.dumps({"messages": 5}), "{not json"]
    (tmp_path / "rows.jsonl").write_text("\n".join(good + bad) + "\n")
    (tmp_path / "mine.toml").write_text('[partitions.C1]\nsource = "rows.jsonl"\nn = 10\n')
    w = tmp_path / "w"
    run_cli("prepare", "C1", "--config", str(tmp_path / "mine.toml"), "--profile", "tiny-kimi", "--model", TINY,
            "--max-new-tokens", "16", "--workdir", str(w))
    rejects = [json.loads(line) for line in (w / "prepared" / "C1.rejects.jsonl").read_text().splitlines()]
    assert sorted(r["source_id"] for r in rejects) == ["broken-7", "row:5", "row:6"], rejects


# -- validate without the checkpoint that validated/ counts ------------------------------------------------

def test_validate_or_emit_after_the_checkpoint_was_deleted_refuses_and_changes_nothing(emitted_b6, tmp_path):
    """The checkpoint is the only copy of what was generated: with it gone, validating again would count every
    sample pending while dataset/ keeps the old rows. Both refuse in one line naming the file and what to do,
    and leave validated/ and dataset/ as they were; once generate has made a checkpoint again, they work."""
    import shutil

    from tests.helpers.cli import tree_hashes

    w = tmp_path / "w"
    shutil.copytree(emitted_b6, w)
    for f in w.glob("generations*.sqlite*"):
        f.unlink()
    def derived():
        return {k: v for k, v in tree_hashes(w).items() if k.startswith(("validated/", "dataset/"))}

    before = derived()
    assert before
    for command in ("validate", "emit"):
        line = one_line(run_cli(command, "--workdir", str(w), check=False))
        assert line.startswith(f"error: {w}/generations.sqlite is missing") and "restore it" in line \
            and "kimi-data generate" in line, line
        assert derived() == before
    run_cli("generate", "--workdir", str(w))
    run_cli("validate", "--workdir", str(w))
