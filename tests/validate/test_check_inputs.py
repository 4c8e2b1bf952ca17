"""`kimi-data check` on other tools' inputs (speculators' save_to_disk datasets and Arrow files, SpecForge's
raw `conversations` rows), on inputs it must refuse, and proof that it streams, through the real CLI.

Verdicts are compared with the demo dataset's own `issues` column, never with hard-coded ids.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers.cli import run_cli

DEADLINE_S = 300


def _split_table(dataset: Path, split: str) -> pa.Table:
    files = sorted(dataset.glob(f"data/*/{split}-*.parquet"))
    assert files, f"the demo dataset has no {split} shards"
    return pa.concat_tables(pq.read_table(f) for f in files)


@pytest.fixture(scope="module")
def demo_tables(demo_run):
    workdir, _ = demo_run
    return workdir, {split: _split_table(workdir / "dataset", split) for split in ("train", "rejected")}


def _check(path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    proc = run_cli("check", str(path), "--profile", "tiny-kimi", "--json", "--no-progress", *extra, check=False)
    verdicts = [json.loads(line) for line in proc.stdout.splitlines()]
    return proc, verdicts


def _error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


# -- speculators: a save_to_disk directory and its Arrow file ----------------------------------------

def test_speculators_save_to_disk_directory_and_arrow_file(demo_tables, tmp_path):
    """`export --format speculators` writes what speculators' prepare_data writes (input_ids, loss_mask,
    seq_len; no id, no tools, no finish_reason): check reads the directory, and the .arrow file inside it,
    and gives each row the dataset's own verdict, in order."""
    workdir, tables = demo_tables
    for split in ("train", "rejected"):
        out = tmp_path / f"spec-{split}"
        run_cli("export", str(workdir / "dataset"), "--format", "speculators", "--split", split, "--out", str(out))
        assert (out / "state.json").is_file() and (out / "dataset_info.json").is_file()
        arrow_files = sorted(out.glob("*.arrow"))
        assert arrow_files
        expected = tables[split].column("issues").to_pylist()
        targets = [out] + ([arrow_files[0]] if len(arrow_files) == 1 else [])
        for target in targets:
            proc, verdicts = _check(target)
            assert [v["issues"] for v in verdicts] == expected, target
            assert [v["row"] for v in verdicts] == list(range(1, len(expected) + 1))
            assert proc.returncode == (0 if split == "train" else 1), proc.stderr


