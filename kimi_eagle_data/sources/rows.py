"""Reading upstream rows: the `Conversation` every adapter returns, column and content checks, the
reasoning split of assistant answers, and the reader of `[{role, content}]`-like turn lists that the
messages, ShareGPT, OpenThoughts and generic chat adapters share (`sources.adapters`)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from kimi_eagle_data.records import SourceRowError

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass
class Conversation:
    """A source row read whole: its base source id, every turn in the chat shape (in order), native tools,
    and the first later turn that could not be read (`messages` stops before it), if any."""

    source_id: str
    messages: list[dict[str, Any]]
    tools: list[dict] | None = None
    error: SourceRowError | None = None


@dataclass(frozen=True)
class AdapterColumns:
    """The columns an adapter reads from a row, and the other columns of its upstream that it leaves out on purpose
    (metadata, scores, tests: nothing a prompt is made of). A local source with any other column holds data the
    adapter drops: prepare names those columns in a warning."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    upstream_only: tuple[str, ...] = ()
    one_of: bool = False                 # `required` are alternatives: a row needs one of them

    def reads(self) -> str:
        """What the adapter reads, for a message: `messages; optional prompt_id`."""
        needed = (" or " if self.one_of else ", ").join(self.required)
        return needed + (f"; optional {', '.join(self.optional)}" if self.optional else "")

    def ignored(self, columns) -> list[str]:
        """The given columns (in their order) that the adapter neither reads nor knows from its upstream."""
        known = {*self.required, *self.optional, *self.upstream_only}
        return [c for c in columns if c not in known]


# --------------------------------------------------------------------------------------------
# helpers


def sha16(*parts: str) -> str:
    h = hashlib.sha1()
    for i, p in enumerate(parts):
        if i:
            h.update(b"\x1f")
        h.update(p.encode("utf-8"))
    return h.hexdigest()[:16]


def require_row(row: Any) -> dict:
    if not isinstance(row, dict):
        raise SourceRowError("wrong_type", f"row is {type(row).__name__}, expected an object")
    return row


def column(row: dict, name: str, kind: type | tuple[type, ...], what: str | None = None) -> Any:
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


def id_string(row: dict, name: str) -> str:
    value = column(row, name, (str, int))
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


def user_text(value: Any, where: str) -> str:
    text = content_text(value, where)
    if not text.strip():
        raise SourceRowError("empty_user_turn", f"{where} is empty")
    return text


def turn_list(row: dict, name: str) -> list:
    turns = column(row, name, list, "a list of turns")
    if not turns:
        raise SourceRowError("no_user_turn", f"`{name}` is an empty list")
    for i, t in enumerate(turns):
        if not isinstance(t, dict):
            raise SourceRowError("wrong_type", f"`{name}[{i}]` is {type(t).__name__}, expected an object")
    return turns


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


# --------------------------------------------------------------------------------------------
# the roles of a chat message: one rule for prepare (the `messages` adapter), render and check

# The roles prepare writes into a prompt. The chat template would render any other role (`developer`, …)
# as a system turn named after it, a prompt no prepared row has: prepare rejects such a row
# (`unknown_role`), and render and check refuse it the same way.
MESSAGE_ROLES = ("system", "user", "assistant", "tool")


def unknown_role(messages: list, col: str = "messages") -> str | None:
    """`{col}[i].role is 'x'` for the first message whose role is not one of MESSAGE_ROLES, else None."""
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in MESSAGE_ROLES:
            return f"`{col}[{i}].role` is {role!r} (known roles: {', '.join(MESSAGE_ROLES)})"
    return None


# --------------------------------------------------------------------------------------------
# `[{role, content}]`-like turn lists: messages, ShareGPT/OpenThoughts conversations, generic chat


