"""`kimi-data check`: the validator as a tool for any EAGLE-3 data, through the real CLI.

The verdicts are compared with the demo dataset's own columns (its `issues`), never with hard-coded
token ids or tool-declaration text: the tiny tokenizer and the validator's rules may change, the
agreement between `check` and `validate` must not.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
from kimi_eagle_data.formats.kimi_k2.render import declared_tool_names, render_prompt

from tests.helpers.cli import run_cli

P = K2_TOKENS
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def _split_table(dataset: Path, split: str) -> pa.Table:
    """Every config's `split` rows, in config order (one file: one CLI start instead of one per shard)."""
    files = sorted(dataset.glob(f"data/*/{split}-*.parquet"))
    assert files, f"the demo dataset has no {split} shards"
    return pa.concat_tables(pq.read_table(f) for f in files)


def _check_json(path: Path, *extra: str) -> tuple[int, list[dict]]:
    proc = run_cli("check", str(path), "--profile", "tiny-kimi", "--json", "--no-progress", *extra, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [v["row"] for v in lines] == list(range(1, len(lines) + 1))      # numbered from 1
    for v in lines:
        assert v["valid"] == (not v["issues"])
    return proc.returncode, lines


@pytest.fixture(scope="module")
def demo_splits(demo_run, tmp_path_factory):
    workdir, _ = demo_run
    out = tmp_path_factory.mktemp("check")
    tables = {}
    for split in ("train", "rejected"):
        tables[split] = _split_table(workdir / "dataset", split)
        pq.write_table(tables[split], out / f"{split}.parquet")
    return workdir, out, tables


def test_check_agrees_with_the_demo_dataset_row_by_row(demo_splits):
    _, out, tables = demo_splits
    rc, verdicts = _check_json(out / "train.parquet")
    assert rc == 0 and len(verdicts) == tables["train"].num_rows
    assert all(v["valid"] for v in verdicts)
    assert [v["id"] for v in verdicts] == tables["train"].column("id").to_pylist()
    # each row's mode, read from its prompt's end, is the one the dataset recorded; the demo has both
    assert [v["mode"] for v in verdicts] == tables["train"].column("mode").to_pylist()
    assert set(tables["train"].column("mode").to_pylist()) == {"thinking", "instant"}

    rejected = tables["rejected"]
    assert rejected.num_rows, "the demo dataset has no rejected row to compare"
    rc, verdicts = _check_json(out / "rejected.parquet")
    assert rc == 1
    assert [v["issues"] for v in verdicts] == rejected.column("issues").to_pylist()
    assert [v["mode"] for v in verdicts] == rejected.column("mode").to_pylist()


def test_a_specforge_export_gets_the_same_verdicts(demo_splits):
    """No tools and no finish_reason columns: the tools come from the prompt's declaration turn, the
    finish reason from the completion's last token; the verdicts stay the dataset's."""
    workdir, out, tables = demo_splits
    with_tools = sum(1 for t, n in zip(tables["train"].column("tools").to_pylist(),
                                       tables["train"].column("num_tool_calls").to_pylist()) if t and n)
    assert with_tools, "no train row calls a tool: the recovery of declared tools would go untested"
    for split in ("train", "rejected"):
        path = out / f"{split}.specforge.jsonl"
        run_cli("export", str(workdir / "dataset"), "--format", "specforge", "--split", split, "--out", str(path))
        assert set(json.loads(path.open().readline())) == {"id", "input_ids", "loss_mask"}
        rc, verdicts = _check_json(path)
        expected = dict(zip(tables[split].column("id").to_pylist(), tables[split].column("issues").to_pylist()))
        assert {v["id"]: v["issues"] for v in verdicts} == expected
        assert rc == (0 if split == "train" else 1)


def test_summary_table_counts_reasons(demo_splits):
    _, out, tables = demo_splits
    proc = run_cli("check", str(out / "rejected.parquet"), "--profile", "tiny-kimi", "--no-progress", check=False)
    assert proc.returncode == 1
    n = tables["rejected"].num_rows
    assert f"{n} rows checked" in proc.stdout and f"0 valid, {n} invalid" in proc.stdout
    counts: dict[str, int] = {}
    for issues in tables["rejected"].column("issues").to_pylist():
        for code in issues:
            counts[code] = counts.get(code, 0) + 1
    table_rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
                  for line in proc.stdout.splitlines() if line.startswith("│") and line.split("│")[1].strip()}
    assert {k: int(v) for k, v in table_rows.items() if k in counts} == counts


