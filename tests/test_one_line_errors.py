"""Faults a user meets that must end in one line (what, where, what to do) and the exit status
docs/reliability.md gives, never a traceback or unbounded memory: a damaged run.json, JSON nested deeper than the
parser goes, a UTF-8 byte order mark, a JSONL row of hundreds of megabytes in `check`, and `stats` / `inspect` /
`plan` while the first `generate` of a workdir is under way. (A full disk: test_disk_full.py; Ctrl-C and SIGTERM
of `check`: tests/validate/test_check_inputs.py; of `push`: tests/hub/test_publish.py.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.helpers.cli import error_lines, run_cli
from tests.helpers.workdirs import completions, generate_in_flight

DEADLINE_S = 600


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = error_lines(proc)
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- JSON: the parser's depth limit, a byte order mark ------------------------------------------------

def test_the_depth_limit_named_is_the_parsers_own():
    from kimi_eagle_data.json_text import JSON_DEPTH_LIMIT, JsonTextError, parse_json

    assert isinstance(parse_json(nested(JSON_DEPTH_LIMIT)), list)    # the deepest it reads
    with pytest.raises(JsonTextError, match=f"^JSON nested too deep \\(limit {JSON_DEPTH_LIMIT} levels"):
        parse_json(nested(JSON_DEPTH_LIMIT + 1))
    with pytest.raises(JsonTextError, match=r"^not valid JSON \("):
        parse_json(b"{not json")
    with pytest.raises(orjson.JSONDecodeError, match="depth"):    # what orjson itself says one level deeper
        orjson.loads(nested(JSON_DEPTH_LIMIT + 1))


def test_prepare_reads_a_bom_first_row_and_says_too_deep(tmp_path):
    from kimi_eagle_data.json_text import JSON_DEPTH_LIMIT
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    src = tmp_path / "rows.jsonl"
    deep = b'{"messages": [{"role": "user", "content": "deep"}], "x": ' + nested(JSON_DEPTH_LIMIT + 5) + b"}"
    src.write_bytes(b"\xef\xbb\xbf" + json.dumps({"messages": [{"role": "user", "content": "first, after a BOM"}]}).encode()
                    + b"\n" + deep + b"\n" + json.dumps({"messages": [{"role": "user", "content": "third"}]}).encode()
                    + b"\n")
    w = tmp_path / "w"
    run_cli("prepare", "B4", "--source", f"B4={src}", "--workdir", str(w), "--profile", "tiny-kimi", "--model",
            str(TINY_MODEL_DIR))
    import pyarrow.parquet as pq

    prompts = pq.read_table(w / "prepared" / "B4.parquet", columns=["messages"]).column("messages").to_pylist()
    assert sorted(json.loads(m)[0]["content"] for m in prompts) == ["first, after a BOM", "third"]
    rejects = [json.loads(line) for line in (w / "prepared" / "B4.rejects.jsonl").read_text().splitlines()]
    assert [(r["source_id"], r["reason"]) for r in rejects] == [("row:2", "malformed_json")]
    assert f"{src}:2: JSON nested too deep (limit {JSON_DEPTH_LIMIT} levels" in rejects[0]["message"]
    assert "not valid JSON" not in rejects[0]["message"]


# -- check: a BOM, a row too deep, a row too large ---------------------------------------------------

ROW = {"messages": [{"role": "user", "content": "hi"}], "completion": "</think>hello<|im_end|>"}


def test_check_reads_a_bom_row_says_too_deep_and_skips_a_huge_row(tmp_path):
    from kimi_eagle_data.json_text import JSON_DEPTH_LIMIT
    from kimi_eagle_data.sources.filters import max_row_bytes

    cap = max_row_bytes(64)
    path = tmp_path / "rows.jsonl"
    huge = json.dumps({**ROW, "completion": "x" * (3 * cap)}).encode()
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(ROW).encode() + b"\n" + nested(JSON_DEPTH_LIMIT + 1) + b"\n"
                     + huge + b"\n" + json.dumps(ROW).encode() + b"\n")
    proc = run_cli("check", str(path), "--profile", "tiny-kimi", "--max-seq-len", "64", "--json", "--no-progress",
                   check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    verdicts = {v["row"]: v for v in map(json.loads, proc.stdout.splitlines())}
    assert sorted(verdicts) == [1, 2, 3, 4]
    assert "unreadable_row" not in verdicts[1]["issues"] and verdicts[1]["issues"] == verdicts[4]["issues"]
    assert verdicts[2]["issues"] == ["unreadable_row"]
    assert verdicts[2]["details"] == [f"JSON nested too deep (limit {JSON_DEPTH_LIMIT} levels of arrays and objects)"]
    assert verdicts[3]["issues"] == ["row_too_large"]
    assert verdicts[3]["details"][0].startswith(f"row of {len(huge) + 1:,} bytes > {cap:,}")
    assert re.search(r"row_too_large\s+│\s+1 │", proc.stderr), proc.stderr      # the summary counts it


# A check run in a fresh interpreter that reports its own peak memory (VmHWM) as it exits.
PEAK_RSS = """
import sys
from kimi_eagle_data.cli.main import main
try:
    main(sys.argv[1:], prog_name="kimi-data")
