"""A probe tells damaged data from clean (trainer tier: trains drafters with speculators, the [probe] extra).

The demo's own rows exported for SpecForge, and the same rows with the loss mask over the prompt as well: on the same
held-out prompts, with the same loss-token budget and seeds, drafters trained on the damaged copy accept fewer tokens
per verify step (their budget goes to prompt text the target never writes)."""

from __future__ import annotations

import json

import orjson
import pytest

from tests.helpers.cli import run_cli

pytestmark = pytest.mark.trainer

PROBE = ("--seeds", "2", "--budget", "12000", "--held-out", "4", "--json")


def test_a_loss_mask_over_the_prompt_lowers_acceptance(demo_run, tmp_path):
    workdir, _ = demo_run
    clean = tmp_path / "clean.jsonl"
    run_cli("export", str(workdir), "--format", "specforge", "--out", str(clean))
    damaged = tmp_path / "damaged.jsonl"
    with clean.open() as f, damaged.open("w") as g:
        for line in f:
            row = json.loads(line)
            row["loss_mask"] = [1] * len(row["input_ids"])
            g.write(json.dumps(row) + "\n")
    card_report = workdir / "probe.json"
    before = card_report.read_bytes() if card_report.exists() else None
    # the two compared in one probe: the same held-out prompts, seeds and training prompts, a paired gain
    proc = run_cli("probe", "--workdir", str(workdir), "--data", str(clean), "--data", str(damaged), *PROBE,
                   timeout=1800)
    report = orjson.loads(proc.stdout)
    assert report["setup"]["trainer"] == "cpu-loop" and report["compared"] == ["clean.jsonl", "damaged.jsonl"]
    assert list(report["arms"]) == ["clean.jsonl", "damaged.jsonl"]
    assert all(s["loss_tokens"] >= 12000 for a in report["arms"].values() for s in a["seeds"].values())
    # other data: a report of its own, never the one the card reads; its rows checked against the workdir
    assert orjson.loads((workdir / "probe-clean-vs-damaged.json").read_bytes())["compared"] == report["compared"]
    assert (card_report.read_bytes() if card_report.exists() else None) == before
    assert report["setup"]["data_check"]["matched_rows"] == report["setup"]["data_check"]["rows"]
    assert "probe: drafters" in proc.stderr + proc.stdout      # the progress line, with its ETA
    got = report["configs"]["all"]
    assert got["arms"]["clean.jsonl"]["prompts"] == got["arms"]["damaged.jsonl"]["prompts"] > 0
    assert got["arms"]["damaged.jsonl"]["acceptance"] < got["arms"]["clean.jsonl"]["acceptance"], got
    gain = got["gain_over_damaged.jsonl"]
    assert gain["estimate"] > 0 and gain["low"] <= gain["estimate"] <= gain["high"], gain