def _completion(name: str, index: int, args: str = '{"city": "Oslo"}', answer: str = "") -> str:
    call = f"{P.tool_call_begin}{P.tool_call_id(name, index)}{P.tool_call_argument_begin}{args}{P.tool_call_end}"
    return (f"Let me look.{P.think_close}{answer}{P.tool_calls_section_begin}{call}{P.tool_calls_section_end}"
            f"{P.end_of_turn}")


def test_messages_and_completion_text_rows_and_malformed_rows(tmp_path, demo_splits):
    user = [{"role": "user", "content": "Weather in Oslo?"}]
    history = user + [
        {"role": "assistant", "content": "", "reasoning_content": "Call it.", "tool_calls": [
            {"id": P.tool_call_id("get_weather", 0), "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": P.tool_call_id("get_weather", 0), "content": "4 C"},
        {"role": "user", "content": "And in Bergen?"}]
    train = demo_splits[2]["train"].slice(0, 1).to_pylist()[0]
    rows = [
        {"messages": user, "completion": f"Easy.{P.think_close}It is cold.{P.end_of_turn}"},          # 0 valid
        {"messages": user, "tools": TOOLS, "completion": _completion("get_weather", 0)},              # 1 valid
        {"messages": history, "tools": json.dumps(TOOLS), "completion": _completion("get_weather", 1)},  # 2 valid
        {"messages": history, "tools": TOOLS, "completion": _completion("get_weather", 0)},           # 3 restarts
        {"messages": user, "tools": TOOLS, "completion": _completion("nope", 0)},                     # 4 undeclared
        {"messages": user, "completion": _completion("get_weather", 0)},                              # 5 no tools
        {"messages": user, "completion": f"Easy.{P.think_close}It is"},                                # 6 cut short
        {"id": "r7", "input_ids": train["input_ids"], "prompt_len": train["prompt_len"],
         "finish_reason": "stop"},                                                                     # 7 valid
        {"id": "r8", "text": "no known form"},                                                         # 8
        {"input_ids": "not ids", "loss_mask": [0]},                                                    # 9
        {"input_ids": train["input_ids"], "loss_mask": train["loss_mask"][:-1]},                       # 10
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows[:9]) + "\n{not json\n\n"
                    + "\n".join(json.dumps(r) for r in rows[9:]) + "\n")
    proc = run_cli("check", str(path), "--profile", "tiny-kimi", "--json", "--no-progress", check=False)
    assert proc.returncode == 1
    verdicts = [json.loads(line) for line in proc.stdout.splitlines()]
    issues = [v["issues"] for v in verdicts]
    assert len(issues) == 12              # the blank line is not a row; the broken JSON line is
    assert issues[0] == issues[1] == issues[2] == issues[7] == []
    assert issues[3] == ["tool_call_index_out_of_order"]
    assert issues[4] == ["undeclared_tool"]
    assert issues[5] == ["tool_call_without_tools"]
    assert issues[6] == ["truncated"]                       # no finish_reason, no end of turn
    assert verdicts[7]["id"] == "r7" and verdicts[8]["id"] == "r8"
    assert issues[8] == issues[9] == issues[10] == ["unreadable_row"]
    assert issues[11][0] == "loss_mask_length_mismatch"
    # one error line per unreadable row on stderr, the run continues
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    # numbered from 1 by line, as editors and `sed -n Np` count (the blank line 11 is no row but has its number)
    assert [e.split(" row ")[1].split(":")[0].split(" ")[0] for e in errors] == ["9", "10", "12"]
    assert [v["row"] for v in verdicts] == [*range(1, 11), 12, 13]
    assert all("mixed.jsonl" in e for e in errors)


def test_exit_codes_and_usage(tmp_path):
    proc = run_cli("check", str(tmp_path / "missing.parquet"), "--profile", "tiny-kimi", check=False)
    assert proc.returncode == 2
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    proc = run_cli("check", str(bad), "--profile", "tiny-kimi", check=False)
    assert proc.returncode == 1
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [proc.stderr.strip()]   # one line
    assert proc.stderr.startswith("error:") and "bad.parquet" in proc.stderr


def test_declared_tool_names_reads_back_what_render_prompt_declares(tiny_tokenizer):
    tools = TOOLS + [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object",
                                                                                      "properties": {}}}}]
    text = tiny_tokenizer.decode(render_prompt(tiny_tokenizer, [{"role": "user", "content": "hi"}], tools),
                                 skip_special_tokens=False)
    turns = [t + P.end_of_turn for t in text.split(P.end_of_turn) if t.startswith(P.turn_tokens["system"])]
    names = [declared_tool_names(t) for t in turns]
    assert frozenset({"get_weather", "ping"}) in names
    user_turn = text[text.index(P.turn_tokens["user"]):]
    assert declared_tool_names(user_turn) is None
    # the template's fallback without `tools_ts_str`: the tools as compact JSON
    head = P.turn_tokens["system"] + P.tool_declare_role + P.turn_header_end
    assert declared_tool_names(head + json.dumps(tools) + P.end_of_turn) == {"get_weather", "ping"}


