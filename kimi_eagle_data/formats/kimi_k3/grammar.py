"""Kimi-K3's completion grammar: a completion's token ids parsed into reasoning, content, tool calls and end.

The prompt ends with the generation prompt, which opens the assistant message and its first element: `think`
(thinking mode) or `response` (instant). The completion finishes that message as K3's encoder writes one:

    REASONING <|close|>think<|sep|> <|open|>response<|sep|> CONTENT <|close|>response<|sep|>   thinking mode
    CONTENT <|close|>response<|sep|>                                                           instant mode
    then, in both:  [ <|open|>tools<|sep|> CALL+ <|close|>tools<|sep|> ] <|close|>message<|sep|> <|end_of_msg|>

    CALL = <|open|>call tool="NAME" index="K"<|sep|> ARGUMENT* <|close|>call<|sep|>     (K = 1, 2, … in order)
    ARGUMENT = <|open|>argument key="KEY" type="TYPE"<|sep|> VALUE <|close|>argument<|sep|>

TYPE is string (VALUE is the raw text), number, boolean, null, object or array (VALUE is that JSON). Attribute
values escape `&` and `"` (`&amp;`, `&quot;`). Nothing stands between elements. The grammar itself is data
(`ELEMENTS`, `ATTRIBUTES`, `ARGUMENT_TYPES`); `REASONS` names every violation with a reason code.

Structure is read from the marker ids (`<|open|>`, `<|close|>`, `<|sep|>`, `<|end_of_msg|>`): a tag is a marker,
the text up to the next `<|sep|>` (its name and attributes), and that `<|sep|>`. The walk stops at the first tag
the grammar does not allow there (the rest is not read as structure); special tokens that are never allowed
(BOS/EOS, the K2-era `<|im_*|>` family) and `<|end_of_msg|>` before the end are found anywhere. Where each
element stands (`K3Span`: its open and close tags) and where the walk stopped reading (`read_end`) are kept, for
`inspect`'s segments (formats/kimi_k3/segments.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from kimi_eagle_data.formats.kimi_k3.facts import GENERATION_PROMPTS, K3TokenIds

# element -> what it holds: "text", or the children it allows (checked in order by `_allowed_child`).
ELEMENTS = {"message": ("think", "response", "tools"), "think": "text", "response": "text", "tools": ("call",),
            "call": ("argument", "json"), "argument": "text", "json": "text"}
# element -> its attributes, in the order the encoder writes them.
ATTRIBUTES = {"call": ("tool", "index"), "argument": ("key", "type"), "json": ("type",)}
ARGUMENT_TYPES = {"string": str, "number": (int, float), "boolean": bool, "null": type(None), "object": dict,
                  "array": list}

# code -> (what it means, whether only a finished completion can break it: a truncated one is excused).
REASONS = {
    "legacy_k2_token": ("a K2-era special token (`<|im_end|>`, `<|im_user|>`, …) in a K3 completion", False),
    "forbidden_token": ("BOS, EOS or the image placeholder in the completion", False),
    "end_of_msg_not_last": ("an `<|end_of_msg|>` before the completion's last token", False),
    "malformed_tag": ("a marker not followed by an element name (and attributes) and `<|sep|>`, or a `<|sep|>` "
                      "that ends no tag", False),
    "unexpected_element": ("an element the grammar does not allow there (inside text, out of order, unknown, "
                           "or closing another than the open one)", False),
    "think_in_instant": ("a `think` element in an instant-mode completion", False),
    "text_between_elements": ("text outside the text elements (between elements, after the message)", False),
    "bad_call": ("a call's attributes are not `tool` and `index`, or its tool name is empty", False),
    "call_index_out_of_order": ("call K of the message does not say index=\"K\"", False),
    "bad_argument": ("an argument without `key`/`type`, of an unknown type, repeated, or whose value is not "
                     "that type's JSON (strict: no NaN)", False),
    "json_arguments": ("a call's arguments written as a `json` block (the encoder's form for history arguments "
                       "it cannot parse; serving parsers drop it)", False),
    "empty_tools": ("a `tools` element without a call", False),
    "undeclared_tool": ("a call names a tool the prompt did not declare", False),
    "tool_call_without_tools": ("the completion calls a tool but the prompt declared none", False),
    "missing_think_close": ("a thinking-mode completion never closes `think`", True),
    "missing_response": ("the message has no `response` element", True),
    "missing_message_close": ("no `<|close|>message<|sep|>` before `<|end_of_msg|>`", True),
    "missing_end_of_msg": ("the completion does not end with `<|end_of_msg|>`", True),
    "empty_answer": ("no response text (only whitespace) and no tool call", True),
}

# What a `train` row of a K3 run satisfies, as the dataset card says it (the grammar above and REASONS, in one
# paragraph).
CARD_RULES = (
    f"the prompt ends with its mode's generation prompt (thinking: `{GENERATION_PROMPTS['thinking']}`; instant: "
    f"`{GENERATION_PROMPTS['instant']}`); a thinking-mode completion closes `think` once (`<|close|>think<|sep|>`) "
    "and then opens its `response`, an instant-mode one has no `think`; every completion finishes the assistant "
    "message as K3's encoder writes one: no BOS, EOS, image or K2-era tokens, a non-empty response or a tool call, "
    "calls only inside one `tools` element as `<|open|>call tool=\"NAME\" index=\"K\"<|sep|>` (K = 1, 2, … in "
    "order) naming declared tools, each argument typed and its value that type's JSON, then "
    "`<|close|>message<|sep|>` and one `<|end_of_msg|>`.")

_TEXT, _OPEN, _CLOSE, _SEP, _END, _LEGACY, _FORBIDDEN = range(7)
_HEAD = re.compile(r'(?P<name>[a-z]+)(?P<attrs>(?: [A-Za-z_]\w*="[^"]*")*)\Z')
_ATTR = re.compile(r' (?P<key>[A-Za-z_]\w*)="(?P<value>[^"]*)"')


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unescape(value: str) -> str:
    return value.replace("&quot;", '"').replace("&amp;", "&")


@dataclass
class K3ToolCall:
    tool: str
    index: str
    arguments: dict[str, Any]
    position: int                       # where its `<|open|>call` tag starts


@dataclass
class K3Violation:
    code: str
    position: int
    message: str


@dataclass
class K3Span:
    """Where one element stands in the completion (what `inspect` shows as segments)."""

    name: str
    depth: int                          # 0: the message, 1: think / response / tools, 2: a call, 3: its arguments
    lo: int                             # its open tag's marker (0 for an element the generation prompt opened)
    head_end: int                       # one past its open tag's `<|sep|>` (0 likewise)
    attrs: dict[str, str] = field(default_factory=dict)
    close_lo: int | None = None         # its close tag's marker; None: never closed (where reading stopped)
    hi: int | None = None               # one past its close tag's `<|sep|>`, else where reading stopped


@dataclass
class K3Completion:
    """One completion as the grammar reads it; positions index the completion's ids."""

    n: int
    instant: bool
    reasoning: str = ""
    reasoning_end: int = 0              # tokens of reasoning: those before `<|close|>think<|sep|>` (all, without)
    content: str = ""
    calls: list[K3ToolCall] = field(default_factory=list)
    ends_with_end_of_msg: bool = False
    message_closed: bool = False
    violations: list[K3Violation] = field(default_factory=list)
    body_end: int = 0                   # the completion without a final `<|end_of_msg|>`
    read_end: int = 0                   # where the walk stopped reading structure (body_end when it read it all)
    spans: list[K3Span] = field(default_factory=list)     # every element, in the order they open

    @property
    def codes(self) -> list[str]:
        return [v.code for v in self.violations]

    def codes_for(self, finished: bool) -> list[str]:
        """The reason codes that apply: a truncated completion is excused the ones that need the end."""
        return [c for c in self.codes if finished or not REASONS[c][1]]


