"""The emitted row schema (docs/data-format.md), defined once: Arrow for writing, `datasets.Features` for cards."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

TOOL_CALL = pa.struct([
    ("id", pa.string()),
    ("type", pa.string()),
    ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
])

MESSAGE = pa.struct([
    ("role", pa.string()),
    ("content", pa.string()),
    ("reasoning_content", pa.string()),
    ("tool_calls", pa.list_(TOOL_CALL)),
    ("name", pa.string()),
    ("tool_call_id", pa.string()),
])

ROW_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("source", pa.string()),
    ("source_id", pa.string()),
    ("input_ids", pa.list_(pa.int32())),
    ("loss_mask", pa.list_(pa.int8())),
    ("prompt_len", pa.int32()),
    ("completion_len", pa.int32()),
    ("reasoning_len", pa.int32()),
    ("num_tool_calls", pa.int32()),
    ("finish_reason", pa.string()),
    ("mode", pa.string()),                # thinking / instant: read from the prompt's generation prompt
    ("temperature", pa.float64()),        # the sampling this row was generated with
    ("top_p", pa.float64()),
    ("conversation_id", pa.string()),     # the conversation's first turn's id (a single-turn prompt: its own id)
    ("turn", pa.int32()),                 # 1-based index of this turn in its conversation
    ("end_reason", pa.string()),          # own_history: why the conversation ended, on its last turn; else null
    ("messages", pa.list_(MESSAGE)),
    ("tools", pa.string()),
    ("issues", pa.list_(pa.string())),
])

# A profile whose thinking has efforts (Kimi-K3): the rows carry the effort each prompt announced, after `mode`
# (null in instant mode). A profile without efforts (Kimi-K2.5) has no such column.
EFFORT = pa.field("effort", pa.string())


def row_schema(efforts: bool) -> pa.Schema:
    """The emitted rows' schema for a profile with thinking efforts (`efforts`) or without."""
    return ROW_SCHEMA.insert(ROW_SCHEMA.get_field_index("mode") + 1, EFFORT) if efforts else ROW_SCHEMA


# What validate keeps per row in validated/<CFG>.parquet: the columns stats, plots, plan, inspect and the card
# read. Token ids, messages and tools live only in the emitted shards (each token is written once).
LIGHT_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("source", pa.string()),
    ("source_id", pa.string()),
    ("split", pa.string()),
    ("prompt_len", pa.int32()),
    ("completion_len", pa.int32()),
    ("reasoning_len", pa.int32()),
    ("num_tool_calls", pa.int32()),
    ("finish_reason", pa.string()),
    ("mode", pa.string()),
    ("effort", pa.string()),              # the thinking effort the prompt announced (null: none; EFFORT below)
    ("temperature", pa.float64()),
    ("top_p", pa.float64()),
    ("conversation_id", pa.string()),
    ("turn", pa.int32()),
    ("end_reason", pa.string()),
    ("issues", pa.list_(pa.string())),
    ("prompt_chars", pa.int64()),         # characters of the prompt messages (plan's naive estimate)
    ("completion_chars", pa.int64()),     # characters of the generated turn
])

PROMPT_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("config", pa.string()),
    ("source", pa.string()),
    ("source_id", pa.string()),
    ("messages", pa.string()),       # JSON: the prompt turns as given to the chat template
    ("tools", pa.string()),          # JSON, "" when none
    ("prompt_ids", pa.list_(pa.int32())),
    # JSON of the upstream answer that followed the prompt ({"reasoning", "content"[, "tool_calls"]}),
    # "" when the source has none; read by `kimi-data score`. Older prepared files lack the column.
    ("answer", pa.string()),
    # The prompt's mode (thinking / instant) and its own sampling (sources/modes.py). Older prepared files
    # lack them: thinking, at the run's sampling.
    ("mode", pa.string()),
    ("temperature", pa.float64()),
    ("top_p", pa.float64()),
    # The thinking effort the prompt announces (Kimi-K3; null: instant mode, or a profile without efforts).
    # Older prepared files lack it.
    ("effort", pa.string()),
    # Policy own_history: JSON of the source's messages after the prompt (what continues the conversation),
    # "" under the other policies. Older prepared files lack the column.
    ("script", pa.string()),
])

SPLITS = ("train", "rejected")


def normalize_message(m: dict[str, Any]) -> dict[str, Any]:
    """One chat message in the MESSAGE struct's shape (absent fields are null)."""
    calls = m.get("tool_calls")
    norm_calls = None
    if calls:
        norm_calls = []
        for c in calls:
            fn = c.get("function") or {}
            args = fn.get("arguments")
            if not isinstance(args, str) and args is not None:
                import json

                args = json.dumps(args, ensure_ascii=False)
            norm_calls.append({"id": c.get("id"), "type": c.get("type", "function"),
                               "function": {"name": fn.get("name"), "arguments": args}})
    content = m.get("content")
    return {
        "role": m.get("role"),
        "content": content if isinstance(content, str) or content is None else str(content),
        "reasoning_content": m.get("reasoning_content"),
        "tool_calls": norm_calls,
        "name": m.get("name"),
        "tool_call_id": m.get("tool_call_id"),
    }


def message_chars(m: dict[str, Any]) -> int:
    """Characters of a normalized message: content + reasoning + each tool call's name and arguments (the
    light columns' prompt_chars and completion_chars; plan's naive estimate reads them)."""
    n = len(m["content"] or "") + len(m["reasoning_content"] or "")
    for c in m["tool_calls"] or ():
        n += len(c["function"]["name"] or "") + len(c["function"]["arguments"] or "")
    return n


def features(schema: pa.Schema = ROW_SCHEMA):
    """The rows' schema (row_schema) as `datasets.Features` (for dataset_info in the card)."""
    from datasets import Features

    return Features.from_arrow_schema(schema)