@dataclass(frozen=True)
class TurnRules:
    """How one upstream reads its turn list up to the first user turn (after it, all read alike).

    `strict` (the built-in upstreams, whose first-user prompt rules predate the generic reader): the first
    user turn and a kept system turn must have text (null is `wrong_type`), and a tool turn cannot open
    the conversation (`unknown_role`). Otherwise null text counts as missing / empty, and a tool turn
    opening it is `starts_with_assistant`."""

    roles: dict[str, str]            # upstream role value -> system / user / assistant / tool
    keep_system: bool = True         # keep the first non-empty system turn before the first user turn
    strict: bool = True
    user: str = "user turn"          # how messages name a user turn
    opens: str = "`{col}[{i}]` ({who}) precedes any {user}"      # starts_with_assistant message


def read_turns(turns: list, col: str, role_key: str, text_key: str, rules: TurnRules
               ) -> tuple[list[dict[str, Any]], SourceRowError | None]:
    """(chat messages, the error that ended them or None). A turn up to the first user turn that cannot
    be read raises; a system turn that no prompt keeps (`keep_system` off) or a later turn ends the list."""
    msgs: list[dict[str, Any]] = []
    error: SourceRowError | None = None
    first = None
    for i, turn in enumerate(turns):
        if role_key not in turn:
            raise SourceRowError("missing_field", f"`{col}[{i}]` has no `{role_key}`")
        who = turn[role_key]
        role = rules.roles.get(who) if isinstance(who, str) else None
        where = f"`{col}[{i}].{text_key}`"
        if role == "system":
            if not rules.keep_system:
                try:
                    content_text(turn.get(text_key) or "", where)
                except SourceRowError as e:
                    error = error or e
                continue
            raw = turn.get(text_key, "") if rules.strict else turn.get(text_key) or ""
            text = content_text(raw, where)
            if text.strip() and not msgs:
                msgs.append({"role": "system", "content": text})
            continue
        if role == "user":
            if (text_key not in turn) if rules.strict else turn.get(text_key) is None:
                raise SourceRowError("missing_field", f"`{col}[{i}]` has no `{text_key}`")
            text = content_text(turn[text_key], f"the first {rules.user} (`{col}[{i}]`)" if rules.strict else where)
            if not text.strip():
                raise SourceRowError("empty_user_turn", f"the first {rules.user} (`{col}[{i}]`) is empty")
            msgs.append({"role": "user", "content": text})
            first = i
            break
        if role == "assistant" or (role == "tool" and not rules.strict):
            raise SourceRowError("starts_with_assistant", rules.opens.format(col=col, i=i, who=who, user=rules.user))
        raise SourceRowError("unknown_role", f"`{col}[{i}].{role_key}` is {who!r}")
    if first is None:
        raise SourceRowError("no_user_turn", f"`{col}` has no {rules.user}")
    if error is None:
        try:
            _read_later_turns(msgs, turns, first + 1, col, role_key, text_key, rules)
        except SourceRowError as e:
            error = e
    return msgs, error


def _read_later_turns(msgs: list[dict[str, Any]], turns: list, start: int, col: str, role_key: str,
                      text_key: str, rules: TurnRules) -> None:
    """The turns after the first user turn, appended to `msgs` (those before a turn that cannot be read stay).
    A system turn there is kept, where it stands, only when the conversation has none yet."""
    for i in range(start, len(turns)):
        turn = turns[i]
        if role_key not in turn:
            raise SourceRowError("missing_field", f"`{col}[{i}]` has no `{role_key}`")
        who = turn[role_key]
        role = rules.roles.get(who) if isinstance(who, str) else None
        if role is None:
            raise SourceRowError("unknown_role", f"`{col}[{i}].{role_key}` is {who!r}")
        raw = turn.get(text_key)
        raw = (raw or "") if role == "system" else "" if raw is None else raw
        text = content_text(raw, f"`{col}[{i}].{text_key}`")
        if role == "system":
            if rules.keep_system and text.strip() and not any(m["role"] == "system" for m in msgs):
                msgs.append({"role": "system", "content": text})
        elif role == "user":
            msgs.append({"role": "user", "content": text})
        elif role == "assistant":
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
