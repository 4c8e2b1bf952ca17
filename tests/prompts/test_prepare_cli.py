"""`kimi-data prepare` end to end: a user-defined partition from a config file, the dry run,
determinism across processes, and a whole unreadable source file."""

from __future__ import annotations

import json
import os
import subprocess

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

from tests.helpers.cli import run_cli

TINY = ["--profile", "tiny-kimi", "--model", str(TINY_MODEL_DIR), "--max-new-tokens", "64", "--max-seq-len", "512"]
GSM = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
       "How many clips did Natalia sell altogether in April and May?")


def kimi(*args, hashseed: str = "0", check: bool = True) -> subprocess.CompletedProcess:
    return run_cli(*args, check=check, timeout=600, env={"COLUMNS": "250", "PYTHONHASHSEED": hashseed})


def make_project(root):
    """Two user-defined partitions (a messages JSONL, a ShareGPT Parquet), an eval set, a config."""
    chats = []
    for i in range(40):
        chats.append({"conv_id": f"c{i:02d}", "messages": [
            {"role": "user", "content": f"Give me {i + 2} ideas for a weekend trip near lake number {i}."},
            {"role": "assistant", "content": "Here are some ideas."},
            {"role": "user", "content": f"Which of those {i + 2} is cheapest?"}]})
    chats[5]["messages"][0]["content"] = "Solve: " + GSM                        # contaminated
    chats[6]["messages"][0]["content"] = chats[7]["messages"][0]["content"].upper()   # duplicate first turns
    chats[6]["messages"][2]["content"] = chats[7]["messages"][2]["content"]
    chats[8]["messages"] = []                                                   # no user turn
    lines = [json.dumps(c) for c in chats] + ["{not json"]
    (root / "chats.jsonl").write_text("\n".join(lines) + "\n")
    pq.write_table(pa.table({
        "id": [f"s{i}" for i in range(12)],
        "conversations": [[{"from": "human", "value": f"Translate sentence {i} into French, please."},
                           {"from": "gpt", "value": "Voilà."}] for i in range(11)]
                         + [[{"from": "gpt", "value": "cut mid-conversation"}]],
    }), root / "sharegpt.parquet")
    (root / "evals").mkdir()
    (root / "evals" / "gsm8k.jsonl").write_text(json.dumps({"question": GSM}) + "\n")
    (root / "cfg.toml").write_text("""
configs = ["C1", "C2"]
seed = 11
[decontam]
[[decontam.sets]]
name = "gsm8k"
path = "evals/gsm8k.jsonl"
[partitions.C1]
source = "chats.jsonl"
upstream = "me/trips"
policy = "every_user_prefix"
id_field = "conv_id"
n = 100
[partitions.C2]
source = "sharegpt.parquet"
n = 8
""")
    return root / "cfg.toml"


def prepared_ids(workdir, config):
    return pq.read_table(workdir / "prepared" / f"{config}.parquet", columns=["id"]).column("id").to_pylist()


