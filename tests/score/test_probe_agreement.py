"""`score` beside the probe: per config the score's verdict, the probe's measured gain own − upstream, whether they
agree and why they may not (score/report.py `probe_agreement`)."""

from __future__ import annotations

from kimi_eagle_data.score.report import agreement_lines, probe_agreement


def score(**verdicts: str) -> dict:
    return {"configs": {c: {"verdict": v} for c, v in verdicts.items()}}


def probe(**gains: tuple[float, float, float]) -> dict:
    return {"configs": {c: {"gain_over_upstream": {"estimate": e, "low": lo, "high": hi, "exploratory": c == "B1"}}
                        for c, (e, lo, hi) in gains.items()}}


def test_each_verdict_is_set_beside_what_the_probe_measured():
    a = probe_agreement(score(B1="regenerate", B2="regenerate", B3="either", B4="either", B5="regenerate",
                              B6="n/a"),
                        probe(B1=(-0.06, -0.15, 0.06), B2=(0.18, 0.07, 0.30), B3=(0.2, 0.1, 0.3),
                              B4=(0.0, -0.1, 0.1), B5=(-0.2, -0.3, -0.1), B6=(0.1, 0.0, 0.2)))
    assert {c: (x["probe"], x["agrees"]) for c, x in a.items()} == {
        "B1": ("no difference shown", False), "B2": ("gain", True), "B3": ("gain", False),
        "B4": ("no difference shown", True), "B5": ("loss", False)}     # B6: no verdict, nothing to compare
    assert "accepted alike" in a["B1"]["why"] and "exploratory" in a["B1"]["why"]
    assert "upstream answers accepted more" in a["B5"]["why"] and "exploratory" not in a["B5"]["why"]
    assert a["B2"]["why"] is None
    lines = agreement_lines(a)
    assert lines[0].startswith("B1: score says regenerate, the probe measured no difference shown (-0.06 [-0.15, "
                               "+0.06] tokens per verify step)")
    assert lines[-1] == "the probe agrees with the score on B2, B4"


def test_without_a_probe_or_its_partition_there_is_nothing_to_set_beside():
    assert probe_agreement(score(B1="regenerate"), None) is None
    assert probe_agreement(score(B1="regenerate"), probe(B2=(0.1, 0.05, 0.2))) == {}