def test_instant_mode_rows(tmp_path):
    """Rows in instant mode (the template's thinking=False): a direct answer is valid; a `</think>` or a
    `<think>` in the completion is a reason of its own. Form (b) rows name their mode; form (a) rows carry it in
    their prompt's end."""
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer

    tok = open_tokenizer(str(TINY_MODEL_DIR))
    user = [{"role": "user", "content": "Weather in Oslo?"}]
    instant_prompt = render_prompt(tok, user, TOOLS, "instant")
    call = f"{P.tool_call_begin}{P.tool_call_id('get_weather', 0)}{P.tool_call_argument_begin}" + \
           f'{{"city": "Oslo"}}{P.tool_call_end}'
    rows = [
        {"mode": "instant", "messages": user, "completion": f"It is cold.{P.end_of_turn}"},             # 1 valid
        {"mode": "instant", "messages": user, "tools": TOOLS,
         "completion": f"{P.tool_calls_section_begin}{call}{P.tool_calls_section_end}{P.end_of_turn}"},  # 2 valid
        {"mode": "instant", "messages": user, "completion": f"Hm.{P.think_close}It is cold.{P.end_of_turn}"},
        {"mode": "instant", "messages": user, "completion": f"{P.think_open}It is cold.{P.end_of_turn}"},
        {"messages": user, "completion": f"It is cold.{P.end_of_turn}"},           # thinking: no </think>
        {"id": "a", "input_ids": instant_prompt + tok.encode(f"Cold.{P.end_of_turn}", add_special_tokens=False),
         "prompt_len": len(instant_prompt)},                                         # form (a), instant, valid
        {"mode": "quick", "messages": user, "completion": "x"},
    ]
    path = tmp_path / "instant.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc, verdicts = _check_json(path)
    assert rc == 1
    assert [v["issues"] for v in verdicts] == [[], [], ["instant_has_think_end"], ["instant_has_think_start"],
                                               ["missing_think_close"], [], ["unreadable_row"]]
    assert [v.get("mode") for v in verdicts] == ["instant"] * 4 + ["thinking", "instant", None]
    proc = run_cli("check", str(path), "--profile", "tiny-kimi", "--no-progress", check=False)
    assert "by mode: instant 5 rows, 3 valid; thinking 1 row, 0 valid" in proc.stdout


def test_render_mode_switch_is_the_templates_own(tmp_path, tiny_tokenizer):
    """`render --mode instant` prints what the chat template renders with thinking=False."""
    row = {"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": TOOLS}
    path = tmp_path / "row.json"
    path.write_text(json.dumps(row))
    for mode, kwargs in (("instant", {"thinking": False}), ("thinking", {})):
        proc = run_cli("render", str(path), "--profile", "tiny-kimi", "--ids", "--mode", mode)
        ids = json.loads(proc.stdout)
        want = list(tiny_tokenizer.apply_chat_template(row["messages"], tools=TOOLS, add_generation_prompt=True,
                                                        tokenize=True, return_dict=False, **kwargs))
        assert ids == want and f"{mode} mode" in proc.stderr
    text = run_cli("render", str(path), "--profile", "tiny-kimi", "--mode", "instant").stdout
    assert text.rstrip("\n").endswith(P.instant_generation_prompt)


# -- a dataset kimi-data emitted ---------------------------------------------------------------------------

