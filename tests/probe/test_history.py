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
from kimi_eagle_data.prompts.prepare import read_prepared
from kimi_eagle_data.prompts.tokenizer import load_tokenizer
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
    chat_format, tokenizer = format_of(PROFILES["tiny-kimi"]), load_tokenizer(TINY)
    compared = 0
    for first in own:
        for turn in (2, 3):
            want = prefixes.get(f"{first.source_id}#u{turn - 1}")
            got = source_history_prompt(first, turn, chat_format, tokenizer)
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
    chat_format, tokenizer = format_of(PROFILES["tiny-kimi"]), load_tokenizer(TINY)
    first = own[0]
    ended = type(first)(**{**first.__dict__, "script": []})
    assert source_history_prompt(ended, turn, chat_format, tokenizer) is None
