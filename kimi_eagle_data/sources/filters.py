"""Prompt filters run by `prepare` after the adapter; each failure is `(reason, message)`.

    empty_prompt          no text to answer: the last user turn is empty, or every message is
    non_text_content      a content that is not a string, contains NUL / too many control
                          characters, or lone surrogates (cannot be UTF-8 encoded)
    invalid_tool_schema   `tools` that the template and the validator cannot use (see `check_tools`)
    language              too few letters in the allowed scripts (see `script_share`)
    too_many_chars        more characters than the partition's `max_chars` (a cheap cap applied
                          before rendering; the real length limit is `prompt_too_long`, in tokens).
                          Default: the longest prompt that could fit max_seq_len, with margin,
                          `max_seq_len × CHARS_PER_TOKEN_BOUND`. A source row longer than
                          `max_row_bytes` is refused the same way while it is read, before it is
                          parsed (sources/readers.py), so one 50 MB row costs neither minutes nor gigabytes.

The language filter is a script heuristic, not language identification: it counts the letters
(`str.isalpha`) of the user turns by Unicode block — latin, cyrillic, greek, armenian, hebrew,
arabic, devanagari, indic (other Indic scripts), thai, hangul, kana, han — and keeps the prompt
when the allowed scripts hold at least `min_script_share` of them. Prompts without letters (pure
code or numbers) pass. Aliases: english→latin, chinese→han, japanese→kana+han, korean→hangul+han.
It cannot tell English from French (both Latin); it is meant to drop e.g. non-Latin-script
chats from a mostly-English mix, cheaply and deterministically.
"""

from __future__ import annotations

import re
from typing import Any

from kimi_eagle_data.sources.partitions import Filters
from kimi_eagle_data.chat_format import TOOL_NAME_REGEX

Failure = "tuple[str, str] | None"

_SCRIPT_RANGES: dict[str, str] = {
    "latin": "A-Za-z\u00aa\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0250-\u02af\u1d00-\u1d7f\u1e00-\u1eff"
             "\u2c60-\u2c7f\ua720-\ua7ff\uab30-\uab6f\uff21-\uff3a\uff41-\uff5a",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "cyrillic": "\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f",
    "armenian": "\u0530-\u058f",
    "hebrew": "\u0590-\u05ff\ufb1d-\ufb4f",
    "arabic": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
    "devanagari": "\u0900-\u097f",
    "indic": "\u0980-\u0dff",
    "thai": "\u0e00-\u0e7f",
    "hangul": "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff",
    "kana": "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "han": "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f",
}
SCRIPTS = tuple(_SCRIPT_RANGES)
SCRIPT_ALIASES = {"english": ("latin",), "chinese": ("han",), "japanese": ("kana", "han"),
                  "korean": ("hangul", "han"), "russian": ("cyrillic",)}
_LETTER = re.compile(r"[^\W\d_]")
TOOL_NAME = re.compile(TOOL_NAME_REGEX)   # what the model's call ids can carry (every Kimi format's)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def expand_scripts(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        key = name.lower()
        for s in SCRIPT_ALIASES.get(key, (key,)):
            if s not in _SCRIPT_RANGES:
                raise ValueError(f"unknown script {name!r}; known: {', '.join(SCRIPTS + tuple(SCRIPT_ALIASES))}")
            if s not in out:
                out.append(s)
    return tuple(out)


_compiled: dict[tuple[str, ...], re.Pattern[str]] = {}


def script_share(text: str, scripts: tuple[str, ...]) -> tuple[float, int]:
    """(share of letters in `scripts`, number of letters); share 1.0 when there are no letters."""
    letters = len(_LETTER.findall(text))
    if not letters:
        return 1.0, 0
    pat = _compiled.get(scripts)
    if pat is None:
        pat = _compiled[scripts] = re.compile("[" + "".join(_SCRIPT_RANGES[s] for s in scripts) + "]")
    return min(1.0, len(pat.findall(text)) / letters), letters


def check_content(messages: list[dict[str, Any]]) -> "tuple[str, str] | None":
    if not messages:
        return "empty_prompt", "the prompt has no messages"
    total = 0
    for i, m in enumerate(messages):
        content = m.get("content")
        if not isinstance(content, str):
            return "non_text_content", f"message {i} ({m.get('role')}): content is {type(content).__name__}"
        if "\x00" in content:
            return "non_text_content", f"message {i} ({m.get('role')}): contains NUL characters"
        controls = len(_CONTROL.findall(content))
        if controls and controls > 0.01 * len(content):
            return "non_text_content", f"message {i} ({m.get('role')}): {controls} control characters (binary?)"
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:
            return "non_text_content", f"message {i} ({m.get('role')}): lone surrogates, not encodable text"
        total += len(content.strip())
    last = messages[-1]
    if last.get("role") == "user" and not last["content"].strip():
        return "empty_prompt", "the last user turn is empty"
    if not total:
        return "empty_prompt", "every message is empty"
    return None


