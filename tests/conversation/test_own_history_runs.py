"""Conversations regenerated on the model's own history, end to end: `kimi-data build` of an own_history partition
through the SGLang-protocol stand-in (requests streamed: a turn is sent as soon as the one before is stored) and the
local engine (in rounds). Each later turn's prompt, decoded from the emitted row, holds the previous turn's OWN
completion rendered as the template renders the parsed message; `kill -9` at random moments across turns, rerun,
and the rows are those of an uninterrupted run."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest

from kimi_eagle_data.conversation.messages import assistant_message, history_call_count, next_turn_messages
from kimi_eagle_data.conversation.script import script_steps
from kimi_eagle_data.grammar import CompletionGrammar
from kimi_eagle_data.profile import TINY_KIMI, ProfileTokens, model_vocab_size
from kimi_eagle_data.prompts.tokenizer import SegmentDecoder, load_tokenizer, render_prompt
from tests.helpers.cli import popen_cli, run_cli
from tests.helpers.servers import TINY, Server, wait_for
from tests.helpers.workdirs import completion_stamps

TOK = load_tokenizer(TINY)
GRAMMAR = CompletionGrammar(ProfileTokens.from_tokenizer(TINY_KIMI, TOK), SegmentDecoder(TOK, model_vocab_size(TINY_KIMI, TOK)))
CONFIG = "C1"
TOPICS = ["apples", "rivers", "clocks", "bridges", "violins", "glaciers", "lanterns", "comets", "harbors", "tea"]


def conversation(i: int, topic: str) -> dict:
    return {"id": f"conv-{i}", "messages": [
        {"role": "user", "content": f"Tell me one fact about {topic}."},
        {"role": "assistant", "content": f"SOURCE-ANSWER-{i}-1: {topic} are old."},
        {"role": "user", "content": f"Why do people like {topic}?"},
        {"role": "assistant", "content": f"SOURCE-ANSWER-{i}-2: they are useful."},
        {"role": "user", "content": "Say it in three words."},
        {"role": "assistant", "content": f"SOURCE-ANSWER-{i}-3: short and sweet."}]}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    d = tmp_path_factory.mktemp("own-history-source")
    rows = [conversation(i, t) for i, t in enumerate(TOPICS)]
    (d / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "partitions.toml").write_text(f'[partitions.{CONFIG}]\nsource = "chats.jsonl"\nid_field = "id"\n'
                                       'policy = "own_history"\nmax_turns = 3\n')
    return d / "partitions.toml", {r["id"]: r for r in rows}


def args(workdir, config_file, *extra):
    return [CONFIG, "--config", str(config_file), "--workdir", str(workdir), "--profile", "tiny-kimi", "--model", TINY,
            "--max-new-tokens", "96", "--no-progress", *extra]


def dataset_rows(workdir) -> list[dict]:
    import datasets

    ds = datasets.load_dataset(str(workdir / "dataset"), CONFIG, cache_dir=str(workdir.parent / f"{workdir.name}-hf"))
    return sorted((r for split in ds for r in ds[split].to_list()), key=lambda r: r["id"])


@pytest.fixture(scope="module")
def stand_in():
    """One request per engine batch: each completion seeded by its own id, so a rerun samples it alike."""
    server = Server("--max-batch", "1").start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def uninterrupted(stand_in, source, tmp_path_factory):
    w = tmp_path_factory.mktemp("uninterrupted") / "w"
    run_cli("build", *args(w, source[0], "--engine", "sglang", "--server", stand_in.url, "--concurrency", "4"))
    return w


def by_conversation(rows: list[dict]) -> dict[str, list[dict]]:
    out = defaultdict(list)
    for r in rows:
        out[r["conversation_id"]].append(r)
    return {k: sorted(v, key=lambda r: r["turn"]) for k, v in out.items()}


def check_conversations(workdir, source_rows: dict[str, dict]) -> dict[str, list[dict]]:
    """Every later turn's prompt is the previous turn's prompt messages, its own completion sent back, and the
    source's next user turn, rendered by the template id for id; one end reason per conversation, on its last
    turn; the loss mask covers the turn's own tokens only."""
    rows = dataset_rows(workdir)
    convs = by_conversation(rows)
    for conv, turns in convs.items():
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1)), conv
        assert [r["end_reason"] is not None for r in turns] == [False] * (len(turns) - 1) + [True], conv
        for r in turns:
            p = r["prompt_len"]
            assert r["loss_mask"] == [0] * p + [1] * r["completion_len"]
        script = script_steps(source_rows[turns[0]["source_id"]]["messages"][1:])
        for k, (prev, nxt) in enumerate(zip(turns, turns[1:]), start=1):
            prev_prompt_messages = [m for m in prev["messages"][:-1]]
            own_ids = prev["input_ids"][prev["prompt_len"]:]
            own = assistant_message(GRAMMAR.parse(own_ids), TINY_KIMI, history_call_count(prev_prompt_messages))
            expected = next_turn_messages(_plain(prev_prompt_messages), own, script[k - 1].next)
            prompt = nxt["input_ids"][:nxt["prompt_len"]]
            assert prompt == render_prompt(TOK, expected, None, nxt["mode"]), (conv, k)
            assert prompt == list(TOK.apply_chat_template(expected, add_generation_prompt=True, tokenize=True,
                                                          return_dict=False,
                                                          **({"thinking": False} if nxt["mode"] == "instant" else {})))
            shown = TOK.decode(prompt, skip_special_tokens=False)
            assert own["content"] in shown and f"SOURCE-ANSWER-" not in shown, (conv, k)
    return convs


def _plain(messages: list[dict]) -> list[dict]:
    """Messages as read from a row (every MESSAGE field present, null where absent) as a client writes them."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


def test_conversations_continue_on_the_models_own_turns_through_a_streaming_server(uninterrupted, source):
    convs = check_conversations(uninterrupted, source[1])
    assert len(convs) == len(TOPICS)
    assert any(len(t) >= 2 for t in convs.values()), "no conversation reached a second turn"
    report = json.loads((uninterrupted / "validated" / f"{CONFIG}.json").read_text())
    assert report["balanced"] and report["later_turns"] == sum(len(t) - 1 for t in convs.values())
    assert sum(report["conversation_ends"].values()) == len(TOPICS)


def test_the_local_engine_continues_conversations_in_rounds(source, tmp_path):
    w = tmp_path / "w"
    run_cli("build", *args(w, source[0], "--engine", "local"))
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
        proc = popen_cli("generate", *args(w, source[0], "--engine", "sglang", "--server", stand_in.url,
                                           "--concurrency", "3"))
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
    run_cli("build", *args(w, source[0], "--engine", "sglang", "--server", stand_in.url, "--concurrency", "3"))
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
