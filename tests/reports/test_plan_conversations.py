"""`plan` projects conversations: a pilot, then the full run on the same workdir (the README's recipe, on the tiny
model with the bundled rows), and every figure the full run produced lies inside the interval the pilot projected,
for a single-turn config (B4) and an own_history one (B6, up to 3 turns: demo.toml). The full run's figures are
read here from its own files (validated/, the emitted Parquet's metadata), not from plan's code.

The same run checks the reuse line on conversations: the full build reuses the pilot's completions, later turns
included, and says nothing stays out; a plain rerun reuses every completion of the dataset."""

from __future__ import annotations

import json
import re
import shutil

import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.sources.partitions import DEMO_CONFIG

from tests.helpers.cli import run_cli

SINGLE, TALK = "B4", "B6"
PILOT_ROWS = 10
THROUGHPUT, GPUS = 50.0, 8
FIGURES = ("rows", "train_rows", "tokens", "prompt_tokens", "completion_tokens", "train_tokens", "disk_bytes",
           "gpu_hours")


def build(workdir, *extra):
    return run_cli("build", SINGLE, TALK, "--config", str(DEMO_CONFIG), "--workdir", str(workdir),
                   "--profile", "tiny-kimi", "--model", str(TINY_MODEL_DIR), "--samples", "--max-new-tokens", "64",
                   "--no-progress", *extra)


def actual(workdir, config) -> dict[str, float]:
    """What the run made of a config, from validated/<CFG>.parquet and the emitted shards' metadata."""
    t = pq.read_table(workdir / "validated" / f"{config}.parquet").to_pylist()
    train = [r for r in t if r["split"] == "train"]
    disk = 0
    for f in (workdir / "dataset" / "data" / config).glob("*.parquet"):
        md = pq.ParquetFile(f).metadata
        disk += sum(md.row_group(i).column(j).total_compressed_size
                    for i in range(md.num_row_groups) for j in range(md.num_columns))
    completion = sum(r["completion_len"] for r in t)
    return {"rows": len(t), "train_rows": len(train),
            "tokens": sum(r["prompt_len"] + r["completion_len"] for r in t),
            "prompt_tokens": sum(r["prompt_len"] for r in t), "completion_tokens": completion,
            "train_tokens": sum(r["prompt_len"] + r["completion_len"] for r in train), "disk_bytes": disk,
            "gpu_hours": completion / THROUGHPUT / 3600 * GPUS,
            "conversations": len({r["conversation_id"] for r in t})}


@pytest.fixture(scope="module")
def pilot_and_full(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan-conversations")
    w = root / "w"
    pilot = build(w, "--limit", str(PILOT_ROWS))
    snapshot = root / "pilot"
    shutil.copytree(w, snapshot)
    full = build(w)
    rerun = build(w)
    return snapshot, w, pilot, full, rerun


def test_the_full_run_lies_inside_the_pilots_projection(pilot_and_full):
    snapshot, w, *_ = pilot_and_full
    counts = {c: json.loads((w / "prepared" / f"{c}.json").read_text())["prepared"] for c in (SINGLE, TALK)}
    proc = run_cli("plan", "--workdir", str(snapshot), "--json", "--throughput", str(THROUGHPUT), "--gpus", str(GPUS),
                   *(a for c, n in counts.items() for a in ("--counts", f"{c}={n}")))
    plan = json.loads(proc.stdout)

    talk = plan["configs"][TALK]["pilot"]
    # the pilot holds conversations of more than one turn, each ended with a reason
    assert talk["turns"] is not None and talk["mean_rows"] > 1, talk
    assert talk["incomplete_conversations"] == 0 and talk["conversations"] == talk["turns"]["conversations"]
    assert sum(talk["turns"]["end_reasons"].values()) == talk["conversations"]
    assert plan["configs"][SINGLE]["pilot"]["turns"] is None and plan["configs"][SINGLE]["pilot"]["mean_rows"] == 1

    full = {c: actual(w, c) for c in (SINGLE, TALK)}
    full["all"] = {k: sum(full[c][k] for c in (SINGLE, TALK)) for k in full[SINGLE]}
    assert full[TALK]["rows"] > full[TALK]["conversations"] == counts[TALK]        # later turns were made
    outside = []
    for config, got in [*plan["configs"].items(), ("all", plan["overall"])]:
        assert got["count"] == (sum(counts.values()) if config == "all" else counts[config])
        for key in FIGURES:
            iv = got[key]
            if not iv["low"] <= full[config][key] <= iv["high"]:
                outside.append(f"{config} {key}: {full[config][key]:,.4g} outside [{iv['low']:,.4g}, "
                               f"{iv['high']:,.4g}] (estimate {iv['estimate']:,.4g})")
    assert not outside, "\n".join(outside)
    # the single-turn config's rows are its prompts, exactly
    assert plan["configs"][SINGLE]["rows"] == {"estimate": counts[SINGLE], "low": counts[SINGLE],
                                               "high": counts[SINGLE]}

    table = " ".join(run_cli("plan", "--workdir", str(snapshot), "--throughput", str(THROUGHPUT)).stdout.split())
    assert f"{TALK} conversations in the pilot: turns 1:" in table and "mean prompt tokens by turn" in table


def reused(stderr: str) -> int:
    m = re.search(r"reusing ([\d,]+) completed samples from an earlier run", stderr)
    assert m, stderr
    return int(m.group(1).replace(",", ""))


def checkpoint_count(workdir) -> int:
    import sqlite3
    from contextlib import closing

    n = 0
    for f in workdir.glob("generations*.sqlite"):
        with closing(sqlite3.connect(f)) as db:
            n += db.execute("SELECT count(*) FROM completions").fetchone()[0]
    return n


def test_the_reuse_line_counts_later_turns_as_this_runs_samples(pilot_and_full):
    """After a pilot, the full build reuses every pilot completion, later turns included, and none 'stays out';
    a plain rerun of the finished workdir reuses them all."""
    snapshot, w, pilot, full, rerun = pilot_and_full
    pilot_done = checkpoint_count(snapshot)
    assert json.loads((snapshot / "validated" / f"{TALK}.json").read_text())["later_turns"] > 0
    assert reused(full.stderr) == pilot_done
    generated = sum(json.loads((w / "validated" / f"{c}.json").read_text())["generated"] for c in (SINGLE, TALK))
    assert reused(rerun.stderr) == generated == checkpoint_count(w)
    for proc in (full, rerun):
        assert "stay out" not in proc.stderr, proc.stderr
