"""Token-structure validator (docs/token-rules.md): a hand-built corpus of completions, valid and invalid.

Sequences are built from text pieces (encoded with the embedded tiny Kimi-format tokenizer) and special-token
ids looked up by string; prompts are rendered by the tiny model's chat template. Every invalid case breaks exactly
one rule and must produce exactly that reason code; no rule may fire on a valid case.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS, k2_tokens
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from kimi_eagle_data.chat_format import Verdict
from kimi_eagle_data.formats.kimi_k2.rules import reason_descriptions
from kimi_eagle_data.formats.kimi_k2.validator import Validator
from kimi_eagle_data.id_buffers import pack

TINY_DIR = Path(__file__).resolve().parents[2] / "kimi_eagle_data" / "assets" / "tiny-kimi"

TOK = open_tokenizer(str(TINY_DIR))
TOKENS = k2_tokens(TOK)
MAX_SEQ_LEN = TINY_KIMI.max_seq_len
V = Validator(TOKENS, TOK, MAX_SEQ_LEN)
V_KEEP = Validator(TOKENS, TOK, MAX_SEQ_LEN, keep_truncated=True)

THINK, END_THINK, EOT = "<think>", "</think>", "<|im_end|>"
SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CB, AB, CE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def _tool(name: str, desc: str, props: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": desc,
                                             "parameters": {"type": "object", "properties": props,
                                                            "required": required}}}


TOOLS = [
    _tool("get_weather", "Get the current weather for a city", {"city": {"type": "string"}}, ["city"]),
    _tool("search_web", "Search the web for a query", {"query": {"type": "string"}}, ["query"]),
]


def ids(*parts) -> list[int]:
    """Token ids from parts: a special-token string -> its id (looked up, never hard-coded); an int -> as is;
    any other string -> its text encoded on its own."""
    out: list[int] = []
    for part in parts:
        if isinstance(part, int):
            out.append(part)
        elif part in TOKENS.ids:
            out.append(TOKENS.ids[part])
        else:
            out.extend(TOK.encode(part, add_special_tokens=False))
    return out


def render(messages, tools=None, **kw) -> list[int]:
    return list(TOK.apply_chat_template(messages, tools=tools, add_generation_prompt=kw.pop("gen", True),
                                        tokenize=True, return_dict=False, **kw))


PLAIN_PROMPT = render([{"role": "user", "content": "What is 2+2?"}])
CLARIFY_PROMPT = render([{"role": "user", "content": "Summarize the article at this link for me."}])
TOOL_PROMPT = render([{"role": "user", "content": "What is the weather in Paris, and search the web for museums."}],
                     tools=TOOLS)


def call(id_text: str, args: str) -> tuple:
    return (CB, id_text, AB, args, CE)


def section(*calls) -> tuple:
    return (SB, *[p for c in calls for p in c], SE)


W0 = call("functions.get_weather:0", '{"city": "Paris"}')
S1 = call("functions.search_web:1", '{"query": "museums in Paris"}')

# A conversation after a tool result: one call (`:0`) is already in the history, so the completion's next
# call continues at `:1` (Kimi numbers call ids across the conversation, as vLLM and SGLang do).
AFTER_RESULT_PROMPT = render([
    {"role": "user", "content": "Weather in Paris, then search museums."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                                                         "function": {"name": "get_weather",
                                                                      "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "name": "get_weather", "content": "18 C"},
], tools=TOOLS)


INSTANT_PROMPT = render([{"role": "user", "content": "What is 2+2?"}], thinking=False)
INSTANT_TOOL_PROMPT = render([{"role": "user", "content": "What is the weather in Paris, and search the web for "
                                                          "museums."}], tools=TOOLS, thinking=False)


# ----------------------------------------------------------------------------------------------
# Valid corpus

VALID = {
    "plain_answer": (PLAIN_PROMPT, ids("The user asks a sum. 2 plus 2 is 4.", END_THINK, "2+2 = 4.", EOT), None),
    "clarification": (CLARIFY_PROMPT, ids("No link.", END_THINK, "Which URL?", EOT), None),
    "two_tool_calls": (TOOL_PROMPT, ids("Need weather and a search.", END_THINK, *section(W0, S1), EOT), TOOLS),
    "text_before_tool_section": (TOOL_PROMPT, ids("Weather first.", END_THINK, "Let me check the weather.",
                                                  *section(W0), EOT), TOOLS),
    "empty_reasoning": (PLAIN_PROMPT, ids(END_THINK, "4", EOT), None),
    # Special-token text typed by a user becomes special ids in the prompt: not a structural error.
    "user_typed_special_text": (render([{"role": "user", "content": "Why does </think> appear in <|im_end|> logs?"}]),
                                ids("Explain.", END_THINK, "It is a marker.", EOT), None),
    # Tools declared in the flat {"name": …} shape.
    "flat_tool_shape": (TOOL_PROMPT, ids("Weather.", END_THINK, *section(W0), EOT),
                        [{"name": "get_weather", "parameters": {}}]),
    # Whitespace between calls inside the section is tolerated.
    "whitespace_between_calls": (TOOL_PROMPT, ids("Two.", END_THINK, SB, *W0, "\n", *S1, SE, EOT), TOOLS),
    "continues_after_history_call": (AFTER_RESULT_PROMPT, ids("Now search.", END_THINK, *section(S1), EOT), TOOLS),
}


# Instant mode: the completion is the answer (or the tool calls) directly, then the end of turn.
VALID_INSTANT = {
    "instant_plain_answer": (INSTANT_PROMPT, ids("2+2 = 4.", EOT), None),
    "instant_tool_calls": (INSTANT_TOOL_PROMPT, ids(*section(W0, S1), EOT), TOOLS),
    "instant_text_then_call": (INSTANT_TOOL_PROMPT, ids("Checking.", *section(W0), EOT), TOOLS),
}


@pytest.mark.parametrize("name", list(VALID_INSTANT))
def test_valid_instant_case_raises_no_issue(name):
    prompt, out, tools = VALID_INSTANT[name]
    v = V.validate(prompt, out, "stop", {"type": "stop", "matched": TOKENS.end_of_turn}, tools)
    assert v.issues == [] and v.valid, v.details
    assert v.mode == "instant" and v.reasoning_len == 0 and v.assistant["reasoning_content"] == ""


def test_instant_prompt_is_the_template_switch():
    """The instant prompt is the thinking prompt with `</think>` after its `<think>`: the template's own switch."""
    assert INSTANT_PROMPT == PLAIN_PROMPT + [TOKENS.think_close]
    assert V.validate(PLAIN_PROMPT, ids(*GOOD), "stop", {}, None).mode == "thinking"


