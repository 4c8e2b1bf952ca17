"""Source adapters: one upstream row (a dict, as `datasets`/JSONL gives it) -> one `SourcePrompt`.

Each adapter either returns `SourcePrompt(source_id, messages, tools)` or raises
`SourceRowError(code, message)` with a machine-readable `code` and one human line. Codes:

    wrong_type            the row, a column or a message has the wrong type
    missing_field         a required column / message key is absent (or null where a value is required)
    empty_user_turn       the user turn to answer is empty or whitespace-only
    no_user_turn          the conversation has no user turn at all
    starts_with_assistant the conversation opens with an assistant turn (ShareGPT chunk starting with gpt)
    unknown_role          a `from`/`role` value the adapter does not know
    placeholder_input     `input` is the "-" placeholder (OpenCodeReasoning split_1, filled from TACO/APPS)
    bad_tool_json         glaive system string: the tool declarations are not JSON objects with a name
    bad_chat_format       glaive `chat` that is not a sequence of USER:/ASSISTANT:/FUNCTION RESPONSE: turns
    bad_tool_call         glaive `<functioncall>` that cannot be parsed (after_tool_result policy)
    undeclared_tool       glaive call to a tool that the system string does not declare
    no_tool_result        after_tool_result policy on a row without a FUNCTION RESPONSE

Messages use the chat shape `apply_chat_template` takes; tools are native
`[{"type": "function", "function": {name, description, parameters}}]`, never pasted into a
system message (SPEC §3).

Design decisions (documented in the report and tested):

* glaive: the system boilerplate ("You are a helpful assistant with access to the following
  functions. Use them if required -", "…with no access to external functions.") is dropped; the
  tools go to `tools=`. Any *other* text left in the system string after removing the tool JSON
  and that boilerplate is kept as a system message (upstream almost never has any).
* source ids: the upstream key where there is one (`id`, `prompt_id`); otherwise a content hash
  (`sha1(...)[:16]`) so that the same row gives the same id on every machine, and duplicated
  questions (OpenThoughts, Mixture-of-Thoughts) get the same id — dedup downstream keys on it.
* content normalisation: a string is kept verbatim (no stripping) except glaive, whose turns are
  cut out of one marker-delimited string and stripped; a list of text parts
  (`{"type": "text", "text": …}` or plain strings) is joined with "\\n"; anything else is `wrong_type`.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Callable

from kimi_eagle_data.profile import KIMI_K25
from kimi_eagle_data.records import SourcePrompt, SourceRowError

# Tool-call ids in history turns use the target's format (Kimi-K2.5: `functions.NAME:IDX`).
tool_call_id = KIMI_K25.tool_call_id

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


# --------------------------------------------------------------------------------------------
# helpers


def _sha16(*parts: str) -> str:
    h = hashlib.sha1()
    for i, p in enumerate(parts):
        if i:
            h.update(b"\x1f")
        h.update(p.encode("utf-8"))
    return h.hexdigest()[:16]


def _require_row(row: Any) -> dict:
    if not isinstance(row, dict):
        raise SourceRowError("wrong_type", f"row is {type(row).__name__}, expected an object")
    return row


def _field(row: dict, name: str, kind: type | tuple[type, ...], what: str | None = None) -> Any:
    """A required column of the given type (None counts as missing; bool is never an int)."""
    if name not in row or row[name] is None:
        raise SourceRowError("missing_field", f"row has no `{name}` column")
    value = row[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise SourceRowError(
            "wrong_type", f"`{name}` is {type(value).__name__}, expected {what or _kind_name(kind)}"
        )
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))


def _id_string(row: dict, name: str) -> str:
    value = _field(row, name, (str, int))
    text = str(value).strip()
    if not text:
        raise SourceRowError("missing_field", f"`{name}` is empty")
    return text


def content_text(value: Any, where: str) -> str:
    """Normalise message content to a string: str as is; a list of text parts joined by "\\n"."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list[str] = []
        for i, part in enumerate(value):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(
                part.get("text"), str
            ):
                parts.append(part["text"])
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise SourceRowError(
                    "wrong_type", f"{where}: content part {i} is not text (got {kind!r})"
                )
        return "\n".join(parts)
    raise SourceRowError(
        "wrong_type",
        f"{where}: content is {type(value).__name__}, expected a string or a list of text parts",
    )


