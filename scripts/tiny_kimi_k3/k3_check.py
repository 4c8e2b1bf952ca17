"""A self-contained structural check of a tiny-kimi-k3 completion (the build script's own; the project's K3
validator is separate): the ids after the generation prompt must follow K3's assistant-turn grammar as our
renderer writes a turn into the history.

    thinking:  REASONING? </think-element> <response>TEXT?</response> TOOLS? <|close|>message<|sep|> <|end_of_msg|>
    off:       TEXT? </response> TOOLS? <|close|>message<|sep|> <|end_of_msg|>
    TOOLS:     <|open|>tools<|sep|> (<|open|>call tool="NAME" index="K"<|sep|> ARGUMENT* <|close|>call<|sep|>)+
               <|close|>tools<|sep|>
    ARGUMENT:  <|open|>argument key="KEY" type="TYPE"<|sep|> VALUE? <|close|>argument<|sep|>

Checked besides the shape: the only reserved ids are the four markers (no BOS/EOS, no `<|im_*|>`, no media or
unnamed ids); calls name declared tools, are indexed 1, 2, ... in order, name only the tool's parameters, once
each, all its required ones, with a value that parses as the declared type; a turn without calls has a
non-blank response."""

from __future__ import annotations

import json
import re

CALL_RE = re.compile(r'^call tool="(?P<name>[^"&]*)" index="(?P<index>\d+)"$')
ARG_RE = re.compile(r'^argument key="(?P<key>[^"&]*)" type="(?P<type>string|number|boolean|null|object|array)"$')


class Bad(Exception):
    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def _items(ids, tok, markers):
    """[(marker name, None) | (None, decoded text)]: runs of text ids decoded together."""
    out, run = [], []
    for i in ids:
        if i in markers:
            if run:
                out.append((None, tok.model.decode(run)))
                run = []
            out.append((markers[i], None))
        else:
            run.append(i)
    if run:
        out.append((None, tok.model.decode(run)))
    return out


class _Reader:
    def __init__(self, items):
        self.items, self.at = items, 0

    def peek(self, k=0):
        return self.items[self.at + k] if self.at + k < len(self.items) else (None, None)

    def text(self) -> str:
        marker, text = self.peek()
        if marker is None and text is not None:
            self.at += 1
            return text
        return ""

    def marker(self, name: str, code: str) -> None:
        if self.peek()[0] != name:
            raise Bad(code)
        self.at += 1

    def element_end(self, name: str, code: str) -> None:
        self.marker("<|close|>", code)
        if self.text() != name:
            raise Bad(code)
        self.marker("<|sep|>", code)

    def opens(self, name_re) -> re.Match | None:
        """An open tag whose header text matches; consumed only when it does."""
        if self.peek()[0] != "<|open|>" or self.peek(1)[0] is not None or self.peek(2)[0] != "<|sep|>":
            return None
        m = name_re.match(self.peek(1)[1])
        if m:
            self.at += 3
        return m


def _value_ok(value: str, kind: str) -> bool:
    if kind == "string":
        return True
    try:
        v = json.loads(value)
    except ValueError:
        return False
    return {"number": isinstance(v, (int, float)) and not isinstance(v, bool), "boolean": isinstance(v, bool),
            "null": v is None, "object": isinstance(v, dict), "array": isinstance(v, list)}[kind]


def _calls(r: _Reader, tools: dict[str, dict]) -> list[dict]:
    """The tools element's calls, `{"name", "arguments"}` each (none: no tools element)."""
    if not r.opens(re.compile(r"^tools$")):
        return []
    if not tools:
        raise Bad("tool_call_without_tools")
    calls = []
    while (m := r.opens(CALL_RE)) is not None:
        calls.append({"name": m["name"], "arguments": {}})
        n = len(calls)
        if m["name"] not in tools:
            raise Bad("undeclared_tool")
        if int(m["index"]) != n:
            raise Bad("bad_call_index")
        schema = tools[m["name"]]
        props, seen = schema.get("properties", {}), set()
        while (a := r.opens(ARG_RE)) is not None:
            if a["key"] not in props:
                raise Bad("unknown_argument")
            if a["key"] in seen:
                raise Bad("duplicate_argument")
            seen.add(a["key"])
            value = r.text()
            if not _value_ok(value, a["type"]):
                raise Bad("bad_argument_value")
            calls[-1]["arguments"][a["key"]] = value if a["type"] == "string" else json.loads(value)
            r.element_end("argument", "bad_argument_element")
        if set(schema.get("required", [])) - seen:
            raise Bad("missing_required_argument")
        r.element_end("call", "bad_call_element")
    if not calls:
        raise Bad("empty_tools")
    r.element_end("tools", "bad_tools_element")
    return calls


def check_completion(ids: list[int], finish: str, tok, tools: dict[str, dict], thinking: bool) -> list[str]:
    """Issues of one completion (empty list: valid). `finish` is 'stop' or 'length'."""
    return parse_completion(ids, finish, tok, tools, thinking)[0]


def parse_completion(ids: list[int], finish: str, tok, tools: dict[str, dict],
                     thinking: bool) -> tuple[list[str], dict | None]:
    """(issues, the turn: {"reasoning", "content", "tool_calls"} when valid, else None)."""
    v = tok.get_vocab()
    markers = {v[s]: s for s in ("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>")}
    base = tok.model.n_vocab - 256
    if any(i >= base and i not in markers for i in ids):
        return ["forbidden_token"], None
    if finish == "length":
        return ["truncated"], None
    r = _Reader(_items(ids, tok, markers))
    try:
        reasoning = r.text() if thinking else ""      # the reasoning, maybe none
        if thinking:
            r.element_end("think", "bad_think_end")
            if not r.opens(re.compile(r"^response$")):
                raise Bad("no_response_element")
        response = r.text()
        r.element_end("response", "bad_response_end")
        calls = _calls(r, tools)
        r.element_end("message", "bad_message_end")
        r.marker("<|end_of_msg|>", "no_end_of_msg")
        if r.at != len(r.items):
            raise Bad("after_end_of_msg")
        if not calls and not response.strip():
            raise Bad("empty_response")
    except Bad as e:
        return [e.code], None
    return [], {"reasoning": reasoning, "content": response, "tool_calls": calls}