def test_user_defined_partitions_end_to_end(tmp_path):
    cfg = make_project(tmp_path)
    dry = kimi("prepare", "--config", str(cfg), "--workdir", str(tmp_path / "dry"), *TINY, "--dry-run")
    assert not (tmp_path / "dry").exists(), "a dry run writes nothing"
    for col in ("scanned", "selected", "adapted", "tools", "decontam", "length", "dedup", "prepared"):
        assert col in dry.stdout, dry.stdout
    assert "C1" in dry.stdout and "C2" in dry.stdout and "contaminated 2" in dry.stdout

    a, b = tmp_path / "a", tmp_path / "b"
    kimi("prepare", "--config", str(cfg), "--workdir", str(a), *TINY, hashseed="1")
    kimi("prepare", "--config", str(cfg), "--workdir", str(b), *TINY, hashseed="2")
    for config in ("C1", "C2"):
        assert prepared_ids(a, config) == prepared_ids(b, config)             # same ids, same order
        assert (a / "prepared" / f"{config}.rejects.jsonl").read_bytes() == \
               (b / "prepared" / f"{config}.rejects.jsonl").read_bytes()

    rep = orjson.loads((a / "prepared" / "C1.json").read_bytes())
    rejects = [orjson.loads(x) for x in (a / "prepared" / "C1.rejects.jsonl").read_bytes().splitlines()]
    assert rep["selected"] == rep["prepared"] + rep["rejected_total"]
    assert rep["rejected_total"] == len(rejects) == sum(rep["rejected"].values())
    # 40 rows + 1 broken line; 39 readable rows give 2 prefixes each; both prefixes of the row
    # quoting GSM8K are contaminated (the second has it in its history); one row duplicates another
    assert (rep["scanned"], rep["selected"], rep["prepared"], rep["n"]) == (41, 80, 74, 100)
    assert rep["rejected"] == {"contaminated": 2, "duplicate_prompt": 2, "malformed_json": 1, "no_user_turn": 1}
    assert rep["policy"] == "every_user_prefix" and rep["seed"] == 11 and not rep["exhausted"]
    assert rep["contaminated_by"] == {"gsm8k": 2}
    reasons = {r["reason"] for r in rejects}
    assert {"contaminated", "duplicate_prompt"} <= reasons
    assert all(r["message"] and r["config"] == "C1" for r in rejects)
    t = pq.read_table(a / "prepared" / "C1.parquet").to_pylist()
    assert {r["source"] for r in t} == {"me/trips"}
    assert all(r["source_id"].split("#u")[0].startswith("c") for r in t)
    turns = {json.loads(r["messages"])[-1]["role"] for r in t}
    assert turns == {"user"} and {len(json.loads(r["messages"])) for r in t} == {1, 3}
    rep2 = orjson.loads((a / "prepared" / "C2.json").read_bytes())
    assert rep2["prepared"] == 8 and rep2["source"].endswith("sharegpt.parquet")

    # the workdir remembers the config file: a later stage command needs neither it nor the configs
    again = kimi("prepare", "--workdir", str(a), hashseed="3")
    assert "C1" in again.stdout and "C2" in again.stdout and prepared_ids(a, "C1") == prepared_ids(b, "C1")
    # build runs a user-defined partition through generate, validate and emit like a built-in one
    c = tmp_path / "c"
    built = kimi("build", "C2", "--config", str(cfg), "--workdir", str(c), *TINY, "--limit", "3", "--no-progress")
    assert "accounting" in built.stdout
    assert list((c / "dataset" / "data" / "C2").glob("*.parquet"))
    assert "config_name: C2" in (c / "dataset" / "README.md").read_text()
    # an unknown config is a usage error
    assert kimi("prepare", "C9", "--config", str(cfg), "--workdir", str(tmp_path / "c"), check=False).returncode == 2