def _user_text(value: Any, where: str) -> str:
    text = content_text(value, where)
    if not text.strip():
        raise SourceRowError("empty_user_turn", f"{where} is empty")
    return text


def _turn_list(row: dict, name: str) -> list:
    turns = _field(row, name, list, "a list of turns")
    if not turns:
        raise SourceRowError("no_user_turn", f"`{name}` is an empty list")
    for i, t in enumerate(turns):
        if not isinstance(t, dict):
            raise SourceRowError("wrong_type", f"`{name}[{i}]` is {type(t).__name__}, expected an object")
    return turns


# --------------------------------------------------------------------------------------------
# B2 / B3: nvidia/OpenCodeInstruct, nvidia/OpenCodeReasoning — `input` as one user turn


def input_field(row: dict) -> SourcePrompt:
    row = _require_row(row)
    source_id = _id_string(row, "id")
    text = _field(row, "input", (str, list), "a string")
    text = content_text(text, "`input`")
    if text.strip() == "-":
        raise SourceRowError(
            "placeholder_input",
            "`input` is the '-' placeholder (OpenCodeReasoning split_1: fill it from TACO/APPS first)",
        )
    if not text.strip():
        raise SourceRowError("empty_user_turn", "`input` is empty")
    return SourcePrompt(source_id, [{"role": "user", "content": text}], None)


def first_user_turn(turns: list, field: str, role_key: str, content_key: str, user_roles: set[str],
                    assistant_roles: set[str]) -> tuple[dict | None, str]:
    """(the first non-empty system turn before it or None, the first user turn's text).

    Shared by the `messages[{role, content}]` and ShareGPT `conversations[{from, value}]` schemas. A
    conversation whose first non-system turn is the assistant's (a chunk cut mid-conversation) is
    `starts_with_assistant`."""
    system: dict | None = None
    for i, turn in enumerate(turns):
        if role_key not in turn:
            raise SourceRowError("missing_field", f"`{field}[{i}]` has no `{role_key}`")
        role = turn[role_key]
        if role == "system":
            text = content_text(turn.get(content_key, ""), f"`{field}[{i}].{content_key}`")
            if text.strip() and system is None:
                system = {"role": "system", "content": text}
            continue
        if role in user_roles:
            if content_key not in turn:
                raise SourceRowError("missing_field", f"`{field}[{i}]` has no `{content_key}`")
            return system, _user_text(turn[content_key], f"the first user turn (`{field}[{i}]`)")
        if role in assistant_roles:
            raise SourceRowError("starts_with_assistant",
                                 f"`{field}` starts with a `{role}` turn (a chunk cut mid-conversation); skipped")
        raise SourceRowError("unknown_role", f"`{field}[{i}].{role_key}` is {role!r}")
    raise SourceRowError("no_user_turn", f"`{field}` has no user turn")


# --------------------------------------------------------------------------------------------
# B4 / B6: open-r1/Mixture-of-Thoughts, HuggingFaceH4/ultrachat_200k — `messages[{role, content}]`


def messages(row: dict) -> SourcePrompt:
    """The first user message (plus a system message that precedes it, if any).

    source_id: `prompt_id` (ultrachat) when the row has one, else sha1 of the user text
    (Mixture-of-Thoughts has no id column)."""
    row = _require_row(row)
    system, text = first_user_turn(_turn_list(row, "messages"), "messages", "role", "content", {"user"},
                                   {"assistant"})
    if "prompt_id" in row and row["prompt_id"] is not None:
        source_id = _id_string(row, "prompt_id")
    else:
        source_id = _sha16(text)
    return SourcePrompt(source_id, ([system] if system else []) + [{"role": "user", "content": text}], None)


