"""Our Kimi-K3 completion grammar and the engines' own K3 output parsers (vLLM 0.32.0's, SGLang 0.5.23's) split every
assistant turn of the golden files (K3's launch encoder's output for our conversations) into the same reasoning,
content and tool calls.

The engines' parsers get the completion's text as serving hands it to them: decoded with special tokens kept, without
the stop token. They read that text, so a reasoning or answer that spells a marker (`<|open|>think<|sep|>` typed
as text) reads to them as structure; our grammar reads marker ids, and text stays text. Those turns may differ;
every other must agree.

Selected with `-m real_engine` (scripts/real_engines/run_tier.sh): each engine's parsers run in the tier's venv of that engine
(tests/real_engines/k3_vllm_parsers.py, k3_sglang_parsers.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.formats.kimi_k3.test_k3_grammar import TURNS, expected_message, ids, parse, CONVERSATIONS
from tests.real_engines.servers import installed_venv

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]

HELPERS = {"vllm": Path(__file__).with_name("k3_vllm_parsers.py"),
           "sglang": Path(__file__).with_name("k3_sglang_parsers.py")}


def request_tools(name: str, k: int) -> list[dict]:
    """The conversation's tools, or (history calls to tools it does not declare) tools named after the calls, so
    the engine's tool parser reads the calls as a chat request with those tools would."""
    tools = CONVERSATIONS[name]["request"].get("tools") or []
    calls = expected_message(name, k).get("tool_calls") or []
    named = {t["function"]["name"] for t in tools}
    extra = [c.get("function", c)["name"] for c in calls if c.get("function", c)["name"] not in named]
    return tools + [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
                    for n in dict.fromkeys(extra)]


@pytest.mark.parametrize("engine", sorted(HELPERS))
def test_the_engines_k3_parsers_split_every_golden_turn_as_our_grammar_does(engine):
    cases = [{"text": "".join(t for t, _ in segments[:-1]), "thinking": not instant, "tools": request_tools(name, k)}
             for name, k, instant, segments in TURNS]      # segments[-1] is the stop token, <|end_of_msg|>
    python = installed_venv(engine) / "bin" / "python"
    proc = subprocess.run([str(python), str(HELPERS[engine])], input="".join(json.dumps(c) + "\n" for c in cases),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(theirs) == len(TURNS)
    differ, spelled = [], []
    for (name, k, instant, segments), their in zip(TURNS, theirs):
        ours = parse(ids(segments), instant=instant)
        mine = {"reasoning": ours.reasoning, "content": ours.content,
                "calls": [[c.tool, c.arguments] for c in ours.calls]}
        if mine != their:
            spells = any(not special and ("<|open|>" in t or "<|close|>" in t) for t, special in segments)
            (spelled if spells else differ).append(f"{name}-{k}: ours {mine} theirs {their}")
    assert not differ, "\n".join(differ)
    assert len(spelled) <= 2 and len(TURNS) - len(spelled) >= 45, spelled
