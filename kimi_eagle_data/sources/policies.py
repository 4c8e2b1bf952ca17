"""Multi-turn policies: which prompts one source conversation gives (`Partition.policy`).

An adapter (`sources.adapters.ADAPTERS`) reads a row into its whole `Conversation`; a policy cuts
prompts out of it, each a prefix of the conversation:

    first_user         up to and including the first user turn (the system turn the adapter keeps before
                       it included); one prompt per row, id = the row's source id (the default)
    every_user_prefix  one prompt per user turn, up to and including it; prompt k has the id `{base}#u{k}`
                       (k = 0-based index among the user turns), so each has a stable id of its own
    after_tool_result  glaive only: up to and including the first tool result, so the model writes the
                       answer to it
    own_history        the first user turn, as first_user, with the rest of the conversation kept beside it
                       (`SourcePrompt.script`): the turns that continue it once the model answered, each later
                       prompt made at generation time on the model's own turns (kimi_eagle_data/conversation/)

Each prompt carries the upstream answer that followed it (`SourcePrompt.answer`, for `kimi-data score`):
the conversation's next turn when it is the assistant's.
"""

from __future__ import annotations

from typing import Any

from kimi_eagle_data.sources.partitions import POLICIES
from kimi_eagle_data.records import SourcePrompt, SourceRowError
from kimi_eagle_data.sources.adapters import ADAPTERS
from kimi_eagle_data.sources.rows import Conversation

PrefixItem = tuple[str, "SourcePrompt | SourceRowError"]


def first_user(conv: Conversation) -> SourcePrompt:
    """The conversation up to its first user turn (a later turn that cannot be read does not matter)."""
    end = next(i for i, m in enumerate(conv.messages) if m["role"] == "user") + 1
    return _prompt(conv, conv.source_id, end)


def every_user_prefix(conv: Conversation) -> list[PrefixItem]:
    """One prompt per user turn; an empty user turn is that prefix's rejection (`empty_user_turn`). Reads
    the whole conversation: a turn that cannot be read rejects the row."""
    if conv.error is not None:
        raise conv.error
    out: list[PrefixItem] = []
    k = 0
    for i, m in enumerate(conv.messages):
        if m["role"] != "user":
            continue
        sid = f"{conv.source_id}#u{k}"
        if not m["content"].strip():
            out.append((sid, SourceRowError("empty_user_turn", f"user turn {k} is empty")))
        else:
            out.append((sid, _prompt(conv, sid, i + 1)))
        k += 1
    if not out:
        raise SourceRowError("no_user_turn", "the conversation has no user turn")
    return out


def own_history(conv: Conversation) -> SourcePrompt:
    """The first user turn, and the messages after it as the conversation's script: what the source says next
    (user turns, tool results) and what it answered (its assistant turns, whose tool calls the model's must
    match for the tool results to follow). A turn that cannot be read ends the script before it."""
    prompt = first_user(conv)
    end = len(prompt.messages)
    prompt.script = [dict(m) for m in conv.messages[end:]]
    return prompt


def after_tool_result(conv: Conversation) -> SourcePrompt:
    """user … → assistant tool call → tool result: the conversation up to and including its first tool
    result, every user turn before it non-empty."""
    for i, m in enumerate(conv.messages):
        if m["role"] == "user" and not m["content"].strip():
            raise SourceRowError("empty_user_turn", "a USER turn before the tool result is empty")
        if m["role"] == "tool":
            return _prompt(conv, conv.source_id, i + 1)
    if conv.error is not None:
        raise conv.error
    raise SourceRowError("no_tool_result", "`chat` has no FUNCTION RESPONSE (policy after_tool_result)")


def _prompt(conv: Conversation, source_id: str, end: int) -> SourcePrompt:
    """The prompt `conv.messages[:end]` with the answer that followed it."""
    return SourcePrompt(source_id, [dict(m) for m in conv.messages[:end]], conv.tools, upstream_answer(conv, end))


def upstream_answer(conv: Conversation, end: int) -> dict[str, Any] | None:
    """The source's own answer to the prompt `conv.messages[:end]`: {"reasoning": str | None, "content":
    str[, "tool_calls"]}, from the assistant turn right after it (reasoning already split off by the
    adapter). None when the source has no answer there (the conversation ends, the next turn is not the
    assistant's, the answer is empty, or the rest of the row cannot be read): prepare counts those prompts."""
    if conv.error is not None or end >= len(conv.messages) or conv.messages[end]["role"] != "assistant":
        return None
    return answer_of(conv.messages[end])


def answer_of(message: dict[str, Any] | None) -> dict[str, Any] | None:
    """A source's assistant message in the shape `kimi-data score` scores (records.SourcePrompt.answer):
    {"reasoning", "content"[, "tool_calls"]}; None when it says nothing."""
    if message is None:
        return None
    answer: dict[str, Any] = {"reasoning": message.get("reasoning_content"), "content": message.get("content") or ""}
    if message.get("tool_calls"):
        answer["tool_calls"] = message["tool_calls"]
    if not answer["content"].strip() and not answer.get("tool_calls") and not (answer["reasoning"] or "").strip():
        return None
    return answer


def adapt_row(adapter: str, row: Any, policy: str = "first_user", *, id_field: str | None = None
              ) -> tuple[str, list[PrefixItem]]:
    """One source row -> (row key, [(source id, prompt or per-prompt error)]) under a policy.

    Raises `SourceRowError` when the row as a whole cannot be read."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}")
    if policy == "after_tool_result" and adapter != "glaive":
        raise ValueError(f"policy after_tool_result needs the glaive adapter, not {adapter!r}")
    conv = ADAPTERS[adapter](row, id_field) if adapter == "chat" else ADAPTERS[adapter](row)
    if policy == "every_user_prefix":
        return conv.source_id, every_user_prefix(conv)
    pick = {"first_user": first_user, "own_history": own_history, "after_tool_result": after_tool_result}[policy]
    prompt = pick(conv)
    return prompt.source_id, [(prompt.source_id, prompt)]