# --------------------------------------------------------------------------------------------
# B5: open-thoughts/OpenThoughts-114k — `system` (Sky-T1 prompt) + `conversations[{from, value}]`

_HUMAN_FROM = {"user", "human"}
_ASSISTANT_FROM = {"assistant", "gpt"}


def openthoughts(row: dict) -> SourcePrompt:
    """First human turn of `conversations`; the Sky-T1 `system` prompt is dropped (it is a
    distillation instruction for the teacher, not part of the question; the target model reasons
    on its own). source_id = sha1 of the question: the upstream has no id, and duplicated
    questions (OpenThoughts3-style 16x repeats) map to one id for dedup."""
    row = _require_row(row)
    turns = _turn_list(row, "conversations")
    for i, turn in enumerate(turns):
        if "from" not in turn:
            raise SourceRowError("missing_field", f"`conversations[{i}]` has no `from`")
        who = turn["from"]
        if who in _HUMAN_FROM:
            if "value" not in turn:
                raise SourceRowError("missing_field", f"`conversations[{i}]` has no `value`")
            text = _user_text(turn["value"], f"the first human turn (`conversations[{i}]`)")
            return SourcePrompt(_sha16(text), [{"role": "user", "content": text}], None)
        if who == "system":
            continue
        if who in _ASSISTANT_FROM:
            raise SourceRowError(
                "starts_with_assistant", f"`conversations[{i}]` ({who}) precedes any human turn"
            )
        raise SourceRowError("unknown_role", f"`conversations[{i}].from` is {who!r}")
    raise SourceRowError("no_user_turn", "`conversations` has no human turn")


# --------------------------------------------------------------------------------------------
# B7: Aeala/ShareGPT_Vicuna_unfiltered — `id`, `conversations[{from, value}]`

SHAREGPT_HUMAN = {"human", "user"}
SHAREGPT_ASSISTANT = {"gpt", "chatgpt", "bing", "bard", "assistant"}


def sharegpt(row: dict) -> SourcePrompt:
    """First human turn. A leading `system` turn is kept as a system message (it is the
    conversation's own setup); a chunk whose first non-system turn comes from an assistant
    (gpt/chatgpt/bing/bard: the split cut mid-conversation) is skipped: `starts_with_assistant`."""
    row = _require_row(row)
    source_id = _id_string(row, "id")
    system, text = first_user_turn(_turn_list(row, "conversations"), "conversations", "from", "value",
                                   SHAREGPT_HUMAN, SHAREGPT_ASSISTANT)
    return SourcePrompt(source_id, ([system] if system else []) + [{"role": "user", "content": text}], None)


# --------------------------------------------------------------------------------------------
# B8: nebius/SWE-agent-trajectories — system prompt + first user message of `trajectory`


def sweagent(row: dict) -> SourcePrompt:
    """System message (the system-role entry's `system_prompt`, else its `text`) + the first user
    message. source_id = `{instance_id}/{model_name}/{sha1(system, user)[:8]}`: readable, stable,
    and one id for trajectories of the same instance and model that share the same prompt."""
    row = _require_row(row)
    instance_id = _id_string(row, "instance_id")
    model_name = _id_string(row, "model_name")
    turns = _turn_list(row, "trajectory")
    system_text: str | None = None
    for i, turn in enumerate(turns):
        if "role" not in turn:
            raise SourceRowError("missing_field", f"`trajectory[{i}]` has no `role`")
        role = turn["role"]
        if role == "system":
            if system_text is None:
                sp = turn.get("system_prompt")
                raw = sp if isinstance(sp, str) and sp.strip() else turn.get("text")
                if raw is not None:
                    text = content_text(raw, f"`trajectory[{i}]` system prompt")
                    if text.strip():
                        system_text = text
            continue
        if role == "user":
            if turn.get("text") is None:
                raise SourceRowError("missing_field", f"`trajectory[{i}]` (user) has no `text`")
            text = _user_text(turn["text"], f"the first user message (`trajectory[{i}]`)")
            if system_text is None:
                sp = turn.get("system_prompt")
                if isinstance(sp, str) and sp.strip():
                    system_text = sp
            msgs = ([{"role": "system", "content": system_text}] if system_text else []) + [
                {"role": "user", "content": text}
            ]
            h = _sha16(system_text or "", text)[:8]
            return SourcePrompt(f"{instance_id}/{model_name}/{h}", msgs, None)
        if role in ("ai", "assistant"):
            raise SourceRowError("starts_with_assistant", f"`trajectory[{i}]` ({role}) precedes any user message")
        raise SourceRowError("unknown_role", f"`trajectory[{i}].role` is {role!r}")
    raise SourceRowError("no_user_turn", "`trajectory` has no user message")


