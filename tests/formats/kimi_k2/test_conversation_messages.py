"""Turns on the model's own history (kimi_eagle_data/conversation/messages.py, K2.5's assistant message in
kimi_eagle_data/formats/kimi_k2/messages.py): a completion parsed by the grammar, sent back as the
assistant message a client sends, and the next turn's prompt rendered by the model's template. Every prompt here is
checked id for id against the template's own `apply_chat_template` (the embedded tiny tokenizer renders every
conversation as Kimi-K2.5's template does); completions are cut out of what the template renders for a message."""

from __future__ import annotations

import pytest

from kimi_eagle_data.formats.kimi_k2.grammar import CompletionGrammar
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.model_profile import INSTANT, THINKING, model_vocab_size
from kimi_eagle_data.formats.kimi_k2.tokens import k2_tokens
from kimi_eagle_data.decoding import SegmentDecoder
from kimi_eagle_data.formats.kimi_k2.render import render_prompt
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from kimi_eagle_data.conversation.messages import TurnError, history_call_count, next_turn_messages, tool_call_matches
from kimi_eagle_data.formats.kimi_k2.messages import assistant_message

TOK = open_tokenizer(str(TINY_MODEL_DIR))
TOKENS = k2_tokens(TOK)
GRAMMAR = CompletionGrammar(TOKENS, SegmentDecoder(TOK, model_vocab_size(TINY_KIMI, TOK)))

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", "parameters": {
             "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "search", "description": "Search the web", "parameters": {
             "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
             "required": ["query"]}}}]


def call(name: str, index: int, arguments: str) -> dict:
    return {"id": f"functions.{name}:{index}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


def template_ids(messages, tools=TOOLS, mode=THINKING, generation_prompt=True) -> list[int]:
    """The template's own rendering, straight through `apply_chat_template` (the serving stack's path)."""
    kwargs = {"thinking": False} if mode == INSTANT else {}
    return list(TOK.apply_chat_template(messages, tools=tools, add_generation_prompt=generation_prompt,
                                        tokenize=True, return_dict=False, **kwargs))


def prompt_ids(messages, tools=TOOLS, mode=THINKING) -> list[int]:
    """The project's render path, checked byte-exact against the template's own."""
    ids = render_prompt(TOK, messages, tools, mode)
    assert ids == template_ids(messages, tools, mode)
    return ids


def completion_of(history, message, mode=THINKING) -> list[int]:
    """The completion ids of `message` after `history`: what the template renders for history + message, less
    the prompt for history (the template keeps a tool-call turn's reasoning when no plain answer follows it)."""
    prompt = prompt_ids(history, mode=mode)
    full = template_ids([*history, message], mode=mode, generation_prompt=False)
    assert full[:len(prompt)] == prompt
    return full[len(prompt):]


def text(ids) -> str:
    return TOK.decode(ids, skip_special_tokens=False)


def find(haystack: list[int], needle: list[int]) -> int:
    """Where `needle` starts in `haystack` as a run of ids, or -1."""
    return next((i for i in range(len(haystack) - len(needle) + 1) if haystack[i:i + len(needle)] == needle), -1)


def test_a_tool_loop_prompt_continues_with_the_turns_own_completion():
    history = [{"role": "user", "content": "Is it raining in Oslo?"}]
    own = {"role": "assistant", "reasoning_content": "I need the weather in Oslo.", "content": "Let me check.",
           "tool_calls": [call("get_weather", 0, '{"city": "Oslo"}')]}
    source_turn = {"role": "assistant", "content": "SOURCE says: checking the forecast.",
                   "tool_calls": [call("get_weather", 0, '{"city":"Oslo"}')]}
    prompt, completion = prompt_ids(history), completion_of(history, own)
    parsed = GRAMMAR.parse(completion)
    assert not parsed.faults and parsed.ends_with_end_of_turn
    sent_back = assistant_message(parsed, history_call_count(history))
    assert sent_back == own
    assert tool_call_matches(sent_back["tool_calls"][0], source_turn["tool_calls"][0])

    result = {"role": "tool", "tool_call_id": "functions.get_weather:5", "name": "get_weather", "content": "4 C, rain"}
    messages = next_turn_messages(history, sent_back, [result])
    assert messages[-1]["tool_call_id"] == "functions.get_weather:0"     # answers the model's own call
    assert result["tool_call_id"] == "functions.get_weather:5"          # the source's message is not modified
    next_prompt = prompt_ids(messages)
    # The next prompt is this turn's prompt and its completion, id for id (reasoning kept in a tool loop), then
    # the tool's result and the generation prompt.
    assert next_prompt[:len(prompt) + len(completion)] == prompt + completion
    rest = text(next_prompt[len(prompt) + len(completion):])
    assert rest == ("<|im_system|>get_weather<|im_middle|>## Return of functions.get_weather:0\n4 C, rain<|im_end|>"
                    "<|im_assistant|>assistant<|im_middle|><think>")
    assert "SOURCE" not in text(next_prompt)


def test_a_chat_prompt_holds_the_turns_own_answer_without_its_reasoning():
    history = [{"role": "user", "content": "Name a fruit."}]
    completion = TOK.encode("The user wants one fruit.</think>Apple.<|im_end|>", add_special_tokens=False)
    parsed = GRAMMAR.parse(completion)
    sent_back = assistant_message(parsed)
    assert sent_back == {"role": "assistant", "reasoning_content": "The user wants one fruit.", "content": "Apple."}

    next_prompt = prompt_ids(next_turn_messages(history, sent_back, [{"role": "user", "content": "Another one?"}]))
    # The model's own answer tokens, after the empty think block the template gives a turn before the last one
    # without tool calls, and before the next user turn; its reasoning is dropped; the source's answer is absent.
    answer = completion[parsed.think_close + 1:]
    at = find(next_prompt, answer)
    assert at > 0 and text(next_prompt[:at]).endswith("<|im_assistant|>assistant<|im_middle|><think></think>")
    assert text(next_prompt[at + len(answer):]).startswith("<|im_user|>user<|im_middle|>Another one?<|im_end|>")
    assert "The user wants one fruit." not in text(next_prompt)
    assert "Banana" not in text(next_prompt)


def test_reasoning_is_kept_only_after_the_last_assistant_turn_without_tool_calls():
    """K2.5's template splits the messages after the last assistant turn without tool calls: turns up to it render
    `<think></think>`, later ones `<think>{reasoning_content}</think>`; with thinking=False none keeps it."""
    messages = [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "reasoning_content": "R1", "content": "",
         "tool_calls": [call("search", 0, '{"query":"a"}')]},
        {"role": "tool", "tool_call_id": "functions.search:0", "name": "search", "content": "t1"},
        {"role": "assistant", "reasoning_content": "R2", "content": "plain answer"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "reasoning_content": "R3", "content": "",
         "tool_calls": [call("search", 1, '{"query":"b"}')]},
        {"role": "tool", "tool_call_id": "functions.search:1", "name": "search", "content": "t3"},
    ]
    thinking = text(prompt_ids(messages))
    assert "R1" not in thinking and "R2" not in thinking
    assert "<think></think><|tool_calls_section_begin|>" in thinking        # turn 1: kept its call, not R1
    assert "<think></think>plain answer<|im_end|>" in thinking
    assert "<think>R3</think><|tool_calls_section_begin|><|tool_call_begin|>functions.search:1" in thinking
    instant = text(prompt_ids(messages, mode=INSTANT))
    assert not any(r in instant for r in ("R1", "R2", "R3"))
    assert instant.count("<think></think>") == 4   # three assistant turns and the generation prompt


