"""A workdir whose selection or sources change between runs (docs/reliability.md): the rows are always those of
the selection and sources of the last run.

- A pilot starts own_history conversations; a smaller selection drops some, a larger one takes them again, then a
  plain rerun: every emitted row's conversation has its turn 1 in the selection, the later turns of the dropped
  conversations are counted as kept, not in this selection (validate's report and the card), never emitted.
- A source row edited in place (same id) and a second user turn edited between a pilot and the full run: the
  completions that answered the earlier prompts are generated again (and the run says how many), and the dataset
  equals a clean one-process build on the final sources, row for row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.conversations import CONFIG, TOPICS, conversation
from tests.helpers.servers import TINY, Server


@pytest.fixture(scope="module")
def stand_in():
    """One request per engine batch: each completion seeded by its own id, so a rerun samples it alike."""
    server = Server("--max-batch", "1").start()
    yield server
    server.kill()


def write_config(d: Path, name: str, n: int | None = None) -> Path:
    path = d / name
    path.write_text(f'[partitions.{CONFIG}]\nsource = "chats.jsonl"\nid_field = "id"\npolicy = "own_history"\n'
                    f'max_turns = 3\n' + (f"n = {n}\n" if n is not None else ""))
    return path


def write_rows(d: Path, rows: list[dict]) -> None:
    (d / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def build(workdir: Path, config_file: Path, server: Server, *extra: str):
    return run_cli("build", CONFIG, "--config", str(config_file), "--workdir", str(workdir), "--profile",
                   "tiny-kimi", "--model", TINY, "--max-new-tokens", "96", "--engine", "sglang", "--server",
                   server.url, "--concurrency", "3", "--no-progress", *extra)


def emitted(workdir: Path) -> list[dict]:
    """Every row of the dataset (train and rejected), by id."""
    rows = [r for f in sorted((workdir / "dataset" / "data").rglob("*.parquet")) if f.parent.name == CONFIG
            for r in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: r["id"])


def selected(workdir: Path) -> set[str]:
    return set(pq.read_table(workdir / "prepared" / f"{CONFIG}.parquet", columns=["id"]).column("id").to_pylist())


def report(workdir: Path) -> dict:
    return json.loads((workdir / "validated" / f"{CONFIG}.json").read_text())


def check_rows_in_selection(workdir: Path) -> list[dict]:
    rows = emitted(workdir)
    ids = selected(workdir)
    assert rows and {r["conversation_id"] for r in rows} <= ids
    turns: dict[str, list[int]] = {}
    for r in rows:
        turns.setdefault(r["conversation_id"], []).append(r["turn"])
    assert all(sorted(t) == list(range(1, len(t) + 1)) for t in turns.values()), turns
    rep = report(workdir)
    assert rep["balanced"] and rep["later_turns"] == sum(len(t) - 1 for t in turns.values())
    return rows


def test_a_smaller_selection_after_a_pilot_emits_only_its_own_conversations(stand_in, tmp_path):
    write_rows(tmp_path, [conversation(i, t) for i, t in enumerate(TOPICS)])
    w = tmp_path / "w"
    build(w, write_config(tmp_path, "all.toml"), stand_in, "--limit", "8")
    pilot = check_rows_in_selection(w)
    started = {r["conversation_id"] for r in pilot if r["turn"] > 1}
    assert started, "the pilot continued no conversation past turn 1"

    build(w, write_config(tmp_path, "three.toml", n=3), stand_in)
    rows = check_rows_in_selection(w)
    assert len(selected(w)) == 3
    dropped = started - selected(w)
    assert dropped, "the smaller selection kept every conversation the pilot continued"
    kept = sum(1 for r in pilot if r["conversation_id"] in dropped and r["turn"] > 1)
    assert report(w)["kept_not_selected"] == kept > 0
    card = (w / "dataset" / "README.md").read_text()
    assert "Kept, not in this selection" in card and f"{CONFIG}: {kept}" in card
    assert all(r["conversation_id"] not in dropped for r in rows)

    build(w, write_config(tmp_path, "ten.toml", n=10), stand_in)
    rows = check_rows_in_selection(w)
    assert len(selected(w)) == 10 and report(w)["kept_not_selected"] == 0
    assert "Kept, not in this selection" not in (w / "dataset" / "README.md").read_text()
    again = build(w, tmp_path / "ten.toml", stand_in)
    assert emitted(w) == rows
    assert "reusing" in again.stderr


def test_an_edited_source_row_and_user_turn_are_generated_again(stand_in, tmp_path):
    src, clean = tmp_path / "src", tmp_path / "clean"
    src.mkdir()
    clean.mkdir()
    rows = [conversation(i, t) for i, t in enumerate(TOPICS)]
    write_rows(src, rows)
    w = src / "w"
    build(w, write_config(src, "p.toml"), stand_in, "--limit", "6")
    pilot = {r["id"]: r for r in emitted(w)}
    pilot_convs = {r["conversation_id"] for r in pilot.values() if r["turn"] > 1}
    edited_first = sorted(pilot_convs)[0]       # a row whose first turn is edited (same id)
    first_row = next(r for r in pilot.values() if r["id"] == edited_first)["source_id"]
    second = next(r["source_id"] for r in pilot.values() if r["turn"] > 1 and r["conversation_id"] != edited_first)
    for r in rows:
        if r["id"] == first_row:
            r["messages"][0]["content"] = "EDITED: tell me one fact about ducks."
        if r["id"] == second:
            r["messages"][2]["content"] = "EDITED: why do ducks swim?"
    write_rows(src, rows)
    write_rows(clean, rows)

    full = build(w, src / "p.toml", stand_in)
    assert "answered an earlier version of their prompt and are generated again" in full.stderr, full.stderr
    clean_w = clean / "w"
    build(clean_w, write_config(clean, "p.toml"), stand_in)
    keys = ("id", "conversation_id", "turn", "end_reason", "input_ids", "loss_mask", "messages")
    got = [{k: r[k] for k in keys} for r in emitted(w)]
    want = [{k: r[k] for k in keys} for r in emitted(clean_w)]
    assert got == want
    shown = [json.dumps(r["messages"]) for r in got]
    assert any("EDITED: tell me one fact about ducks." in m for m in shown)
    assert any("EDITED: why do ducks swim?" in m for m in shown)
