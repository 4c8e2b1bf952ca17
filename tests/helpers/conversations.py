"""A workdir with conversations regenerated on the model's own history: a user-defined `chat` partition of
multi-turn conversations under policy own_history (C1) beside a single-turn one (C2), built with the tiny model."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

from tests.helpers.cli import run_cli

TOPICS = ("a trip to Rome", "baking bread", "learning chess", "a garden", "saving money", "running a marathon",
          "painting a room", "a birthday party", "learning Spanish", "keeping bees")
QUESTIONS = ("Help me plan {}.", "What should I do first?", "And after that?", "Any last tip?")
CONFIG = """\
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
    from kimi_eagle_data.profile import TINY_MODEL_DIR

    root.mkdir(parents=True, exist_ok=True)
    with open(root / "chats.jsonl", "w") as f:
        for i, topic in enumerate(TOPICS):
            messages = []
            for k, q in enumerate(QUESTIONS):
                messages += [{"role": "user", "content": q.format(topic)},
                             {"role": "assistant", "content": f"Answer {k} about {topic}."}]
            f.write(json.dumps({"id": f"c{i}", "messages": messages}) + "\n")
    with open(root / "single.jsonl", "w") as f:
        for i, topic in enumerate(TOPICS[:4]):
            f.write(json.dumps({"id": f"s{i}", "messages": [{"role": "user", "content": f"Tell me about {topic}."}]})
                    + "\n")
    (root / "cfg.toml").write_text(CONFIG)
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
