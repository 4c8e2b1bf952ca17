"""Kimi-K2.5's completion grammar (kimi_eagle_data/formats/kimi_k2/grammar.py): completion ids -> reasoning, answer,
tool calls, end, and the malformations found, read the same way by the validator, `inspect` and the reasoning boundary of
generation and `score`. Completions are built from text pieces encoded with the embedded tiny Kimi-format
tokenizer and special tokens looked up by string."""

from __future__ import annotations

import numpy as np
import pytest

from kimi_eagle_data.formats.kimi_k2.grammar import CALL_BEGIN, CompletionGrammar, Fault, reasoning_length
from kimi_eagle_data.id_buffers import pack
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.model_profile import model_vocab_size
from kimi_eagle_data.formats.kimi_k2.tokens import k2_tokens
from kimi_eagle_data.decoding import SegmentDecoder
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.reports.inspect import segments_of
from kimi_eagle_data.formats.kimi_k2.validator import Validator

TOK = open_tokenizer(str(TINY_MODEL_DIR))
TOKENS = k2_tokens(TOK)
GRAMMAR = CompletionGrammar(TOKENS, SegmentDecoder(TOK, model_vocab_size(TINY_KIMI, TOK)))

END_THINK, EOT = "</think>", "<|im_end|>"
SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CB, AB, CE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
TOOLS = [{"type": "function", "function": {"name": n, "description": "d", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}} for n in ("get_weather", "find")]
PROMPT = list(TOK.apply_chat_template([{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS,
                                      add_generation_prompt=True, tokenize=True, return_dict=False))


def ids(*parts) -> list[int]:
    """A special-token string -> its id (looked up); any other string -> its text encoded on its own."""
    out: list[int] = []
    for part in parts:
        out += [TOKENS.ids[part]] if part in TOKENS.ids else TOK.encode(part, add_special_tokens=False)
    return out


def call(id_text: str, args: str) -> tuple:
    return (CB, id_text, AB, args, CE)


W0 = call("functions.get_weather:0", '{"q": "Paris"}')
F1 = call(" functions.find:1 ", '{"q": "museums"}')

# name -> (completion ids, the finish reason it is judged with)
CASES = {
    "plain": (ids("Sum.", END_THINK, "It is 4.", EOT), "stop"),
    "calls": (ids("Look up.", END_THINK, "Checking.", SB, *W0, "\n", *F1, SE, EOT), "stop"),
    "no_think_close": (ids("Thinking and done.", EOT), "stop"),
    "truncated_in_reasoning": (ids("Still thinking"), "length"),
    "truncated_in_call": (ids("x", END_THINK, SB, *W0, CB, "functions.find:1", AB, '{"q": "mu'), "length"),
    "call_without_argument_begin": (ids("x", END_THINK, SB, CB, "functions.get_weather:0", CE, *F1, SE, EOT), "stop"),
    "end_without_begin": (ids("x", END_THINK, "Hm.", SE, "ok", EOT), "stop"),
    "text_between_calls": (ids("x", END_THINK, SB, *W0, "and", *F1, SE, EOT), "stop"),
    "closed_inside_call": (ids("x", END_THINK, SB, CB, "functions.get_weather:0", AB, "{", SE, EOT), "stop"),
    "never_closed": (ids("x", END_THINK, SB, *W0, EOT), "stop"),
    "outside_and_after": (ids("x", END_THINK, *W0, SB, *F1, SE, "Done.", EOT), "stop"),
    "in_reasoning": (ids("x", SB, *W0, SE, END_THINK, "y", EOT), "stop"),
    "bad_id_and_args": (ids("x", END_THINK, SB, *call("get_weather", "[1]"), SE, EOT), "stop"),
    "two_think_close": (ids("a", END_THINK, "b", END_THINK, "c", EOT), "stop"),
    "empty": ([], "length"),
}


def test_a_well_formed_completion_parses_into_its_parts():
    out, _ = CASES["calls"]
    c = GRAMMAR.parse(out)
    assert c.ends_with_end_of_turn and c.body_end == len(out) - 1 and c.n == len(out)
    assert c.reasoning == "Look up." and c.reasoning_end == c.think_close == len(ids("Look up."))
    assert c.answer == "Checking." and c.faults == [] and not c.empty_section
    assert [(k.name, k.index, k.arguments, k.arguments_ok) for k in c.calls] == [
        ("get_weather", 0, '{"q": "Paris"}', True), ("find", 1, '{"q": "museums"}', True)]
    assert c.calls[1].id_text == " functions.find:1 "
    first = c.calls[0]
    assert out[first.begin] == TOKENS.tool_call_begin and out[first.argument_begin] == TOKENS.tool_call_argument_begin
    assert out[first.end] == TOKENS.tool_call_end and out[c.section_begin] == TOKENS.tool_calls_section_begin
    assert out[c.section_end] == TOKENS.tool_calls_section_end
    assert c.at[CALL_BEGIN] == [first.begin, c.calls[1].begin]


@pytest.mark.parametrize("name,kinds", [
    ("call_without_argument_begin", [Fault.OUT_OF_ORDER]),
    ("end_without_begin", [Fault.END_WITHOUT_BEGIN]),
    ("text_between_calls", [Fault.TEXT_BETWEEN_CALLS]),
    ("closed_inside_call", [Fault.CLOSED_INSIDE_CALL]),
    ("never_closed", [Fault.UNCLOSED]),
    ("truncated_in_call", [Fault.UNCLOSED]),
])
def test_each_malformation_is_found_where_it_is(name, kinds):
    out, _ = CASES[name]
    c = GRAMMAR.parse(out)
    assert [f.kind for f in c.faults] == kinds
    assert all(f.message and 0 <= f.position < len(out) for f in c.faults)


def test_the_tolerance_for_malformed_input():
    c = GRAMMAR.parse(CASES["call_without_argument_begin"][0])
    assert c.calls == []                              # reading the section stops at the first token out of order
    c = GRAMMAR.parse(CASES["text_between_calls"][0])
    assert [k.name for k in c.calls] == ["get_weather", "find"]   # text between calls: reading goes on
    c = GRAMMAR.parse(CASES["outside_and_after"][0])
    assert len(c.tool_tokens_outside_section) == 3 and [k.name for k in c.calls] == ["find"]
    assert c.answer.startswith(CB) and c.answer.endswith("Done.")     # stray tokens and text after stay answer
    c = GRAMMAR.parse(CASES["in_reasoning"][0])
    assert len(c.tool_tokens_in_reasoning) == 5 and c.calls == [] and c.reasoning.startswith("x" + SB)
    c = GRAMMAR.parse(CASES["no_think_close"][0])
    assert c.think_close is None and c.reasoning == "Thinking and done." and c.answer == ""
    c = GRAMMAR.parse(CASES["bad_id_and_args"][0])
    assert [(k.name, k.index, k.arguments_ok) for k in c.calls] == [(None, None, False)]
    c = GRAMMAR.parse(ids("x", END_THINK, SB, SE, EOT))
    assert c.empty_section and c.calls == [] and c.faults == []


def test_a_chunk_parses_as_its_completions_one_by_one():
    outs = [out for out, _ in CASES.values()]
    together = list(GRAMMAR.parse_many(*pack(outs)))
    alone = [GRAMMAR.parse(out) for out in outs]
    assert together == alone and [c.ids.tolist() for c in together] == outs


@pytest.mark.parametrize("name", list(CASES))
def test_one_reasoning_boundary_for_the_validator_generation_and_score(name):
    out, finish = CASES[name]
    verdict = Validator(TOKENS, TOK, 4096).validate(PROMPT, out, finish, {}, TOOLS)
    assert verdict.reasoning_len == GRAMMAR.parse(out).reasoning_end == reasoning_length(out, TOKENS)
    assert reasoning_length(np.asarray(out, dtype=np.int32), TOKENS) == verdict.reasoning_len


@pytest.mark.parametrize("name", list(CASES))
def test_inspect_shows_what_the_validator_reads(name):
    """inspect's completion segments are the grammar's parts: its tool-call segments are the calls of the
    validator's decoded turn, and the segments cover the completion exactly."""
    out, finish = CASES[name]
    verdict = Validator(TOKENS, TOK, 4096).validate(PROMPT, out, finish, {}, TOOLS)
    segs = segments_of(KIMI_K2_FORMAT.bind(TINY_KIMI, TOK).segmenter(), PROMPT + out, len(PROMPT))
    completion = [s for s in segs if s.loss == 1]
    assert sum((s.ids for s in completion), []) == out
    shown = [s.label for s in completion if s.kind == "tool_call"]
    decoded = [c["function"]["name"] or "malformed id" for c in verdict.assistant["tool_calls"]]
    assert shown == [f"tool call {k}: {n}" for k, n in enumerate(decoded)]
    reasoning = [s for s in completion if s.kind == "reasoning"]
    if out:
        assert reasoning[0].n_tokens == verdict.reasoning_len + (GRAMMAR.parse(out).think_close is not None)
    answer = "".join(s.text for s in completion if s.kind == "answer" or s.label == "text after the tool-call section")
    assert answer == verdict.assistant["content"]


# Instant mode: the prompt ends `<think></think>` (the template's thinking=False); the completion has no reasoning.
INSTANT_PROMPT = list(TOK.apply_chat_template([{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS,
                                              add_generation_prompt=True, tokenize=True, return_dict=False,
                                              thinking=False))
INSTANT_CASES = {
    "answer": ids("Sunny.", EOT),
    "calls": ids(SB, *W0, *F1, SE, EOT),
    "text_then_call": ids("Checking.", SB, *W0, SE, EOT),
    "with_think_end": ids("Sunny.", END_THINK, "Really.", EOT),
}


def test_an_instant_completion_is_all_answer():
    c = GRAMMAR.parse(INSTANT_CASES["text_then_call"], instant=True)
    assert c.instant and c.reasoning == "" and c.reasoning_end == 0 and c.answer_start == 0
    assert c.answer == "Checking." and [k.name for k in c.calls] == ["get_weather"] and not c.faults
    # a `</think>` in an instant completion is read as answer text (the validator's instant_has_think_end)
    c = GRAMMAR.parse(INSTANT_CASES["with_think_end"], instant=True)
    assert c.answer == "Sunny.</think>Really." and c.think_close == len(ids("Sunny."))
    # the same ids read in thinking mode: all reasoning, no answer
    c = GRAMMAR.parse(INSTANT_CASES["text_then_call"])
    assert c.answer_start is None and c.calls == [] and c.reasoning_end == c.body_end


def test_instant_chunks_parse_as_one_by_one():
    outs = [*INSTANT_CASES.values(), *(out for out, _ in CASES.values())]
    flags = [True] * len(INSTANT_CASES) + [False] * len(CASES)
    together = list(GRAMMAR.parse_many(*pack(outs), instant=flags))
    assert together == [GRAMMAR.parse(o, instant=f) for o, f in zip(outs, flags)]


@pytest.mark.parametrize("name", list(INSTANT_CASES))
def test_instant_reasoning_boundary_and_inspect(name):
    out = INSTANT_CASES[name]
    verdict = Validator(TOKENS, TOK, 4096).validate(INSTANT_PROMPT, out, "stop", {}, TOOLS)
    assert verdict.mode == "instant"
    assert verdict.reasoning_len == GRAMMAR.parse(out, instant=True).reasoning_end == 0
    assert reasoning_length(out, TOKENS, instant=True) == 0
    assert verdict.issues == (["instant_has_think_end"] if name == "with_think_end" else [])
    seg = KIMI_K2_FORMAT.bind(TINY_KIMI, TOK).segmenter()
    segs = segments_of(seg, INSTANT_PROMPT + out, len(INSTANT_PROMPT))
    assert seg.mode(np.asarray(INSTANT_PROMPT + out), len(INSTANT_PROMPT)) == "instant"
    gp = [s for s in segs if s.kind == "generation_prompt"]
    assert gp and gp[0].text.endswith("<think></think>") and gp[0].label == "generation prompt (instant mode)"
    completion = [s for s in segs if s.loss == 1]
    assert sum((s.ids for s in completion), []) == out and not [s for s in completion if s.kind == "reasoning"]
    shown = [s.label for s in completion if s.kind == "tool_call"]
    assert shown == [f"tool call {k}: {c['function']['name']}" for k, c in enumerate(verdict.assistant["tool_calls"])]