@dataclass
class _Tag:
    kind: int           # _OPEN or _CLOSE
    lo: int             # the marker's position
    hi: int             # one past its `<|sep|>`
    head: str           # name and attributes, as decoded


class _Walk:
    """The grammar walk over one completion's items (text runs and tags)."""

    def __init__(self, out: K3Completion, decode: Callable[[int, int], str], declared: frozenset[str] | None):
        self.out, self.decode, self.declared = out, decode, declared
        self.stack = ["message", "response" if out.instant else "think"]
        # the open elements' spans (the generation prompt opened the first two); closed ones stay in out.spans
        self.open_spans = [K3Span("message", 0, 0, 0), K3Span(self.stack[1], 1, 0, 0)]
        out.spans.extend(self.open_spans)
        self.done: dict[str, list[str]] = {"message": [], "tools": [], "call": []}
        self.text: list[str] = []        # the open text element's pieces
        self.stopped = False
        self.args: dict[str, Any] = {}
        self.attrs: dict[str, str] = {}

    def fail(self, code: str, at: int, message: str, stop: bool = False) -> None:
        self.out.violations.append(K3Violation(code, at, message))
        self.stopped = self.stopped or stop

    def text_run(self, lo: int, hi: int) -> None:
        text = self.decode(lo, hi)
        if self.stack and ELEMENTS[self.stack[-1]] == "text":
            self.text.append(text)
        elif text:
            self.fail("text_between_elements", lo, f"text {text[:40]!r} at {lo} outside any text element")

    def tag(self, tag: _Tag) -> None:
        m = _HEAD.match(tag.head)
        if m is None or (tag.kind == _CLOSE and m["attrs"]):
            return self.fail("malformed_tag", tag.lo, f"tag {tag.head[:40]!r} at {tag.lo} is no element name with "
                                                      "attributes", stop=True)
        name = m["name"]
        if tag.kind == _OPEN:
            return self.open(name, m["attrs"], tag.lo, tag.hi)
        if not self.stack or self.stack[-1] != name:
            return self.fail("unexpected_element", tag.lo, f"</{name}> at {tag.lo} closes no open {name}",
                             stop=True)
        span = self.open_spans.pop()
        span.close_lo, span.hi = tag.lo, tag.hi
        self.close(name, tag.lo)

    def open(self, name: str, attrs: str, at: int, head_end: int) -> None:
        parent = self.stack[-1] if self.stack else None
        if name == "think" and self.out.instant:
            return self.fail("think_in_instant", at, f"a think element at {at} in an instant-mode completion",
                             stop=True)
        if parent is None or not self._allowed_child(parent, name):
            where = f"inside {parent}" if parent else "after the message"
            return self.fail("unexpected_element", at, f"<{name}> at {at} {where}", stop=True)
        pairs = [(a["key"], _unescape(a["value"])) for a in _ATTR.finditer(attrs)]
        if [k for k, _ in pairs] != list(ATTRIBUTES.get(name, ())):
            code = {"call": "bad_call", "argument": "bad_argument"}.get(name, "malformed_tag")
            return self.fail(code, at, f"<{name}> at {at} has attributes {[k for k, _ in pairs]}, not "
                                       f"{list(ATTRIBUTES.get(name, ()))}", stop=True)
        self.attrs = dict(pairs)
        span = K3Span(name, len(self.stack), at, head_end, dict(pairs))
        self.open_spans.append(span)
        self.out.spans.append(span)
        self.stack.append(name)
        self.text = []
        if name == "call":
            self.args = {}
            self.start_call(at)
        elif name == "json":
            self.fail("json_arguments", at, f"call arguments at {at} written as a json block")

    def _allowed_child(self, parent: str, name: str) -> bool:
        allowed, done = ELEMENTS[parent], self.done.get(parent, [])
        if allowed == "text" or name not in allowed:
            return False
        if parent == "message":     # think (thinking mode only), response, then at most one tools, in that order
            order = ["response", "tools"] if self.out.instant else ["think", "response", "tools"]
            return done == order[:order.index(name)]
        if parent == "call":        # arguments, or one json block alone
            return not done or (name == "argument" and "json" not in done)
        return True

    def start_call(self, at: int) -> None:
        k = len(self.done["tools"]) + 1
        tool, index = self.attrs["tool"], self.attrs["index"]
        if not tool:
            self.fail("bad_call", at, f"call {k} at {at} names no tool")
        if index != str(k):
            self.fail("call_index_out_of_order", at, f"call {k} at {at} says index={index!r}")
        if self.declared is not None and tool:
            if not self.declared:
                self.fail("tool_call_without_tools", at, f"call to {tool!r} at {at} but the prompt declared no tools")
            elif tool not in self.declared:
                self.fail("undeclared_tool", at, f"call to {tool!r} at {at}, which the prompt did not declare")
        self.out.calls.append(K3ToolCall(tool=tool, index=index, arguments=self.args, position=at))
        self.done["call"] = []

    def close(self, name: str, at: int) -> None:
        self.stack.pop()
        parent = self.stack[-1] if self.stack else None
        if parent in self.done:
            self.done[parent].append(name)
        body = "".join(self.text)
        if name == "think":
            self.out.reasoning, self.out.reasoning_end = body, at
        elif name == "response":
            self.out.content = body
        elif name == "argument":
            self.argument(body, at)
        elif name == "tools" and not self.done["tools"]:
            self.fail("empty_tools", at, f"the tools element closed at {at} holds no call")
        elif name == "message":
            self.out.message_closed = True
        if name in ("think", "response", "argument", "json"):
            self.text = []

    def argument(self, raw: str, at: int) -> None:
        key, kind = self.attrs["key"], self.attrs["type"]
        if kind not in ARGUMENT_TYPES:
            return self.fail("bad_argument", at, f"argument {key!r} before {at} has unknown type {kind!r}")
        if key in self.args:
            return self.fail("bad_argument", at, f"argument {key!r} before {at} is repeated")
        if kind == "string":
            self.args[key] = raw
            return
        try:
            value = json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return self.fail("bad_argument", at, f"argument {key!r} before {at} is not {kind} JSON")
        if not isinstance(value, ARGUMENT_TYPES[kind]) or (kind == "number" and isinstance(value, bool)):
            return self.fail("bad_argument", at, f"argument {key!r} before {at} is JSON of another type than {kind}")
        self.args[key] = value

    def finish(self, body_end: int) -> None:
        """What only the end of the walk shows (skipped after a stop: the structure past it was not read)."""
        for span in self.open_spans:       # never closed: they reach where reading stopped
            span.hi = self.out.read_end
        if self.stack and self.stack[-1] == "think":
            self.out.reasoning, self.out.reasoning_end = "".join(self.text), body_end
        elif self.stack and self.stack[-1] == "response":
            self.out.content = "".join(self.text)
        if self.stopped:
            return
        if not self.out.instant and "think" in self.stack:
            self.fail("missing_think_close", body_end, "the think element is never closed")
        elif "response" not in self.done["message"] and "response" not in self.stack:
            self.fail("missing_response", body_end, "the message has no response element")
        if not self.out.message_closed:
            self.fail("missing_message_close", body_end, "the message is never closed")
        elif not self.out.content.strip() and not self.out.calls:
            self.fail("empty_answer", body_end, "no response text and no tool call")


