"""Conversations regenerated on the model's own history, as tests make and check them: sources of multi-turn
chats under an own_history partition, the checks every run's rows must pass (tests/conversation, the real-engine
tier), and a built workdir with a conversation config beside a single-turn one (the reports' and card's tests)."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

from kimi_eagle_data.conversation.messages import history_call_count, next_turn_messages
from kimi_eagle_data.formats.kimi_k2.messages import assistant_message
from kimi_eagle_data.conversation.script import script_steps
from kimi_eagle_data.formats.kimi_k2.grammar import CompletionGrammar
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.model_profile import model_vocab_size
from kimi_eagle_data.formats.kimi_k2.tokens import k2_tokens
from kimi_eagle_data.decoding import SegmentDecoder
from kimi_eagle_data.formats.kimi_k2.render import render_prompt
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from tests.helpers.cli import run_cli
from tests.helpers.servers import TINY

TOK = open_tokenizer(TINY)
GRAMMAR = CompletionGrammar(k2_tokens(TOK),
                            SegmentDecoder(TOK, model_vocab_size(TINY_KIMI, TOK)))
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


def write_source(d: Path, max_turns: int = 3) -> tuple[Path, dict[str, dict]]:
    """chats.jsonl (one conversation per topic) and partitions.toml (partition C1, own_history) in `d`."""
    rows = [conversation(i, t) for i, t in enumerate(TOPICS)]
    (d / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "partitions.toml").write_text(f'[partitions.{CONFIG}]\nsource = "chats.jsonl"\nid_field = "id"\n'
                                       f'policy = "own_history"\nmax_turns = {max_turns}\n')
    return d / "partitions.toml", {r["id"]: r for r in rows}


def dataset_rows(workdir) -> list[dict]:
    import datasets

    ds = datasets.load_dataset(str(workdir / "dataset"), CONFIG, cache_dir=str(workdir.parent / f"{workdir.name}-hf"))
    return sorted((r for split in ds for r in ds[split].to_list()), key=lambda r: r["id"])


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
            own = assistant_message(GRAMMAR.parse(own_ids), history_call_count(prev_prompt_messages))
            expected = next_turn_messages(_plain(prev_prompt_messages), own, script[k - 1].next)
            prompt = nxt["input_ids"][:nxt["prompt_len"]]
            assert prompt == render_prompt(TOK, expected, None, nxt["mode"]), (conv, k)
            assert prompt == list(TOK.apply_chat_template(expected, add_generation_prompt=True, tokenize=True,
                                                          return_dict=False,
                                                          **({"thinking": False} if nxt["mode"] == "instant" else {})))
            shown = TOK.decode(prompt, skip_special_tokens=False)
            assert own["content"] in shown and "SOURCE-ANSWER-" not in shown, (conv, k)
    return convs


def _plain(messages: list[dict]) -> list[dict]:
    """Messages as read from a row (every MESSAGE field present, null where absent) as a client writes them."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


# -- a built workdir: C1 (own_history) beside C2 (single-turn) ------------------------------------------

REPORT_TOPICS = ("a trip to Rome", "baking bread", "learning chess", "a garden", "saving money", "running a marathon",
          "painting a room", "a birthday party", "learning Spanish", "keeping bees")
QUESTIONS = ("Help me plan {}.", "What should I do first?", "And after that?", "Any last tip?")
REPORT_PARTITIONS = """\
[partitions.C1]
source = "chats.jsonl"
policy = "own_history"
max_turns = 3
n = 10
[partitions.C2]
source = "single.jsonl"
n = 4
"""


def build_conversations(root: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """`kimi-data build C1 C2` of the two partitions under `root`; (workdir, the build's process)."""
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    root.mkdir(parents=True, exist_ok=True)
    with open(root / "chats.jsonl", "w") as f:
        for i, topic in enumerate(REPORT_TOPICS):
            messages = []
            for k, q in enumerate(QUESTIONS):
                messages += [{"role": "user", "content": q.format(topic)},
                             {"role": "assistant", "content": f"Answer {k} about {topic}."}]
            f.write(json.dumps({"id": f"c{i}", "messages": messages}) + "\n")
    with open(root / "single.jsonl", "w") as f:
        for i, topic in enumerate(REPORT_TOPICS[:4]):
            f.write(json.dumps({"id": f"s{i}", "messages": [{"role": "user", "content": f"Tell me about {topic}."}]})
                    + "\n")
    (root / "cfg.toml").write_text(REPORT_PARTITIONS)
    workdir = root / "w"
    proc = run_cli("build", "C1", "C2", "--config", str(root / "cfg.toml"), "--workdir", str(workdir),
                   "--profile", "tiny-kimi", "--model", str(TINY_MODEL_DIR), "--max-new-tokens", "64",
                   "--no-progress")
    return workdir, proc


def conversations_of(workdir: Path, config: str) -> dict[str, list[dict]]:
    """conversation_id -> its rows' light columns in turn order, read straight from validated/<config>.parquet."""
    convs = defaultdict(list)
    for r in pq.read_table(workdir / "validated" / f"{config}.parquet").to_pylist():
        convs[r["conversation_id"]].append(r)
    return {c: sorted(rs, key=lambda r: r["turn"]) for c, rs in convs.items()}