def test_decoded_instant_answer_and_calls():
    v = V.validate(INSTANT_PROMPT, ids("2+2 = 4.", EOT), "stop", {}, None)
    assert v.assistant == {"role": "assistant", "reasoning_content": "", "content": "2+2 = 4.", "tool_calls": []}
    prompt, out, tools = VALID_INSTANT["instant_text_then_call"]
    v = V.validate(prompt, out, "stop", {}, tools)
    assert v.assistant["content"] == "Checking." and v.num_tool_calls == 1
    assert v.assistant["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_thinking_completion_under_an_instant_prompt_is_not_missing_think_close():
    # An instant answer without `</think>` is whole; the same ids under a thinking prompt lack `</think>`.
    out = ids("2+2 = 4.", EOT)
    assert V.validate(INSTANT_PROMPT, out, "stop", {}, None).valid
    assert V.validate(PLAIN_PROMPT, out, "stop", {}, None).issues == ["missing_think_close"]


@pytest.mark.parametrize("name", list(VALID))
def test_valid_case_raises_no_issue(name):
    prompt, out, tools = VALID[name]
    v = V.validate(prompt, out, "stop", {"type": "stop", "matched": TOKENS.end_of_turn}, tools)
    assert v.issues == [] and v.details == [], v.details
    assert v.valid and v.finish_reason == "stop"


def test_valid_cases_as_numpy_arrays_are_not_modified():
    for prompt, out, tools in VALID.values():
        p, o = np.asarray(prompt, dtype=np.int32), np.asarray(out, dtype=np.int32)
        p0, o0 = p.copy(), o.copy()
        assert V.validate(p, o, "stop", {}, tools).valid
        assert np.array_equal(p, p0) and np.array_equal(o, o0)


def test_prompt_ends_with_think():
    for prompt, _, _ in VALID.values():
        assert prompt[-1] == TOKENS.think_open


def test_clarification_is_short_and_valid():
    prompt, out, _ = VALID["clarification"]
    assert len(out) <= 24
    v = V.validate(prompt, out, "stop", {}, None)
    assert v.valid
    assert v.assistant == {"role": "assistant", "reasoning_content": "No link.",
                           "content": "Which URL?", "tool_calls": []}


def test_decoded_plain_answer():
    prompt, out, _ = VALID["plain_answer"]
    v = V.validate(prompt, out, "stop", {}, None)
    assert v.reasoning_len == len(ids("The user asks a sum. 2 plus 2 is 4."))
    assert v.num_tool_calls == 0 and v.args_valid
    assert v.assistant["reasoning_content"] == "The user asks a sum. 2 plus 2 is 4."
    assert v.assistant["content"] == "2+2 = 4."


def test_decoded_two_tool_calls():
    prompt, out, tools = VALID["two_tool_calls"]
    v = V.validate(prompt, out, "stop", {}, tools)
    assert v.num_tool_calls == 2 and v.args_valid
    assert v.assistant["content"] == ""
    assert v.assistant["tool_calls"] == [
        {"id": "functions.get_weather:0", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "functions.search_web:1", "type": "function",
         "function": {"name": "search_web", "arguments": '{"query": "museums in Paris"}'}},
    ]
    assert [json.loads(c["function"]["arguments"]) for c in v.assistant["tool_calls"]] == [
        {"city": "Paris"}, {"query": "museums in Paris"}]


def test_decoded_text_before_tool_section_and_empty_reasoning():
    prompt, out, tools = VALID["text_before_tool_section"]
    v = V.validate(prompt, out, "stop", {}, tools)
    assert v.assistant["content"] == "Let me check the weather."
    assert v.num_tool_calls == 1
    prompt, out, tools = VALID["empty_reasoning"]
    v = V.validate(prompt, out, "stop", {}, tools)
    assert v.reasoning_len == 0 and v.assistant["reasoning_content"] == "" and v.assistant["content"] == "4"


def test_decoded_turn_rerenders_to_the_same_ids():
    """The decoded assistant turn, rendered back by the template as the last turn, reproduces the completion."""
    msgs = [{"role": "user", "content": "What is the weather in Paris, and search the web for museums."}]
    for name in ("two_tool_calls", "text_before_tool_section"):
        prompt, out, tools = VALID[name]
        v = V.validate(prompt, out, "stop", {}, tools)
        full = render(msgs + [v.assistant], tools=TOOLS, gen=False)
        # Template: <|im_assistant|>assistant<|im_middle|><think>reasoning</think>… ; completion starts after <think>.
        assert TOK.decode(full[len(prompt):], skip_special_tokens=False) == TOK.decode(out, skip_special_tokens=False)


# ----------------------------------------------------------------------------------------------
# Invalid corpus: (code, prompt, output_ids, finish_reason, finish_detail, tools, validator)


def _stop(code, prompt, out, tools=None):
    return (code, prompt, out, "stop", {"type": "stop", "matched": TOKENS.end_of_turn}, tools, V)


def _vocab() -> int:
    return V.vocab_size


GOOD = ("Fine.", END_THINK, "Answer.", EOT)
PARTIAL = ids("I am still thinking about the weather and")

INVALID = {
    # sample level
    "prompt_without_generation_prompt": _stop(
        "prompt_not_generation_prompt", render([{"role": "user", "content": "hi"}], gen=False), ids(*GOOD)),
    # instant mode (the prompt ends `<think></think>`, the template's thinking=False): no reasoning
    "instant_with_reasoning": _stop("instant_has_think_end", INSTANT_PROMPT, ids(*GOOD)),
    "instant_think_end_after_answer": _stop("instant_has_think_end", INSTANT_PROMPT, ids("4.", END_THINK, EOT)),
    "instant_think_start": _stop("instant_has_think_start", INSTANT_PROMPT, ids(THINK, "Answer.", EOT)),
    "instant_empty_answer": _stop("empty_answer", INSTANT_PROMPT, ids(" \n", EOT)),
    "instant_tool_call_outside_section": _stop("tool_call_outside_section", INSTANT_TOOL_PROMPT,
                                               ids("Calling.", *W0, EOT), TOOLS),
    "exceeds_max_seq_len": _stop(
        "exceeds_max_seq_len", PLAIN_PROMPT, ids(" ".join(["think"] * (MAX_SEQ_LEN + 10)), END_THINK, "4", EOT)),
    "id_too_large": _stop("id_out_of_range", PLAIN_PROMPT, ids("Fine.", _vocab(), END_THINK, "Answer.", EOT)),
    "id_negative": _stop("id_out_of_range", PLAIN_PROMPT, ids("Fine.", END_THINK, "Answer.", -1, EOT)),
    "aborted": ("aborted", PLAIN_PROMPT, PARTIAL, "abort", {"type": "abort", "message": "client gone"}, None, V),
    "unknown_finish_reason": ("unknown_finish_reason", PLAIN_PROMPT, ids(*GOOD), "cancelled", {}, None, V),
    "truncated": ("truncated", PLAIN_PROMPT, PARTIAL, "length", {"type": "length", "length": len(PARTIAL)}, None, V),
    "length_mismatch": ("length_mismatch", PLAIN_PROMPT, PARTIAL, "length",
                        {"type": "length", "length": len(PARTIAL) + 7}, None, V_KEEP),
    # reasoning / think
    "think_open_in_completion": _stop("think_open_in_completion", PLAIN_PROMPT, ids(THINK, *GOOD)),
    "multiple_think_close": _stop("multiple_think_close", PLAIN_PROMPT,
                                  ids("Fine.", END_THINK, "Wait.", END_THINK, "Answer.", EOT)),
    "missing_think_close": _stop("missing_think_close", PLAIN_PROMPT, ids("Fine. The answer is 4.", EOT)),
    # tool section
    "tool_section_in_reasoning": _stop("tool_section_in_reasoning", TOOL_PROMPT,
                                       ids("Calling now.", *section(W0), END_THINK, "Done.", EOT), TOOLS),
    "tool_call_outside_section": _stop("tool_call_outside_section", TOOL_PROMPT,
                                       ids("Weather.", END_THINK, "Calling.", *W0, EOT), TOOLS),
    "section_end_without_begin": _stop("malformed_tool_section", TOOL_PROMPT,
                                       ids("Weather.", END_THINK, "Calling.", SE, EOT), TOOLS),
    "call_without_argument_begin": _stop("malformed_tool_section", TOOL_PROMPT,
                                         ids("Weather.", END_THINK, SB, CB, "functions.get_weather:0", CE, SE, EOT),
                                         TOOLS),
    "section_never_closed": _stop("malformed_tool_section", TOOL_PROMPT,
                                  ids("Weather.", END_THINK, SB, *W0, EOT), TOOLS),
    "nested_section": _stop("malformed_tool_section", TOOL_PROMPT,
                            ids("Weather.", END_THINK, SB, *W0, SB, *S1, SE, EOT), TOOLS),
    "text_between_calls": _stop("malformed_tool_section", TOOL_PROMPT,
                                ids("Two.", END_THINK, SB, *W0, "and then", *S1, SE, EOT), TOOLS),
    "section_closed_inside_call": _stop("malformed_tool_section", TOOL_PROMPT,
                                        ids("Weather.", END_THINK, SB, CB, "functions.get_weather:0", AB,
                                            '{"city": "Paris"}', SE, EOT), TOOLS),
    "empty_tool_section": _stop("empty_tool_section", TOOL_PROMPT,
                                ids("Weather.", END_THINK, "Let me see.", SB, SE, EOT), TOOLS),
    "text_after_tool_section": _stop("text_after_tool_section", TOOL_PROMPT,
                                     ids("Weather.", END_THINK, *section(W0), "Done.", EOT), TOOLS),
    "bad_id_no_prefix": _stop("bad_tool_call_id", TOOL_PROMPT,
                              ids("Weather.", END_THINK, *section(call("get_weather:0", '{"city": "Paris"}')), EOT),
                              TOOLS),
    "bad_id_no_index": _stop("bad_tool_call_id", TOOL_PROMPT,
                             ids("Weather.", END_THINK, *section(call("functions.get_weather", '{"city": "Paris"}')),
                                 EOT), TOOLS),
    "index_starts_at_1": _stop("tool_call_index_out_of_order", TOOL_PROMPT,
                               ids("Weather.", END_THINK,
                                   *section(call("functions.get_weather:1", '{"city": "Paris"}')), EOT), TOOLS),
    "index_repeated": _stop("tool_call_index_out_of_order", TOOL_PROMPT,
                            ids("Two.", END_THINK,
                                *section(W0, call("functions.search_web:0", '{"query": "museums"}')), EOT), TOOLS),
    "index_restarts_after_history": _stop("tool_call_index_out_of_order", AFTER_RESULT_PROMPT,
                                          ids("Now search.", END_THINK,
                                              *section(call("functions.search_web:0", '{"query": "museums"}')),
                                              EOT), TOOLS),
    "undeclared_tool": _stop("undeclared_tool", TOOL_PROMPT,
                             ids("Mail.", END_THINK, *section(call("functions.send_email:0", '{"to": "a@b.c"}')), EOT),
                             TOOLS),
    "tool_call_without_tools": _stop("tool_call_without_tools", PLAIN_PROMPT,
                                     ids("Weather.", END_THINK, *section(W0), EOT), None),
    "args_single_quoted": _stop("args_not_json_object", TOOL_PROMPT,
                                ids("Weather.", END_THINK,
                                    *section(call("functions.get_weather:0", "{'city': 'Paris'}")), EOT), TOOLS),
    "args_json_array": _stop("args_not_json_object", TOOL_PROMPT,
                             ids("Weather.", END_THINK, *section(call("functions.get_weather:0", '["Paris"]')), EOT),
                             TOOLS),
    "args_cut_off": _stop("args_not_json_object", TOOL_PROMPT,
                          ids("Weather.", END_THINK, *section(call("functions.get_weather:0", '{"city": "Par')), EOT),
                          TOOLS),
    "args_nan": _stop("args_not_json_object", TOOL_PROMPT,
                      ids("Weather.", END_THINK, *section(call("functions.get_weather:0", '{"temp": NaN}')), EOT),
                      TOOLS),
    # answer / end of turn
    "empty_answer": _stop("empty_answer", PLAIN_PROMPT, ids("Fine.", END_THINK, EOT)),
    "blank_answer": _stop("empty_answer", PLAIN_PROMPT, ids("Fine.", END_THINK, " \n\n ", EOT)),
    "missing_end_of_turn": _stop("missing_end_of_turn", PLAIN_PROMPT, ids("Fine.", END_THINK, "Answer.")),
    "end_of_turn_not_last": _stop("end_of_turn_not_last", PLAIN_PROMPT, ids(*GOOD, "More.")),
    "multiple_end_of_turn": _stop("multiple_end_of_turn", PLAIN_PROMPT, ids(*GOOD, "More.", EOT)),
}

# One forbidden-token case per forbidden token the tokenizer has.
for _t in K2_TOKENS.forbidden_in_completion:
    if _t in TOKENS.ids:
        INVALID[f"forbidden {_t}"] = _stop("forbidden_token", PLAIN_PROMPT, ids("Fine.", END_THINK, "Ans", _t, "wer.", EOT))


@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_case_raises_exactly_its_code(name):
    code, prompt, out, finish, detail, tools, validator = INVALID[name]
    v = validator.validate(prompt, out, finish, detail, tools)
    assert v.issues == [code], (v.issues, v.details)
    assert len(v.details) == 1 and v.details[0]
    assert not v.valid


def test_a_chunk_is_judged_as_its_samples_one_by_one():
    """validate_many (one vectorised pass over a chunk's buffers, what emit runs) gives every sample the
    verdict validate gives it alone: the whole corpus, valid and invalid (out-of-range ids, empty
    completions, every rule), shuffled into one chunk."""
    cases = [(p, o, "stop", {"type": "stop", "matched": TOKENS.end_of_turn}, t)
             for p, o, t in [*VALID.values(), *VALID_INSTANT.values()]]
    cases += [(p, o, f, d, t) for _code, p, o, f, d, t, validator in INVALID.values() if validator is V]
    cases += [(PLAIN_PROMPT, [], "length", {"type": "length", "length": 0}, None), ([], [], "abort", {}, None)]
    order = np.random.default_rng(0).permutation(len(cases))
    cases = [cases[i] for i in order]

    together = list(V.validate_many(*pack([c[0] for c in cases]), *pack([c[1] for c in cases]),
                                    [c[2] for c in cases], [c[3] for c in cases], [c[4] for c in cases]))
    alone = [V.validate(*c) for c in cases]
    assert len(together) == len(cases) == len(alone)
    assert together == alone
    assert sum(v.valid for v in alone) == len(VALID) + len(VALID_INSTANT)
    assert len({code for v in alone for code in v.issues}) > 20 and {v.mode for v in alone} == {"thinking", "instant"}


def test_every_reason_code_has_a_case():
    assert {case[0] for case in INVALID.values()} == set(reason_descriptions())
    assert all(isinstance(d, str) and d and "\n" not in d for d in reason_descriptions().values())


def test_forbidden_token_is_named():
    for name, (code, prompt, out, finish, detail, tools, validator) in INVALID.items():
        if code == "forbidden_token":
            tok = name.split(" ", 1)[1]
            assert tok in validator.validate(prompt, out, finish, detail, tools).details[0]


def test_several_issues_are_all_reported():
    out = ids(THINK, "Fine.", "<|im_user|>", "x")        # <think>, forbidden, no </think>, no end of turn
    v = V.validate(PLAIN_PROMPT, out, "stop", {}, None)
    assert set(v.issues) == {"think_open_in_completion", "forbidden_token", "missing_think_close",
                             "missing_end_of_turn"}
    assert len(v.details) == len(v.issues)


def test_bad_args_reported_once_with_each_call():
    out = ids("Two.", END_THINK, *section(call("functions.get_weather:0", "{bad"),
                                          call("functions.search_web:1", "nope")), EOT)
    v = V.validate(TOOL_PROMPT, out, "stop", {}, TOOLS)
    assert v.issues == ["args_not_json_object"] and not v.args_valid
    assert "call 0" in v.details[0] and "call 1" in v.details[0]


# ----------------------------------------------------------------------------------------------
# Truncated completions


def _length(out):
    return {"type": "length", "length": len(out)}


def test_truncated_kept_in_reasoning_is_valid():
    v = V_KEEP.validate(PLAIN_PROMPT, PARTIAL, "length", _length(PARTIAL), None)
    assert v.valid and v.finish_reason == "length"
    assert v.reasoning_len == len(PARTIAL)
    assert v.assistant["reasoning_content"] == TOK.decode(PARTIAL, skip_special_tokens=False)
    assert v.assistant["content"] == ""


def test_truncated_kept_inside_tool_call_is_valid():
    out = ids("Weather.", END_THINK, SB, *W0, CB, "functions.search_web:1", AB, '{"query": "mus')
    v = V_KEEP.validate(TOOL_PROMPT, out, "length", _length(out), TOOLS)
    assert v.valid, v.details
    assert v.num_tool_calls == 2 and len(v.assistant["tool_calls"]) == 1   # only the finished call is decoded


def test_truncated_without_answer_is_not_empty_answer():
    out = ids("Fine.", END_THINK)
    assert V_KEEP.validate(PLAIN_PROMPT, out, "length", _length(out), None).valid


@pytest.mark.parametrize("code,out", [
    ("forbidden_token", ids("Fine.", "<|im_assistant|>", "more")),
    ("think_open_in_completion", ids(THINK, "Fine.")),
    ("multiple_think_close", ids("a", END_THINK, "b", END_THINK, "c")),
    ("undeclared_tool", ids("a", END_THINK, SB, *call("functions.send_email:0", "{}"), CB, "functions.x")),
])
def test_truncated_still_checks_what_does_not_need_the_end(code, out):
    v = V_KEEP.validate(TOOL_PROMPT, out, "length", _length(out), TOOLS)
    assert v.issues == [code], v.details
    v = V.validate(TOOL_PROMPT, out, "length", _length(out), TOOLS)
    assert v.issues == ["truncated", code], v.details


def test_length_ending_with_end_of_turn_is_a_whole_turn():
    """SGLang <= 0.5.9 reported `length` when the stop token landed on the last allowed position."""
    prompt, out, _ = VALID["plain_answer"]
    v = V.validate(prompt, out, "length", _length(out), None)
    assert v.valid and v.finish_reason == "stop"
    bad = ids("Fine.", END_THINK, EOT)                      # and it is validated as a whole turn
    assert V.validate(PLAIN_PROMPT, bad, "length", _length(bad), None).issues == ["empty_answer"]


def test_length_without_reported_length_is_not_a_mismatch():
    assert V_KEEP.validate(PLAIN_PROMPT, PARTIAL, "length", {"type": "length"}, None).valid
    assert V_KEEP.validate(PLAIN_PROMPT, PARTIAL, "length", None, None).valid


# ----------------------------------------------------------------------------------------------
# Construction


def test_constructor_checks_the_generation_prompt():
    bad = replace(K2_TOKENS, generation_prompt="<|im_assistant|>assistant<|im_middle|>")
    with pytest.raises(ValueError, match="generation prompt"):
        Validator(k2_tokens(TOK, bad), TOK, 512)


def test_verdict_valid_property():
    assert Verdict().valid and not Verdict(issues=["truncated"], details=["x"]).valid