def tag_head(text: str) -> tuple[str, dict[str, str]] | None:
    """A tag's decoded head (what stands between its marker and `<|sep|>`, e.g. `message role="tool" tool="f"`)
    as (element name, attributes unescaped); None when it is no element name with attributes."""
    m = _HEAD.match(text)
    if m is None:
        return None
    return m["name"], {a["key"]: _unescape(a["value"]) for a in _ATTR.finditer(m["attrs"])}


def reasoning_length(ids: Sequence[int], tokens: K3TokenIds, instant: bool = False) -> int:
    """How many of a completion's tokens are reasoning, without decoding it (generation's and `score`'s log-prob
    sums): those before the first `<|close|>`, which in a completion the grammar reads to its end is think's
    close tag (then this is `K3Completion.reasoning_end`, tested equal), else all but a final `<|end_of_msg|>`;
    none in instant mode."""
    if instant:
        return 0
    ids = [int(i) for i in ids]
    if tokens.close in ids:
        return ids.index(tokens.close)
    return len(ids) - 1 if ids and ids[-1] == tokens.end_of_msg else len(ids)


def parse_completion(ids: Sequence[int], tokens: K3TokenIds, decode: Callable[[Sequence[int]], str], *,
                     instant: bool = False, declared_tools: frozenset[str] | None = None) -> K3Completion:
    """One completion's ids read by the grammar (module docstring). `decode` turns ids into text (special ids as
    their strings); `declared_tools` None skips the declared-tool rules."""
    ids = [int(i) for i in ids]
    out = K3Completion(n=len(ids), instant=instant)
    role = {tokens.open: _OPEN, tokens.close: _CLOSE, tokens.sep: _SEP, tokens.end_of_msg: _END}
    role.update({i: _LEGACY for i in tokens.legacy})
    role.update({i: _FORBIDDEN for i in tokens.forbidden})
    roles = [role.get(i, _TEXT) for i in ids]
    out.ends_with_end_of_msg = bool(ids) and roles[-1] == _END
    body_end = len(ids) - 1 if out.ends_with_end_of_msg else len(ids)
    walk = _Walk(out, lambda lo, hi: decode(ids[lo:hi]) if hi > lo else "", declared_tools)
    for p, r in enumerate(roles):
        if r == _LEGACY:
            walk.fail("legacy_k2_token", p, f"{tokens.legacy[ids[p]]} at {p}")
        elif r == _FORBIDDEN:
            walk.fail("forbidden_token", p, f"{tokens.forbidden[ids[p]]} at {p}")
        elif r == _END and p != len(ids) - 1:
            walk.fail("end_of_msg_not_last", p, f"<|end_of_msg|> at {p} before the end")
    if not out.ends_with_end_of_msg:
        walk.fail("missing_end_of_msg", len(ids), "the completion does not end with <|end_of_msg|>")
    out.body_end = out.read_end = body_end
    p = 0
    while p < body_end and not walk.stopped:
        if roles[p] in (_OPEN, _CLOSE):
            q = p + 1
            while q < body_end and roles[q] in (_TEXT, _LEGACY, _FORBIDDEN):
                q += 1
            if q >= body_end or roles[q] != _SEP:
                if q < body_end or out.ends_with_end_of_msg:   # a tag cut by the end of a truncated one is not
                    walk.fail("malformed_tag", p, f"the marker at {p} is not closed by <|sep|>", stop=True)
                out.read_end = p
                break
            walk.tag(_Tag(roles[p], p, q + 1, decode(ids[p + 1:q])))
            if walk.stopped:        # the tag was not read
                out.read_end = p
            p = q + 1
        elif roles[p] == _END:      # before the last token: reported above; nothing after it is read
            walk.stopped = True
            out.read_end = p
        elif roles[p] == _SEP:
            walk.fail("malformed_tag", p, f"a <|sep|> at {p} that ends no tag", stop=True)
            out.read_end = p
        else:
            q = p
            while q < body_end and roles[q] in (_TEXT, _LEGACY, _FORBIDDEN):
                q += 1
            walk.text_run(p, q)
            p = q
    walk.finish(body_end)
    return out
