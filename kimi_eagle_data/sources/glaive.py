"""B1: glaiveai/glaive-function-calling-v2 — `system` (tools as concatenated JSON) + `chat` (one string of
USER:/ASSISTANT:/FUNCTION RESPONSE: turns) read as one whole conversation.

The system boilerplate ("You are a helpful assistant with access to the following functions. Use them if
required -", "…with no access to external functions.") is dropped and the tools go to `tools=`; any *other*
text left in the system string is kept as a system message (upstream almost never has any). Turns are cut
out of the marker-delimited string and stripped. `<functioncall>` turns become native `tool_calls` with
ids numbered across the conversation, FUNCTION RESPONSE turns `role: "tool"` results.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kimi_eagle_data.chat_format import history_tool_call_id
from kimi_eagle_data.records import SourceRowError
from kimi_eagle_data.sources.rows import (
    EMPTY_PARAMETERS, AdapterColumns, Conversation, column, require_row, sha16,
)

# Tool-call ids in history turns: every Kimi format's `functions.NAME:IDX` (chat_format.py).
tool_call_id = history_tool_call_id

_GLAIVE_PREFIX = re.compile(r"^\s*SYSTEM:[ \t]*", re.I)
_GLAIVE_WITH_TOOLS = re.compile(
    r"You are a helpful assistant,? with access to the following functions\.?"
    r"(?:[ \t]*Use them if required[ \t]*-?)?",
    re.I,
)
_GLAIVE_NO_TOOLS = re.compile(r"You are a helpful assistant,? with no access to external functions\.?", re.I)
_GLAIVE_MARKER = re.compile(r"(?:^|\n)[ \t]*(USER|ASSISTANT|FUNCTION RESPONSE):[ \t]?")
_ENDOFTEXT = "<|endoftext|>"
_FUNCTIONCALL = "<functioncall>"


def parse_glaive_system(system: str) -> tuple[list[dict] | None, str]:
    """Split a glaive `system` string into native tools (or None) and the leftover system text
    ("" when nothing but boilerplate is left).

    The tools are the JSON objects after "…with access to the following functions. Use them if
    required -" (or, without that preamble, JSON objects that start the text), concatenated with
    whitespace between them; they are read with `JSONDecoder.raw_decode` one after the other."""
    text = _GLAIVE_PREFIX.sub("", system, count=1)
    tools: list[dict] | None = None
    m = _GLAIVE_WITH_TOOLS.search(text)
    if m:
        start = m.end()
        before = text[: m.start()]
    elif text.lstrip().startswith("{"):
        start, before = 0, ""
    else:
        start, before = None, text
    rest = before
    if start is not None:
        decoder = json.JSONDecoder()
        pos, end, tools = start, len(text), []
        while True:
            while pos < end and text[pos].isspace():
                pos += 1
            if pos >= end or text[pos] != "{":
                break
            try:
                obj, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as e:
                raise SourceRowError(
                    "bad_tool_json", f"tool declaration {len(tools)} in `system` is not valid JSON: {e.msg}"
                ) from None
            tools.append(_glaive_tool(obj, len(tools)))
        if m and not tools and text[pos:].strip():
            raise SourceRowError("bad_tool_json", "`system` promises functions but declares no JSON object")
        rest = before + "\n" + text[pos:]
        tools = tools or None
    rest = _GLAIVE_NO_TOOLS.sub("", rest).strip()
    return tools, rest


def _glaive_tool(obj: Any, i: int) -> dict:
    if not isinstance(obj, dict):
        raise SourceRowError("bad_tool_json", f"tool declaration {i} is {type(obj).__name__}, expected an object")
    if obj.get("type") == "function" and isinstance(obj.get("function"), dict):
        obj = obj["function"]            # already native
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SourceRowError("bad_tool_json", f"tool declaration {i} has no `name`")
    description = obj.get("description") or ""
    if not isinstance(description, str):
        raise SourceRowError("bad_tool_json", f"tool {name!r}: `description` is not a string")
    params = obj.get("parameters")
    if params is None or params == {} or params == []:
        params = dict(EMPTY_PARAMETERS)
    elif not isinstance(params, dict):
        raise SourceRowError("bad_tool_json", f"tool {name!r}: `parameters` is not an object")
    else:
        params = dict(params)
        params.setdefault("type", "object")
        if params["type"] == "object" and "properties" not in params:
            params["properties"] = {}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


def parse_glaive_chat(chat: str) -> list[tuple[str, str]]:
    """The `chat` string as [(marker, text)]; assistant text has `<|endoftext|>` removed; all stripped."""
    matches = list(_GLAIVE_MARKER.finditer(chat))
    if not matches:
        raise SourceRowError("no_user_turn", "`chat` has no USER:/ASSISTANT: markers")
    if chat[: matches[0].start()].strip():
        raise SourceRowError("bad_chat_format", "`chat` has text before its first USER:/ASSISTANT: marker")
    turns = []
    for m, nxt in zip(matches, matches[1:] + [None]):
        text = chat[m.end(): nxt.start() if nxt else len(chat)]
        if m.group(1) == "ASSISTANT":
            text = text.strip()
            if text.endswith(_ENDOFTEXT):
                text = text[: -len(_ENDOFTEXT)]
        turns.append((m.group(1), text.strip()))
    return turns


def parse_glaive_call(text: str) -> tuple[str, str, dict]:
    """An assistant turn `[prose] <functioncall> {"name": …, "arguments": '{…}'}` ->
    (prose, name, arguments). The single-quoted `arguments` is taken verbatim between the quote
    after `"arguments":` and the last quote before the closing brace, so apostrophes inside values
    (`'{"title": "Rock 'n' roll"}'`) survive; it is then parsed as JSON."""
    k = text.find(_FUNCTIONCALL)
    prose, call = text[:k].strip(), text[k + len(_FUNCTIONCALL):].strip()
    try:                                                   # some rows have real JSON arguments
        obj = json.loads(call)
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            args = obj.get("arguments", {})
            if isinstance(args, str):
                args = _loads_args(args, obj["name"])
            if not isinstance(args, dict):
                raise SourceRowError("bad_tool_call", f"call to {obj['name']!r}: arguments are not an object")
            return prose, obj["name"], args
    except json.JSONDecodeError:
        pass
    m = re.match(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*', call)
    if not m:
        raise SourceRowError("bad_tool_call", f"cannot parse function call {call[:80]!r}")
    name = json.loads(f'"{m.group(1)}"')
    rest = call[m.end():].rstrip()
    if not rest.endswith("}"):
        raise SourceRowError("bad_tool_call", f"call to {name!r} is not closed by '}}'")
    rest = rest[:-1].rstrip()
    if len(rest) >= 2 and rest[0] == "'" and rest[-1] == "'":
        rest = rest[1:-1]
    return prose, name, _loads_args(rest, name)


def _loads_args(raw: str, name: str) -> dict:
    for candidate in (raw, raw.replace("\\'", "'")):
        try:
            args = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(args, dict):
            return args
        raise SourceRowError("bad_tool_call", f"call to {name!r}: arguments are not a JSON object")
    raise SourceRowError("bad_tool_call", f"call to {name!r}: arguments are not valid JSON: {raw[:80]!r}")


GLAIVE_COLUMNS = AdapterColumns(("system", "chat"))


def glaive(row: dict) -> Conversation:
    """A glaive row as its whole conversation: [system?] + every turn of `chat`, tools native.

    source_id: sha1 of `system` + `chat` (the upstream has no id column). The row is rejected for what
    the first USER turn needs (system JSON, chat markers, a first USER turn with text); a later turn that
    cannot be read (a call that does not parse or names an undeclared tool, a result without a call) ends
    the conversation there as its `error`."""
    row = require_row(row)
    system = column(row, "system", str)
    chat = column(row, "chat", str)
    tools, rest = parse_glaive_system(system)
    source_id = sha16(system, chat)
    turns = parse_glaive_chat(chat)
    if turns[0][0] != "USER":
        raise SourceRowError("starts_with_assistant", f"`chat` starts with {turns[0][0]}:, not USER:")
    if not turns[0][1]:
        raise SourceRowError("empty_user_turn", "the first USER turn of `chat` is empty")
    msgs: list[dict[str, Any]] = [{"role": "system", "content": rest}] if rest else []
    try:
        _append_turns(msgs, turns, tools)
    except SourceRowError as e:
        return Conversation(source_id, msgs, tools, e)
    return Conversation(source_id, msgs, tools)


def _append_turns(msgs: list[dict[str, Any]], turns: list[tuple[str, str]], tools: list[dict] | None) -> None:
    """glaive turns in the chat shape, appended to `msgs` (those before a turn that cannot be read stay):
    calls as native `tool_calls`, FUNCTION RESPONSE as `role: "tool"`. Call ids are numbered across the
    whole conversation (0, 1, 2, …), as Kimi numbers them (vLLM and SGLang count the calls already in the
    history), so the model sees history ids that agree with the index it must continue from."""
    declared = {t["function"]["name"] for t in tools or []}
    pending: tuple[str, str] | None = None                 # (call id, name) awaiting its result
    calls = 0
    for marker, text in turns:
        if marker == "USER":
            msgs.append({"role": "user", "content": text})
        elif marker == "ASSISTANT":
            if _FUNCTIONCALL in text:
                prose, name, args = parse_glaive_call(text)
                if name not in declared:
                    raise SourceRowError("undeclared_tool", f"call to {name!r}, which `system` does not declare")
                call_id = tool_call_id(name, calls)
                calls += 1
                msgs.append({"role": "assistant", "content": prose, "tool_calls": [{
                    "id": call_id, "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]})
                pending = (call_id, name)
            else:
                msgs.append({"role": "assistant", "content": text})
        else:                                              # FUNCTION RESPONSE
            if pending is None:
                raise SourceRowError("bad_tool_call", "FUNCTION RESPONSE without a preceding <functioncall>")
            msgs.append({"role": "tool", "tool_call_id": pending[0], "name": pending[1], "content": text})
            pending = None
