"""Kimi-K3's prompt format: a conversation -> segments, each `(text, allow_special)`.

K3 writes a chat as XTML: elements opened by `<|open|>NAME ATTRS<|sep|>`, closed by `<|close|>NAME<|sep|>`, each
message followed by `<|end_of_msg|>`:

    <|open|>message role="user"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|>

Only the markers are special tokens; element names, attribute names and values, and every piece of message text
are ordinary text, and each is its own segment. The tokenizer encodes segment by segment (`segment_ids.py`), so
the segment boundaries are part of the format: ` role`, `="`, `user` and `"` are four segments, and joining them
first would change the token ids wherever BPE merges across a boundary.

The order of a prompt: the tool declaration (when the request has tools), the effort announcement (thinking mode
with an effort), the messages, a `tool-choice` and a `response-format` system message when asked for, then the
generation prompt `<|open|>message role="assistant"<|sep|><|open|>think<|sep|>` (thinking) or `…<|open|>response
<|sep|>` (instant, K3's thinking off). An assistant message is a `think` element (thinking mode only, present even
when empty), a `response` element, and a `tools` element holding one `call` per tool call. Written for
kimi-eagle-data from the format of K3's launch tokenizer code (docs/kimi-k3.md names the version).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, NamedTuple

from kimi_eagle_data.formats.kimi_k3.normalize import (K3FormatError, call_function, normalized_conversation,
                                                        sort_keys_deep)

OPEN, CLOSE, SEP, END_OF_MSG = "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"
IMAGE_PLACEHOLDER = "<|kimi_image_placeholder|>"
# The efforts K3's launch encoder accepts in thinking mode (default: max, as its tokenizer sets it). Its
# announcement names `medium` too, but the encoder refuses it.
EFFORTS = ("low", "high", "max")
DEFAULT_EFFORT = "max"
# Efforts a user may expect from the announcement's text, and why each is refused: every refusal (a prompt's
# effort, `render --effort`, a partition's `efforts` table) says this.
REFUSED_EFFORTS = {
    "medium": "K3's launch encoder has no medium effort: the effort announcement's text names `medium`, but the "
              "encoder asserts low, high or max",
}

_EFFORT_TEXT = ("`thinking_effort` guides on how much to think in your thinking channel (not including the "
                "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
                "Now the system is invoked with `thinking_effort={effort}`.")
_TOOLS_TEXT = "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n{tools}\n```"
_MORE_TOOLS_TEXT = ("## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
                    "You have access to all existing and extended tools.\nHere are the specs for the extended "
                    "tools.\n\n```json\n{tools}\n```")
_TOOL_CHOICE_TEXT = {
    "required": "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.",
    "none": "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.",
}
_RAW_JSON = ("The system is invoked with `response_format={kind}`.\nYour response must be raw JSON data without "
             "markdown code blocks (```json) or any additional formatting.")
_SCHEMA_TEXT = "\nThe JSON data must match the following schema:\n```json\n{schema}\n```"


class Segment(NamedTuple):
    text: str
    allow_special: bool


class EffortError(K3FormatError):
    """An effort K3 does not accept."""


def check_effort(effort: str | None) -> None:
    """None (no announcement) or one of EFFORTS; anything else is one line, in either mode."""
    if effort is None or effort in EFFORTS:
        return
    if effort in REFUSED_EFFORTS:
        raise EffortError(f"effort {effort!r} is refused: {REFUSED_EFFORTS[effort]}; use low, high or max")
    raise EffortError(f"unknown effort {effort!r}; K3 takes low, high or max (default max)")


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _attr_value(value: Any) -> str:
    return str(value).replace("&", "&amp;").replace('"', "&quot;")


def _value_type(value: Any) -> str:
    """The `type` attribute of a call argument."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


