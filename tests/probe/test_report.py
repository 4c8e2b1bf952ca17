"""probe's report (no speculators needed): acceptance pooled over verify steps, its interval over prompts and seeds,
the paired gain; and the one line the probe stops with when speculators cannot be imported."""

from __future__ import annotations

import pytest

from tests.helpers.card import check_card_markdown
from tests.helpers.cli import copy_run, run_cli

from kimi_eagle_data.probe.report import build_report, markdown_table, report_path, write_report


def arm_results(per_seed: dict[int, dict[str, tuple[int, int]]], config: str = "B1") -> dict[int, dict]:
    """An arm's results as the stage hands them: seed -> its figures and each held-out prompt's (tokens, steps)."""
    return {s: {"rows": 4, "prompts": 4, "loss_tokens_available": 100, "steps": 3, "loss_tokens": 90,
                "prompts_by_config": {config: [{"id": i, "tokens": t, "steps": n} for i, (t, n) in prompts.items()]}}
            for s, prompts in per_seed.items()}


def test_acceptance_is_pooled_over_steps_not_averaged_per_prompt():
    own = {0: {"a": (40, 10), "b": (3, 3)}, 1: {"a": (40, 11), "b": (3, 3)}}   # a mean of means would say ~2.5
    report = build_report({}, {"B1": ["a", "b"]}, {"own": arm_results(own), "upstream": arm_results(own)})
    a = report["configs"]["B1"]["arms"]["own"]
    assert a["acceptance"] == round(86 / 27, 3)
    assert a["low"] <= a["acceptance"] <= a["high"]
    assert a["per_seed"] == {"0": round(43 / 13, 3), "1": round(43 / 14, 3)}
    assert a["seed_spread"] == round(43 / 13 - 43 / 14, 3)
    one = build_report({}, {"B1": ["a"]}, {"own": arm_results({0: {"a": (40, 10)}})})["configs"]["B1"]["arms"]["own"]
    assert one["acceptance"] == 4.0 and one["low"] is None and one["exploratory"]


