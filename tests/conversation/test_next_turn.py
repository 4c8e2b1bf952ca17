"""After each turn of an own_history conversation (kimi_eagle_data/conversation/next_turn.py): the next turn's prompt
— the conversation so far with the model's OWN turn, rendered by the template exactly as it renders the parsed
message a client sends back, then the source's next user turn or tool result — or the conversation's end with its
reason. Completions are cut out of what the template renders for a message (tests/formats/kimi_k2/test_conversation_messages.py),
so every id here is the template's own."""

from __future__ import annotations

from kimi_eagle_data.conversation.next_turn import NextTurn, turn_id
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.formats.kimi_k2.tokens import k2_tokens
from kimi_eagle_data.records import Completion, ConversationEnd, PromptRecord
from kimi_eagle_data.formats.kimi_k2.validator import Validator
from tests.formats.kimi_k2.test_conversation_messages import TOK, TOOLS, call, completion_of, find, prompt_ids, template_ids, text

MAX_SEQ_LEN = TINY_KIMI.max_seq_len
CONV = "C1-0123456789abcdef"


def next_turn(script, *, max_turns=4, max_new_tokens=64, max_seq_len=MAX_SEQ_LEN) -> NextTurn:
    validator = Validator(k2_tokens(TOK), TOK, max_seq_len)
    return NextTurn(validator, max_new_tokens=max_new_tokens, max_seq_len=max_seq_len, max_turns={"C1": max_turns},
                    scripts={CONV: script}, chat_format=KIMI_K2_FORMAT.bind(TINY_KIMI, TOK))


def first_turn(messages, tools=TOOLS, mode=THINKING) -> PromptRecord:
    return PromptRecord(CONV, "C1", "src", "row-1", messages, tools, prompt_ids(messages, tools, mode), mode=mode,
                        temperature=1.0, top_p=0.95)


def completed(record: PromptRecord, message: dict, finish_reason="stop") -> Completion:
    """The model's turn as it generates it after the prompt (which ends with `<think>`, or `<think></think>` in
    instant mode). A tool-call turn is cut out of the template's render (which keeps its reasoning); a plain
    answer's reasoning the template drops once it is history, so that turn is written out."""
    if message.get("tool_calls"):
        ids = completion_of(record.messages, message, record.mode)
    else:
        reasoning = "" if record.mode == INSTANT else message["reasoning_content"] + "</think>"
        ids = TOK.encode(reasoning + message["content"] + "<|im_end|>", add_special_tokens=False)
    assert ids[-1] == TOK.convert_tokens_to_ids("<|im_end|>")
    return Completion(record.id, ids, finish_reason)


CHAT = [{"role": "user", "content": "Name a red fruit."}]
CHAT_SCRIPT = [{"role": "assistant", "content": "SOURCE: strawberry."},
               {"role": "user", "content": "And a yellow one?"},
               {"role": "assistant", "content": "SOURCE: banana."},
               {"role": "user", "content": "Thanks!"}]
OWN = {"role": "assistant", "reasoning_content": "Red fruits: apple, cherry.", "content": "An apple."}


def test_the_next_prompt_holds_the_models_own_turn_rendered_as_the_template_renders_the_parsed_message():
    first = first_turn(CHAT)
    nxt = next_turn(CHAT_SCRIPT)(first, completed(first, OWN))
    assert isinstance(nxt, PromptRecord)
    assert (nxt.id, nxt.conversation_id, nxt.turn) == (turn_id(CONV, 2), CONV, 2)
    expected = [*CHAT, OWN, {"role": "user", "content": "And a yellow one?"}]
    assert nxt.messages == expected
    assert nxt.prompt_ids == template_ids(expected)            # byte-exact with the serving stack's render
    shown = text(nxt.prompt_ids)
    assert "An apple." in shown and "SOURCE: strawberry." not in shown
    # A chat's history reasoning is the template's to drop: K2.5's drops it before the last plain answer.
    assert "Red fruits" not in shown
    # What the source would have answered at turn 2 is kept for `score`.
    assert nxt.answer == {"reasoning": None, "content": "SOURCE: banana."}
    # Sampling and mode go on with the conversation.
    assert (nxt.mode, nxt.temperature, nxt.top_p, nxt.tools) == (THINKING, 1.0, 0.95, TOOLS)