# --------------------------------------------------------------------------------------------
# B1: glaiveai/glaive-function-calling-v2 — `system` (tools as concatenated JSON), `chat` (markers)

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


GLAIVE_POLICIES = ("first_user", "after_tool_result")


def glaive(row: dict, policy: str = "first_user") -> SourcePrompt:
    """glaive-function-calling-v2 row -> prompt.

    `first_user` (default, B1): [system?] + the first USER turn, tools native.
    `after_tool_result`: the conversation up to and including the first FUNCTION RESPONSE —
    user … → assistant tool call (native `tool_calls`, ids numbered across the conversation,
    JSON arguments string) → `role: "tool"` result — so the model regenerates the answer after a tool result.
    source_id: sha1 of `system` + `chat` (the upstream has no id column); same for both policies.
    """
    if policy not in GLAIVE_POLICIES:
        raise ValueError(f"unknown glaive policy {policy!r}; known: {', '.join(GLAIVE_POLICIES)}")
    row = _require_row(row)
    system = _field(row, "system", str)
    chat = _field(row, "chat", str)
    tools, rest = parse_glaive_system(system)
    source_id = _sha16(system, chat)
    turns = parse_glaive_chat(chat)
    if turns[0][0] != "USER":
        raise SourceRowError("starts_with_assistant", f"`chat` starts with {turns[0][0]}:, not USER:")
    head = [{"role": "system", "content": rest}] if rest else []
    if not turns[0][1]:
        raise SourceRowError("empty_user_turn", "the first USER turn of `chat` is empty")
    if policy == "first_user":
        return SourcePrompt(source_id, head + [{"role": "user", "content": turns[0][1]}], tools)

    msgs = glaive_messages(turns, tools, stop_after_tool_result=True)
    if msgs[-1]["role"] != "tool":
        raise SourceRowError("no_tool_result", "`chat` has no FUNCTION RESPONSE (policy after_tool_result)")
    return SourcePrompt(source_id, head + msgs, tools)


def glaive_messages(turns: list[tuple[str, str]], tools: list[dict] | None, *,
                    stop_after_tool_result: bool = False) -> list[dict[str, Any]]:
    """glaive turns in the chat shape: calls as native `tool_calls`, FUNCTION RESPONSE as
    `role: "tool"`. Call ids are numbered across the whole conversation (0, 1, 2, …), as Kimi
    numbers them (vLLM and SGLang count the calls already in the history), so the model sees
    history ids that agree with the index it must continue from."""
    declared = {t["function"]["name"] for t in tools or []}
    msgs: list[dict[str, Any]] = []
    pending: tuple[str, str] | None = None                 # (call id, name) awaiting its result
    calls = 0
    for marker, text in turns:
        if marker == "USER":
            if not text and stop_after_tool_result:
                raise SourceRowError("empty_user_turn", "a USER turn before the tool result is empty")
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
            if stop_after_tool_result:
                break
    return msgs


def glaive_after_tool_result(row: dict) -> SourcePrompt:
    return glaive(row, policy="after_tool_result")


