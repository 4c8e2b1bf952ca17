"""A Kimi-K2.5 completion sent back as the assistant message a client sends (conversations on the model's own
history, conversation/).

A deployed Kimi-K2.5 only ever sees its own earlier turns in its history: a client that keeps `reasoning_content`
(K2.5's API asks for it in tool-call loops) sends each completion back as

    {"role": "assistant", "reasoning_content": REASONING, "content": ANSWER,
     "tool_calls": [{"id": "functions.NAME:IDX", "type": "function",
                     "function": {"name": NAME, "arguments": ARGS}}]}

and the model's chat template renders it; the template, not this module, decides which history reasoning it keeps
(K2.5's keeps `reasoning_content` only on the assistant turns after the last assistant turn without tool calls,
and none in instant mode). The fields here are the ones K2.5's template reads: `content`, `reasoning_content`,
each call's `id` and `function.arguments` (a string is written as is); `function.name` is what clients and tool
executors read. No `name` key: the template would put it in the turn header instead of `assistant`.
"""

from __future__ import annotations

from typing import Any

from kimi_eagle_data.conversation.messages import TurnError
from kimi_eagle_data.formats.kimi_k2.grammar import ParsedCompletion, ToolCall
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS


def assistant_message(parsed: ParsedCompletion, first_index: int = 0) -> dict:
    """The parsed completion as the assistant message a client sends back: its reasoning (none in instant mode:
    no `reasoning_content`), its answer, and its calls with the arguments' JSON text as the model wrote it.

    Meant for a turn the validator accepted: the answer is all the text outside the tool-call section (a valid
    turn has none after it), and call i must be `functions.NAME:IDX` with IDX = `first_index` + i, where
    `first_index` is the `history_call_count` of the conversation before it; a call that is not raises
    TurnError."""
    message: dict[str, Any] = {"role": "assistant"}
    if not parsed.instant:
        message["reasoning_content"] = parsed.reasoning
    message["content"] = parsed.answer
    if parsed.calls:
        message["tool_calls"] = [_tool_call(call, first_index + i) for i, call in enumerate(parsed.calls)]
    return message


def _tool_call(call: ToolCall, index: int) -> dict:
    if call.name is None or call.index != index:
        wanted = K2_TOKENS.tool_call_id(call.name or "NAME", index)
        raise TurnError(f"tool call {call.id_text.strip()!r} is not {wanted!r} (the conversation's call count goes "
                        "on from its history): a turn the validator rejects cannot continue the conversation")
    return {"id": K2_TOKENS.tool_call_id(call.name, index), "type": "function",
            "function": {"name": call.name, "arguments": call.arguments}}