def check_tools(tools: Any) -> "tuple[str, str] | None":
    """Tools must be a non-empty list of `{"type": "function", "function": {name, description?,
    parameters}}` with a unique name the model's call ids can carry and `parameters` a JSON-schema
    object (`type: "object"`, `properties` an object, `required` a list of strings)."""
    if tools is None:
        return None
    bad = lambda msg: ("invalid_tool_schema", msg)  # noqa: E731
    if not isinstance(tools, list) or not tools:
        return bad(f"`tools` is {type(tools).__name__ if not isinstance(tools, list) else 'an empty list'}")
    names: set[str] = set()
    for i, t in enumerate(tools):
        if not isinstance(t, dict):
            return bad(f"tool {i} is {type(t).__name__}, expected an object")
        if t.get("type", "function") != "function":
            return bad(f"tool {i} has type {t.get('type')!r}, expected 'function'")
        fn = t.get("function")
        if not isinstance(fn, dict):
            return bad(f"tool {i} has no `function` object")
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            return bad(f"tool {i}: name {name!r} is not a string of letters, digits, _ . -")
        if name in names:
            return bad(f"tool {name!r} is declared twice")
        names.add(name)
        if "description" in fn and not isinstance(fn["description"], (str, type(None))):
            return bad(f"tool {name!r}: `description` is not a string")
        params = fn.get("parameters")
        if not isinstance(params, dict):
            return bad(f"tool {name!r}: `parameters` is {type(params).__name__}, expected a JSON-schema object")
        if params.get("type") != "object":
            return bad(f"tool {name!r}: `parameters.type` is {params.get('type')!r}, expected 'object'")
        if "properties" in params and not isinstance(params["properties"], dict):
            return bad(f"tool {name!r}: `parameters.properties` is not an object")
        props = params.get("properties") or {}
        for pname, pschema in props.items():
            if not isinstance(pschema, dict):
                return bad(f"tool {name!r}: property {pname!r} is {type(pschema).__name__}, expected a schema object")
        req = params.get("required")
        if req is not None and (not isinstance(req, list) or not all(isinstance(r, str) for r in req)):
            return bad(f"tool {name!r}: `parameters.required` is not a list of strings")
    return None


def user_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str))


def check_language(messages: list[dict[str, Any]], filters: Filters) -> "tuple[str, str] | None":
    if not filters.scripts:
        return None
    scripts = expand_scripts(filters.scripts)
    share, letters = script_share(user_text(messages), scripts)
    if share < filters.min_script_share:
        return ("language", f"{share:.0%} of {letters} letters in the user turns are {'/'.join(scripts)} "
                            f"(need {filters.min_script_share:.0%})")
    return None


# No chat tokenizer averages more than ~10 characters a token on real text (Kimi's: ~4); 32 leaves
# a 3x margin, so the default cap never rejects a prompt that max_seq_len could hold.
CHARS_PER_TOKEN_BOUND = 32
# A raw source row holds more than the prompt (the upstream answer, metadata, other turns) and JSON
# escapes take up to 6 bytes a character: 8 bytes per prompt character bounds the row.
ROW_BYTES_PER_CHAR = 8


def default_max_chars(max_seq_len: int) -> int:
    return max_seq_len * CHARS_PER_TOKEN_BOUND


def max_row_bytes(max_seq_len: int, max_chars: int | None = None) -> int:
    """The longest raw source row (bytes) read and parsed: beyond it no prompt can fit max_seq_len.
    An explicit `max_chars` above the default raises it with it."""
    return max(default_max_chars(max_seq_len), max_chars or 0) * ROW_BYTES_PER_CHAR


def check_chars(messages: list[dict[str, Any]], tools: Any, filters: Filters,
                max_seq_len: int | None = None) -> "tuple[str, str] | None":
    limit = filters.max_chars or (default_max_chars(max_seq_len) if max_seq_len else None)
    if limit is None:
        return None
    n = sum(len(m["content"]) for m in messages) + (len(repr(tools)) if tools else 0)
    if n > limit:
        origin = "max_chars" if filters.max_chars else f"max_chars (default: max_seq_len × {CHARS_PER_TOKEN_BOUND})"
        return "too_many_chars", f"{n:,} characters > {origin} {limit:,}"
    return None