HISTORY_WITH_A_CALL = [
    {"role": "user", "content": "Weather in Oslo, then news about it."},
    {"role": "assistant", "reasoning_content": "Weather first.", "content": "",
     "tool_calls": [call("get_weather", 0, '{"city": "Oslo"}')]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "name": "get_weather", "content": "4 C"},
]


@pytest.mark.parametrize("mode, message", [
    (THINKING, {"role": "assistant", "reasoning_content": "Now the news.", "content": "",
                "tool_calls": [call("search", 1, '{"query": "Oslo news", "limit": 3}')]}),
    (THINKING, {"role": "assistant", "reasoning_content": "Two searches.\nIn parallel.", "content": "Searching twice.",
                "tool_calls": [call("search", 1, '{"query": "Oslo — nyheter", "nested": {"a": [1, 2.5, null]}}'),
                               call("get_weather", 2, '{"city":"Bergen"}')]}),
    (THINKING, {"role": "assistant", "reasoning_content": "", "content": "",
                "tool_calls": [call("search", 1, '{"query": "x"}')]}),
    (INSTANT, {"role": "assistant", "content": "Searching.", "tool_calls": [call("search", 1, '{"query": "y"}')]}),
])
def test_a_rendered_completion_round_trips_through_the_grammar(mode, message):
    completion = completion_of(HISTORY_WITH_A_CALL, message, mode)
    parsed = GRAMMAR.parse(completion, instant=mode == INSTANT)
    assert not parsed.faults
    rebuilt = assistant_message(parsed, history_call_count(HISTORY_WITH_A_CALL))
    assert rebuilt == message
    assert ("reasoning_content" in rebuilt) == (mode == THINKING)
    assert template_ids([*HISTORY_WITH_A_CALL, rebuilt], mode=mode, generation_prompt=False) == \
        template_ids([*HISTORY_WITH_A_CALL, message], mode=mode, generation_prompt=False)


