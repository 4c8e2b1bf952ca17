"""Source adapters: one upstream row (a dict, as `datasets`/JSONL gives it) -> its whole `Conversation`.

One adapter per upstream schema (`input_field`, `messages`, `openthoughts`, `sharegpt`, `sweagent`, the
generic `chat`; glaive in `sources.glaive`); which prompts a conversation gives is a policy
(`sources.policies`: first_user, every_user_prefix, after_tool_result). An adapter either returns
`Conversation(source_id, messages, tools, error)` or raises `SourceRowError(code, message)` with a
machine-readable `code` and one human line. Codes:

    wrong_type            the row, a column or a message has the wrong type
    missing_field         a required column / message key is absent (or null where a value is required)
    empty_user_turn       the user turn to answer is empty or whitespace-only
    no_user_turn          the conversation has no user turn at all
    starts_with_assistant the conversation opens with an assistant turn (ShareGPT chunk starting with gpt)
    unknown_role          a `from`/`role` value the adapter does not know
    placeholder_input     `input` is the "-" placeholder (OpenCodeReasoning split_1, filled from TACO/APPS)
    bad_tool_json         glaive system string: the tool declarations are not JSON objects with a name
    bad_chat_format       glaive `chat` that is not a sequence of USER:/ASSISTANT:/FUNCTION RESPONSE: turns
    bad_tool_call         glaive `<functioncall>` that cannot be parsed (policies past the first user turn)
    undeclared_tool       glaive call to a tool that the system string does not declare
    no_tool_result        after_tool_result policy on a row without a FUNCTION RESPONSE

What the first user turn needs (the row's key, the turns up to and including the first user turn) is
raised; a later turn that cannot be read ends `messages` there and is kept as `error`, which only the
policies that reach past the first user turn raise (the default first_user prompt of a row does not
depend on the rest of it). The generic `chat` adapter raises every error: its id hashes the whole
conversation.

Each adapter declares the columns it reads (`ADAPTER_COLUMNS`): prepare names a local source's other columns in a
warning (data the adapter would drop without a word) and, when no row became a prompt, the columns it expected.

Messages use the chat shape `apply_chat_template` takes; tools are native
`[{"type": "function", "function": {name, description, parameters}}]`, never pasted into a
system message. Assistant turns keep a leading `<think>…</think>` (or OpenThoughts' thought
section) as `reasoning_content` (`split_reasoning`).

Design decisions (documented in the report and tested):

* source ids: the upstream key where there is one (`id`, `prompt_id`); otherwise a content hash
  (`sha1(...)[:16]`) so that the same row gives the same id on every machine, and duplicated
  questions (OpenThoughts, Mixture-of-Thoughts) get the same id — dedup downstream keys on it.
* content normalisation: a string is kept verbatim (no stripping) except glaive, whose turns are
  cut out of one marker-delimited string and stripped; a list of text parts
  (`{"type": "text", "text": …}` or plain strings) is joined with "\\n"; anything else is `wrong_type`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable

from kimi_eagle_data.json_text import JsonTextError, parse_json
from kimi_eagle_data.records import SourceRowError
from kimi_eagle_data.sources.glaive import GLAIVE_COLUMNS, glaive
from kimi_eagle_data.sources.rows import (
    EMPTY_PARAMETERS, MESSAGE_ROLES, AdapterColumns, Conversation, TurnRules, column, id_string, require_row, sha16,
    turn_list, user_text, content_text, read_turns, split_reasoning,
)


# --------------------------------------------------------------------------------------------
# B2 / B3: nvidia/OpenCodeInstruct, nvidia/OpenCodeReasoning — `input` as one user turn


# The other columns of OpenCodeInstruct, then OpenCodeReasoning.
INPUT_FIELD_COLUMNS = AdapterColumns(("id", "input"), ("output",), upstream_only=(
    "domain", "generation_algorithm", "llm_judgement", "unit_tests", "tests_execution_status", "average_test_score",
    "source", "license", "dataset", "split", "difficulty", "solution"))


def input_field(row: dict) -> Conversation:
    """`input` as the user turn; `output` (OpenCodeInstruct's code, OpenCodeReasoning's `<think>…</think>`
    + solution) as the answer when it is text (it is never part of a prompt, so it cannot spoil one)."""
    row = require_row(row)
    source_id = id_string(row, "id")
    text = column(row, "input", (str, list), "a string")
    text = content_text(text, "`input`")
    if text.strip() == "-":
        raise SourceRowError(
            "placeholder_input",
            "`input` is the '-' placeholder (OpenCodeReasoning split_1: fill it from TACO/APPS first)",
        )
    if not text.strip():
        raise SourceRowError("empty_user_turn", "`input` is empty")
    msgs = [{"role": "user", "content": text}]
    if row.get("output") is not None:
        try:
            msgs.append(split_reasoning(content_text(row["output"], "`output`")))
        except SourceRowError:
            pass                                           # no answer to score: prepare counts it
    return Conversation(source_id, msgs, None)


# --------------------------------------------------------------------------------------------
# B4 / B6: open-r1/Mixture-of-Thoughts, HuggingFaceH4/ultrachat_200k — `messages[{role, content}]`

_MESSAGES = TurnRules({role: role for role in MESSAGE_ROLES},
                      opens="`{col}` starts with a `{who}` turn (a chunk cut mid-conversation); skipped")


# Mixture-of-Thoughts' num_tokens and source; ultrachat's prompt (its first user turn again).
MESSAGES_COLUMNS = AdapterColumns(("messages",), ("prompt_id",), upstream_only=("num_tokens", "source", "prompt"))


def messages(row: dict) -> Conversation:
    """A system message before the first user message is kept (the first non-empty one).

    source_id: `prompt_id` (ultrachat) when the row has one, else sha1 of the first user text
    (Mixture-of-Thoughts has no id column)."""
    row = require_row(row)
    msgs, error = read_turns(turn_list(row, "messages"), "messages", "role", "content", _MESSAGES)
    if "prompt_id" in row and row["prompt_id"] is not None:
        source_id = id_string(row, "prompt_id")
    else:
        source_id = sha16(_first_user_text(msgs))
    return Conversation(source_id, msgs, None, error)


def _first_user_text(msgs: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in msgs if m["role"] == "user")


# --------------------------------------------------------------------------------------------
# B5: open-thoughts/OpenThoughts-114k — `system` (Sky-T1 prompt) + `conversations[{from, value}]`

_HUMAN_FROM = {"user", "human"}
_ASSISTANT_FROM = {"assistant", "gpt"}
_OPENTHOUGHTS = TurnRules({**dict.fromkeys(_HUMAN_FROM, "user"), **dict.fromkeys(_ASSISTANT_FROM, "assistant"),
                           "system": "system"}, keep_system=False, user="human turn")


OPENTHOUGHTS_COLUMNS = AdapterColumns(("conversations",), upstream_only=("system",))   # Sky-T1's, dropped


def openthoughts(row: dict) -> Conversation:
    """The Sky-T1 `system` prompt (column and turns) is dropped: it is a distillation instruction for the
    teacher, not part of the question; the target model reasons on its own. source_id = sha1 of the first
    question: the upstream has no id, and duplicated questions (OpenThoughts3-style 16x repeats) map to
    one id for dedup."""
    row = require_row(row)
    msgs, error = read_turns(turn_list(row, "conversations"), "conversations", "from", "value", _OPENTHOUGHTS)
    return Conversation(sha16(_first_user_text(msgs)), msgs, None, error)


# --------------------------------------------------------------------------------------------
# B7: Aeala/ShareGPT_Vicuna_unfiltered — `id`, `conversations[{from, value}]`

SHAREGPT_HUMAN = {"human", "user"}
SHAREGPT_ASSISTANT = {"gpt", "chatgpt", "bing", "bard", "assistant"}
_SHAREGPT = replace(_MESSAGES, roles={**dict.fromkeys(SHAREGPT_HUMAN, "user"),
                                      **dict.fromkeys(SHAREGPT_ASSISTANT, "assistant"), "system": "system"})


SHAREGPT_COLUMNS = AdapterColumns(("id", "conversations"))


def sharegpt(row: dict) -> Conversation:
    """A leading `system` turn is kept as a system message (it is the conversation's own setup); a chunk
    whose first non-system turn comes from an assistant (gpt/chatgpt/bing/bard: the split cut
    mid-conversation) is skipped: `starts_with_assistant`."""
    row = require_row(row)
    source_id = id_string(row, "id")
    msgs, error = read_turns(turn_list(row, "conversations"), "conversations", "from", "value", _SHAREGPT)
    return Conversation(source_id, msgs, None, error)


# --------------------------------------------------------------------------------------------
# B8: nebius/SWE-agent-trajectories — system prompt + the turns of `trajectory`


SWEAGENT_COLUMNS = AdapterColumns(("instance_id", "model_name", "trajectory"),
                                  upstream_only=("target", "exit_status", "generated_patch", "eval_logs"))


def sweagent(row: dict) -> Conversation:
    """System message (the system-role entry's `system_prompt`, else its `text`; else the first user
    entry's `system_prompt`) + the user and ai turns. source_id = `{instance_id}/{model_name}/{sha1(system,
    first user)[:8]}`: readable, stable, and one id for trajectories of the same instance and model that
    share the same prompt."""
    row = require_row(row)
    instance_id = id_string(row, "instance_id")
    model_name = id_string(row, "model_name")
    turns = turn_list(row, "trajectory")
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
            text = user_text(turn["text"], f"the first user message (`trajectory[{i}]`)")
            if system_text is None:
                sp = turn.get("system_prompt")
                if isinstance(sp, str) and sp.strip():
                    system_text = sp
            msgs = ([{"role": "system", "content": system_text}] if system_text else []) + [
                {"role": "user", "content": text}
            ]
            source_id = f"{instance_id}/{model_name}/{sha16(system_text or '', text)[:8]}"
            try:
                _sweagent_later_turns(msgs, turns, i + 1)
            except SourceRowError as e:
                return Conversation(source_id, msgs, None, e)
            return Conversation(source_id, msgs, None)
        if role in ("ai", "assistant"):
            raise SourceRowError("starts_with_assistant", f"`trajectory[{i}]` ({role}) precedes any user message")
        raise SourceRowError("unknown_role", f"`trajectory[{i}].role` is {role!r}")
    raise SourceRowError("no_user_turn", "`trajectory` has no user message")


def _sweagent_later_turns(msgs: list[dict[str, Any]], turns: list, start: int) -> None:
    """The turns after the first user message: user and ai text as is (later system entries repeat the
    setup and are skipped)."""
    for i in range(start, len(turns)):
        role = turns[i].get("role")
        if role == "system":
            continue
        text = content_text(turns[i].get("text") or "", f"`trajectory[{i}].text`")
        if role == "user":
            msgs.append({"role": "user", "content": text})
        elif role in ("ai", "assistant"):
            msgs.append({"role": "assistant", "content": text})
        else:
            raise SourceRowError("unknown_role", f"`trajectory[{i}].role` is {role!r}")


# -- the generic adapter for user-defined partitions ------------------------------------------

CHAT_ROLES = {
    "user": "user", "human": "user",
    "assistant": "assistant", "gpt": "assistant", "chatgpt": "assistant", "bing": "assistant",
    "bard": "assistant", "model": "assistant",
    "system": "system",
    "tool": "tool", "function": "tool", "observation": "tool",
}
CHAT_ID_FIELDS = ("id", "prompt_id", "conversation_id", "uuid")
_CHAT = TurnRules(CHAT_ROLES, strict=False)


def normalize_tool(obj: Any) -> Any:
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
            raw = parse_json(raw)
        except JsonTextError as e:
            raise SourceRowError("bad_tool_json", f"`tools`: {e}") from None
    if not isinstance(raw, list):
        raise SourceRowError("bad_tool_json", f"`tools` is {type(raw).__name__}, expected a list of tools")
    return [normalize_tool(t) for t in raw] or None


CHAT_COLUMNS = AdapterColumns(("messages", "conversations"), ("system", "tools", *CHAT_ID_FIELDS), one_of=True)


def chat(row: dict, id_field: str | None = None) -> Conversation:
    """Any row with `messages` ({role, content}) or `conversations` (ShareGPT {from, value}, or
    {role, content}); optional `system` (string) and `tools` (list, or a JSON string) columns.

    source id: `id_field` when given, else the first of id/prompt_id/conversation_id/uuid the row
    has, else sha1 of the whole conversation (so two conversations sharing only their opening
    question stay two rows; the exact-prompt dedup then handles the shared prompt). Hence every turn
    must read: a turn that does not is the row's error."""
    row = require_row(row)
    col = "messages" if "messages" in row else "conversations" if "conversations" in row else None
    if col is None:
        raise SourceRowError("missing_field", "row has neither a `messages` nor a `conversations` column")
    turns = turn_list(row, col)
    role_key, text_key = ("from", "value") if "from" in turns[0] else ("role", "content")
    if role_key == "role" and "content" not in turns[0] and "value" in turns[0]:
        text_key = "value"
    msgs, error = read_turns(turns, col, role_key, text_key, _CHAT)
    if error is not None:
        raise error
    system = row.get("system")
    if system is not None and not any(m["role"] == "system" for m in msgs):
        text = content_text(system, "`system`")
        if text.strip():
            msgs.insert(0, {"role": "system", "content": text})
    tools = _chat_tools(row)
    if id_field:
        base = id_string(row, id_field)
    else:
        key = next((k for k in CHAT_ID_FIELDS if row.get(k) is not None), None)
        base = id_string(row, key) if key else sha16(json.dumps([msgs, tools], sort_keys=True, ensure_ascii=False))
    return Conversation(base, msgs, tools)


ADAPTERS: dict[str, Callable[..., Conversation]] = {
    "glaive": glaive,
    "input_field": input_field,
    "messages": messages,
    "openthoughts": openthoughts,
    "sharegpt": sharegpt,
    "sweagent": sweagent,
    "chat": chat,
}

ADAPTER_COLUMNS: dict[str, AdapterColumns] = {
    "glaive": GLAIVE_COLUMNS,
    "input_field": INPUT_FIELD_COLUMNS,
    "messages": MESSAGES_COLUMNS,
    "openthoughts": OPENTHOUGHTS_COLUMNS,
    "sharegpt": SHAREGPT_COLUMNS,
    "sweagent": SWEAGENT_COLUMNS,
    "chat": CHAT_COLUMNS,
}


# The columns each adapter takes a row's id from (the others derive it from the content).
ID_COLUMNS: dict[str, tuple[str, ...]] = {"chat": CHAT_ID_FIELDS, "sharegpt": ("id",), "input_field": ("id",),
                                          "messages": ("prompt_id",)}


def readable_id(adapter: str, row: Any, id_field: str | None = None) -> str | None:
    """The id of a row the adapter could not read as a whole, when its id column still reads: what names the row
    in rejects.jsonl (None: the row number names it)."""
    if not isinstance(row, dict):
        return None
    for name in (id_field,) if id_field and adapter == "chat" else ID_COLUMNS.get(adapter, ()):
        if row.get(name) is None:
            continue
        try:
            return id_string(row, name)
        except SourceRowError:
            continue
    return None


def adapter_columns(adapter: str, id_field: str | None = None) -> AdapterColumns:
    """The columns `adapter` reads; the chat adapter's `id_field` (a config file's row-key column) among them."""
    cols = ADAPTER_COLUMNS[adapter]
    return replace(cols, optional=(*cols.optional, id_field)) if id_field and id_field not in cols.optional else cols
