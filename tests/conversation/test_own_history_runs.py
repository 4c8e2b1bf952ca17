"""Conversations regenerated on the model's own history, end to end: `kimi-data build` of an own_history partition
through the SGLang-protocol stand-in (requests streamed: a turn is sent as soon as the one before is stored) and the
local engine (in rounds). Each later turn's prompt, decoded from the emitted row, holds the previous turn's OWN
completion rendered as the template renders the parsed message; `kill -9` at random moments across turns, rerun,
and the rows are those of an uninterrupted run."""

from __future__ import annotations

import json
import random

import pytest

from tests.helpers.cli import popen_cli, run_cli
from tests.helpers.conversations import CONFIG, TOPICS, check_conversations, dataset_rows, write_source
from tests.helpers.servers import TINY, Server, wait_for
from tests.helpers.workdirs import completion_stamps


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return write_source(tmp_path_factory.mktemp("own-history-source"))


def args(workdir, config_file, *extra):
    """prepare's arguments; build's with the engine's in `extra`."""
    return [CONFIG, "--config", str(config_file), "--workdir", str(workdir), "--profile", "tiny-kimi", "--model", TINY,
            "--max-new-tokens", "96", *extra]


@pytest.fixture(scope="module")
def stand_in():
    """One request per engine batch: each completion seeded by its own id, so a rerun samples it alike."""
    server = Server("--max-batch", "1").start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def uninterrupted(stand_in, source, tmp_path_factory):
    w = tmp_path_factory.mktemp("uninterrupted") / "w"
    run_cli("build", *args(w, source[0], "--engine", "sglang", "--server", stand_in.url, "--concurrency", "4",
                           "--no-progress"))
    return w


def test_conversations_continue_on_the_models_own_turns_through_a_streaming_server(uninterrupted, source):
    convs = check_conversations(uninterrupted, source[1])
    assert len(convs) == len(TOPICS)
    assert any(len(t) >= 2 for t in convs.values()), "no conversation reached a second turn"
    report = json.loads((uninterrupted / "validated" / f"{CONFIG}.json").read_text())
    assert report["balanced"] and report["later_turns"] == sum(len(t) - 1 for t in convs.values())
    assert sum(report["conversation_ends"].values()) == len(TOPICS)


def test_the_local_engine_continues_conversations_in_rounds(source, tmp_path):
    w = tmp_path / "w"
    run_cli("build", *args(w, source[0], "--engine", "local", "--no-progress"))
    convs = check_conversations(w, source[1])
    assert any(len(t) >= 2 for t in convs.values()), "no conversation reached a second turn"


def test_kill_9_across_turns_then_rerun_gives_the_rows_of_an_uninterrupted_run(stand_in, uninterrupted, source,
                                                                               tmp_path):
    w = tmp_path / "w"
    run_cli("prepare", *args(w, source[0]))
    total = len(dataset_rows(uninterrupted))
    rng = random.Random(21)
    kills = 0
    kept: dict[str, float] = {}
    while len(completion_stamps(w)) < total and kills < 4:
        before = len(completion_stamps(w))
        target = before + rng.randint(1, 4)
        proc = popen_cli("generate", CONFIG, "--workdir", str(w), "--engine", "sglang", "--server", stand_in.url,
                         "--concurrency", "3", "--no-progress")
        try:
            wait_for(lambda: len(completion_stamps(w)) >= min(target, total) or proc.poll() is not None, 300,
                     "no completion committed", proc=None)
        finally:
            if proc.poll() is None:
                proc.kill()          # SIGKILL: no cleanup runs
                kills += 1
            proc.wait()
        stamps = completion_stamps(w)
        assert {i: stamps[i] for i in kept} == kept, "a stored turn was generated again"
        kept = stamps
    assert kills >= 2, "the run finished before it could be killed twice; slow the stand-in down"
    run_cli("build", *args(w, source[0], "--engine", "sglang", "--server", stand_in.url, "--concurrency", "3",
                           "--no-progress"))
    stamps = completion_stamps(w)
    assert {i: stamps[i] for i in kept} == kept
    assert len(stamps) == total
    keys = ("id", "conversation_id", "turn", "end_reason", "input_ids", "loss_mask", "messages")
    got = [{k: r.get(k) for k in keys} for r in dataset_rows(w)]
    want = [{k: r.get(k) for k in keys} for r in dataset_rows(uninterrupted)]
    assert got == want
    check_conversations(w, source[1])


def test_max_turns_binds_the_workdir(source, tmp_path):
    """A conversation ended at max_turns under one value would not go on under another: refused in one line."""
    run_cli("prepare", *args(tmp_path / "w", source[0]))
    run = json.loads((tmp_path / "w" / "run.json").read_text())
    assert run["conversation_plan"] == {CONFIG: {"max_turns": 3}}
    other = tmp_path / "partitions.toml"
    other.write_text(source[0].read_text().replace("max_turns = 3", "max_turns = 2")
                     .replace('"chats.jsonl"', json.dumps(str(source[0].parent / "chats.jsonl"))))
    proc = run_cli("prepare", *args(tmp_path / "w", other), check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "conversation_plan" in lines[0], proc.stderr