def test_call_ids_keep_counting_across_the_conversation():
    """Turn 2's first call is k = the calls in its prompt's history (what the validator counts), and the ids sent
    back render as the model wrote them."""
    assert history_call_count(HISTORY_WITH_A_CALL) == 1
    turn_2 = {"role": "assistant", "reasoning_content": "r", "content": "",
              "tool_calls": [call("search", 1, '{"query": "a"}'), call("search", 2, '{"query": "b"}')]}
    prompt = prompt_ids(HISTORY_WITH_A_CALL)
    assert prompt.count(TOKENS.tool_call_begin) == history_call_count(HISTORY_WITH_A_CALL)
    parsed = GRAMMAR.parse(completion_of(HISTORY_WITH_A_CALL, turn_2))
    assert [c.index for c in parsed.calls] == [1, 2]
    sent_back = assistant_message(parsed, 1)
    assert [c["id"] for c in sent_back["tool_calls"]] == ["functions.search:1", "functions.search:2"]
    results = [{"role": "tool", "tool_call_id": "x", "name": "search", "content": c} for c in ("ra", "rb")]
    messages = next_turn_messages(HISTORY_WITH_A_CALL, sent_back, results)
    assert [m["tool_call_id"] for m in messages[-2:]] == ["functions.search:1", "functions.search:2"]
    assert history_call_count(messages) == 3
    assert prompt_ids(messages).count(TOKENS.tool_call_begin) == 3


def test_a_call_that_does_not_continue_the_count_cannot_be_sent_back():
    restarted = GRAMMAR.parse(completion_of(HISTORY_WITH_A_CALL, {
        "role": "assistant", "reasoning_content": "r", "content": "",
        "tool_calls": [call("search", 0, '{"query": "a"}')]}))
    with pytest.raises(TurnError, match="'functions.search:0' is not 'functions.search:1'"):
        assistant_message(restarted, 1)
    unnamed = GRAMMAR.parse(TOK.encode('r</think><|tool_calls_section_begin|><|tool_call_begin|>search<|tool_call_'
                                       'argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|><|im_end|>',
                                       add_special_tokens=False))
    assert unnamed.calls and unnamed.calls[0].name is None
    with pytest.raises(TurnError, match="'search' is not 'functions.NAME:0'"):
        assistant_message(unnamed, 0)


@pytest.mark.parametrize("source_next, error", [
    ([], "no next turn"),
    ([{"role": "assistant", "content": "source answer"}], "user turn or tool results"),
    ([{"role": "tool", "tool_call_id": "a", "content": "1"}, {"role": "tool", "tool_call_id": "b", "content": "2"}],
     "2 tool result.s. follow a turn with 1 tool call"),
])
def test_a_next_turn_the_conversation_cannot_take_is_an_error(source_next, error):
    own = {"role": "assistant", "content": "", "tool_calls": [call("search", 0, '{"query": "a"}')]}
    with pytest.raises(TurnError, match=error):
        next_turn_messages([{"role": "user", "content": "u"}], own, source_next)


@pytest.mark.parametrize("model_args, source_name, source_args, matches", [
    ('{"city": "Oslo", "days": 2}', "get_weather", '{"days":2,"city":"Oslo"}', True),     # key order, spacing
    ('{"city": "Oslo"}', "get_weather", {"city": "Oslo"}, True),                          # a mapping as is
    ('{"a": [1, {"b": "c"}]}', "get_weather", '{ "a" : [ 1 , { "b" : "c" } ] }', True),
    ('{"city": "Oslo"}', "search", '{"city": "Oslo"}', False),                            # other name
    ('{"city": "Oslo"}', "get_weather", '{"city": "Bergen"}', False),                     # other arguments
    ('{"city": "Oslo"}', "get_weather", '{"city": "Oslo", "days": 1}', False),
    ('{"flag": true}', "get_weather", '{"flag": 1}', False),                              # JSON types differ
    ('{"n": 1, "m": [2e0]}', "get_weather", '{"n": 1.0, "m": [2]}', True),               # numbers by value
    ('{"n": 1}', "get_weather", '{"n": 1.5}', False),
    ('{"city": "Oslo"', "get_weather", '{"city": "Oslo"', False),                         # unparseable
    ('{"n": NaN}', "get_weather", '{"n": NaN}', False),                                   # not strict JSON
])
def test_a_diverging_tool_call_does_not_match(model_args, source_name, source_args, matches):
    model = call("get_weather", 0, model_args)
    source = {"id": "functions.x:0", "type": "function", "function": {"name": source_name, "arguments": source_args}}
    assert tool_call_matches(model, source) is matches
    assert tool_call_matches(source, model) is matches
