"""Conversation turns on the model's own history: the next turn's messages after the model's own.

A deployed model only ever sees its own earlier turns in its history: a client sends each completion back as the
assistant message the run's chat format makes of it (`ChatFormat.assistant_message`; Kimi-K2.5's in
formats/kimi_k2/messages.py), and the model's chat template renders it.

Call ids count across the conversation (docs/token-rules.md, `tool_call_index_out_of_order`): the history's
calls are 0…k−1, the turn's first call is k.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from kimi_eagle_data.errors import KimiDataError

_NEXT_ROLES = ("user", "tool")


class TurnError(KimiDataError, ValueError):
    """A completion or source turn that cannot continue the conversation."""


def history_call_count(messages: Sequence[dict]) -> int:
    """How many tool calls the conversation's assistant turns hold: the IDX the next turn's first call carries
    (each renders one `<|tool_call_begin|>`, the token the validator counts in the prompt)."""
    return sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")


def next_turn_messages(history: Sequence[dict], completion_message: dict, source_next: Sequence[dict]) -> list[dict]:
    """The messages of the next turn's prompt: the conversation so far, the model's own assistant message, then
    the source's next user turn or tool result(s). Tool result i answers the model's call i: its `tool_call_id`
    is set to that call's id (the template writes `## Return of {tool_call_id}`, which must name the model's own
    call). The inputs are not modified."""
    if not source_next:
        raise TurnError("the source has no next turn: nothing to continue the conversation with")
    roles = [m.get("role") for m in source_next]
    if any(r not in _NEXT_ROLES for r in roles):
        raise TurnError(f"a next turn must be a user turn or tool results, got roles {roles}")
    call_ids = [c["id"] for c in completion_message.get("tool_calls") or ()]
    results = [m for m in source_next if m["role"] == "tool"]
    if len(results) > len(call_ids):
        raise TurnError(f"{len(results)} tool result(s) follow a turn with {len(call_ids)} tool call(s)")
    ids = iter(call_ids)
    spliced = [dict(m, tool_call_id=next(ids)) if m["role"] == "tool" else dict(m) for m in source_next]
    return [*history, completion_message, *spliced]


def tool_call_matches(model_call: dict, source_call: dict) -> bool:
    """Whether the model called what the source called: the same function name and JSON-equal arguments (each
    side's JSON text parsed, or a mapping taken as is, then compared as JSON values: key order and spacing do not
    matter, numbers compare by value (`1` equals `1.0`), `true` is not `1`). Arguments that are not strict JSON
    never match."""
    a, b = model_call["function"], source_call["function"]
    if a.get("name") != b.get("name"):
        return False
    left, right = _canonical_arguments(a.get("arguments")), _canonical_arguments(b.get("arguments"))
    return left is not None and left == right


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _canonical_arguments(arguments: Any) -> str | None:
    """One text per JSON value: keys sorted, no spacing, an integral number written as an integer."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return None
    try:
        return json.dumps(_integral_as_int(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except (TypeError, ValueError, RecursionError, OverflowError):
        return None


def _integral_as_int(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral_as_int(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral_as_int(v) for v in value]
    return value