def test_a_dataset_dict_or_a_plain_directory_is_one_error(tmp_path):
    dd = tmp_path / "dd"
    (dd / "train").mkdir(parents=True)
    (dd / "train" / "state.json").write_text("{}")
    (dd / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    plain = tmp_path / "plain"
    plain.mkdir()
    for target, expect in ((dd, str(dd / "train")), (plain, "state.json")):
        proc, verdicts = _check(target)
        assert proc.returncode == 1 and verdicts == []
        lines = _error_lines(proc)
        assert len(lines) == 1 and lines[0].startswith("error:") and expect in lines[0], proc.stderr


# -- SpecForge's raw rows ------------------------------------------------------------------------------

def test_specforge_raw_conversations_rows(demo_tables, tmp_path):
    """SpecForge's prepare_data writes `{"id", "conversations": [{"role", "content"}, ...]}` (+ `tools` for
    tool-use data). The demo's train rows in that shape (the generated turn as the last assistant turn,
    its reasoning and tool calls kept) are all valid; a row SpecForge's ultrachat conversion makes is too."""
    _, tables = demo_tables
    train = tables["train"]
    rows = []
    for r in train.to_pylist():
        turns = [{k: v for k, v in m.items() if v is not None} for m in r["messages"]]
        rows.append({"id": r["id"], "conversations": turns, **({"tools": r["tools"]} if r["tools"] else {})})
    assert any("tools" in r for r in rows), "no demo train row declares tools"
    rows.append({"id": "ultrachat-1", "conversations": [
        {"role": "user", "content": "Name a prime number."},
        {"role": "assistant", "content": "Seven is prime."}]})
    rows.append({"id": "dev", "conversations": [
        {"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."}]})
    rows.append({"id": "open", "conversations": [{"role": "user", "content": "Hi"}]})
    path = tmp_path / "specforge_raw.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc, verdicts = _check(path)
    assert proc.returncode == 1
    by_id = {v["id"]: v for v in verdicts}
    assert all(by_id[i]["valid"] for i in train.column("id").to_pylist())
    assert by_id["ultrachat-1"]["valid"]
    assert by_id["dev"]["issues"] == ["unknown_role"] and "conversations[0].role" in by_id["dev"]["details"][0]
    assert by_id["open"]["issues"] == ["unreadable_row"] and "last turn" in by_id["open"]["details"][0]

    # the same rows as Parquet (conversations a list of structs)
    pq.write_table(pa.Table.from_pylist(rows[-4:-2]), tmp_path / "specforge_raw.parquet")
    proc, verdicts = _check(tmp_path / "specforge_raw.parquet")
    assert [v["valid"] for v in verdicts] == [True, True] and proc.returncode == 0, proc.stderr


# -- inputs check refuses ------------------------------------------------------------------------------

@pytest.mark.parametrize("name, content, expect", [
    ("empty.jsonl", b"", "0 bytes"),
    ("blank.jsonl", b"\n  \n\n", "no rows"),
    ("empty.parquet", None, "no rows"),
])
def test_an_input_without_rows_is_an_error(tmp_path, name, content, expect):
    path = tmp_path / name
    if content is None:
        pq.write_table(pa.table({"input_ids": pa.array([], pa.list_(pa.int64())),
                                 "loss_mask": pa.array([], pa.list_(pa.int64()))}), path)
    else:
        path.write_bytes(content)
    proc, verdicts = _check(path)
    assert proc.returncode == 1 and verdicts == []
    lines = _error_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("error:") and name in lines[0] and expect in lines[0], proc.stderr


def test_columns_of_the_wrong_type_or_no_known_column_are_named(tmp_path):
    wrong = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"input_ids": ["1 2 3"], "loss_mask": [[0, 1, 1]], "prompt_len": [1.5]}), wrong)
    proc, _ = _check(wrong)
    lines = _error_lines(proc)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "input_ids is string (expected list<int>)" in lines[0]
    assert "prompt_len is double (expected int)" in lines[0]

    unknown = tmp_path / "unknown.parquet"
    pq.write_table(pa.table({"tokens": [[1, 2]], "mask": [[0, 1]]}), unknown)
    proc, _ = _check(unknown)
    lines = _error_lines(proc)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "tokens (list<" in lines[0] and "mask (list<" in lines[0] and "input_ids (list<int>)" in lines[0]
    assert "keys: none" not in lines[0]


# -- streaming ---------------------------------------------------------------------------------------

def _train_lines(tables: dict[str, pa.Table], n: int) -> list[bytes]:
    t = tables["train"].slice(0, n).select(["id", "input_ids", "loss_mask"])
    return [json.dumps(r).encode() + b"\n" for r in t.to_pylist()]


def _open_fifo_writer(fifo: Path, proc: subprocess.Popen) -> int:
    """The write end of `fifo`, once the process has opened it for reading (or fail by the deadline)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            return fd
        except OSError:              # ENXIO: no reader yet
            assert proc.poll() is None, f"exited {proc.returncode} before reading: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "the process never opened the pipe"
            time.sleep(0.05)          # polling for the reader, bounded by the deadline


def _read_line(proc: subprocess.Popen) -> bytes:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    assert sel.select(timeout=DEADLINE_S), "no output while the rest of the input is still unwritten"
    return proc.stdout.readline()


def _stream(tmp_path: Path, args: list[str], first: bytes, rest: bytes) -> tuple[bytes, subprocess.Popen, bytes]:
    """Run `kimi-data ARGS` on a named pipe: write `first`, read one stdout line while the pipe stays open
    (a reader that reads its whole input first would wait for the end and print nothing), then write the
    rest and close. Returns (that line, the finished process, the rest of stdout)."""
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "kimi_eagle_data", *args[:1], str(fifo), *args[1:]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        fd = _open_fifo_writer(fifo, proc)
        try:
            os.write(fd, first)
            line = _read_line(proc)
            try:
                os.write(fd, rest)
            except BrokenPipeError:       # render stops reading at its row: fine
                pass
        finally:
            os.close(fd)
        out, _ = proc.communicate(timeout=DEADLINE_S)
        return line, proc, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_check_streams_jsonl_row_by_row(demo_tables, tmp_path):
    """Row 1's verdict comes out while the rest of the file is not even written: nothing is read ahead."""
    _, tables = demo_tables
    lines = _train_lines(tables, 3)
    first, proc, out = _stream(tmp_path, ["check", "--profile", "tiny-kimi", "--json", "--no-progress"],
                               lines[0], b"".join(lines[1:]) + b"{not json\n")
    assert json.loads(first) == {"row": 1, "valid": True, "issues": [], "id": tables["train"]["id"][0].as_py(),
                                 "details": [], "mode": tables["train"]["mode"][0].as_py()}
    assert [json.loads(x)["row"] for x in out.splitlines()] == [2, 3, 4]
    assert proc.returncode == 1          # the unreadable last row


