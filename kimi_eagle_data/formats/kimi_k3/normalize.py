"""A conversation as Kimi-K3's tokenizer reads it before writing a single segment.

Three things happen to the caller's messages first (none of them mutates the caller's objects):

- tool results are put in call order: each run of consecutive `tool` messages whose ids all answer calls of the
  latest assistant message is sorted by the position of the call it answers (a stable sort, so two results of
  one call keep their order), and each takes that call's function name; a run with one unmatched id stays as it
  came;
- an assistant's tool-call `arguments` become an object: absent or blank is `{}`, a JSON object string is parsed,
  a string that is not JSON is kept as raw text (rendered as a JSON block), any other JSON is refused;
- tool lists (the request's and a system message's) are sorted by key at every depth; lists keep their order.

What K3's launch encoder drops without a word (a message that is not an object, a role it does not know) is a
`K3FormatError` here: data that would silently vanish from the prompt is a one-line error instead.
"""

from __future__ import annotations

import json
from typing import Any

from kimi_eagle_data.errors import KimiDataError

ROLES = ("system", "user", "assistant", "tool")


class K3FormatError(KimiDataError, ValueError):
    """A conversation Kimi-K3's format cannot render (or would render by dropping part of it); one line."""


def sort_keys_deep(value: Any) -> Any:
    """Every object sorted by key, recursively; arrays keep their order."""
    if isinstance(value, dict):
        return {key: sort_keys_deep(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sort_keys_deep(item) for item in value]
    return value


def call_arguments(arguments: Any, where: str) -> tuple[dict, str | None]:
    """(the arguments as an object, the raw text when they are a string that is not JSON)."""
    if arguments is None:
        return {}, None
    if isinstance(arguments, dict):
        return arguments, None
    if not isinstance(arguments, str):
        raise K3FormatError(f"{where}: arguments are a {type(arguments).__name__}; give a JSON object or its text")
    if not arguments.strip():
        return {}, None
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return {}, arguments
    if not isinstance(parsed, dict):
        raise K3FormatError(f"{where}: arguments are JSON but not an object ({arguments[:40]!r}); "
                            "K3 renders a call's arguments only from a JSON object")
    return parsed, None


def _normalized_call(call: Any, where: str) -> dict:
    if not isinstance(call, dict):
        raise K3FormatError(f"{where}: a tool call is a {type(call).__name__}, not an object")
    call = dict(call)
    holder = call
    if "function" in call:
        if not isinstance(call["function"], dict):
            raise K3FormatError(f"{where}: `function` is a {type(call['function']).__name__}, not an object")
        holder = call["function"] = dict(call["function"])
    if "name" not in holder:
        raise K3FormatError(f"{where}: a tool call without a function name")
    holder["arguments"], raw = call_arguments(holder.get("arguments"), where)
    holder.pop("raw_arguments", None)
    if raw is not None:
        holder["raw_arguments"] = raw
    return call


def call_function(call: dict) -> dict:
    """The object of a (normalized) tool call that holds `name` and `arguments`."""
    return call["function"] if "function" in call else call


def _normalized_message(message: dict, where: str) -> dict:
    message = dict(message)
    if message.get("tools") is not None:
        message["tools"] = sort_keys_deep(message["tools"])
    calls = message.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise K3FormatError(f"{where}: `tool_calls` is a {type(calls).__name__}, not a list")
        message["tool_calls"] = [_normalized_call(c, f"{where}, tool call {i}")      # numbered as K3 numbers calls
                               for i, c in enumerate(calls, start=1)]
    return message


def _call_positions(calls: Any) -> dict[str, tuple[int, Any]]:
    """Call id (as text) -> (1-based position among the calls, the call's function name); the first of two
    calls with one id wins, and a call without an id still takes a position."""
    found: dict[str, tuple[int, Any]] = {}
    for position, call in enumerate(calls if isinstance(calls, list) else [], start=1):
        if isinstance(call, dict) and call.get("id") is not None:
            fn = call.get("function")
            name = fn.get("name") if isinstance(fn, dict) else call.get("name")
            found.setdefault(str(call["id"]), (position, name))
    return found


def _answered_call_id(result: dict) -> str | None:
    """The id of the call a tool result answers, as text (`tool_call_id`, else `id`); None: it names none."""
    call_id = result["tool_call_id"] if "tool_call_id" in result else result.get("id")
    return None if call_id is None else str(call_id)


def _retitled(result: dict, name: Any) -> dict:
    if name is None:
        return result
    result = dict(result)
    result["tool"] = name
    if "name" in result:
        result["name"] = name
    return result


def in_call_order(messages: list[dict]) -> list[dict]:
    """Each run of tool results sorted into the order of the calls they answer (module docstring)."""
    out: list[dict] = []
    positions: dict[str, tuple[int, Any]] = {}
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.get("role") != "tool":
            if message.get("role") == "assistant":
                positions = _call_positions(message.get("tool_calls")) if message.get("tool_calls") else {}
            out.append(message)
            i += 1
            continue
        end = i
        while end < len(messages) and messages[end].get("role") == "tool":
            end += 1
        run = messages[i:end]
        answered = [positions.get(_answered_call_id(m)) for m in run]
        if all(a is not None for a in answered):
            order = sorted(range(len(run)), key=lambda k: (answered[k][0], k))
            out.extend(_retitled(run[k], answered[k][1]) for k in order)
        else:
            out.extend(run)
        i = end
    return out


def normalized_conversation(messages: Any) -> list[dict]:
    """The caller's messages as K3's tokenizer renders them (module docstring); K3FormatError when one cannot
    be rendered."""
    if not isinstance(messages, list):
        raise K3FormatError(f"the conversation is a {type(messages).__name__}; give a list of messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise K3FormatError(f"message {i} is a {type(message).__name__}, not an object with a role")
        if message.get("role") not in ROLES:
            raise K3FormatError(f"message {i}: role {message.get('role')!r} is not one K3 renders "
                                f"({', '.join(ROLES)}); K3's own encoder would drop it without a word")
    ordered = in_call_order(messages)
    return [_normalized_message(m, f"message {i} ({m['role']})") for i, m in enumerate(ordered)]


# Call arguments in a prompt's history that K3's encoder renders but its completion grammar never accepts from the
# model: prepare keeps such prompts (they are rendered as K3 renders them), counts them per code in
# prepared/<CFG>.json (`history_arguments`) and warns (docs/kimi-k3.md, "Tool calls in the history").
HISTORY_ARGUMENT_NOTES = {
    "arguments_not_json": "tool-call arguments that are not JSON, rendered as one `json` element",
    "arguments_not_finite": "tool-call arguments holding NaN or Infinity, rendered as such though the completion "
                            "grammar rejects them",
}


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    return False


def history_argument_notes(messages: Any) -> set[str]:
    """The HISTORY_ARGUMENT_NOTES codes the assistant tool calls of `messages` show (a message or call of the
    wrong shape is the renderer's to refuse, not counted here)."""
    found: set[str] = set()
    for message in messages if isinstance(messages, list) else ():
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            holder = call.get("function", call) if isinstance(call, dict) else None
            arguments = holder.get("arguments") if isinstance(holder, dict) else None
            if isinstance(arguments, str) and arguments.strip():
                try:
                    arguments = json.loads(arguments)
                except (ValueError, RecursionError):
                    found.add("arguments_not_json")
                    continue
            if _has_non_finite(arguments):
                found.add("arguments_not_finite")
    return found
