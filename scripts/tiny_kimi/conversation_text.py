"""A synthetic conversation (synth.py) as text: the completion with its token strings (training), plain pieces
for BPE training, and the tool calls already in its prompt."""

from __future__ import annotations

import json

from kimi_eagle_data.formats.kimi_k2.tool_declaration import encode_tools


def history_calls(messages: list[dict]) -> int:
    """Tool calls already in the prompt: the completion's first call continues the numbering there."""
    return sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")


def render_prompt(tok, conv: dict, **kwargs):
    """The conversation's prompt through the chat template, in its mode (instant: `thinking=False`)."""
    return tok.apply_chat_template(conv["messages"], tools=conv["tools"], add_generation_prompt=True,
                                   thinking=conv["mode"] == "thinking", **kwargs)


def completion_text(conv: dict) -> str:
    """The completion after the generation prompt, as text with token strings. Thinking mode: the prompt ends
    with `<think>`, the completion with reasoning then `</think>`; instant mode: the prompt ends `<think></think>`
    and the completion starts with the answer. Tool-call ids are global to the conversation: `functions.NAME:IDX`,
    IDX counting on from the history's."""
    s = (conv["reasoning"] + "</think>" if conv["mode"] == "thinking" else "") + conv["content"]
    if conv["tool_calls"]:
        s += "<|tool_calls_section_begin|>"
        for i, c in enumerate(conv["tool_calls"], start=history_calls(conv["messages"])):
            s += (f"<|tool_call_begin|>functions.{c['name']}:{i}<|tool_call_argument_begin|>"
                  f"{json.dumps(c['arguments'], ensure_ascii=False)}<|tool_call_end|>")
        s += "<|tool_calls_section_end|>"
    return s + "<|im_end|>"


def bpe_texts(conv: dict) -> list[str]:
    """Plain text pieces for BPE training: no special tokens, no `functions.NAME` strings (a history call's id
    and the `## Return of` header are left out too)."""
    out = []
    for m in conv["messages"]:
        c = m.get("content")
        if isinstance(c, list):
            c = "".join(p.get("text", "") for p in c)
        if c:
            out.append(c)
        out.append(m["role"])
    if conv["tools"]:
        out.append("tool_declare")
        out.append(encode_tools(conv["tools"]))   # the TypeScript declaration the prompts carry
    out.append(conv["reasoning"])
    out.append(conv["content"])
    for c in conv["tool_calls"]:
        out.append(json.dumps(c["arguments"], ensure_ascii=False))
    return [t for t in out if t]