def test_turn_three_follows_turn_two_and_the_script_runs_out_after_it():
    decide = next_turn(CHAT_SCRIPT)
    first = first_turn(CHAT)
    second = decide(first, completed(first, OWN))
    own2 = {"role": "assistant", "reasoning_content": "Yellow: banana.", "content": "A banana."}
    third = decide(second, completed(second, own2))
    assert third.turn == 3 and third.messages[-2:] == [own2, {"role": "user", "content": "Thanks!"}]
    assert third.prompt_ids == template_ids(third.messages)
    end = decide(third, completed(third, {"role": "assistant", "reasoning_content": "ok", "content": "Welcome."}))
    assert end == ConversationEnd(CONV, "C1", 3, "source_exhausted", "the source has nothing after turn 3")


def test_max_turns_ends_the_conversation():
    first = first_turn(CHAT)
    end = next_turn(CHAT_SCRIPT, max_turns=1)(first, completed(first, OWN))
    assert isinstance(end, ConversationEnd) and (end.turn, end.reason) == (1, "max_turns")


LOOP = [{"role": "user", "content": "Is it raining in Oslo?"}]


def loop_script(arguments: str) -> list[dict]:
    return [{"role": "assistant", "content": "", "tool_calls": [call("get_weather", 0, arguments)]},
            {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "4 C, rain"},
            {"role": "assistant", "content": "SOURCE: yes, it rains."},
            {"role": "user", "content": "Should I take an umbrella?"}]


OWN_CALL = {"role": "assistant", "reasoning_content": "I need the weather.", "content": "",
            "tool_calls": [call("get_weather", 0, '{"city": "Oslo"}')]}


def test_a_matching_tool_call_is_answered_by_the_sources_result_and_the_loop_goes_on():
    decide = next_turn(loop_script('{"city":"Oslo"}'))     # JSON-equal, spelled otherwise
    first = first_turn(LOOP)
    second = decide(first, completed(first, OWN_CALL))
    assert isinstance(second, PromptRecord)
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "4 C, rain"}
    assert second.prompt_ids == template_ids(second.messages)
    shown = text(second.prompt_ids)
    assert "4 C, rain" in shown and "I need the weather." in shown     # a running tool loop keeps its reasoning
    # The model answers the result; its next call would be number 1 (ids count across the conversation).
    answer = {"role": "assistant", "reasoning_content": "It rains.", "content": "Yes, 4 C and rain."}
    third = decide(second, completed(second, answer))
    assert third.turn == 3 and third.messages[-1] == {"role": "user", "content": "Should I take an umbrella?"}
    assert third.prompt_ids == template_ids(third.messages)


def test_a_diverging_tool_call_ends_the_conversation_after_that_turn():
    decide = next_turn(loop_script('{"city": "Bergen"}'))
    first = first_turn(LOOP)
    end = decide(first, completed(first, OWN_CALL))
    assert isinstance(end, ConversationEnd) and (end.turn, end.reason) == (1, "call_diverged")
    assert "Bergen" in end.message and "Oslo" in end.message
    # No call where the source made one: diverged too.
    no_call = {"role": "assistant", "reasoning_content": "Hm.", "content": "I cannot tell."}
    assert decide(first, completed(first, no_call)).reason == "call_diverged"


def test_a_rejected_or_cut_turn_is_never_sent_back():
    decide = next_turn(CHAT_SCRIPT)
    first = first_turn(CHAT)
    undeclared = {"role": "assistant", "reasoning_content": "r", "content": "",
                  "tool_calls": [call("not_declared", 0, "{}")]}
    end = decide(first, completed(first, undeclared))
    assert (end.reason, end.turn) == ("turn_rejected", 1) and "undeclared_tool" in end.message
    ids = completed(first, OWN).output_ids[:5]
    cut = decide(first, Completion(first.id, ids, "length"))
    assert cut.reason == "turn_truncated"


