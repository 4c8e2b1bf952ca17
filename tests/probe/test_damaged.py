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

PROBE = ("--seeds", "2", "--no-curve", "--no-upstream", "--budget", "12000", "--held-out", "4", "--json")


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
    got = {}
    for name, path in (("clean", clean), ("damaged", damaged)):
        proc = run_cli("probe", "--workdir", str(workdir), "--data", str(path), *PROBE, timeout=1800)
        report = orjson.loads(proc.stdout)
        assert report["setup"]["trainer"] == "cpu-loop" and list(report["arms"]) == ["own"]
        assert all(s["loss_tokens"] >= 12000 for s in report["arms"]["own"]["seeds"].values())
        # other data: its own report, never the one the card reads; its rows checked against the workdir
        assert orjson.loads((workdir / f"probe-{name}.json").read_bytes())["setup"]["data_name"] == f"{name}.jsonl"
        assert report["setup"]["data_check"]["matched_rows"] == report["setup"]["data_check"]["rows"]
        assert "probe: drafters" in proc.stderr + proc.stdout      # the progress line, with its ETA
        # one arm with 2 seeds: a seeds' spread from 1 degree of freedom, so every row is exploratory
        assert report["configs"]["all"]["exploratory"] and report["arms"]["own"]["seed_spread"] >= 0
        got[name] = report["configs"]["all"]["arms"]["own"]
    assert (card_report.read_bytes() if card_report.exists() else None) == before
    assert got["clean"]["prompts"] == got["damaged"]["prompts"] > 0
    assert got["damaged"]["acceptance"] < got["clean"]["acceptance"], got