def _shard_issues(dataset: Path) -> dict[tuple[str, int], tuple[str, list[str]]]:
    """{(shard relative to the dataset, row from 1): (id, recorded issues)} of every shard the manifest lists."""
    manifest = json.loads((dataset / "manifest.json").read_text())
    out = {}
    for config, entry in manifest["configs"].items():
        for info in entry["splits"].values():
            for name in info["files"]:
                rel = f"data/{config}/{name}"
                table = pq.read_table(dataset / rel, columns=["id", "issues"])
                for k, (i, issues) in enumerate(zip(table.column("id").to_pylist(),
                                                    table.column("issues").to_pylist()), 1):
                    out[rel, k] = (i, issues)
    return out


def test_the_emitted_dataset_folder_checks_against_its_recorded_issues(demo_run):
    """`check DIR/dataset` (no --profile: the manifest's) judges every row of every shard with the settings the
    manifest records; each verdict is the row's own `issues`, rejected rows included; the workdir works too."""
    workdir, _ = demo_run
    dataset = workdir / "dataset"
    proc = run_cli("check", str(dataset), "--json", "--no-progress", check=False)
    assert proc.returncode == 0, proc.stderr
    verdicts = [json.loads(line) for line in proc.stdout.splitlines()]
    recorded = _shard_issues(dataset)
    assert {(v["file"], v["row"]): (v["id"], v["issues"]) for v in verdicts} == recorded
    assert len(verdicts) == len(recorded)
    assert all(v["passed"] and v["recorded"] == v["issues"] for v in verdicts)
    assert any(v["issues"] for v in verdicts) and any(not v["issues"] for v in verdicts)   # both splits
    n, invalid = len(verdicts), sum(1 for v in verdicts if v["issues"])
    assert f"{n} rows checked" in proc.stderr and f"{n - invalid} valid, {invalid} invalid; {n} with the verdict " \
        "they record, 0 with another" in proc.stderr

    summary = run_cli("check", str(workdir), "--no-progress").stdout      # the workdir names its dataset
    assert f"{n} rows checked" in summary and f"{n} with the verdict they record" in summary


def test_a_row_whose_recorded_issues_are_not_its_verdict_fails(demo_run, tmp_path):
    workdir, _ = demo_run
    dataset = tmp_path / "dataset"
    shutil.copytree(workdir / "dataset", dataset)
    shard = sorted(dataset.glob("data/*/train-*.parquet"))[0]
    table = pq.read_table(shard)
    issues = table.column("issues").to_pylist()
    issues[0] = ["truncated"]                    # a train row that claims a reason it does not have
    pq.write_table(table.set_column(table.schema.get_field_index("issues"), "issues",
                                    pa.array(issues, type=table.schema.field("issues").type)), shard)
    proc = run_cli("check", str(dataset), "--no-progress", check=False)
    assert proc.returncode == 1, proc.stderr
    row_id = table.column("id")[0].as_py()
    failing = [line for line in proc.stdout.splitlines() if " row " in line]
    assert failing == [f"{shard} row 1 ({row_id}): records [truncated], check finds []"]
    assert "with the verdict they record, 1 with another  ✗" in proc.stdout


def test_an_option_other_than_the_manifests_is_a_usage_error(demo_run):
    dataset = demo_run[0] / "dataset"
    for option in (["--max-seq-len", "100"], ["--profile", "kimi-k2.5"], ["--keep-truncated"]):
        proc = run_cli("check", str(dataset), *option, "--no-progress", check=False)
        assert proc.returncode == 2 and option[0] in proc.stderr and "drop the option" in proc.stderr, proc.stderr
    # the manifest's own value is no conflict
    manifest = json.loads((dataset / "manifest.json").read_text())
    proc = run_cli("check", str(dataset), "--profile", "tiny-kimi", "--max-seq-len",
                   str(manifest["provenance"]["max_seq_len"]), "--no-progress", check=False)
    assert proc.returncode == 0, proc.stderr


def test_a_dataset_made_with_another_tokenizer_is_one_error_line(demo_run, tmp_path):
    dataset = tmp_path / "dataset"
    shutil.copytree(demo_run[0] / "dataset", dataset)
    manifest = json.loads((dataset / "manifest.json").read_text())
    manifest["provenance"]["tokenizer_sha256"] = "0" * 64
    (dataset / "manifest.json").write_text(json.dumps(manifest))
    proc = run_cli("check", str(dataset), "--no-progress", check=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and proc.stdout == "", proc.stderr
    assert lines[0].startswith(f"error: {dataset} was made with another tokenizer") and "--tokenizer" in lines[0]