# --------------------------------------------------------------------------------------------
# Whole conversations: the `every_user_prefix` policy and the generic `chat` adapter
#
# A conversation function returns (base source id, messages, tools): every turn of the row in
# the chat shape, in order. `prefixes()` cuts it at each user turn; prefix k gets the source id
# `{base}#u{k}` (k = 0-based index among the user turns), so each prefix has a stable id of its
# own. Each conversation function applies the same rules as its first-user adapter up to the
# first user turn, so prefix 0 has the same messages as the first-user prompt (tested).

Conversation = tuple[str, list[dict[str, Any]], "list[dict] | None"]
PrefixItem = tuple[str, "SourcePrompt | SourceRowError"]

_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.S)
_OT_THOUGHT = re.compile(r"^\s*<\|begin_of_thought\|>(.*?)<\|end_of_thought\|>\s*", re.S)
_OT_SOLUTION = re.compile(r"^\s*<\|begin_of_solution\|>(.*?)(?:<\|end_of_solution\|>\s*)?$", re.S)


def split_reasoning(text: str) -> dict[str, Any]:
    """An upstream assistant answer as a chat message: a leading `<think>…</think>` (or
    OpenThoughts' `<|begin_of_thought|>…<|end_of_thought|>`) becomes `reasoning_content`, so the
    reasoning markers never reach the template as text (Kimi's template drops the reasoning of
    earlier turns anyway)."""
    for pattern in (_THINK, _OT_THOUGHT):
        m = pattern.match(text)
        if m:
            answer = text[m.end():]
            sol = _OT_SOLUTION.match(answer)
            if sol:
                answer = sol.group(1)
            return {"role": "assistant", "content": answer.strip(), "reasoning_content": m.group(1).strip()}
    return {"role": "assistant", "content": text}


def prefixes(base_id: str, msgs: list[dict[str, Any]], tools: list[dict] | None) -> list[PrefixItem]:
    """One prompt per user turn; an empty user turn is that prefix's rejection (`empty_user_turn`)."""
    out: list[PrefixItem] = []
    k = 0
    for i, m in enumerate(msgs):
        if m["role"] != "user":
            continue
        sid = f"{base_id}#u{k}"
        if not m["content"].strip():
            out.append((sid, SourceRowError("empty_user_turn", f"user turn {k} is empty")))
        else:
            out.append((sid, SourcePrompt(sid, [dict(x) for x in msgs[: i + 1]], tools)))
        k += 1
    if not out:
        raise SourceRowError("no_user_turn", "the conversation has no user turn")
    return out


def _conversation_turns(turns: list, col: str, role_key: str, text_key: str, roles: dict[str, str],
                        *, keep_system: bool) -> list[dict[str, Any]]:
    """Map upstream turns to chat messages (roles: upstream value -> user/assistant/system/tool).
    Before the first user turn: a system turn is kept (first non-empty one) when `keep_system`;
    an assistant turn is `starts_with_assistant`."""
    msgs: list[dict[str, Any]] = []
    seen_user = False
    for i, turn in enumerate(turns):
        if role_key not in turn:
            raise SourceRowError("missing_field", f"`{col}[{i}]` has no `{role_key}`")
        who = turn[role_key]
        role = roles.get(who) if isinstance(who, str) else None
        if role is None:
            raise SourceRowError("unknown_role", f"`{col}[{i}].{role_key}` is {who!r}")
        if role == "system":
            text = content_text(turn.get(text_key) or "", f"`{col}[{i}].{text_key}`")
            if keep_system and text.strip() and not any(m["role"] == "system" for m in msgs):
                msgs.append({"role": "system", "content": text})
            continue
        if role == "user":
            raw = turn.get(text_key)
            if raw is None and not seen_user:
                raise SourceRowError("missing_field", f"`{col}[{i}]` has no `{text_key}`")
            text = content_text("" if raw is None else raw, f"`{col}[{i}].{text_key}`")
            if not seen_user and not text.strip():
                raise SourceRowError("empty_user_turn", f"the first user turn (`{col}[{i}]`) is empty")
            seen_user = True
            msgs.append({"role": "user", "content": text})
            continue
        if not seen_user:
            raise SourceRowError("starts_with_assistant", f"`{col}[{i}]` ({who}) precedes any user turn")
        raw = turn.get(text_key)
        text = content_text("" if raw is None else raw, f"`{col}[{i}].{text_key}`")
        if role == "assistant":
            msg = split_reasoning(text)
            if isinstance(turn.get("tool_calls"), list) and turn["tool_calls"]:
                msg["tool_calls"] = turn["tool_calls"]
            msgs.append(msg)
        else:                                              # tool result
            msg = {"role": "tool", "content": text}
            for key in ("tool_call_id", "name"):
                if isinstance(turn.get(key), str):
                    msg[key] = turn[key]
            msgs.append(msg)
    if not seen_user:
        raise SourceRowError("no_user_turn", f"`{col}` has no user turn")
    return msgs


