"""Loading the model's own tokenizer and chat template, and fingerprinting both for provenance."""

from __future__ import annotations

import hashlib
from functools import lru_cache

import orjson

from .errors import KimiDataError
from .tool_declaration import deep_sort, encode_tools


class TokenizerLoadError(KimiDataError, RuntimeError):
    pass


@lru_cache(maxsize=4)
def load_tokenizer(path: str, revision: str | None = None):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=True)
    except (OSError, ValueError) as e:
        reason = " ".join(str(e).split())   # one line, however many the library's message has
        raise TokenizerLoadError(
            f"cannot load tokenizer {path!r}: {reason} Pass --tokenizer DIR (a local model directory) or "
            "make sure the Hub id is in the local cache") from e
    # Length limits are ours (max_seq_len, checked at prepare), not the tokenizer's: silence its warning.
    tok.model_max_length = 1 << 62
    if not tok.chat_template:
        raise TokenizerLoadError(f"tokenizer {path!r} has no chat template; the data path renders prompts "
                                 "only with the model's own template")
    try:
        check_tool_rendering(tok)
    except ToolRenderingError as e:
        raise TokenizerLoadError(f"tokenizer {path!r}: {e}") from None
    return tok


class ToolRenderingError(KimiDataError, ValueError):
    """A prompt whose tools the model's template did not declare in the TypeScript form."""


def render_text(tokenizer, messages, tools) -> str:
    """The prompt text: the model's own template, tools passed natively and declared TypeScript-style.

    Kimi-K2.5's tokenizer code deep-sorts `tools` and computes `tools_ts_str` itself; other tokenizers
    (the embedded tiny one included) get the same string from our encoder, so every tokenizer renders
    tools as the real model sees them. A schema the encoder cannot render raises ToolSchemaUnsupported;
    a template that did not put the TypeScript block in the text (a JSON fallback) raises
    ToolRenderingError: never a JSON-declared prompt mixed into the data."""
    kwargs = {}
    if tools:
        tools = deep_sort(tools)
        kwargs["tools_ts_str"] = ts = encode_tools(tools)
    text = tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True,
                                         tokenize=False, **kwargs)
    if tools and ts not in text:
        raise ToolRenderingError("the chat template did not render the TypeScript tool declarations "
                                 "(the tokenizer's own encoder failed or its template ignores `tools_ts_str`)")
    return text


def render_prompt(tokenizer, messages, tools) -> list[int]:
    """Prompt ids: `render_text` tokenized the way `apply_chat_template(tokenize=True)` does."""
    return list(tokenizer(render_text(tokenizer, messages, tools), add_special_tokens=False)["input_ids"])


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


def renders_tools_itself(tokenizer) -> bool:
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    return type(tokenizer).apply_chat_template is not PreTrainedTokenizerBase.apply_chat_template


def check_tool_rendering(tokenizer) -> None:
    """Start-up self-check: every probe renders with the TypeScript block, and a tokenizer that renders
    tools itself renders each probe exactly as we do. Raises ToolRenderingError naming the first
    differing probe."""
    own = renders_tools_itself(tokenizer)
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


def tokenizer_fingerprint(tokenizer) -> dict[str, str]:
    """Hashes of the vocabulary (string -> id, incl. added tokens) and of the chat template."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    vocab_hash = hashlib.sha256(orjson.dumps(vocab)).hexdigest()
    template_hash = hashlib.sha256((tokenizer.chat_template or "").encode()).hexdigest()
    return {"tokenizer_sha256": vocab_hash, "chat_template_sha256": template_hash,
            "vocab_size": str(len(tokenizer))}
