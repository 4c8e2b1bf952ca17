"""End to end: `kimi-data demo` on CPU, the emitted dataset read back by `datasets` in a fresh process,
idempotent reruns, resume, and the one-line errors."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap

import orjson
import pytest
import pyarrow.parquet as pq

from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.store.workdir import file_sha256

from tests.helpers.cli import copy_run, run_cli, tree_hashes


def test_demo_dataset_loads_in_a_fresh_process(demo_run):
    workdir, _ = demo_run
    script = textwrap.dedent(f"""
        import json
        from datasets import load_dataset, get_dataset_config_names
        path = {str(workdir / "dataset")!r}
        names = get_dataset_config_names(path)
        ds = load_dataset(path, "B4")
        train = ds["train"]
        rows = [dict(r) for r in train]
        print(json.dumps({{"names": names, "splits": list(ds), "columns": train.column_names,
                          "features": {{k: str(v) for k, v in train.features.items()}}, "rows": rows}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["names"] == sorted(PARTITIONS)
    assert got["columns"] == ["id", "source", "source_id", "input_ids", "loss_mask", "prompt_len",
                              "completion_len", "reasoning_len", "num_tool_calls", "finish_reason", "mode",
                              "temperature", "top_p", "conversation_id", "turn", "end_reason", "messages", "tools",
                              "issues"]
    assert "int32" in got["features"]["input_ids"] and "int8" in got["features"]["loss_mask"]
    from transformers import AutoTokenizer

    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    tok = AutoTokenizer.from_pretrained(TINY_MODEL_DIR, trust_remote_code=True)
    think, im_end = tok.convert_tokens_to_ids("<think>"), tok.convert_tokens_to_ids("<|im_end|>")
    think_close = tok.convert_tokens_to_ids("</think>")
    assert got["rows"], "B4 has no train rows"
    assert {r["mode"] for r in got["rows"]} == {"thinking", "instant"}      # the demo config's instant share
    for row in got["rows"]:
        n = row["prompt_len"]
        assert len(row["input_ids"]) == len(row["loss_mask"]) == n + row["completion_len"]
        assert row["loss_mask"][:n] == [0] * n and row["loss_mask"][n:] == [1] * row["completion_len"]
        # thinking: the prompt ends <think>; instant: <think></think> and no </think> in the completion
        if row["mode"] == "thinking":
            assert row["input_ids"][n - 1] == think and (row["temperature"], row["top_p"]) == (1.0, 0.95)
        else:
            assert row["input_ids"][n - 2:n] == [think, think_close] and think_close not in row["input_ids"][n:]
            assert (row["temperature"], row["top_p"], row["reasoning_len"]) == (0.6, 0.95, 0)
        assert row["input_ids"][-1] == im_end and row["finish_reason"] == "stop"
        assert row["issues"] == []
        assert row["messages"][-1]["role"] == "assistant"


def test_every_config_has_valid_samples_and_b1_has_tool_calls(demo_run):
    workdir, proc = demo_run
    for config in PARTITIONS:
        files = sorted((workdir / "dataset" / "data" / config).glob("train-*.parquet"))
        assert files, f"{config} has no train shard"
        t = pq.read_table(files[0])
        assert t.num_rows > 0, f"{config} has no valid sample"
    b1 = pq.read_table(next((workdir / "dataset" / "data" / "B1").glob("train-*.parquet"))).to_pylist()
    with_calls = [r for r in b1 if r["num_tool_calls"] > 0]
    assert with_calls, "no B1 sample has a tool call"
    for r in with_calls:
        calls = r["messages"][-1]["tool_calls"]
        assert len(calls) == r["num_tool_calls"]
        declared = {t["function"]["name"] for t in json.loads(r["tools"])}
        # Kimi numbers calls across the conversation: a later turn's first call follows its history's calls
        before = sum(len(m.get("tool_calls") or ()) for m in r["messages"][:-1] if m["role"] == "assistant")
        for i, call in enumerate(calls):
            assert call["function"]["name"] in declared
            assert call["id"] == f"functions.{call['function']['name']}:{before + i}"
            assert isinstance(json.loads(call["function"]["arguments"]), dict)


def test_demo_continues_conversations_on_the_models_own_turns(demo_run):
    """The demo's B1, B6 and B7 (policy own_history, kimi_eagle_data/sources/samples/demo.toml): B6 and B7 have
    conversations of 2 turns or more, and in B1 a tool result of the source follows the model's own call (the call
    the source made) and the model answers it in a later turn."""
    workdir, _ = demo_run

    def train(config):
        return pq.read_table(next((workdir / "dataset" / "data" / config).glob("train-*.parquet"))).to_pylist()

    for config in ("B6", "B7"):
        assert any(r["turn"] >= 2 for r in train(config)), f"no {config} conversation got a second turn"
    answered = 0
    for r in train("B1"):
        msgs = r["messages"]
        if r["turn"] < 2 or msgs[-1]["role"] != "assistant":
            continue
        for k, m in enumerate(msgs[1:-1], start=1):
            call_ids = [c["id"] for c in msgs[k - 1].get("tool_calls") or ()]
            if m["role"] == "tool" and m["tool_call_id"] in call_ids:
                answered += 1
                break
    assert answered >= 1, "no B1 turn answers a tool result that followed the model's own call"


def test_rejected_rows_carry_reasons_and_accounting_balances(demo_run):
    workdir, proc = demo_run
    rejected_files = list((workdir / "dataset" / "data").glob("*/rejected-*.parquet"))
    total_rejected = 0
    for config in PARTITIONS:
        rep = orjson.loads((workdir / "validated" / f"{config}.json").read_bytes())
        assert rep["balanced"], rep
        # a conversation's later turns are samples of its own beyond the selected prompt (docs/data-format.md)
        assert rep["selected"] + rep["later_turns"] == (rep["rejected_at_prepare"] + rep["valid"] + rep["rejected"]
                                                        + rep["failed"] + rep["pending"])
        total_rejected += rep["rejected"]
    assert len(rejected_files) == sum(1 for c in PARTITIONS if orjson.loads(
        (workdir / "validated" / f"{c}.json").read_bytes())["rejected"])
    for f in rejected_files:
        for row in pq.read_table(f).to_pylist():
            assert row["issues"], f"rejected row {row['id']} has no reason"
    # Prepare-time rejections are kept with a reason too (the bundled B8 has an over-long prompt).
    b8 = [orjson.loads(line) for line in (workdir / "prepared" / "B8.rejects.jsonl").read_bytes().splitlines()]
    assert any(r["reason"] == "prompt_too_long" for r in b8)
    assert "accounting" in proc.stdout and "load_dataset" in proc.stdout


def test_card_and_manifest(demo_run):
    workdir, _ = demo_run
    ds = workdir / "dataset"
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(ds / "README.md")
    names = [c["config_name"] for c in card.data.configs]
    assert names == list(PARTITIONS)
    assert "meaningless" in card.text  # the demo card says what the tiny model is
    assert (ds / "assets" / "completion_lengths.png").stat().st_size > 1000
    manifest = orjson.loads((ds / "manifest.json").read_bytes())
    assert manifest["version"] == "0.1.0"
    for rel, sha in manifest["files"].items():
        assert file_sha256(ds / rel) == sha, rel
    assert manifest["provenance"]["chat_template_sha256"]


def test_rerun_does_no_work_and_is_byte_identical(demo_run):
    workdir, _ = demo_run
    before = tree_hashes(workdir / "dataset")
    prepared_mtime = (workdir / "prepared" / "B4.parquet").stat().st_mtime_ns
    ckpt_rows = sqlite3.connect(workdir / "generations.sqlite").execute("SELECT COUNT(*) FROM completions").fetchone()
    proc = run_cli("demo", "--workdir", str(workdir), "--no-progress")
    assert "generate: 0 completed" in proc.stdout
    assert tree_hashes(workdir / "dataset") == before
    # prepare was reused, not redone: a resumed run never re-reads (re-streams) its sources
    assert (workdir / "prepared" / "B4.parquet").stat().st_mtime_ns == prepared_mtime
    again = sqlite3.connect(workdir / "generations.sqlite").execute("SELECT COUNT(*) FROM completions").fetchone()
    assert again == ckpt_rows


def test_build_resumes_from_checkpoint(tmp_path):
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    common = ["B4", "--workdir", str(tmp_path / "w"), "--profile", "tiny-kimi", "--model", str(TINY_MODEL_DIR),
              "--samples", "--no-progress"]
    first = run_cli("build", *common, "--limit", "3")
    assert "generate: 3 completed" in first.stdout
    second = run_cli("build", *common, "--limit", "6")
    assert "generate: 3 completed, 0 failed, 3 already done" in second.stdout
    ids = [r[0] for r in sqlite3.connect(tmp_path / "w" / "generations.sqlite").execute("SELECT id FROM completions")]
    assert len(ids) == len(set(ids)) == 6
    # A later stage command inherits the workdir's settings.
    third = run_cli("validate", "--workdir", str(tmp_path / "w"))
    assert "B4" in third.stdout and "✓" in third.stdout


def test_changed_settings_are_refused_with_one_line(tmp_path):
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    common = ["B6", "--workdir", str(tmp_path / "w"), "--profile", "tiny-kimi", "--model", str(TINY_MODEL_DIR),
              "--samples", "--limit", "2"]
    run_cli("prepare", *common)
    proc = run_cli("prepare", *common, "--temperature", "0.5", check=False)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "temperature" in lines[0], proc.stderr


def test_a_sampling_mix_is_bound_and_recorded_per_row(tmp_path):
    """A partition's instant share and sampling mix bind the workdir (run.json `sampling_plan`): a resume with
    another mix is refused as another temperature is; every row records the sampling it was generated with."""
    import json

    import pyarrow.parquet as pq
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    def config(mix: str) -> str:
        path = tmp_path / f"mix-{abs(hash(mix))}.toml"
        path.write_text(f"[partitions.B6]\ninstant_share = 0.5\n[partitions.B6.sampling]\nmix = {mix}\n")
        return str(path)

    first = config("[{ share = 0.5, temperature = 0.5 }, { share = 0.5, temperature = 1.0 }]")
    common = ["B6", "--workdir", str(tmp_path / "w"), "--profile", "tiny-kimi", "--model", str(TINY_MODEL_DIR),
              "--samples", "--no-progress", "--limit", "8"]
    run_cli("build", *common, "--config", first)
    run = json.loads((tmp_path / "w" / "run.json").read_text())
    assert run["sampling_plan"]["B6"]["mix"] == [{"share": 0.5, "temperature": 0.5}, {"share": 0.5, "temperature": 1.0}]
    rows = pq.read_table(tmp_path / "w" / "validated" / "B6.parquet").to_pylist()
    assert {(r["mode"], r["temperature"], r["top_p"]) for r in rows} <= {
        (m, t, 0.95) for m in ("thinking", "instant") for t in (0.5, 1.0)}
    assert {r["temperature"] for r in rows} == {0.5, 1.0} and {r["mode"] for r in rows} == {"thinking", "instant"}
    prepared = pq.read_table(tmp_path / "w" / "prepared" / "B6.parquet").to_pylist()
    assert {r["id"]: r["temperature"] for r in prepared if r["id"] in {x["id"] for x in rows}} == \
        {r["id"]: r["temperature"] for r in rows}
    # the same command resumes; another mix is refused in one line naming it
    run_cli("build", *common, "--config", first)
    proc = run_cli("build", *common, "--config", config("[{ share = 1.0, temperature = 0.5 }]"), check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "sampling_plan" in lines[0], proc.stderr


def test_corrupt_checkpoint_is_reported(demo_run, tmp_path):
    w = copy_run(demo_run[0], tmp_path / "w")
    db = sqlite3.connect(w / "generations.sqlite")
    db.execute("UPDATE completions SET output_ids = CAST(output_ids || x'01000000' AS BLOB) WHERE rowid = 1")
    db.commit()
    db.close()
    for workers in ("1", "2"):   # checksums are verified where the batch is judged: here, or in a worker
        proc = run_cli("validate", "--workdir", str(w), "--workers", workers, check=False)
        assert proc.returncode == 1
        assert "checksum" in proc.stderr and "corrupt" in proc.stderr
        assert str(w / "generations.sqlite") in proc.stderr and "Traceback" not in proc.stderr


def test_usage_errors_exit_2(tmp_path):
    proc = run_cli("build", "B9", "--workdir", str(tmp_path), check=False)
    assert proc.returncode == 2
    proc = run_cli("build", "--workdir", str(tmp_path), "--source", "nonsense", check=False)
    assert proc.returncode == 2


def test_emit_refuses_non_semver(demo_run, tmp_path):
    from kimi_eagle_data.emit.writer import EmitError, check_version

    for bad_version in ("1", "v1.0.0", "1.0", "1.0.0.0", "1.0.0-"):
        with pytest.raises(EmitError, match="semver"):
            check_version(bad_version)
    check_version("1.2.3-rc.1")
    w = copy_run(demo_run[0], tmp_path / "w")
    proc = run_cli("emit", "--workdir", str(w), "--dataset-version", "v1.0.0", check=False)
    assert proc.returncode == 1 and "semver" in proc.stderr and not (w / "dataset").exists()


def test_emit_repo_is_remembered_by_later_builds(tmp_path):
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    w = tmp_path / "w"
    run_cli("build", "B6", "--workdir", str(w), "--profile", "tiny-kimi", "--model", str(TINY_MODEL_DIR),
            "--samples", "--no-progress", "--limit", "1")
    assert "my-org/kimi-eagle" not in (w / "dataset" / "README.md").read_text()
    run_cli("emit", "--workdir", str(w), "--repo", "my-org/kimi-eagle")
    run_cli("build", "--workdir", str(w), "--no-progress", "--limit", "1")   # --limit is not inherited
    card = (w / "dataset" / "README.md").read_text()
    assert 'load_dataset("my-org/kimi-eagle", "B6", revision="v0.1.0")' in card
