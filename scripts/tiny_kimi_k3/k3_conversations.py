"""Synthetic Kimi-K3 conversations for the tiny K3 model: tiny-kimi's synthetic conversations (scripts/tiny_kimi/
synth.py: eight styles, tools from the fixed pool, multi-turn chats and tool loops on the model's own history),
each given a K3 setting (an effort, `low`/`high`/`max`, or thinking off) and rendered by our K3 renderer.

A conversation here is synth.py's dict plus `setting`. Its prompt is what K3's tokenizer renders with the
generation prompt; its completion is what follows the generation prompt when the last assistant turn is rendered
in the history, segment for segment (`completion_segments`): in thinking mode the reasoning, `</think>`'s K3 form
`<|close|>think<|sep|>`, the response element, the tools element (one `call` per tool call, each argument an
`argument` element with its JSON type), `<|close|>message<|sep|>` and `<|end_of_msg|>`; with thinking off the
same from the response on. `low` effort keeps only the reasoning's first sentence, so the effort the prompt
announces shows in the completion's length."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tiny_kimi"))

from synth import Synth  # noqa: E402

from kimi_eagle_data.formats.kimi_k3.render import render_segments  # noqa: E402

SETTINGS = ("max", "high", "low", "off")
SETTING_WEIGHTS = (35, 20, 20, 25)


def thinking(conv: dict) -> bool:
    return conv["setting"] != "off"


def render_kwargs(conv: dict) -> dict:
    """K3 tokenizer keywords for the conversation's setting (apply_chat_template's names)."""
    if conv["setting"] == "off":
        return {"thinking": False}
    return {"thinking": True, "thinking_effort": conv["setting"]}


def _effort_reasoning(reasoning: str, setting: str) -> str:
    if setting != "low":
        return reasoning
    head, dot, _ = reasoning.partition(". ")
    return head + ("." if dot else "")


def assistant_turn(conv: dict) -> dict:
    """The completion as the assistant message a client sends back (K3 renders it into the history)."""
    msg = {"role": "assistant"}
    if thinking(conv):
        msg["reasoning_content"] = _effort_reasoning(conv["reasoning"], conv["setting"])
    msg["content"] = conv["content"]
    if conv["tool_calls"]:
        msg["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                              "function": {"name": c["name"], "arguments": c["arguments"]}}
                             for i, c in enumerate(conv["tool_calls"])]
    return msg


def prompt_segments(conv: dict):
    return render_segments(conv["messages"], conv["tools"], thinking=thinking(conv),
                           effort=conv["setting"] if thinking(conv) else None)


def completion_segments(conv: dict):
    """The segments after the generation prompt when the completion is rendered as the last history turn."""
    prompt = prompt_segments(conv)
    full = render_segments(conv["messages"] + [assistant_turn(conv)], conv["tools"], thinking=thinking(conv),
                           effort=conv["setting"] if thinking(conv) else None, add_generation_prompt=False)
    if full[:len(prompt)] != prompt:
        raise AssertionError("the rendered history does not start with the prompt and its generation prompt")
    return full[len(prompt):]


class K3Synth:
    """synth.py's conversations with a K3 setting each, from one seed (settings from their own stream)."""

    def __init__(self, seed: int):
        self.synth = Synth(seed)
        self.setting_rng = random.Random(f"k3-setting-{seed}")

    def setting(self) -> str:
        return self.setting_rng.choices(SETTINGS, weights=SETTING_WEIGHTS)[0]

    def conversation(self, style: str | None = None, setting: str | None = None) -> dict:
        setting = setting or self.setting()
        conv = self.synth.conversation(style, mode="instant" if setting == "off" else "thinking")
        return dict(conv, setting=setting)

    def multi_turn(self, kind: str | None = None, setting: str | None = None, turns: int | None = None) -> dict:
        setting = setting or self.setting()
        conv = self.synth.multi_turn(kind, "instant" if setting == "off" else "thinking", turns)
        # Earlier turns were answered at the same effort: a low-effort history has short reasoning too.
        messages = [dict(m, reasoning_content=_effort_reasoning(m["reasoning_content"], setting))
                    if m["role"] == "assistant" and m.get("reasoning_content") else m for m in conv["messages"]]
        return dict(conv, messages=messages, setting=setting)


def declared_tools(conv: dict) -> dict[str, dict]:
    """Tool name -> its parameters schema, for the check."""
    return {t["function"]["name"]: t["function"].get("parameters", {}) for t in (conv["tools"] or [])}


def describe(conv: dict) -> str:
    return json.dumps({"style": conv["style"], "setting": conv["setting"]})