def test_the_gain_is_paired_over_the_same_prompts():
    # prompts differ a lot, the arms' difference on each prompt little: only a paired interval excludes 0
    own = {s: {f"p{i}": (96, 96 // (1.2 + 0.15 * i) - 2 - s) for i in range(8)} for s in (0, 1, 2)}
    up = {s: {f"p{i}": (96, 96 // (1.2 + 0.15 * i) + s % 2) for i in range(8)} for s in (0, 1, 2)}
    report = build_report({}, {"B1": [f"p{i}" for i in range(8)]},
                          {"own": arm_results(own), "upstream": arm_results(up)})
    g = report["configs"]["B1"]["gain_over_upstream"]
    o, u = (report["configs"]["B1"]["arms"][a] for a in ("own", "upstream"))
    assert abs(g["estimate"] - (o["acceptance"] - u["acceptance"])) < 0.0015
    assert 0 < g["low"] <= g["estimate"] <= g["high"]
    assert o["low"] < u["high"]        # unpaired, the arms' intervals overlap


def test_an_acceptance_interval_never_goes_below_one():
    flat = {s: {f"p{i}": (90, 90 - (i == s)) for i in range(5)} for s in (0, 1)}    # nearly every draft rejected
    report = build_report({}, {"B1": [f"p{i}" for i in range(5)]}, {"upstream": arm_results(flat)})
    a = report["configs"]["B1"]["arms"]["upstream"]
    assert a["low"] == 1.0 < a["acceptance"] < a["high"]


def synthetic_report(configs=("B1", "B2")) -> dict:
    seed = {"rows": 4, "prompts": 4, "loss_tokens_available": 100, "steps": 3, "loss_tokens": 90,
            "train_seconds": 1.0, "decode_seconds": 1.0, "last_loss": 1.0}
    results = {arm: {s: {**seed, "prompts_by_config": {c: [{"id": f"{c}-{i}", "tokens": t + i + s, "steps": 10}
                                                          for i in range(3)] for c in configs}} for s in (0, 1)}
               for arm, t in (("own", 20), ("upstream", 12), ("own 0.25", 14), ("own 0.5", 17))}
    setup = {"model": "/x/tiny-kimi", "trainer": "cpu-loop", "device": "cpu", "budget_loss_tokens": 90, "seq_len": 512,
             "seeds": [0, 1], "drafts_per_step": 3, "max_new_tokens": 96, "held_out_per_config": 3,
             "drafter": {"model": "speculators Eagle3DraftModel", "layers": 1, "hidden_size": 128,
                         "trainable_parameters": 361344, "loss": "kl_div (eager)"}}
    return build_report(setup, {c: [f"{c}-{i}" for i in range(3)] for c in configs}, results)


def test_emit_puts_the_probe_in_the_card_with_its_setup(demo_run, tmp_path):
    workdir, _ = demo_run
    copy = copy_run(workdir, tmp_path / "w")
    from kimi_eagle_data.store.workdir import Workdir

    report = synthetic_report()
    report["setup"] |= {"data": str(copy / "dataset"), "data_name": "this dataset"}
    write_report(copy / "probe.json", report)
    assert (copy / "probe-learning-curve.png").stat().st_size > 0
    other = synthetic_report()
    other["setup"] |= {"data": str(tmp_path / "other.jsonl"), "data_name": "other.jsonl"}
    write_report(report_path(Workdir(copy), tmp_path / "other.jsonl", None), other)
    assert (copy / "probe-other.json").is_file()
    run_cli("emit", "--workdir", str(copy))
    card = (copy / "dataset" / "README.md").read_text()
    assert "## Measured value" in card
    flat = " ".join(card.split())
    assert "Target tiny-kimi; drafter speculators Eagle3DraftModel (1 layer, hidden 128" in flat
    assert "seeds 0, 1" in card and "cpu-loop" in card and "Data measured: this dataset." in flat
    assert "other.jsonl" not in card
    found = check_card_markdown(card, copy / "dataset")
    probe_table = next(t for t in found["tables"] if t[0].startswith("| config | held-out | own |"))
    # 3 held-out prompts per config: below the size the intervals were shown to cover at
    assert [r.split("|")[1].strip() for r in probe_table[1:]] == ["B1 (exploratory)", "B2 (exploratory)", "all"]
    assert "Rows marked exploratory" in flat


def test_a_report_of_other_data_in_probe_json_never_reaches_the_card(tmp_path):
    from kimi_eagle_data.probe.report import load_report
    from kimi_eagle_data.store.workdir import Workdir

    wd = Workdir(tmp_path)
    report = synthetic_report()
    report["setup"]["data"] = str(tmp_path / "dataset")
    write_report(tmp_path / "probe.json", report)
    assert load_report(wd)["setup"]["data"] == str(tmp_path / "dataset")
    report["setup"]["data"] = str(tmp_path / "export.jsonl")     # as a --data run wrote it before --out
    write_report(tmp_path / "probe.json", report)
    assert load_report(wd) is None
    with pytest.raises(ValueError, match="the report the dataset card reads"):
        report_path(wd, tmp_path / "export.jsonl", tmp_path / "probe.json")
    assert report_path(wd, tmp_path / "export.jsonl", None) == tmp_path / "probe-export.json"
    assert report_path(wd, None, None) == report_path(wd, tmp_path / "dataset", None) == tmp_path / "probe.json"


def test_two_datasets_compared_have_their_own_report_and_a_paired_gain(tmp_path):
    from kimi_eagle_data.probe.arms import TrainRow, compared_arms, compared_names
    from kimi_eagle_data.probe.report import table
    from kimi_eagle_data.store.workdir import Workdir

    wd = Workdir(tmp_path)
    compared = report_path(wd, tmp_path / "dataset", None, tmp_path / "fixed.jsonl")
    assert compared == tmp_path / "probe-dataset-vs-fixed.json"
    with pytest.raises(ValueError, match="the report the dataset card reads"):
        report_path(wd, None, tmp_path / "probe.json", tmp_path / "fixed.jsonl")
    assert compared_names(tmp_path / "a" / "x.jsonl", tmp_path / "b" / "x.jsonl") == ("A x.jsonl", "B x.jsonl")
    rows = {i: TrainRow(i, "B1", [1, 2], [0, 1]) for i in ("p", "q", "r")}
    arms = compared_arms([rows["p"], rows["q"]], [rows["q"], rows["r"]], {"p": 1, "q": 1, "r": 1}, ("a", "b"))
    assert {a: [r.id for r in rs] for a, rs in arms.items()} == {"a": ["q"], "b": ["q"]}   # the prompts both hold
    a = {s: {f"p{i}": (96, 60 - i + s) for i in range(6)} for s in (0, 1)}
    b = {s: {f"p{i}": (96, 70 - i - s) for i in range(6)} for s in (0, 1)}
    report = build_report({}, {"B1": [f"p{i}" for i in range(6)]}, {"clean.jsonl": arm_results(a),
                          "fixed.jsonl": arm_results(b)}, "clean.jsonl", "fixed.jsonl")
    report["compared"] = ["clean.jsonl", "fixed.jsonl"]
    head, rows_ = table(report)
    assert head[-1] == "gain clean.jsonl − fixed.jsonl"
    g = report["configs"]["B1"]["gain_over_fixed.jsonl"]
    assert g["low"] <= g["estimate"] <= g["high"] and rows_[0][-1].startswith(f"{g['estimate']:+.2f}")


def test_the_table_has_a_row_per_config_and_the_pool():
    seed = {"rows": 4, "prompts": 4, "loss_tokens_available": 100, "steps": 3, "loss_tokens": 90,
            "train_seconds": 1.0, "decode_seconds": 1.0, "last_loss": 1.0}
    results = {arm: {0: {**seed, "prompts_by_config": {"B1": [{"id": "x", "tokens": t, "steps": 10}],
                                                       "B2": [{"id": "y", "tokens": t + 5, "steps": 10}]}}}
               for arm, t in (("own", 20), ("upstream", 12))}
    report = build_report({}, {"B1": ["x"], "B2": ["y"]}, results)
    assert report["configs"]["all"]["arms"]["own"]["acceptance"] == 2.25
    assert report["configs"]["B1"]["gain_over_upstream"]["estimate"] == 0.8
    table = markdown_table(report)
    assert table.splitlines()[0] == "| config | held-out | own | upstream | gain own − upstream |"
    assert [r.split(" | ")[0] for r in table.splitlines()[2:]] == ["| B1 (exploratory)", "| B2 (exploratory)",
                                                                  "| all (exploratory)"]   # 1 prompt, 1 seed


def test_the_history_arms_have_a_table_of_their_own_in_the_card_section():
    from kimi_eagle_data.probe.report import card_section, history_table

    seed = {"rows": 2, "prompts": 2, "loss_tokens_available": 50, "steps": 2, "loss_tokens": 40,
            "train_seconds": 1.0, "decode_seconds": 1.0, "last_loss": 1.0}
    results = {arm: {0: {**seed, "prompts_by_config": {"B6": [{"id": "t", "tokens": t, "steps": 10}]}}}
               for arm, t in (("own history", 18), ("source history", 14))}
    report = synthetic_report()
    assert history_table(report) is None and card_section(report)["history_table"] is None
    history = build_report({}, {"B6": ["t"]}, results, "own history", "source history")
    report["history"] = {k: history[k] for k in ("held_out", "arms", "configs")}
    head, rows = history_table(report)
    assert head == ["config", "held-out", "own history", "source history", "gain own history − source history"]
    assert rows[0][0] == "B6 (exploratory)" and rows[0][-1] == "+0.40 [–]"      # 1 later turn: no interval
    assert "gain_over_upstream" not in history["configs"]["B6"]
    assert card_section(report)["history_table"].splitlines()[0] == "| " + " | ".join(head) + " |"


def test_without_speculators_the_probe_stops_in_one_line(tmp_path, prepared_b6):
    workdir = prepared_b6
    fake = tmp_path / "shadow" / "speculators"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named speculators')\n")
    proc = run_cli("probe", "--workdir", str(workdir), check=False, env={"PYTHONPATH": str(fake.parent)})
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install 'speculators==0.9.0'" in lines[0], proc.stderr
    assert "pip uninstall -y torchvision torchaudio" in lines[0]
