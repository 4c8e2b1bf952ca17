"""An assistant answer ({"reasoning", "content", "tool_calls"}) as the token ids Kimi-K2.5 writes for it
(`KimiK2Format.render_answer`).

Shared by `score` (the upstream answers it scores) and `check` (the last assistant turn of a SpecForge
`conversations` row): one rendering, so both read an answer as the model would have written it.
"""

from __future__ import annotations

from typing import Any

import orjson

from kimi_eagle_data.chat_format import FormatTokens
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS


def render_answer(answer: dict[str, Any], tokenizer, tokens: FormatTokens,
                  instant: bool = False) -> tuple[list[int], int]:
    """The upstream answer as the assistant turn the target would write after its generation prompt
    (which ends with think_open): reasoning, think_close, content, tool calls, end_of_turn. Returns the ids
    and how many of them are reasoning (before think_close). After an instant-mode prompt (which ends with
    think_open think_close) the turn has no reasoning: content, tool calls, end_of_turn. Special tokens come
    from the tokens by id; text is encoded piece by piece, never through a template."""
    def enc(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False)) if text else []

    reasoning = [] if instant else enc(answer.get("reasoning") or "")
    ids = ([] if instant else reasoning + [tokens.think_close]) + enc(answer.get("content") or "")
    calls = answer.get("tool_calls") or []
    if calls:
        ids.append(tokens.tool_calls_section_begin)
        for i, call in enumerate(calls):
            fn = call.get("function") or {}
            args = fn.get("arguments", "{}")
            args = args if isinstance(args, str) else orjson.dumps(args).decode()
            call_id = call.get("id") or K2_TOKENS.tool_call_id(str(fn.get("name", "")), i)
            ids += [tokens.tool_call_begin, *enc(call_id), tokens.tool_call_argument_begin, *enc(args),
                    tokens.tool_call_end]
        ids.append(tokens.tool_calls_section_end)
    ids.append(tokens.end_of_turn)
    return ids, len(reasoning)
