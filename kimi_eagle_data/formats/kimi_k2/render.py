"""Kimi-K2.5's prompt renderer: the tokenizer's own chat template, with tools declared TypeScript-style by our
encoder (`tool_declaration.py`), the self-check a tokenizer passes before any prompt is rendered with it, and the
tool names a rendered prompt declares, read back from its ids (for data that comes without its `tools`)."""

from __future__ import annotations

import json
import re

import numpy as np

from kimi_eagle_data.chat_format import ToolSchemaUnsupported
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.formats.kimi_k2.tool_declaration import deep_sort, encode_tools
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.prompts.tokenizer import own_chat_code


class ToolRenderingError(ToolSchemaUnsupported, KimiDataError):
    """A prompt whose tools the model's template did not declare in the TypeScript form: prepare counts the row out
    as `tool_schema_unsupported`, as it does a schema the encoder refuses."""


def render_text(tokenizer, messages, tools, mode: str = THINKING, options: dict | None = None) -> str:
    """The prompt text: the model's own template, tools passed natively and declared TypeScript-style.
    Instant mode goes through the template's own switch, `thinking=False` (its generation prompt then ends
    with `<think></think>`); thinking mode passes nothing, the template's default.

    Kimi-K2.5's tokenizer code deep-sorts `tools` and computes `tools_ts_str` itself; other tokenizers
    (the embedded tiny one included) get the same string from our encoder, so every tokenizer renders
    tools as the real model sees them. A schema the encoder cannot render raises ToolSchemaUnsupported;
    a template that did not put the TypeScript block in the text (a JSON fallback) raises
    ToolRenderingError: never a JSON-declared prompt mixed into the data. `options`: the template's own arguments
    the run sets (Kimi-K2.6's `preserve_thinking`), passed as given."""
    kwargs: dict = {**(options or {}), **({"thinking": False} if mode == INSTANT else {})}
    if tools:
        tools = deep_sort(tools)
        kwargs["tools_ts_str"] = ts = encode_tools(tools)
    text = tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True,
                                         tokenize=False, **kwargs)
    if tools and ts not in text:
        raise ToolRenderingError("the chat template did not render the TypeScript tool declarations "
                                 "(the tokenizer's own encoder failed or its template ignores `tools_ts_str`)")
    return text


def render_prompt(tokenizer, messages, tools, mode: str = THINKING, options: dict | None = None) -> list[int]:
    """Prompt ids: `render_text` tokenized the way `apply_chat_template(tokenize=True)` does."""
    return list(tokenizer(render_text(tokenizer, messages, tools, mode, options),
                          add_special_tokens=False)["input_ids"])


# A fixed probe set for tokenizers that render tool declarations themselves (Kimi-K2.5's own
# `apply_chat_template`): their rendering must equal ours, byte for byte, before any data is made.
_PROBE_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.\nUse metric units.",
        "parameters": {"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string", "description": "City name"},
            "days": {"type": "integer", "description": "Forecast days", "default": 1, "minimum": 1},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search documents.",
        "parameters": {"type": "object", "required": ["query"], "$defs": {
            "Filter": {"type": "object", "properties": {"field": {"type": "string"},
                                                        "value": {"anyOf": [{"type": "string"},
                                                                            {"type": "number"}]}}}},
            "properties": {"query": {"type": "string"},
                           "filters": {"type": "array", "items": {"$ref": "#/$defs/Filter"}},
                           "extra": {"type": "object", "additionalProperties": {"type": "boolean"}},
                           "limit": {"type": ["integer", "null"]}}}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
]
TOOL_PROBES: list[tuple[str, list[dict], list[dict]]] = [
    ("one user turn, three tools", [{"role": "user", "content": "Weather in Oslo?"}], _PROBE_TOOLS),
    ("system + user, one tool", [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": "Find the docs."}], _PROBE_TOOLS[1:2]),
    ("after a tool result", [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "reasoning_content": "Call it.", "tool_calls": [
            {"id": "functions.get_weather:0", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "name": "get_weather", "content": "4 C"}],
     _PROBE_TOOLS[:1]),
]


def check_tool_rendering(tokenizer) -> None:
    """The self-check: every probe renders with the TypeScript block, and a tokenizer that renders tools itself
    (its own `apply_chat_template`, as K2.5's) renders each probe exactly as we do. Raises ToolRenderingError
    naming the first differing probe."""
    own = own_chat_code(tokenizer)
    for name, messages, tools in TOOL_PROBES:
        try:
            ours = render_text(tokenizer, messages, tools)
        except ToolRenderingError as e:
            raise ToolRenderingError(f"tool-rendering self-check failed on probe {name!r}: {e}") from None
        if own:
            theirs = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True,
                                                   tokenize=False)
            if theirs != ours:
                at = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), min(len(theirs), len(ours)))
                raise ToolRenderingError(
                    f"tool-rendering self-check failed on probe {name!r}: the tokenizer's own "
                    f"apply_chat_template differs from our TypeScript encoder at character {at} "
                    f"({theirs[at:at + 40]!r} vs {ours[at:at + 40]!r}); refusing to build data that would not "
                    "match what the model sees")


def declared_tools(tokenizer, prompt_ids) -> list[dict] | None:
    """The tools (names only: all the validator reads) the prompt's tool-declaration turn declares; None when the
    prompt has no such turn, or declares none."""
    prompt = np.asarray(prompt_ids)
    system_id = tokenizer.convert_tokens_to_ids(K2_TOKENS.turn_tokens["system"])
    end_id = tokenizer.convert_tokens_to_ids(K2_TOKENS.end_of_turn)
    for begin in np.flatnonzero(prompt == system_id).tolist():
        ends = np.flatnonzero(prompt[begin:] == end_id)
        end = begin + int(ends[0]) + 1 if ends.size else prompt.size
        names = declared_tool_names(tokenizer.decode(prompt[begin:end].tolist(), skip_special_tokens=False))
        if names is not None:
            return [{"name": n} for n in sorted(names)] or None
    return None


def declared_tool_names(turn_text: str) -> frozenset[str] | None:
    """The tool names a rendered tool-declaration turn declares, read back from its text.

    `turn_text` is one system turn decoded with special tokens kept, from the turn token through the end-of-turn
    token; None when that turn is not the tool declaration. The one place that reads the declaration back: the
    TypeScript block K2.5's tokenizer renders (`namespace functions {` … `type NAME = (_: …`), or the compact JSON
    list its template falls back to without `tools_ts_str`."""
    head = K2_TOKENS.turn_tokens["system"] + K2_TOKENS.tool_declare_role + K2_TOKENS.turn_header_end
    if not turn_text.startswith(head):
        return None
    body = turn_text[len(head):].removesuffix(K2_TOKENS.end_of_turn)
    at = body.find(K2_TOKENS.tool_declare_namespace)
    if at >= 0:
        return frozenset(m["name"] for m in re.finditer(K2_TOKENS.tool_declare_name_regex, body[at:]))
    try:
        tools = json.loads(body)
    except ValueError:
        return frozenset()
    names = set()
    for t in tools if isinstance(tools, list) else ():
        fn = t.get("function", t) if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return frozenset(names)
