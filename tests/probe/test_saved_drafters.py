"""`probe --drafter ARM=DIR`: saved drafters measured instead of trained (trainer tier: needs speculators)."""

from __future__ import annotations

import json

import pytest

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_KIMI
from tests.helpers.cli import run_cli

pytestmark = pytest.mark.trainer


def test_the_same_saved_drafter_as_two_arms_measures_the_same(demo_run, tmp_path):
    workdir, out = demo_run[0], tmp_path / "probe.json"
    drafter = TINY_KIMI.shipped_drafter
    run_cli("probe", "B4", "--workdir", str(workdir), "--held-out", "3", "--no-progress", "--out", str(out),
            "--drafter", f"own={drafter}", "--drafter", f"upstream={drafter}")
    report = json.loads(out.read_text())
    setup, b4 = report["setup"], report["configs"]["B4"]
    assert setup["trainer"] == "saved drafters (--drafter)" and setup["measured_by"] == "in-process"
    assert setup["drafters"] == {"own": [drafter], "upstream": [drafter]}
    assert b4["held_out"] == 3 and b4["arms"]["own"]["acceptance"] == b4["arms"]["upstream"]["acceptance"] > 1.0
    assert b4["gain_over_upstream"]["estimate"] == 0.0