class _Writer:
    """Segments in writing order; an empty text writes nothing."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []

    def text(self, text: Any) -> None:
        text = str(text)
        if text:
            self.segments.append(Segment(text, False))

    def marker(self, token: str) -> None:
        self.segments.append(Segment(token, True))

    def open(self, name: str, attrs: Iterable[tuple[str, Any]] = ()) -> None:
        self.marker(OPEN)
        self.text(name)
        for key, value in attrs:
            for piece in (f" {key}", '="', _attr_value(value), '"'):
                self.text(piece)
        self.marker(SEP)

    def close(self, name: str) -> None:
        self.marker(CLOSE)
        self.text(name)
        self.marker(SEP)

    def element(self, name: str, attrs: Iterable[tuple[str, Any]], body: str) -> None:
        self.open(name, attrs)
        self.text(body)
        self.close(name)

    def system_notice(self, kind: str, body: str) -> None:
        """A message the tokenizer adds itself: `role="system" type="KIND"`."""
        self.element("message", [("role", "system"), ("type", kind)], body.strip())
        self.marker(END_OF_MSG)

    def content(self, content: Any, where: str) -> None:
        """Message content: a string, nothing, or a list of parts (an image part is the image placeholder)."""
        if content is None or isinstance(content, str):
            self.text("" if content is None else content)
            return
        if not isinstance(content, list):
            raise K3FormatError(f"{where}: content is a {type(content).__name__}; give text or a list of parts")
        for part in content:
            if not isinstance(part, dict) or "type" not in part:
                raise K3FormatError(f"{where}: a content part without a `type`")
            if part["type"] in ("image", "image_url"):
                self.marker(IMAGE_PLACEHOLDER)
            elif "text" not in part:
                raise K3FormatError(f"{where}: a {part['type']!r} content part without `text`")
            else:
                self.text(part["text"])


def _name_attrs(role: str, message: dict) -> list[tuple[str, Any]]:
    return [("role", role)] + ([("name", message["name"])] if message.get("name") else [])


def _write_assistant(out: _Writer, message: dict, thinking: bool, where: str) -> None:
    out.open("message", _name_attrs("assistant", message))
    if thinking:    # the think element is there in thinking mode even when there is no reasoning
        out.open("think")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning is not None and str(reasoning).strip():
            out.text(reasoning)
        out.close("think")
    out.open("response")
    out.content(message.get("content"), where)
    out.close("response")
    if message.get("tool_calls"):
        out.open("tools")
        for index, call in enumerate(message["tool_calls"], start=1):
            fn = call_function(call)
            out.open("call", [("tool", fn["name"]), ("index", index)])
            if "raw_arguments" in fn:
                out.element("json", [("type", "object")], fn["raw_arguments"])
            else:
                for key, value in fn["arguments"].items():
                    out.element("argument", [("key", key), ("type", _value_type(value))],
                                value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            out.close("call")
        out.close("tools")
    out.close("message")
    out.marker(END_OF_MSG)


def _tool_result_name(message: dict, calls: list | None, index: int, where: str) -> Any:
    """The tool a result names (`tool`, else `name`), else the function of the call at its position."""
    name = message["tool"] if "tool" in message else message.get("name")
    if name is None and calls is not None and index <= len(calls):
        name = call_function(calls[index - 1])["name"]
    if name is None:
        raise K3FormatError(f"{where}: a tool result without a tool name; give `tool` or `name`, or answer a "
                            "call of the preceding assistant message in its order")
    return name


def _write_messages(out: _Writer, messages: list[dict], thinking: bool) -> None:
    calls: list | None = None     # the latest assistant message's tool calls
    results = 0                   # tool results since that message
    for i, message in enumerate(messages):
        role, where = message["role"], f"message {i} ({message['role']})"
        if role == "assistant":
            calls, results = message.get("tool_calls"), 0
            _write_assistant(out, message, thinking, where)
            continue
        if role == "system" and message.get("tools"):
            out.system_notice("tool-declare", _MORE_TOOLS_TEXT.format(tools=_compact_json(message["tools"])))
            continue
        if role == "tool":
            results += 1
            attrs = [("role", "tool"), ("tool", _tool_result_name(message, calls, results, where)),
                     ("index", results)]
        else:
            attrs = _name_attrs(role, message)
        out.open("message", attrs)
        out.content(message.get("content"), where)
        out.close("message")
        out.marker(END_OF_MSG)


def _response_format_notice(response_format: Any) -> str | None:
    """The `response-format` message's text for an OpenAI-style `response_format` (or its bare type)."""
    kind = response_format.get("type", response_format) if isinstance(response_format, dict) else response_format
    if kind == "json_object":
        return _RAW_JSON.format(kind=kind)
    if kind != "json_schema":
        return None
    spec = response_format.get("json_schema") if isinstance(response_format, dict) else None
    schema = spec.get("schema", spec.get("json_schema", spec)) if isinstance(spec, dict) else spec
    return _RAW_JSON.format(kind=kind) + _SCHEMA_TEXT.format(schema=_compact_json(sort_keys_deep(schema)))


def render_segments(messages: list[dict], tools: list | None = None, *, thinking: bool = True,
                    effort: str | None = DEFAULT_EFFORT, add_generation_prompt: bool = True,
                    response_format: Any = None, tool_choice: str | None = None) -> list[Segment]:
    """The segments Kimi-K3's tokenizer renders for this request (module docstring).

    `thinking=False` is K3's thinking off (instant): no effort is announced and assistant messages have no think
    element. `effort` None announces none. K3FormatError (one line) for what K3 cannot render: an effort it does
    not take (`medium` included), a tool result naming no tool, call arguments that are JSON but not an object,
    and what its encoder would drop without a word (a message that is not an object, an unknown role)."""
    check_effort(effort)
    out = _Writer()
    if tools:
        out.system_notice("tool-declare", _TOOLS_TEXT.format(tools=_compact_json(sort_keys_deep(tools))))
    if thinking and effort is not None:
        out.system_notice("thinking-effort", _EFFORT_TEXT.format(effort=effort))
    _write_messages(out, normalized_conversation(messages), thinking)
    if isinstance(tool_choice, str) and tool_choice in _TOOL_CHOICE_TEXT:
        out.system_notice("tool-choice", _TOOL_CHOICE_TEXT[tool_choice])
    notice = _response_format_notice(response_format)
    if notice is not None:
        out.system_notice("response-format", notice)
    if add_generation_prompt:
        out.open("message", [("role", "assistant")])
        out.open("think" if thinking else "response")
    return out.segments


def completion_segments(message: dict, *, thinking: bool = True) -> list[Segment]:
    """An assistant message as the completion that writes it: its segments after the generation prompt (the open
    tags of the message and of its first element), through `<|end_of_msg|>`. `score` scores an upstream answer as
    this; the message's `name`, if any, is not written (the generation prompt names none)."""
    message = {k: v for k, v in message.items() if k != "name"}
    out, head = _Writer(), _Writer()
    _write_assistant(out, normalized_conversation([{**message, "role": "assistant"}])[0], thinking, "the answer")
    head.open("message", [("role", "assistant")])
    head.open("think" if thinking else "response")
    if out.segments[:len(head.segments)] != head.segments:     # pragma: no cover - _write_assistant's own order
        raise AssertionError("an assistant message does not start with the generation prompt")
    return out.segments[len(head.segments):]


def joined_text(segments: Iterable[Segment]) -> str:
    """The prompt as text (what the tokenizer's `apply_chat_template(tokenize=False)` returns)."""
    return "".join(s.text for s in segments)