def test_a_next_prompt_over_max_seq_len_ends_the_conversation():
    first = first_turn(CHAT)
    room = len(first.prompt_ids) + 64 + 10       # turn 1 fits, turn 2 (longer by the answer and a question) not
    end = next_turn(CHAT_SCRIPT, max_seq_len=room)(first, completed(first, OWN))
    assert end.reason == "next_prompt_too_long" and f"max_seq_len {room}" in end.message


def test_an_instant_conversation_stays_instant():
    first = first_turn(CHAT, mode=INSTANT)
    own = {"role": "assistant", "content": "An apple."}
    nxt = next_turn(CHAT_SCRIPT)(first, completed(first, own))
    assert nxt.mode == INSTANT
    assert nxt.prompt_ids == template_ids(nxt.messages, mode=INSTANT)
    assert find(nxt.prompt_ids, TOK.encode("An apple.", add_special_tokens=False)) > 0


def test_turn_ids_are_stable_sample_ids_of_the_conversations_config():
    assert turn_id(CONV, 1) == CONV
    assert turn_id(CONV, 2) == turn_id(CONV, 2) != turn_id(CONV, 3)
    assert turn_id(CONV, 2).startswith("C1-") and len(turn_id(CONV, 2)) == len(CONV)


def test_turns_left_counts_the_sources_steps_up_to_max_turns():
    """Generate starts the conversations with the most turns ahead first (NextTurn.turns_left)."""
    first = first_turn(CHAT)
    assert next_turn(CHAT_SCRIPT).turns_left(first) == 3          # two more user turns in the script
    assert next_turn(CHAT_SCRIPT, max_turns=2).turns_left(first) == 2
    assert next_turn(CHAT_SCRIPT[:1]).turns_left(first) == 1       # the source answers, then ends
    second = next_turn(CHAT_SCRIPT)(first, completed(first, OWN))
    assert next_turn(CHAT_SCRIPT).turns_left(second) == 2
    other = PromptRecord("B4-0123456789abcdef", "B4", "src", "row", CHAT, None, first.prompt_ids)
    assert next_turn(CHAT_SCRIPT).turns_left(other) == 1 and next_turn(CHAT_SCRIPT)(other, None) is None


def test_next_prompts_are_what_the_real_k25_template_renders():
    """The next turns' prompts (a chat, a tool loop, instant mode) equal Kimi-K2.5's real chat_template.jinja's
    render of the same messages, token for token. The real template is not part of this repository: point
    KIMI_K25_CHAT_TEMPLATE at a copy of it to run this comparison."""
    import os

    import pytest

    path = os.environ.get("KIMI_K25_CHAT_TEMPLATE")
    if not path:
        pytest.skip("KIMI_K25_CHAT_TEMPLATE is not set (a copy of Kimi-K2.5's chat_template.jinja)")
    real = open(path, encoding="utf-8").read()
    chat, loop, instant = first_turn(CHAT), first_turn(LOOP), first_turn(CHAT, mode=INSTANT)
    second_chat = next_turn(CHAT_SCRIPT)(chat, completed(chat, OWN))
    second_loop = next_turn(loop_script('{"city": "Oslo"}'))(loop, completed(loop, OWN_CALL))
    answer = {"role": "assistant", "reasoning_content": "It rains.", "content": "Yes, 4 C and rain."}
    third_loop = next_turn(loop_script('{"city": "Oslo"}'))(second_loop, completed(second_loop, answer))
    second_instant = next_turn(CHAT_SCRIPT)(instant, completed(instant, {"role": "assistant", "content": "An apple."}))
    for record in (second_chat, second_loop, third_loop, second_instant):
        kwargs = {"thinking": False} if record.mode == INSTANT else {}
        text = TOK.apply_chat_template(record.messages, tools=TOOLS, add_generation_prompt=True, tokenize=False,
                                       chat_template=real, **kwargs)
        assert record.prompt_ids == TOK.encode(text, add_special_tokens=False), (record.turn, record.mode)
