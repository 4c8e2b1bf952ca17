"""Kimi-K2.6: K2.5's format with one chat-template argument more, `preserve_thinking`, token-exact by rule.

- off (the model's default): every prompt renders exactly as K2.5's, on K2.5's own cases (the conversations
  tests/prompts/test_tiny_tokenizer.py checks against K2.5's real template) and the tool-rendering probes;
- on: each earlier assistant turn's reasoning stands as `<think>REASONING</think>` before its content, in plain turns
  and tool loops, and nothing else changes: the expected text is K2.5's with each assistant turn's think block
  rewritten to hold that turn's reasoning, built here from the messages, not by the renderer under test.

The profiles, the setting that sets it (`--preserve-thinking`, refused for a template without it), the card's line on
history reasoning and an own-history conversation carrying the model's own reasoning when it is on."""

from __future__ import annotations

import copy
import re

import pytest

from kimi_eagle_data.conversation.next_turn import NextTurn
from kimi_eagle_data.formats import format_of
from kimi_eagle_data.formats.kimi_k2 import KIMI_K25, KIMI_K26, TINY_KIMI, TINY_KIMI_K26
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.formats.kimi_k2.render import TOOL_PROBES
from kimi_eagle_data.formats.kimi_k2.tokens import k2_tokens
from kimi_eagle_data.formats.kimi_k2.validator import Validator
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.profile import get_profile
from kimi_eagle_data.records import PromptRecord
from kimi_eagle_data.run_checks import SettingError
from kimi_eagle_data.runs import run_format
from kimi_eagle_data.settings import RunSettings
from tests.formats.kimi_k2.test_conversation_messages import TOK
from tests.prompts.test_tiny_tokenizer import CASES

K26_OFF = format_of(TINY_KIMI_K26).with_template_options(TINY_KIMI_K26.template_options)
K26_ON = format_of(TINY_KIMI_K26).with_template_options({"preserve_thinking": True})

# Every conversation of K2.5's own rendering cases and probes, in each mode it is checked in.
K25_CASES = [(name, messages, tools, INSTANT if kwargs.get("thinking") is False else THINKING)
             for name, (messages, tools, kwargs, _) in sorted(CASES.items())]
K25_CASES += [(f"probe {name}", messages, tools, mode) for name, messages, tools in TOOL_PROBES
              for mode in (THINKING, INSTANT)]
# Conversations with reasoning in their history: plain turns, a tool loop before and after a plain answer.
CALL = {"id": "functions.get_weather:0", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}
HISTORIES = [
    ("two plain turns", [{"role": "user", "content": "a"},
                         {"role": "assistant", "content": "b", "reasoning_content": "first thought"},
                         {"role": "user", "content": "c"},
                         {"role": "assistant", "content": "d", "reasoning_content": "second thought"},
                         {"role": "user", "content": "e"}], None),
    ("a tool loop, then a plain answer, then a call", [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "reasoning_content": "call it", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "4 C"},
        {"role": "assistant", "content": "4C.", "reasoning_content": "report it"},
        {"role": "user", "content": "again?"},
        {"role": "assistant", "content": "Checking.", "reasoning_content": "once more",
         "tool_calls": [{**CALL, "id": "functions.get_weather:1"}]},
        {"role": "tool", "tool_call_id": "functions.get_weather:1", "content": "5 C"}], TOOL_PROBES[0][2][:1]),
    ("no reasoning recorded", [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                               {"role": "user", "content": "c"}], None),
]
ALL = K25_CASES + [(name, m, t, mode) for name, m, t in HISTORIES for mode in (THINKING, INSTANT)]

THINK = re.compile(r"(<\|im_assistant\|>[^<]*<\|im_middle\|>)<think>(.*?)</think>", re.S)


def kept_by_rule(k25_text: str, messages) -> str:
    """K2.5's text with each assistant turn's think block holding that turn's reasoning (none: empty)."""
    reasonings = iter([m.get("reasoning_content") or "" for m in messages if m["role"] == "assistant"])
    history_end = k25_text.rfind("<|im_assistant|>")      # the generation prompt's think block stays as it is
    body = THINK.sub(lambda m: f"{m.group(1)}<think>{next(reasonings)}</think>", k25_text[:history_end])
    assert next(reasonings, None) is None, "a turn's think block was not found"
    return body + k25_text[history_end:]


def render(fmt, messages, tools, mode) -> tuple[str, list[int]]:
    fmt = fmt.bind(TINY_KIMI_K26, TOK)
    ids = fmt.render_prompt(copy.deepcopy(messages), copy.deepcopy(tools), mode)
    return fmt.render_text(copy.deepcopy(messages), copy.deepcopy(tools), mode), ids