_MESSAGES_ROLES = {"system": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def messages_conversation(row: dict) -> Conversation:
    row = _require_row(row)
    first = messages(row)                                  # the first-user rules and id
    turns = _turn_list(row, "messages")
    msgs = _conversation_turns(turns, "messages", "role", "content", _MESSAGES_ROLES, keep_system=True)
    return first.source_id, msgs, None


def openthoughts_conversation(row: dict) -> Conversation:
    row = _require_row(row)
    first = openthoughts(row)
    roles = {**{k: "user" for k in _HUMAN_FROM}, **{k: "assistant" for k in _ASSISTANT_FROM}, "system": "system"}
    msgs = _conversation_turns(_turn_list(row, "conversations"), "conversations", "from", "value", roles,
                               keep_system=False)
    return first.source_id, msgs, None


def sharegpt_conversation(row: dict) -> Conversation:
    row = _require_row(row)
    first = sharegpt(row)
    roles = {**{k: "user" for k in SHAREGPT_HUMAN}, **{k: "assistant" for k in SHAREGPT_ASSISTANT},
             "system": "system"}
    msgs = _conversation_turns(_turn_list(row, "conversations"), "conversations", "from", "value", roles,
                               keep_system=True)
    return first.source_id, msgs, None


def sweagent_conversation(row: dict) -> Conversation:
    row = _require_row(row)
    first = sweagent(row)
    turns = _turn_list(row, "trajectory")
    head = [m for m in first.messages if m["role"] == "system"]
    msgs: list[dict[str, Any]] = list(head)
    seen_user = False
    for i, turn in enumerate(turns):
        role = turn.get("role")
        if role == "system":
            continue
        text = content_text(turn.get("text") or "", f"`trajectory[{i}].text`")
        if role == "user":
            seen_user = True
            msgs.append({"role": "user", "content": text})
        elif role in ("ai", "assistant") and seen_user:
            msgs.append({"role": "assistant", "content": text})
        else:
            raise SourceRowError("unknown_role", f"`trajectory[{i}].role` is {role!r}")
    return first.source_id, msgs, None


def glaive_conversation(row: dict) -> Conversation:
    """Every turn of a glaive chat: tool calls as native `tool_calls`, FUNCTION RESPONSE as
    `role: "tool"` results (the same conversion as the after_tool_result policy)."""
    first = glaive(row)
    tools, rest = parse_glaive_system(row["system"])
    msgs: list[dict[str, Any]] = [{"role": "system", "content": rest}] if rest else []
    return first.source_id, msgs + glaive_messages(parse_glaive_chat(row["chat"]), tools), tools


def input_field_conversation(row: dict) -> Conversation:
    sp = input_field(row)
    return sp.source_id, sp.messages, None


# -- the generic adapter for user-defined partitions ------------------------------------------

CHAT_ROLES = {
    "user": "user", "human": "user",
    "assistant": "assistant", "gpt": "assistant", "chatgpt": "assistant", "bing": "assistant",
    "bard": "assistant", "model": "assistant",
    "system": "system",
    "tool": "tool", "function": "tool", "observation": "tool",
}
CHAT_ID_FIELDS = ("id", "prompt_id", "conversation_id", "uuid")


def normalize_tool(obj: Any, i: int) -> Any:
    """A tool as `{"type": "function", "function": {...}}`: a flat `{name, description,
    parameters}` is wrapped and empty/missing `parameters` filled (as for glaive). Anything else
    is passed through unchanged, for the `invalid_tool_schema` filter to judge."""
    if isinstance(obj, dict) and "function" not in obj and "name" in obj:
        obj = {"type": "function", "function": obj}
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):
        fn = dict(obj["function"])
        if fn.get("parameters") in (None, {}, []):
            fn["parameters"] = dict(EMPTY_PARAMETERS)
        obj = {**obj, "type": obj.get("type", "function"), "function": fn}
    return obj


