"""probe's report (no speculators needed): acceptance pooled over verify steps, its bootstrap interval over prompts,
the paired gain; and the one line the probe stops with when speculators cannot be imported."""

from __future__ import annotations

from tests.helpers.card import check_card_markdown
from tests.helpers.cli import copy_run, run_cli

from kimi_eagle_data.probe.report import acceptance, build_report, gain, markdown_table, write_report


def test_acceptance_is_pooled_over_steps_not_averaged_per_prompt():
    prompts = {"a": (40, 10), "b": (3, 3)}          # per prompt 4.0 and 1.0: a mean of means would say 2.5
    a = acceptance(prompts, ["a", "b"])
    assert a["acceptance"] == round(43 / 13, 3)
    assert a["low"] <= a["acceptance"] <= a["high"] and a["low"] >= 1.0 and a["high"] <= 4.0
    one = acceptance({"a": (40, 10)}, ["a"])
    assert one["low"] == one["high"] == 4.0


def test_the_gain_is_paired_over_the_same_prompts():
    own = {"a": (30, 10), "b": (20, 10)}
    up = {"a": (15, 10), "b": (10, 10)}
    g = gain(own, up, ["a", "b"])
    assert g["estimate"] == 2.5 - 1.25 and 0 < g["low"] <= g["estimate"] <= g["high"]


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

    write_report(Workdir(copy), synthetic_report())
    assert (copy / "probe-learning-curve.png").stat().st_size > 0
    run_cli("emit", "--workdir", str(copy))
    card = (copy / "dataset" / "README.md").read_text()
    assert "## Measured value" in card
    assert "Target tiny-kimi; drafter speculators Eagle3DraftModel (1 layer, hidden 128" in " ".join(card.split())
    assert "seeds 0, 1" in card and "cpu-loop" in card
    found = check_card_markdown(card, copy / "dataset")
    probe_table = next(t for t in found["tables"] if t[0].startswith("| config | held-out | own |"))
    assert [r.split("|")[1].strip() for r in probe_table[1:]] == ["B1", "B2", "all"]


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
    assert [r.split(" | ")[0] for r in table.splitlines()[2:]] == ["| B1", "| B2", "| all"]


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
    assert rows[0][0] == "B6" and rows[0][-1].startswith("+0.40")
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