@pytest.mark.parametrize("name,messages,tools,mode", ALL, ids=[f"{c[0]}-{c[3]}" for c in ALL])
def test_off_every_prompt_is_k25_s(name, messages, tools, mode):
    assert render(K26_OFF, messages, tools, mode) == render(KIMI_K2_FORMAT, messages, tools, mode)


@pytest.mark.parametrize("name,messages,tools,mode", ALL, ids=[f"{c[0]}-{c[3]}" for c in ALL])
def test_on_each_earlier_turn_keeps_its_reasoning_and_nothing_else_changes(name, messages, tools, mode):
    k25_text, _ = render(KIMI_K2_FORMAT, messages, tools, mode)
    text, ids = render(K26_ON, messages, tools, mode)
    assert text == kept_by_rule(k25_text, messages)
    assert ids == list(TOK(text, add_special_tokens=False)["input_ids"])


def test_the_rule_is_seen_where_k25_drops_reasoning():
    """The cases above are not vacuous: K2.5 drops history reasoning that K2.6 with the option keeps."""
    _, messages, tools = HISTORIES[1]
    k25, _ = render(KIMI_K2_FORMAT, messages, tools, THINKING)
    on, _ = render(K26_ON, messages, tools, THINKING)
    assert "call it" not in k25 and "report it" not in k25 and "once more" in k25
    assert "<think>call it</think><|tool_calls_section_begin|>" in on and "<think>report it</think>4C." in on


def test_the_profiles():
    for k26, k25 in ((KIMI_K26, KIMI_K25), (TINY_KIMI_K26, TINY_KIMI)):
        assert get_profile(k26.name) is k26 and k26.chat_format == k25.chat_format
        assert k26.template_options == {"preserve_thinking": False} and not k25.template_options
        assert k26.model_path.startswith("moonshotai/") == (k26 is KIMI_K26)
    assert TINY_KIMI_K26.model_path == TINY_KIMI.model_path and TINY_KIMI_K26.is_test_model
    assert k2_tokens(TOK).end_of_turn == TOK.convert_tokens_to_ids("<|im_end|>")


def test_the_setting_binds_the_run_s_format_and_is_refused_without_the_argument(tmp_path):
    on = RunSettings(workdir=str(tmp_path), profile="tiny-kimi-k2.6", preserve_thinking=True)
    assert on.template_options() == {"preserve_thinking": True}
    assert run_format(on).template_options == {"preserve_thinking": True}
    default = RunSettings(workdir=str(tmp_path), profile="tiny-kimi-k2.6")
    assert run_format(default).template_options == {"preserve_thinking": False}
    assert run_format(RunSettings(workdir=str(tmp_path), profile="tiny-kimi")) is KIMI_K2_FORMAT
    with pytest.raises(SettingError, match="profile tiny-kimi's chat template takes no such argument; profiles "
                                           "whose template does: kimi-k2.6, tiny-kimi-k2.6"):
        RunSettings(workdir=str(tmp_path), profile="tiny-kimi", preserve_thinking=True)


def test_the_card_says_how_history_reasoning_is_rendered():
    off = K26_OFF.card_text().history_reasoning
    on = K26_ON.card_text().history_reasoning
    assert "`<think></think>`" in off and "dropped" in off
    assert "`<think>REASONING</think>` before its content" in on and "preserve_thinking" in on
    assert KIMI_K2_FORMAT.card_text().history_reasoning == off


def test_an_own_history_conversation_carries_the_model_s_own_reasoning_when_on():
    from tests.conversation.test_next_turn import CHAT, CHAT_SCRIPT, CONV, OWN, completed, first_turn

    for fmt, kept in ((K26_ON, True), (K26_OFF, False)):
        validator = Validator(k2_tokens(TOK), TOK, TINY_KIMI_K26.max_seq_len)
        fmt = fmt.bind(TINY_KIMI_K26, TOK)
        step = NextTurn(validator, max_new_tokens=64, max_seq_len=TINY_KIMI_K26.max_seq_len,
                        max_turns={"C1": 4}, scripts={CONV: CHAT_SCRIPT}, chat_format=fmt)
        first = first_turn(CHAT)
        nxt = step(first, completed(first, OWN))
        assert isinstance(nxt, PromptRecord) and nxt.messages[1] == OWN
        shown = TOK.decode(nxt.prompt_ids, skip_special_tokens=False)
        assert (f"<think>{OWN['reasoning_content']}</think>{OWN['content']}" in shown) is kept
        assert nxt.prompt_ids == fmt.render_prompt(nxt.messages, nxt.tools, nxt.mode)
