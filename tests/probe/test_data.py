"""Other data probed in a workdir (`probe --data`): its rows checked against the workdir's prompts, tokenizer and
format before any drafter is trained (probe/data_check.py), refused in one line when too few belong; the warnings
the probe gives about its own sizes; and the options that only make sense together. No speculators needed: nothing
here trains."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import numpy as np

from kimi_eagle_data.cli.options import saved_options
from kimi_eagle_data.probe.arms import ProbeInputError, TrainRow, passes
from kimi_eagle_data.probe.data_check import MIN_SHARE, DataMismatch
from kimi_eagle_data.probe.stage import split_rows
from kimi_eagle_data.runs import open_run
from kimi_eagle_data.settings import RunSettings
from tests.helpers.cli import copy_run, run_cli


@pytest.fixture(scope="module")
def export(demo_run, tmp_path_factory) -> Path:
    workdir, _ = demo_run
    path = tmp_path_factory.mktemp("probe-data") / "own.jsonl"
    run_cli("export", str(workdir), "--format", "specforge", "--out", str(path))
    return path


@pytest.fixture
def ctx(demo_run, tmp_path):
    w = copy_run(demo_run[0], tmp_path / "w")
    _, saved = saved_options(w)
    context = open_run(RunSettings(workdir=str(w), progress=False, workers=1, **saved), create=False)
    yield context
    context.lock.release()


def rewrite(src: Path, dst: Path, change) -> Path:
    with src.open() as f, dst.open("w") as g:
        for n, line in enumerate(f):
            g.write(json.dumps(change(json.loads(line), n)) + "\n")
    return dst


def split(ctx, data: Path):
    return split_rows(ctx, data, [], 6, 0, 96)


def test_the_workdirs_own_export_belongs_whole(ctx, export):
    got = split(ctx, export)
    rows = sum(1 for _ in export.open())
    assert got.data_check == {"rows": rows, "matched_rows": rows, "other_tokenizer_rows": 0, "invalid_rows": 0,
                              "min_share": MIN_SHARE}


def test_probing_one_partition_the_others_rows_still_belong(ctx, export):
    got = split_rows(ctx, export, ["B2"], 6, 0, 96)
    assert got.data_check["matched_rows"] == got.data_check["rows"]
    assert {r.config for r in got.own_all} - {None} == {"B2"}      # None: later turns, matched by their id


def test_a_loss_mask_over_the_prompt_is_measured_not_refused(ctx, export, tmp_path):
    damaged = rewrite(export, tmp_path / "damaged.jsonl", lambda r, n: r | {"loss_mask": [1] * len(r["input_ids"])})
    got = split(ctx, damaged)
    # a first turn is validated on its prepared prompt, whatever the mask says: it belongs
    assert got.data_check["other_tokenizer_rows"] == 0
    assert {r.id for r in got.own_all} >= set(got.firsts) & {json.loads(x)["id"] for x in export.open()}
    # a later turn has no prepared prompt: with the mask over its prompt it is no valid turn, and is left out
    later = sum(1 for x in export.open() if json.loads(x)["id"] not in got.firsts)
    assert later and got.data_check["invalid_rows"] == later


def test_rows_of_other_prompts_are_refused_in_one_line(ctx, export, tmp_path):
    def stranger(r, n):         # another workdir's rows: ids and prompts this workdir never prepared
        return r | {"id": f"B1-{n:016x}", "input_ids": [5] + r["input_ids"], "loss_mask": [0] + r["loss_mask"]}

    other = rewrite(export, tmp_path / "other.jsonl", stranger)
    with pytest.raises(DataMismatch) as e:
        split(ctx, other)
    line = str(e.value)
    assert "\n" not in line and "match none of its prompts" in line and "below 50%" in line
    rows = sum(1 for _ in export.open())
    assert line.startswith(f"{other}: 0 of {rows} rows belong to") and f"{rows} match none" in line


def test_rows_of_another_tokenizer_are_refused(ctx, export, tmp_path):
    vocab = len(ctx.tokenizer)
    beyond = rewrite(export, tmp_path / "k3.jsonl", lambda r, n: r | {"input_ids": [i + vocab for i in r["input_ids"]]})
    with pytest.raises(DataMismatch, match="hold ids of another tokenizer"):
        split(ctx, beyond)
    # in the vocabulary but not this tokenizer's ids for the same prompts (the same sample ids, another model)
    shuffled = rewrite(export, tmp_path / "remapped.jsonl",
                       lambda r, n: r | {"input_ids": [(7 * i + 3) % vocab for i in r["input_ids"]]})
    with pytest.raises(DataMismatch) as e:
        split(ctx, shuffled)
    assert "hold ids of another tokenizer" in str(e.value)


def test_a_minority_of_foreign_rows_is_left_out_with_a_warning(ctx, export, tmp_path, caplog):
    mixed = rewrite(export, tmp_path / "mixed.jsonl",
                    lambda r, n: r if n % 4 else r | {"id": f"B1-{n:016x}", "input_ids": [5] + r["input_ids"],
                                                      "loss_mask": [0] + r["loss_mask"]})
    rows = sum(1 for _ in export.open())
    foreign = len(range(0, rows, 4))
    with caplog.at_level(logging.WARNING, logger="kimi_eagle_data"):
        got = split(ctx, mixed)
    assert got.data_check["matched_rows"] == rows - foreign
    assert len(got.own_all) == rows - foreign
    assert any(f"{foreign} of {rows} rows are left out of training" in r.getMessage() for r in caplog.records)


def test_empty_and_unreadable_data_each_stop_in_one_clear_line(ctx, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(DataMismatch, match=r"empty\.jsonl holds no row"):
        split(ctx, empty)
    text = tmp_path / "notes.jsonl"
    text.write_text("\nthese are my notes, not JSON\n")
    with pytest.raises(ProbeInputError) as e:
        split(ctx, text)
    assert str(e.value).startswith(f"{text}: line 2 cannot be read") and "\n" not in str(e.value)


def test_a_cut_held_out_count_is_said(ctx, export, caplog):
    with caplog.at_level(logging.WARNING, logger="kimi_eagle_data"):
        got = split_rows(ctx, export, [], 1000, 0, 96)
    lines = [r.getMessage() for r in caplog.records if "--held-out 1000 is cut" in r.getMessage()]
    assert len(lines) == 1 and all(f"{c} {len(h)}" in lines[0] for c, h in got.held.items())


def row(loss_tokens: int) -> TrainRow:
    return TrainRow("x", "B1", np.arange(loss_tokens + 1), np.r_[0, np.ones(loss_tokens, dtype=np.int64)])


def test_an_arm_that_repeats_its_data_far_more_than_another_is_said(caplog):
    with caplog.at_level(logging.WARNING, logger="kimi_eagle_data"):
        got = passes({"own": [row(2295)], "upstream": [row(643)]}, 20_000)
    assert got == {"own": round(20_000 / 2295, 2), "upstream": round(20_000 / 643, 2)}
    assert any("arm upstream goes over its data 31.1 times and arm own 8.7 times" in r.getMessage()
               for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kimi_eagle_data"):
        passes({"own": [row(1000)], "upstream": [row(700)], "own 0.25": [row(250)]}, 20_000)
    assert not caplog.records       # the curve's shares repeat their data by design


def test_prefill_rate_needs_dry_run(demo_run):
    workdir, _ = demo_run
    proc = run_cli("probe", "--workdir", str(workdir), "--prefill-rate", "10000", check=False)
    assert proc.returncode == 2, proc.stderr
    assert "--prefill-rate" in proc.stderr and "--dry-run" in proc.stderr


def test_a_projection_under_an_hour_is_in_minutes(demo_run):
    workdir, _ = demo_run
    out = run_cli("probe", "--workdir", str(workdir), "--dry-run", "--prefill-rate", "10000").stdout
    assert " of extraction at 10,000 prefill tokens/s" in out and "0.00 h" not in out
    assert any(unit in out for unit in (" s of extraction", " min of extraction")), out