def _chat_tools(row: dict) -> list | None:
    raw = row.get("tools")
    if raw is None or raw == "" or raw == []:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise SourceRowError("bad_tool_json", f"`tools` is not valid JSON: {e.msg}") from None
    if not isinstance(raw, list):
        raise SourceRowError("bad_tool_json", f"`tools` is {type(raw).__name__}, expected a list of tools")
    return [normalize_tool(t, i) for i, t in enumerate(raw)] or None


def chat_conversation(row: dict, id_field: str | None = None) -> Conversation:
    """Any row with `messages` ({role, content}) or `conversations` (ShareGPT {from, value}, or
    {role, content}); optional `system` (string) and `tools` (list, or a JSON string) columns.

    source id: `id_field` when given, else the first of id/prompt_id/conversation_id/uuid the row
    has, else sha1 of the whole conversation (so two conversations sharing only their opening
    question stay two rows; the exact-prompt dedup then handles the shared prompt)."""
    row = _require_row(row)
    col = "messages" if "messages" in row else "conversations" if "conversations" in row else None
    if col is None:
        raise SourceRowError("missing_field", "row has neither a `messages` nor a `conversations` column")
    turns = _turn_list(row, col)
    role_key, text_key = ("from", "value") if "from" in turns[0] else ("role", "content")
    if role_key == "role" and "content" not in turns[0] and "value" in turns[0]:
        text_key = "value"
    msgs = _conversation_turns(turns, col, role_key, text_key, CHAT_ROLES, keep_system=True)
    system = row.get("system")
    if system is not None and not any(m["role"] == "system" for m in msgs):
        text = content_text(system, "`system`")
        if text.strip():
            msgs.insert(0, {"role": "system", "content": text})
    tools = _chat_tools(row)
    if id_field:
        base = _id_string(row, id_field)
    else:
        key = next((k for k in CHAT_ID_FIELDS if row.get(k) is not None), None)
        base = _id_string(row, key) if key else _sha16(json.dumps([msgs, tools], sort_keys=True, ensure_ascii=False))
    return base, msgs, tools


def chat(row: dict, id_field: str | None = None) -> SourcePrompt:
    """First-user prompt of a generic chat row: everything before the first user turn + that turn."""
    base, msgs, tools = chat_conversation(row, id_field)
    first = next(i for i, m in enumerate(msgs) if m["role"] == "user")
    return SourcePrompt(base, msgs[: first + 1], tools)


CONVERSATIONS: dict[str, Callable[..., Conversation]] = {
    "glaive": glaive_conversation,
    "input_field": input_field_conversation,
    "messages": messages_conversation,
    "openthoughts": openthoughts_conversation,
    "sharegpt": sharegpt_conversation,
    "sweagent": sweagent_conversation,
    "chat": chat_conversation,
}


def adapt_row(adapter: str, row: Any, policy: str = "first_user", *, id_field: str | None = None
              ) -> tuple[str, list[PrefixItem]]:
    """One source row -> (row key, [(source id, prompt or per-prompt error)]) under a policy; each prompt
    carries the upstream answer that followed it (`SourcePrompt.answer`, None where there is none).

    Raises `SourceRowError` when the row as a whole cannot be read."""
    key, items = _adapt_row(adapter, row, policy, id_field=id_field)
    for _, item in items:
        if isinstance(item, SourcePrompt):
            item.answer = upstream_answer(adapter, row, item, id_field=id_field)
    return key, items


