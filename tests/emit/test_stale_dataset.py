"""A pilot's dataset once the full run's prompts are prepared (emit/stale.py): marked stale in its manifest and card
(which still vouch for each other), in `stats` and `slurm status`; `push` refuses it; the mark goes when the
selection it was made from is prepared again, and a new emit makes a dataset without it."""

from __future__ import annotations

import json

from kimi_eagle_data.emit.dataset import load_local
from tests.executors.test_slurm_status import record_submit
from tests.helpers.cli import error_lines, run_cli
from tests.helpers.servers import TINY

RUN = ["B4", "--samples", "--profile", "tiny-kimi", "--model", TINY, "--max-new-tokens", "16"]


def test_a_pilots_dataset_is_marked_stale_where_a_user_looks_until_emitted_again(tmp_path):
    w = tmp_path / "w"
    dataset = w / "dataset"
    run_cli("build", *RUN, "--limit", "3", "--workdir", str(w), "--no-progress")
    pilot = json.loads((dataset / "manifest.json").read_text())
    assert pilot["selection"]["B4"]["limit"] == 3 and "stale" not in pilot
    rows = {f.name: f.read_bytes() for f in (dataset / "data" / "B4").glob("*.parquet")}

    prepared = run_cli("prepare", *RUN, "--limit", "6", "--workdir", str(w))     # the full run's prompts
    reason = json.loads((dataset / "manifest.json").read_text())["stale"]
    assert reason.startswith("made from an earlier selection (B4: 3 selected by a pilot (--limit 3); 6 now)") \
        and "emit again" in reason, reason
    line = f"stale: {dataset} was {reason}"
    assert line in prepared.stdout + prepared.stderr
    card = (dataset / "README.md").read_text()
    assert card.index(f"Stale: this dataset was {reason}") < card.index("\n# "), "the card's notice is not at its top"
    load_local(dataset)      # card and manifest still vouch for each other; the rows are the pilot's, untouched
    assert {f.name: f.read_bytes() for f in (dataset / "data" / "B4").glob("*.parquet")} == rows

    stats = run_cli("stats", "--workdir", str(w), "--no-plots")
    assert f"dataset: {line}" in stats.stdout, stats.stdout
    assert json.loads(run_cli("stats", "--workdir", str(w), "--json").stdout)["stale_dataset"] == line
    record_submit(w, 2, ["B4"])      # as `slurm submit` of the full run left it
    status = json.loads(run_cli("slurm", "status", "--workdir", str(w), "--json", check=False).stdout)
    assert status["stale_dataset"] == line and status["dataset"] is None
    push = run_cli("push", str(w), "--repo", "org/kimi", "--dry-run", check=False)
    assert push.returncode == 1 and len(error_lines(push)) == 1 and "stale" in push.stderr, push.stderr
    # export and check still read it (its rows are the pilot's, whole), and say in one line that it is stale
    readers = [run_cli("export", str(w), "--split", "rejected", "--out", str(tmp_path / "rows.jsonl")),
               run_cli("check", str(dataset), "--no-progress")]
    for proc in readers:
        said = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
        assert said == [f"warning: {dataset} is stale: it was {reason}"], proc.stderr

    run_cli("prepare", *RUN, "--limit", "3", "--workdir", str(w))     # the pilot's selection again: not stale
    assert "stale" not in json.loads((dataset / "manifest.json").read_text())
    assert "kimi-data: stale" not in (dataset / "README.md").read_text()
    load_local(dataset)

    run_cli("build", *RUN, "--limit", "6", "--workdir", str(w), "--no-progress")
    full = json.loads((dataset / "manifest.json").read_text())
    assert "stale" not in full and full["selection"]["B4"]["limit"] == 6 and full["configs"]["B4"]["counts"]["selected"] == 6
    assert json.loads(run_cli("stats", "--workdir", str(w), "--json").stdout)["stale_dataset"] is None


def test_the_stale_mark_depends_only_on_the_configs_own_selection(tmp_path):
    """Built with B4 and B6 together, then B4 alone prepared with the same limit: the same six B4 prompts, so the
    dataset is not stale (the selection is what counts, not which configs were named beside it); a smaller
    selection is stale, and the reason says the rows differ, not that they lack what was prepared since."""
    w = tmp_path / "w"
    dataset = w / "dataset"
    run_cli("build", *RUN, "B6", "--limit", "6", "--workdir", str(w), "--no-progress")
    prepared = run_cli("prepare", *RUN, "--limit", "6", "--workdir", str(w))
    assert "stale:" not in prepared.stdout + prepared.stderr
    assert "stale" not in json.loads((dataset / "manifest.json").read_text())
    push = run_cli("push", str(w), "--repo", "org/kimi", "--dry-run", check=False)
    assert push.returncode == 0 and "is stale" not in push.stderr, push.stderr

    run_cli("prepare", *RUN, "--limit", "3", "--workdir", str(w))
    reason = json.loads((dataset / "manifest.json").read_text())["stale"]
    assert reason.startswith("made from an earlier selection (B4: 6 selected by a pilot (--limit 6); 3 now)"), reason
    assert "lacks" not in reason and "emit again" in reason, reason