except SystemExit as e:
    code = e.code
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("PEAK", int(peak.split()[1]) * 1024, "EXIT", code, file=sys.stderr)
"""


def check_peak_rss(path: Path) -> tuple[int, int, str]:
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS, "check", str(path), "--profile", "tiny-kimi",
                           "--max-seq-len", "1024", "--no-progress"], capture_output=True, text=True,
                          timeout=DEADLINE_S, env={**os.environ, "COLUMNS": "200"})
    m = re.search(r"^PEAK (\d+) EXIT (\d+)$", proc.stderr, re.MULTILINE)
    assert m, proc.stderr
    return int(m[1]), int(m[2]), proc.stdout + proc.stderr


def test_check_memory_stays_flat_on_a_row_of_hundreds_of_megabytes(tmp_path):
    """The same file with and without a 256 MB row in the middle: the peak memory of `check` differs by less
    than a tenth of that row (parsed, the row alone would take more than its size)."""
    row = json.dumps(ROW).encode() + b"\n"
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_bytes(row * 3)
    with open(big, "wb") as f:
        f.write(row)
        f.write(b'{"messages": [{"role": "user", "content": "hi"}], "completion": "')
        block = b"x" * (1 << 20)
        for _ in range(256):
            f.write(block)
        f.write(b'"}\n' + row * 2)
    base, code_small, _ = check_peak_rss(small)
    peak, code_big, text = check_peak_rss(big)
    assert code_small == 0 and code_big == 1, text
    assert "row_too_large" in text and "4 rows checked" in text, text
    assert peak - base < (256 << 20) // 10, (base, peak)
    print(f"check peak RSS: {base / 2**20:.0f} MB without the 256 MB row, {peak / 2**20:.0f} MB with it")


# -- a damaged run.json ---------------------------------------------------------------------------------

@pytest.mark.parametrize("content, why", [(b"{not json", "not valid JSON ("),
                                          (b"[1, 2]", "it holds a JSON list, not an object")])
@pytest.mark.parametrize("command", ["generate", "validate", "emit", "build"])
def test_a_damaged_run_json_is_one_line_naming_it(command, content, why, prepared_b6, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(prepared_b6, w)
    (w / "run.json").write_bytes(content)
    proc = run_cli(command, "--workdir", str(w), check=False)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    line = one_error_line(proc)
    assert line.startswith(f"error: {w.resolve()}/run.json is damaged: {why}"), line
    assert line.endswith("restore it, or move it aside and rerun `kimi-data build` there with the options the run "
                         "was started with"), line
    assert (w / "run.json").read_bytes() == content       # left as it was


# -- stats, inspect and plan during the first generate ----------------------------------------------------

def test_reports_during_the_first_generate_show_the_checkpoints_counts(tmp_path):
    with generate_in_flight(tmp_path) as run:
        w, n = run.workdir, run.prepared
        assert not (w / "validated").exists()
        committed = len(completions(w))
        stats = run_cli("stats", "--workdir", str(w), "--json", check=False)
        assert stats.returncode == 0, stats.stderr
        live = json.loads(stats.stdout)
        assert live["validated"] is False and f"(pid {run.proc.pid})" in live["writer"]
        b6 = live["configs"]["B6"]
        assert committed <= b6["generated"] <= n and b6["generated"] + b6["failed"] + b6["pending"] == n
        table = run_cli("stats", "--workdir", str(w), check=False)
        assert table.returncode == 0 and "generation so far" in table.stdout and "Traceback" not in table.stderr
        for args in (["inspect", str(w), "B6", "--random"], ["inspect", str(w), "B6"], ["plan", "--workdir", str(w)]):
            proc = run_cli(*args, check=False)
            assert proc.returncode == 1, (args, proc.stderr)
            line = one_error_line(proc)
            m = re.search(r"has nothing validated yet \(`kimi-data generate` \(pid (\d+)\) is writing it\); the "
                          r"checkpoint holds ([\d,]+) of ([\d,]+) prompts generated", line)
            assert m and int(m[1]) == run.proc.pid and int(m[3]) == n, line
            assert committed <= int(m[2].replace(",", "")) <= n
            assert "generation so far" in proc.stdout, proc.stdout
        assert run.proc.poll() is None, "generate ended before the reports ran; slow the stand-in server down"


# -- small things a user met ------------------------------------------------------------------------------

def test_inspect_of_a_config_the_directory_lacks_names_the_ones_it_has(emitted_b6):
    for args in ([], ["--random"]):
        proc = run_cli("inspect", str(emitted_b6), "C3", *args, check=False)
        assert proc.returncode == 1, proc.stderr
        assert one_error_line(proc) == f"error: no config C3 in {emitted_b6} (configs: B6)"


@pytest.mark.parametrize("toml, said", [
    ('configs = ["C2"]\n[partition.C2]\nsource = "rows.jsonl"\n',
     "{file}: partition: unknown key (did you mean partitions?)"),
    ('configs = ["C3"]\n[partitions.C2]\nsource = "rows.jsonl"\n',
     "{file}: configs: 'C3' is neither a built-in config nor defined by a [partitions.C3] table; the configs are "
     "B1, B2, B3, B4, B5, B6, B7, B8, C2"),
])
def test_a_partition_file_typo_is_named_with_its_brackets(toml, said, tmp_path):
    """The line keeps `[partitions.C3]` as written (the console must not read it as markup and drop it)."""
    file = tmp_path / "partitions.toml"
    file.write_text(toml)
    (tmp_path / "rows.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    proc = run_cli("prepare", "--config", str(file), "--workdir", str(tmp_path / "w"), check=False)
    assert proc.returncode == 1, proc.stderr
    assert said.format(file=file) in " ".join(proc.stderr.split()), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("fmt", ["parquet", "arrow-stream", "arrow-file", "token-ids"])
def test_check_reports_a_huge_columnar_row_as_too_large_without_reading_it(fmt, tmp_path):
    """Parquet and Arrow rows get the JSONL cap: a row whose read columns hold more bytes than any row within
    max_seq_len needs is `row_too_large` (never turned into Python objects nor tokenized); the rows around it in
    the same batch are checked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kimi_eagle_data.sources.filters import max_row_bytes

    cap = max_row_bytes(64)
    if fmt == "token-ids":
        ids = [[1, 2, 3], list(range(cap)), [4, 5, 6]]      # int64: 8 bytes an id, far past the cap
        table = pa.table({"input_ids": ids, "prompt_len": [1, 1, 1]})
        huge = 8 * cap + 8
    else:
        completions = ["</think>hello<|im_end|>", "x" * (3 * cap), "</think>bye<|im_end|>"]
        messages = [[{"role": "user", "content": "hi"}]] * 3
        table = pa.table({"messages": messages, "completion": completions})
        huge = 3 * cap + len("user") + len("hi")
    path = tmp_path / f"rows.{fmt}"
    if fmt in ("parquet", "token-ids"):
        pq.write_table(table, path)
    else:
        new = pa.ipc.new_stream if fmt == "arrow-stream" else pa.ipc.new_file
        with pa.OSFile(str(path), "wb") as sink, new(sink, table.schema) as writer:
            writer.write_table(table)
    proc = run_cli("check", str(path), "--profile", "tiny-kimi", "--max-seq-len", "64", "--json", "--no-progress",
                   check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    verdicts = {v["row"]: v for v in map(json.loads, proc.stdout.splitlines())}
    assert sorted(verdicts) == [1, 2, 3]
    assert verdicts[2]["issues"] == ["row_too_large"]
    assert verdicts[2]["details"][0].startswith(f"row of {huge:,} bytes > {cap:,} in the columns check reads"), \
        verdicts[2]["details"]
    assert "row_too_large" not in verdicts[1]["issues"] + verdicts[3]["issues"]
    assert "unreadable_row" not in verdicts[1]["issues"] + verdicts[3]["issues"]
