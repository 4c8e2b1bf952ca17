"""The emitted row schema (SPEC §6), defined once: Arrow for writing, `datasets.Features` for cards."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
    ("messages", pa.list_(MESSAGE)),
    ("tools", pa.string()),
    ("issues", pa.list_(pa.string())),
])

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


def message_chars(messages: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per row: characters of the prompt messages' content, and of the generated (last) assistant turn's
    reasoning + answer + tool calls (name + arguments). Column-wise over the `messages` list column."""
    arr = messages.combine_chunks() if isinstance(messages, pa.ChunkedArray) else messages
    n = len(arr)
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy().astype(np.int64)
    flat = pc.list_flatten(arr)
    if len(flat) == 0:
        return np.zeros(n), np.zeros(n)
    parents = pc.list_parent_indices(arr).to_numpy()

    def strlen(a) -> np.ndarray:
        return pc.fill_null(pc.utf8_length(a), 0).to_numpy(zero_copy_only=False).astype(np.float64)

    per_msg = strlen(flat.field("content")) + strlen(flat.field("reasoning_content"))
    calls = flat.field("tool_calls")
    call_flat = pc.list_flatten(calls)
    if len(call_flat):
        fn = call_flat.field("function")
        call_chars = strlen(fn.field("name")) + strlen(fn.field("arguments"))
        per_msg += np.bincount(pc.list_parent_indices(calls).to_numpy(), weights=call_chars, minlength=len(flat))
    is_last = np.zeros(len(flat), dtype=bool)
    ends = np.cumsum(lengths)
    is_last[ends[lengths > 0] - 1] = True
    prompt = np.bincount(parents, weights=np.where(is_last, 0.0, per_msg), minlength=n)
    completion = np.bincount(parents, weights=np.where(is_last, per_msg, 0.0), minlength=n)
    return prompt, completion


def features():
    """The schema as `datasets.Features` (for dataset_info in the card)."""
    from datasets import Features

    return Features.from_arrow_schema(ROW_SCHEMA)
