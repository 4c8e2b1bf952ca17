"""The small EAGLE-3 drafters shipped for the tiny models, and the demo's line about them.

Without speculators the demo says in one note line how to get the drafter's acceptance (main suite); with it (the
trainer tier, the [probe] extra) each profile's shipped drafter loads as speculators loads a drafter and, in the demo,
accepts more than one token per verify step on held-out prompts of the data the demo built."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli

DRAFTER_LINE = re.compile(r"^drafter: (?P<name>\S+) \(shipped, speculators' EAGLE-3\) accepts (?P<acc>[\d.]+) tokens "
                          r"per verify step on (?P<n>\d+) held-out prompts of this dataset", re.M)


def test_the_demo_without_speculators_says_how_to_get_the_drafter_s_acceptance(tmp_path):
    shadow = tmp_path / "no-speculators" / "speculators"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("No module named \'speculators\'")\n', encoding="utf-8")
    proc = run_cli("demo", "--workdir", str(tmp_path / "w"), "--limit", "2", "--no-progress",
                   env={"PYTHONPATH": str(shadow.parent)})
    notes = [line for line in proc.stdout.splitlines() if "drafter" in line]
    assert notes == ["note: the shipped tiny EAGLE-3 drafter's acceptance on this data needs speculators (the [probe] "
                     "extra, docs/probe.md): pip install 'speculators==0.9.0' torch==2.13.0 && pip uninstall -y "
                     "torchvision torchaudio"], proc.stdout[-3000:]
    assert (tmp_path / "w" / "dataset").is_dir()


@pytest.mark.trainer
@pytest.mark.parametrize("profile", ["tiny-kimi", "tiny-kimi-k3"])
def test_the_shipped_drafter_loads_as_speculators_saves_it(profile):
    from speculators.models.eagle3 import Eagle3DraftModel

    from kimi_eagle_data.probe.drafter import load_drafter
    from kimi_eagle_data.probe.shipped import provenance
    from kimi_eagle_data.profile import get_profile

    p = get_profile(profile)
    drafter = Path(p.shipped_drafter)
    config = json.loads((drafter / "config.json").read_text(encoding="utf-8"))
    assert config["speculators_model_type"] == "eagle3" and config["architectures"] == ["Eagle3DraftModel"]
    assert config["speculators_config"]["verifier"]["name_or_path"] == profile
    assert (drafter / "model.safetensors").stat().st_size < 4_000_000
    model = load_drafter(drafter, p.model_path)
    assert isinstance(model, Eagle3DraftModel) and not model.training
    prov = provenance(drafter)
    assert prov["profile"] == profile and prov["acceptance"]["acceptance"] > 1.0
    assert len(prov["trained_prompt_sha256"]) > 100


@pytest.mark.trainer
def test_the_k25_demo_reports_its_drafter_s_acceptance_on_held_out_prompts(demo_run):
    _, proc = demo_run
    got = DRAFTER_LINE.search(proc.stdout)
    assert got, proc.stdout[-3000:]
    assert got["name"] == "tiny-kimi-eagle3" and int(got["n"]) >= 8 and float(got["acc"]) > 1.0, got[0]


@pytest.mark.trainer
def test_the_k3_demo_reports_its_drafter_s_acceptance_on_held_out_prompts(tmp_path):
    proc = run_cli("demo", "--profile", "tiny-kimi-k3", "--workdir", str(tmp_path / "w"), "--no-progress",
                   timeout=1200)
    got = DRAFTER_LINE.search(proc.stdout)
    assert got, proc.stdout[-3000:]
    assert got["name"] == "tiny-kimi-k3-eagle3" and int(got["n"]) >= 8 and float(got["acc"]) > 1.0, got[0]