def test_unreadable_source_is_one_line_and_other_configs_still_prepare(tmp_path):
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(os.urandom(3000))
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps({"prompt": "q", "prompt_id": f"p{i}", "messages": [
        {"role": "user", "content": f"How many legs do {i} spiders have?"}]}) for i in range(5)) + "\n")
    w = tmp_path / "w"
    proc = run_cli("prepare", "B4", "B6", "--workdir", str(w), "--source", f"B4={garbage}", "--source",
                   f"B6={good}", *TINY, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: B4:") and "not a readable Parquet file" in lines[0]
    assert len(prepared_ids(w, "B6")) == 5 and not (w / "prepared" / "B4.parquet").exists()
    bad_cfg = tmp_path / "bad.toml"
    bad_cfg.write_text("[partitions.B4]\nnn = 1\n")
    proc = run_cli("prepare", "--config", str(bad_cfg), "--workdir", str(tmp_path / "x"), *TINY, check=False)
    assert proc.returncode == 1 and "partitions.B4.nn: unknown key" in proc.stderr


def test_a_pilot_limit_is_not_inherited_and_stage_commands_still_read_the_pilot(tmp_path):
    """--limit belongs to the pilot: a later prepare without it reads the full source (and says so); a stage
    command that only reads the prepared prompts keeps working on them."""
    w = tmp_path / "w"
    rows = sum(1 for line in PARTITIONS["B6"].sample_file.read_text().splitlines() if line.strip())
    kimi("prepare", "B6", "--samples", "--workdir", str(w), *TINY, "--limit", "3")
    pilot = orjson.loads((w / "prepared" / "B6.json").read_bytes())
    assert (pilot["scanned"], pilot["limit"]) == (3, 3)
    again = kimi("prepare", "B6", "--samples", "--workdir", str(w), *TINY, "--limit", "3")
    assert "--limit" not in again.stderr          # the same pilot again: nothing to say
    full = kimi("prepare", "--workdir", str(w))
    report = orjson.loads((w / "prepared" / "B6.json").read_bytes())
    assert report["scanned"] == report["selected"] == rows and report["limit"] is None
    assert report["prepared"] == len(prepared_ids(w, "B6")) > pilot["prepared"]
    assert "read at most 3 source rows per config (--limit 3, a pilot); this one reads the full sources" \
        in " ".join(full.stderr.split())
    run_json = orjson.loads((w / "run.json").read_bytes())
    assert "limit" not in run_json["options"]



def write_chats(path, n=20):
    """Rows a user might hand over: `messages` + `tools` + `id` (the chat schema, not glaive's nor B4's)."""
    tool = {"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}
    path.write_text("".join(json.dumps({"id": f"c{i}", "messages": [
        {"role": "user", "content": f"What is the weather in city number {i}?"}], "tools": [tool]}) + "\n"
        for i in range(n)))
    return path


def test_columns_an_adapter_does_not_read_are_named_in_a_warning(tmp_path):
    chats = write_chats(tmp_path / "my-chats.jsonl")
    w = tmp_path / "w"
    proc = kimi("prepare", "B4", "B6", "--source", f"B4={chats}", "--samples", "--workdir", str(w), *TINY,
                "--limit", "4")
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1, proc.stderr             # B6 reads its bundled rows: nothing to say about them
    assert warnings[0].startswith(f"warning: B4: column(s) id, tools in {chats} are not read by B4's messages "
                                  "adapter (it reads: messages; optional prompt_id)"), warnings
    assert "chat adapter" in warnings[0]
    report = orjson.loads((w / "prepared" / "B4.json").read_bytes())
    assert report["ignored_columns"] == ["id", "tools"] and report["prepared"] == 4
    assert orjson.loads((w / "prepared" / "B6.json").read_bytes())["ignored_columns"] == []


def test_a_source_giving_no_prompt_is_an_error_naming_the_expected_columns(tmp_path):
    chats = write_chats(tmp_path / "my-chats.jsonl")
    w = tmp_path / "w"
    proc = kimi("build", "B1", "--source", f"B1={chats}", "--workdir", str(w), *TINY, "--no-progress", check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    rejects = w / "prepared" / "B1.rejects.jsonl"
    assert lines[0].startswith(f"error: B1: none of the 20 selected rows of {chats} became a prompt (missing_field 20)")
    assert "glaive adapter reads system, chat" in lines[0] and "the file has id, messages, tools" in lines[0]
    assert str(rejects) in lines[0] and len(rejects.read_text().splitlines()) == 20
    assert "run generate" not in proc.stdout + proc.stderr and not (w / "dataset").exists()
    assert not (w / "generations.sqlite").exists()
    # the other configs are still prepared, and the line says so
    w2 = tmp_path / "w2"
    proc = kimi("prepare", "B1", "B6", "--source", f"B1={chats}", "--samples", "--workdir", str(w2), *TINY,
                "--limit", "2", check=False)
    assert proc.returncode == 1 and proc.stderr.count("error:") == 1, proc.stderr
    assert " ".join(proc.stderr.split()).endswith("; B6 prepared")
    assert len(prepared_ids(w2, "B6")) == 2 and (w2 / "prepared" / "B1.rejects.jsonl").exists()


def test_a_second_conversation_under_one_id_is_rejected_where_every_drop_is_counted(tmp_path):
    """A user's JSONL giving one id to two conversations: the second is rejected `repeated_id` (it was dropped
    without a word, counted only in prepared/C1.json's repeated_rows): in prepare's table, rejects.jsonl, the
    accounting and the card's drop counts."""
    rows = [{"id": "a", "messages": [{"role": "user", "content": "What is two plus two?"}]},
            {"id": "b", "messages": [{"role": "user", "content": "Name a colour."}]},
            {"id": "a", "messages": [{"role": "user", "content": "Write a haiku about rain."}]},
            {"id": "b", "messages": [{"role": "user", "content": "Name a colour."}]}]     # the same row again
    (tmp_path / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "cfg.toml").write_text('[partitions.C1]\nsource = "chats.jsonl"\n')
    w = tmp_path / "w"
    proc = kimi("build", "C1", "--config", str(tmp_path / "cfg.toml"), "--workdir", str(w), *TINY[:4],
                "--max-new-tokens", "16", "--no-progress")
    prepare_row = next(line for line in proc.stdout.splitlines() if "C1" in line and "chats.jsonl" in line)
    # selected, prompts, rejected, reasons
    assert [c.strip() for c in prepare_row.split("│")[3:7]] == ["3", "2", "1", "repeated_id 1"], proc.stdout
    report = json.loads((w / "prepared" / "C1.json").read_text())
    assert report["rejected"] == {"repeated_id": 1} and report["repeated_rows"] == 1 and report["selected"] == 3
    (reject,) = [json.loads(x) for x in (w / "prepared" / "C1.rejects.jsonl").read_text().splitlines()]
    assert reject["source_id"] == "a" and reject["reason"] == "repeated_id" and "C1 row 3: " in reject["message"]
    validated = json.loads((w / "validated" / "C1.json").read_text())
    assert validated["prepare_reasons"] == {"repeated_id": 1} and validated["balanced"]
    card = " ".join((w / "dataset" / "README.md").read_text().split())
    assert "at prepare: `repeated_id` 1" in card
