"""Kimi-K3's completion grammar reads every assistant turn K3's launch encoder rendered in the golden files back
into the message it came from (reasoning, content, tool calls), and gives each violation its reason code.

The golden turns are the assistant messages of tests/golden/k3/expected.json (the encoder's output for our
conversations), tokenized segment by segment on a tokenizer with K3's special-token layout."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kimi_eagle_data.formats.kimi_k3.facts import GENERATION_PROMPTS, K3TokenIds
from kimi_eagle_data.formats.kimi_k3.grammar import REASONS, parse_completion
from kimi_eagle_data.formats.kimi_k3.normalize import call_arguments, call_function, normalized_conversation
from kimi_eagle_data.formats.kimi_k3.segment_ids import segment_ids
from tests.formats.kimi_k3.k3_tokens import k3_encoding, k3_vocab

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden" / "k3"
CONVERSATIONS = {c["name"]: c for c in json.loads((GOLDEN / "conversations.json").read_text("utf-8"))["conversations"]}
EXPECTED = json.loads((GOLDEN / "expected.json").read_text("utf-8"))["expected"]
HEAD = [["<|open|>", True], ["message", False], [" role", False], ['="', False], ["assistant", False], ['"', False]]
TOKENS = K3TokenIds.from_vocab(k3_vocab())


def golden_turns() -> list[tuple[str, int, bool, list]]:
    """(conversation, k-th assistant message, instant, the turn's segments after its generation prompt)."""
    turns = []
    for name, outcome in EXPECTED.items():
        segments, k = outcome.get("segments", []), 0
        for i in range(len(segments)):
            if segments[i:i + 6] != HEAD:
                continue
            j = next(j for j in range(i, len(segments)) if segments[j] == ["<|sep|>", True])
            end = next((e for e in range(j, len(segments)) if segments[e] == ["<|end_of_msg|>", True]), None)
            if end is not None:       # the generation prompt has none
                instant = segments[j + 2] == ["response", False]
                turns.append((name, k, instant, segments[j + 4:end + 1]))
                k += 1
    return turns


TURNS = golden_turns()


def ids(segments) -> list[int]:
    return segment_ids(k3_encoding(), [(t, s) for t, s in segments])


def parse(token_ids, **options):
    return parse_completion(token_ids, TOKENS, k3_encoding().decode, **options)


def expected_message(name: str, k: int) -> dict:
    request = CONVERSATIONS[name]["request"]
    return [m for m in normalized_conversation(request["messages"]) if m["role"] == "assistant"][k]


def test_the_golden_files_hold_enough_assistant_turns_of_every_shape():
    assert len(TURNS) >= 45
    assert sum(instant for _, _, instant, _ in TURNS) >= 8
    with_calls = [t for t in TURNS if expected_message(t[0], t[1]).get("tool_calls")]
    assert len(with_calls) >= 20


@pytest.mark.parametrize("turn", TURNS, ids=[f"{n}-{k}" for n, k, _, _ in TURNS])
def test_each_golden_turn_reads_back_as_its_message(turn):
    name, k, instant, segments = turn
    message = expected_message(name, k)
    parsed = parse(ids(segments), instant=instant)
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    want_reasoning = "" if instant or reasoning is None or not str(reasoning).strip() else str(reasoning)
    content = message.get("content")
    want_content = "".join(p["text"] for p in content) if isinstance(content, list) else content or ""
    assert (parsed.reasoning, parsed.content) == (want_reasoning, want_content)
    calls = [call_function(c) for c in message.get("tool_calls") or []]
    assert [(c.tool, c.index) for c in parsed.calls] == [(str(fn["name"]), str(i)) for i, fn in enumerate(calls, 1)]
    raw = [fn for fn in calls if "raw_arguments" in fn]
    for got, fn in zip(parsed.calls, calls):
        if "raw_arguments" not in fn:
            assert got.arguments == fn["arguments"]
    expected_codes = (["json_arguments"] * len(raw)
                      + (["empty_answer"] if not want_content.strip() and not calls else []))
    assert sorted(parsed.codes) == sorted(expected_codes)
    assert parsed.ends_with_end_of_msg and parsed.message_closed
    if not instant:
        assert k3_encoding().decode(ids(segments)[:parsed.reasoning_end]) == want_reasoning


# ---- violations, each on a completion written out as text (markers as special tokens) ----------------------------

CALL = '<|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>Paris' \
       '<|close|>argument<|sep|><|close|>call<|sep|>'
GOOD = ("I should call it.<|close|>think<|sep|><|open|>response<|sep|>Checking.<|close|>response<|sep|>"
        f"<|open|>tools<|sep|>{CALL}<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>")


def text_ids(text: str) -> list[int]:
    return k3_encoding().encode(text, allowed_special="all")


def codes(text: str, **options) -> list[str]:
    return parse(text_ids(text), **options).codes


def test_a_well_formed_completion_has_no_violation():
    parsed = parse(text_ids(GOOD), declared_tools=frozenset({"get_weather"}))
    assert parsed.codes == [] and parsed.reasoning == "I should call it." and parsed.content == "Checking."
    assert [(c.tool, c.index, c.arguments) for c in parsed.calls] == [("get_weather", "1", {"city": "Paris"})]


@pytest.mark.parametrize("text, options, code", [
    (GOOD.replace("Checking.", "Checking.<|im_end|>"), {}, "legacy_k2_token"),
    (GOOD.replace("I should", "[EOS]I should"), {}, "forbidden_token"),
    (GOOD.replace("Checking.", "Checking.<|end_of_msg|>"), {}, "end_of_msg_not_last"),
    (GOOD.replace("<|open|>response<|sep|>", "<|open|>response"), {}, "malformed_tag"),
    (GOOD.replace("<|close|>think<|sep|>", ""), {}, "unexpected_element"),
    (GOOD.split("<|close|>think<|sep|>")[1], {"instant": False}, "unexpected_element"),
    ("<|open|>think<|sep|>x<|close|>think<|sep|>" + GOOD.split("<|close|>think<|sep|>")[1], {"instant": True},
     "think_in_instant"),
    (GOOD.replace("<|close|>think<|sep|>", "<|close|>think<|sep|>\n"), {}, "text_between_elements"),
    (GOOD.replace('tool="get_weather" index="1"', 'index="1" tool="get_weather"'), {}, "bad_call"),
    (GOOD.replace('index="1"', 'index="0"'), {}, "call_index_out_of_order"),
    (GOOD.replace('type="string"<|sep|>Paris', 'type="number"<|sep|>Paris'), {}, "bad_argument"),
    (GOOD.replace('type="string"<|sep|>Paris', 'type="number"<|sep|>NaN'), {}, "bad_argument"),
    (GOOD.replace('type="string"<|sep|>Paris', 'type="date"<|sep|>Paris'), {}, "bad_argument"),
    (GOOD.replace('<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>',
                  '<|open|>json type="object"<|sep|>{"city": "Paris"}<|close|>json<|sep|>'), {}, "json_arguments"),
    (GOOD.replace(CALL, ""), {}, "empty_tools"),
    (GOOD, {"declared_tools": frozenset({"search"})}, "undeclared_tool"),
    (GOOD, {"declared_tools": frozenset()}, "tool_call_without_tools"),
    ("Still thinking<|end_of_msg|>", {}, "missing_think_close"),
    ("r<|close|>think<|sep|><|close|>message<|sep|><|end_of_msg|>", {}, "missing_response"),
    (GOOD.replace("<|close|>message<|sep|>", ""), {}, "missing_message_close"),
    (GOOD.removesuffix("<|end_of_msg|>"), {}, "missing_end_of_msg"),
    ("r<|close|>think<|sep|><|open|>response<|sep|> \n<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>",
     {}, "empty_answer"),
])
def test_each_violation_has_its_reason_code(text, options, code):
    found = codes(text, **options)
    assert code in found, found
    assert set(found) <= set(REASONS)


def test_a_truncated_completion_is_excused_what_needs_the_end():
    cut = GOOD[:GOOD.index("Checking.") + 5]          # stopped by the length limit inside the response
    parsed = parse(text_ids(cut))
    assert "missing_end_of_msg" in parsed.codes and parsed.codes_for(finished=False) == []
    assert parsed.reasoning == "I should call it." and parsed.content == "Check"
    inside_tag = parse(text_ids("abc<|close|>think"))     # cut inside a tag
    assert inside_tag.codes_for(finished=False) == [] and inside_tag.reasoning == "abc"


def test_the_instant_generation_prompt_is_what_the_grammar_starts_inside():
    """The profile's generation prompts are the renderer's: the grammar starts inside `think` or `response`."""
    from kimi_eagle_data.formats.kimi_k3.render import joined_text, render_segments

    for mode, thinking in (("thinking", True), ("instant", False)):
        prompt = joined_text(render_segments([{"role": "user", "content": "x"}], thinking=thinking))
        assert prompt.endswith(GENERATION_PROMPTS[mode])


def test_every_reason_code_is_used_and_documented():
    """Each code of REASONS is given somewhere in the parser (its name appears past the table), and
    docs/kimi-k3.md lists it."""
    source = (ROOT / "kimi_eagle_data" / "formats" / "kimi_k3" / "grammar.py").read_text("utf-8")
    after_table = source[source.index("_TEXT, _OPEN"):]
    assert not [c for c in REASONS if f'"{c}"' not in after_table]
    docs = (ROOT / "docs" / "kimi-k3.md").read_text("utf-8")
    assert not [c for c in REASONS if f"`{c}`" not in docs]


# ---- round trip: random assistant messages rendered by our renderer (which the golden files and the fuzz hold to
# K3's encoder) read back as themselves ----------------------------------------------------------------------------

PIECES = ["word", " ", "\n", "你好", "🙂", "e\u0301", '"', "&", "=\"", "<|open|>", "<|close|>think<|sep|>", "<|sep|>",
          "<|end_of_msg|>", "<|im_end|>", "[EOS]", "{}", "1", "\t", "x" * 30]


def random_text(rng, n=6):
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, n)))