def upstream_answer(adapter: str, row: Any, prompt: SourcePrompt, *, id_field: str | None = None
                    ) -> dict[str, Any] | None:
    """The source's own answer to `prompt`: {"reasoning": str | None, "content": str[, "tool_calls"]}.

    `input_field` rows: the `output` column (OpenCodeInstruct's code, OpenCodeReasoning's `<think>…</think>`
    + solution). Conversation rows: the assistant turn right after the prompt's last turn in the row's
    whole conversation (the same `CONVERSATIONS` reading the every_user_prefix policy uses), with a
    leading `<think>…</think>` or OpenThoughts' thought section split off as reasoning (`split_reasoning`).
    None when the source has no answer there (the conversation ends, the next turn is not the assistant's,
    the answer is empty, or the rest of the row cannot be read): prepare counts those prompts."""
    try:
        if adapter == "input_field":
            out = row.get("output") if isinstance(row, dict) else None
            msg = split_reasoning(content_text(out, "`output`")) if out is not None else None
        else:
            fn = CONVERSATIONS[adapter]
            _, msgs, _ = fn(row, id_field) if adapter == "chat" else fn(row)
            msg = _turn_after(msgs, prompt.messages)
    except (SourceRowError, KeyError):
        return None
    if msg is None:
        return None
    answer: dict[str, Any] = {"reasoning": msg.get("reasoning_content"), "content": msg.get("content") or ""}
    if msg.get("tool_calls"):
        answer["tool_calls"] = msg["tool_calls"]
    if not answer["content"].strip() and not answer.get("tool_calls") and not (answer["reasoning"] or "").strip():
        return None
    return answer


def _turn_after(msgs: list[dict[str, Any]], prompt: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The assistant message after the prompt's last turn: the k-th message of that role in the
    conversation, where k counts that role in the prompt (system turns the prompt drops do not shift it)."""
    last = prompt[-1]["role"]
    k = sum(m["role"] == last for m in prompt)
    seen = 0
    for i, m in enumerate(msgs):
        if m["role"] == last:
            seen += 1
            if seen == k:
                nxt = msgs[i + 1] if i + 1 < len(msgs) else None
                return nxt if nxt is not None and nxt["role"] == "assistant" else None
    return None


def _adapt_row(adapter: str, row: Any, policy: str = "first_user", *, id_field: str | None = None
               ) -> tuple[str, list[PrefixItem]]:
    if policy == "first_user":
        sp = chat(row, id_field) if adapter == "chat" else ADAPTERS[adapter](row)
        return sp.source_id, [(sp.source_id, sp)]
    if policy == "after_tool_result":
        if adapter != "glaive":
            raise ValueError(f"policy after_tool_result needs the glaive adapter, not {adapter!r}")
        sp = glaive(row, policy="after_tool_result")
        return sp.source_id, [(sp.source_id, sp)]
    if policy == "every_user_prefix":
        fn = CONVERSATIONS[adapter]
        base, msgs, tools = fn(row, id_field) if adapter == "chat" else fn(row)
        return base, prefixes(base, msgs, tools)
    raise ValueError(f"unknown policy {policy!r}")


# --------------------------------------------------------------------------------------------

ADAPTERS: dict[str, Callable[[dict], SourcePrompt]] = {
    "glaive": glaive,
    "glaive_after_tool_result": glaive_after_tool_result,
    "input_field": input_field,
    "messages": messages,
    "openthoughts": openthoughts,
    "sharegpt": sharegpt,
    "sweagent": sweagent,
    "chat": chat,
}


def get_adapter(key: str) -> Callable[[dict], SourcePrompt]:
    try:
        return ADAPTERS[key]
    except KeyError:
        raise ValueError(f"unknown adapter {key!r}; known: {', '.join(ADAPTERS)}") from None
