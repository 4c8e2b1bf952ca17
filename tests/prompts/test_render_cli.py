"""`kimi-data render`: the exact prompt `prepare` rendered, through the real CLI."""

from __future__ import annotations

import json

import orjson
import pyarrow.parquet as pq
import pytest

from tests.helpers.cli import run_cli


@pytest.fixture(scope="module")
def prepared_rows(demo_run):
    """Demo prompts as prepare stored them: messages, tools (JSON strings), prompt_ids and the mode each was
    rendered in."""
    workdir, _ = demo_run
    rows = pq.read_table(workdir / "prepared" / "B1.parquet").to_pylist()
    with_tools = [r for r in rows if r["tools"]]
    assert with_tools, "no B1 demo prompt declares tools"
    return with_tools[:2] + [r for r in rows if not r["tools"]][:1]


def test_render_prints_prepares_prompt_as_text_and_ids(prepared_rows, tmp_path, tiny_tokenizer):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"messages": json.loads(r["messages"]), "tools": json.loads(r["tools"])
                                        if r["tools"] else []}) + "\n" for r in prepared_rows))
    for k in (0, 2):                    # --row counts from 1, as editors and `sed -n 1p` do
        ids = prepared_rows[k]["prompt_ids"]
        mode = ("--mode", prepared_rows[k]["mode"])
        text = run_cli("render", str(path), "--row", str(k + 1), "--profile", "tiny-kimi", *mode).stdout
        assert text == tiny_tokenizer.decode(ids, skip_special_tokens=False) + "\n"
        got = run_cli("render", str(path), "--row", str(k + 1), "--profile", "tiny-kimi", "--ids", *mode).stdout
        assert orjson.loads(got) == ids
    assert run_cli("render", str(path), "--row", "0", "--profile", "tiny-kimi", check=False).returncode == 2


def test_render_reads_stdin_and_tools_as_a_json_string(prepared_rows, tiny_tokenizer):
    import subprocess
    import sys

    r = prepared_rows[1]
    row = json.dumps({"messages": json.loads(r["messages"]), "tools": r["tools"]})
    proc = subprocess.run([sys.executable, "-m", "kimi_eagle_data", "render", "-", "--profile", "tiny-kimi", "--ids",
                           "--mode", r["mode"]],
                          input=row, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout) == r["prompt_ids"]


@pytest.mark.parametrize("content, extra, expect", [
    ('{"messages": [', (), "is not valid JSON"),
    ('{"tools": []}', (), 'has no "messages" list'),
    ('{"messages": []}\n{"messages": []}\n', (), "--row N"),
    ('{"messages": []}\n', ("--row", "3"), "out of range"),
    ('{"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]}', (),
     "unknown_role"),
])
def test_render_errors_are_one_line(tmp_path, content, extra, expect):
    path = tmp_path / "row.json"
    path.write_text(content)
    proc = run_cli("render", str(path), "--profile", "tiny-kimi", *extra, check=False)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and expect in lines[0], proc.stderr


def test_render_and_prepare_share_one_role_rule(tmp_path):
    """A role the data path does not know (`developer`) is `unknown_role` for prepare's adapters and an error
    for render: render never shows a prompt prepare would not make."""
    from kimi_eagle_data.records import SourceRowError
    from kimi_eagle_data.sources.adapters import ADAPTERS

    row = {"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]}
    for adapter in ("messages", "chat"):
        with pytest.raises(SourceRowError) as info:
            fn = ADAPTERS[adapter]
            fn(row, None) if adapter == "chat" else fn(row)
        assert info.value.code == "unknown_role", adapter
    path = tmp_path / "row.json"
    path.write_text(json.dumps(row))
    proc = run_cli("render", str(path), "--profile", "tiny-kimi", check=False)
    assert proc.returncode == 1 and "unknown_role" in proc.stderr and "'developer'" in proc.stderr