def test_render_streams_jsonl_to_its_row(demo_tables, tmp_path, tiny_tokenizer):
    workdir, _ = demo_tables
    prepared = pq.read_table(workdir / "prepared" / "B6.parquet").slice(0, 2).to_pylist()
    rows = [json.dumps({"messages": json.loads(r["messages"])}).encode() + b"\n" for r in prepared]
    first, proc, out = _stream(tmp_path, ["render", "--row", "1", "--profile", "tiny-kimi", "--ids",
                                          "--mode", prepared[0]["mode"]], rows[0], rows[1] * 1000)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(first + out) == prepared[0]["prompt_ids"]


def test_parquet_is_read_row_group_by_row_group(demo_tables, tmp_path):
    """A Parquet file whose last row group is corrupt: the verdicts of the row groups before it come out,
    then one error line: the file is never read whole before checking."""
    _, tables = demo_tables
    t = tables["rejected"].select(["id", "input_ids", "loss_mask", "finish_reason", "tools", "issues"])
    group = 8
    assert t.num_rows > group, "the demo's rejected split is too small for two row groups"
    path = tmp_path / "cut.parquet"
    pq.write_table(t, path, row_group_size=group, compression="none")
    md = pq.ParquetFile(path).metadata
    last = md.row_group(md.num_row_groups - 1).column(t.schema.get_field_index("input_ids"))
    with open(path, "r+b") as f:       # the last row group's input_ids pages become garbage
        f.seek(last.data_page_offset)
        f.write(b"\xff" * min(64, last.total_compressed_size))
    proc, verdicts = _check(path)
    good = (md.num_row_groups - 1) * group
    assert proc.returncode == 1
    assert len(verdicts) >= good
    assert [(v["id"], v["issues"]) for v in verdicts[:good]] == list(zip(t.column("id").to_pylist()[:good],
                                                                          t.column("issues").to_pylist()[:good]))
    lines = _error_lines(proc)
    assert len(lines) == 1 and "cut.parquet" in lines[0] and "Parquet read failed" in lines[0], proc.stderr


def test_an_arrow_stream_is_read_batch_by_batch(demo_tables, tmp_path):
    """An Arrow IPC stream (the format `datasets` writes) cut short in its last record batch: the earlier
    batches' verdicts come out, then one error line."""
    _, tables = demo_tables
    t = tables["train"].select(["input_ids", "loss_mask"])
    path = tmp_path / "cut.arrow"
    batches = t.to_batches(max_chunksize=10)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, t.schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    os.truncate(path, path.stat().st_size - 40)          # into the last batch's body
    proc, verdicts = _check(path)
    assert proc.returncode == 1
    assert len(verdicts) == sum(b.num_rows for b in batches[:-1]) and all(v["valid"] for v in verdicts)
    lines = _error_lines(proc)
    assert len(lines) == 1 and "cut.arrow" in lines[0] and "Arrow read failed" in lines[0], proc.stderr


@pytest.mark.parametrize("sig, code, by", [(signal.SIGINT, 130, ""), (signal.SIGTERM, 143, " by SIGTERM")],
                         ids=["ctrl-c", "sigterm"])
def test_check_stopped_mid_input_says_what_is_true(sig, code, by, tmp_path):
    """Stopped while it reads a pipe (row 1's verdict out, the rest unwritten): it says check writes nothing and
    covered only the rows before the stop, never that a checkpoint resumes it (it has none)."""
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    row = json.dumps({"messages": [{"role": "user", "content": "hi"}], "completion": "</think>hi<|im_end|>"})
    proc = subprocess.Popen([sys.executable, "-m", "kimi_eagle_data", "check", str(fifo), "--profile", "tiny-kimi",
                             "--json", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        fd = _open_fifo_writer(fifo, proc)
        try:
            os.write(fd, row.encode() + b"\n")
            assert json.loads(_read_line(proc))["row"] == 1
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=DEADLINE_S)
        finally:
            os.close(fd)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = err.decode()
    assert proc.returncode == code, (proc.returncode, err)
    assert "Traceback" not in err and "checkpoint" not in err and "resume" not in err, err
    assert f"interrupted{by}: check writes nothing, and what it printed covers only the rows before the stop; " \
           "rerun the same command to check every row" in " ".join(err.split()), err
