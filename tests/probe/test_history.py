"""The history arms' prompts (probe/history.py): a later turn carried on the source's history is exactly the prompt
prepare makes for that user turn under policy every_user_prefix (the same conversation, the source's own answers in
the history), so the `source history` arm differs from `own history` in the history alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from kimi_eagle_data.conversation.next_turn import turn_id
from kimi_eagle_data.formats import format_of
from kimi_eagle_data.probe.arms import TrainRow
from kimi_eagle_data.probe.history import later_turns, source_history_prompt
from kimi_eagle_data.profile import PROFILES
from kimi_eagle_data.prompts.prepared_file import read_prepared
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from kimi_eagle_data.sources.partitions import SAMPLES_DIR
from kimi_eagle_data.store.workdir import Workdir
from tests.helpers.cli import run_cli
from tests.helpers.servers import TINY


def prepared(tmp_path: Path, policy: str) -> list:
    config = tmp_path / f"{policy}.toml"
    config.write_text(f'[partitions.B6]\nsource = "{SAMPLES_DIR / "B6-ultrachat.jsonl"}"\npolicy = "{policy}"\n')
    w = tmp_path / policy
    run_cli("prepare", "B6", "--config", str(config), "--profile", "tiny-kimi", "--model", TINY, "--limit", "8",
            "--workdir", str(w))
    return read_prepared(Workdir(w), "B6")


def test_a_source_history_prompt_is_the_every_user_prefix_prompt_of_that_user_turn(tmp_path):
    own = prepared(tmp_path, "own_history")
    prefixes = {r.source_id: r for r in prepared(tmp_path, "every_user_prefix")}
    chat_format = format_of(PROFILES["tiny-kimi"]).bind(PROFILES["tiny-kimi"], open_tokenizer(TINY))
    compared = 0
    for first in own:
        for turn in (2, 3):
            want = prefixes.get(f"{first.source_id}#u{turn - 1}")
            got = source_history_prompt(first, turn, chat_format)
            if want is None:
                continue
            assert got is not None, (first.id, turn)
            assert got.prompt_ids == want.prompt_ids and got.messages == want.messages, (first.id, turn)
            assert got.id == turn_id(first.id, turn) and got.conversation == first.id and got.turn == turn
            compared += 1
    assert compared >= 8, compared


def test_later_turns_are_found_by_their_id_and_only_in_own_history_configs(tmp_path):
    own = prepared(tmp_path, "own_history")
    firsts = {r.id: r for r in own}
    conv = own[0].id
    row = TrainRow(turn_id(conv, 3), None, [1, 2, 3], [0, 0, 1], conv)
    first_row = TrainRow(conv, "B6", [1, 2], [0, 1], conv)
    stranger = TrainRow("B6-0000000000000000", None, [1], [1], conv)
    found = later_turns([row, first_row, stranger], firsts, {"B6": 4})
    assert [(t.row.id, t.turn, t.first.id) for t in found] == [(turn_id(conv, 3), 3, conv)]
    assert later_turns([row], firsts, {"B6": 2}) == []          # past the config's max_turns
    assert later_turns([row], firsts, {}) == []                 # not an own_history config


@pytest.mark.parametrize("turn", [2])
def test_no_source_history_prompt_where_the_source_stops(tmp_path, turn):
    own = prepared(tmp_path, "own_history")
    chat_format = format_of(PROFILES["tiny-kimi"]).bind(PROFILES["tiny-kimi"], open_tokenizer(TINY))
    first = own[0]
    ended = type(first)(**{**first.__dict__, "script": []})
    assert source_history_prompt(ended, turn, chat_format) is None


def own_history_build(tmp_path, max_turns: int):
    """The bundled B6 sample built by the tiny model as an own_history partition of up to `max_turns` turns."""
    config = tmp_path / "mine.toml"
    config.write_text(f'[partitions.B6]\nsource = "{SAMPLES_DIR / "B6-ultrachat.jsonl"}"\npolicy = "own_history"\n'
                      f"max_turns = {max_turns}\n")
    w = tmp_path / "w"
    run_cli("build", "B6", "--config", str(config), "--profile", "tiny-kimi", "--model", TINY, "--max-new-tokens",
            "160", "--engine", "local", "--workdir", str(w), "--no-progress")
    return w


@pytest.mark.trainer
def test_probe_measures_own_against_source_history_on_the_held_out_conversations_later_turns(tmp_path):
    """Trainer tier: a build whose B6 conversations go on the model's own turns, then the probe: both history arms
    train on the same later turns for the same loss tokens and are measured on the same held-out later turns; the
    terminal table, probe.json and the card (after emit) carry them."""
    import orjson

    w = own_history_build(tmp_path, max_turns=3)
    probe = ("probe", "--workdir", str(w), "--seeds", "1", "--no-curve", "--no-upstream", "--budget", "3000",
             "--held-out", "8")
    shown = run_cli(*probe, timeout=1800).stdout
    report = orjson.loads((w / "probe.json").read_bytes())
    history = report["history"]
    arms = history["arms"]
    assert list(arms) == ["own history", "source history"]
    assert arms["own history"]["prompts"] == arms["source history"]["prompts"] > 0
    assert all(s["loss_tokens"] >= 3000 for a in arms.values() for s in a["seeds"].values())
    held = history["held_out"]["B6"]
    assert held and not set(held) & set(report["held_out"]["B6"])      # later turns, not the first turns
    entry = history["configs"]["all"]
    assert entry["held_out"] == len(held) and entry["gain_over_source_history"] is not None
    assert all(entry["arms"][a]["acceptance"] >= 1.0 for a in arms)
    assert "own vs source history" in shown and "gain own history − source history" in shown
    run_cli("emit", "B6", "--workdir", str(w))
    card = (w / "dataset" / "README.md").read_text()
    assert "| config | held-out | own history | source history | gain own history − source history |" in card


@pytest.mark.trainer
def test_sigterm_stops_the_probe_while_it_trains_exit_143_and_the_last_report_stays(tmp_path):
    import signal
    import subprocess

    from tests.helpers.cli import popen_cli, read_until

    w = own_history_build(tmp_path, max_turns=2)
    (w / "probe.json").write_text('{"earlier": true}\n')
    proc = popen_cli("probe", "--workdir", str(w), "--seeds", "1", "--no-curve", "--budget", "200000",
                     stderr=subprocess.PIPE)
    read_until(proc, "training arm own, seed 0", 600)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, f"exit {proc.returncode}\n{err}"
    assert "interrupted by SIGTERM: probe.json is written once every drafter is measured" in err, err
    assert "Traceback" not in err, err
    assert (w / "probe.json").read_text() == '{"earlier": true}\n'