def random_value(rng, depth=0):
    kind = rng.choice(["s", "i", "f", "b", "n", "l", "d"] if depth < 2 else ["s", "i"])
    return {"s": lambda: random_text(rng, 3), "i": lambda: rng.randint(-10**6, 10**6),
            "f": lambda: rng.choice([0.5, 1e21, -2.25]), "b": lambda: rng.random() < 0.5, "n": lambda: None,
            "l": lambda: [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))],
            "d": lambda: {random_text(rng, 2): random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}}[kind]()


def test_random_assistant_messages_read_back_as_themselves():
    import random

    from kimi_eagle_data.formats.kimi_k3.render import render_segments

    rng = random.Random(11)
    for case in range(400):
        thinking = rng.random() < 0.7
        calls = [{"id": f"c{i}", "function": {"name": rng.choice(["f", "get_weather", "we&ird\"name", "天气"]),
                                              "arguments": {random_text(rng, 2) or "k": random_value(rng)
                                                            for _ in range(rng.randint(0, 3))}}}
                 for i in range(rng.choice([0, 0, 1, 2, 3]))]
        message = {"role": "assistant", "content": random_text(rng, 8) or "ok", "reasoning_content": random_text(rng)}
        if calls:
            message["tool_calls"] = calls
        segments = render_segments([{"role": "user", "content": "q"}, message], thinking=thinking,
                                   add_generation_prompt=False)
        listed = [list(s) for s in segments]
        head = next(i for i in range(len(listed)) if listed[i:i + 6] == HEAD)
        sep = next(j for j in range(head, len(listed)) if listed[j] == ["<|sep|>", True])
        parsed = parse(ids(listed[sep + 4:]), instant=not thinking)     # after the think/response opener
        reasoning = message["reasoning_content"] if thinking and message["reasoning_content"].strip() else ""
        assert (parsed.reasoning, parsed.content) == (reasoning, message["content"]), case
        assert [(c.tool, c.arguments) for c in parsed.calls] == [(c["function"]["name"], c["function"]["arguments"])
                                                                 for c in calls], case
        blank = not message["content"].strip() and not calls
        assert parsed.codes == (["empty_answer"] if blank else []), (case, parsed.violations)
