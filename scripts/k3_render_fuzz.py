"""Differential fuzz of our Kimi-K3 renderer against K3's own encoder (`encoding_k3.py`, loaded from a path).

A seeded generator writes requests of every shape the format has: tool lists with random JSON schemas (nested
objects and arrays, enums, anyOf, unicode names and descriptions, quotes and ampersands), system/user/assistant/
tool messages in random orders, assistant turns with reasoning (and its alias, blank), content as text, null,
empty or parts (images included), tool calls whose arguments are objects, JSON text, non-JSON text, blank or
absent, tool results in and out of call order, with missing, unknown, integer or duplicate ids, with and without
names; efforts, thinking off, tool_choice, response_format, with and without the generation prompt; text from many
scripts, emoji, odd whitespace and typed special-token strings. Each request is rendered twice:

- by the original, as K3's tokenizer calls it (`build_chat_segments`, effort max where the request names none);
- by `kimi_eagle_data.formats.kimi_k3.render.render_segments`.

Outcomes are counted both ways. Requests the original renders and we refuse on purpose (a role it would drop, an
effort it does not take with thinking off) are counted apart. Nothing of the original is in this repository.

Usage: python scripts/k3_render_fuzz.py --encoder PATH/encoding_k3.py [--cases N] [--seed S] [--show K]
Exit 0 when no case differs, none is rendered by one side only (on-purpose refusals aside) and we never crash; 1
otherwise; 2 on usage errors.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from kimi_eagle_data.formats.kimi_k3.normalize import ROLES, K3FormatError, in_call_order
from kimi_eagle_data.formats.kimi_k3.render import EFFORTS, render_segments

EQUAL, TEXT_DIFFERS = "both render, equal", "both render, text differs"
SPLIT_DIFFERS = "both render, same text, segments differ"
WE_REFUSE, ON_PURPOSE = "original renders, we refuse", "original renders, we refuse on purpose"
THEY_REFUSE, BOTH_REFUSE, CRASH = "we render, original refuses", "both refuse", "we crash (not K3FormatError)"
MUTATES = "we change the caller's request"
OUTCOMES = [EQUAL, TEXT_DIFFERS, SPLIT_DIFFERS, WE_REFUSE, ON_PURPOSE, THEY_REFUSE, BOTH_REFUSE, CRASH, MUTATES]
FAILING = {TEXT_DIFFERS, SPLIT_DIFFERS, WE_REFUSE, THEY_REFUSE, CRASH, MUTATES}


def load_original(path: Path):
    spec = importlib.util.spec_from_file_location("encoding_k3", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python file; give the path of K3's encoding_k3.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["encoding_k3"] = module       # its dataclass looks its module up there
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - whatever the file does wrong, one line says so
        raise ValueError(f"{path} cannot be loaded ({type(err).__name__}: {err})") from None
    if not hasattr(module, "build_chat_segments"):
        raise ValueError(f"{path} has no build_chat_segments; is it K3's encoding_k3.py?")
    return module


# ---- the generator --------------------------------------------------------------------------------------------

PIECES = ["hello", "world", "Kimi", "EAGLE", "def f(x):", "SELECT *", "42", "3.14", "-7", "é", "naïve", "你好",
          "世界", "こんにちは", "한국어", "مرحبا", "שלום", "Привет", "🙂", "👩‍👩‍👧", "🇫🇷", "e\u0301", "\u200b",
          "\u00a0", "\u3000",
          "\t", "\n", "\r\n", "\n\n", "   ", " ", "\"", "'", "&", "&amp;", "<", ">", "=\"", "`", "```json", "{}", "[]",
          "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>", "[EOS]", "[BOS]", "<|im_end|>", "<|im_user|>",
          "<|kimi_image_placeholder|>", "<think>", "</think>", "\\", "_", "$ref", "...", "!?"]


def text(rng: random.Random, max_pieces: int = 8) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, max_pieces)))


def name(rng: random.Random) -> str:
    return rng.choice(["get_weather", "search", "run_sql", "天气", "do&\"it", "a.b-c", "_private", "x" * 40,
                       text(rng, 2) or "t"])


def schema(rng: random.Random, depth: int = 0) -> dict:
    kind = rng.choice(["string", "number", "integer", "boolean", "null", "object", "array", "enum", "anyOf", "list"]
                      if depth < 3 else ["string", "number", "boolean"])
    out: dict[str, Any] = {}
    if kind == "object":
        props = {text(rng, 2) or f"p{i}": schema(rng, depth + 1) for i in range(rng.randint(0, 4))}
        out = {"type": "object", "properties": props}
        if props and rng.random() < 0.5:
            out["required"] = rng.sample(sorted(props), rng.randint(1, len(props)))
    elif kind == "array":
        out = {"type": "array", "items": schema(rng, depth + 1)}
    elif kind == "enum":
        out = {"type": "string", "enum": [text(rng, 2) for _ in range(rng.randint(1, 4))]}
    elif kind == "anyOf":
        out = {"anyOf": [schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]}
    elif kind == "list":
        out = {"type": rng.sample(["string", "number", "null", "boolean"], 2)}
    else:
        out = {"type": kind}
    if rng.random() < 0.4:
        out["description"] = text(rng)
    if rng.random() < 0.1:
        out["default"] = value(rng, depth + 1)
    return dict(rng.sample(list(out.items()), len(out)))     # keys in random order: the encoder sorts them


def tool(rng: random.Random) -> dict:
    fn = {"name": name(rng), "parameters": schema(rng) if rng.random() < 0.9 else {"type": "object"}}
    if rng.random() < 0.7:
        fn["description"] = text(rng)
    return {"type": "function", "function": fn}


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["str", "int", "float", "bool", "null", "list", "dict"] if depth < 3 else ["str", "int"])
    if kind == "str":
        return text(rng, 4)
    if kind == "int":
        return rng.choice([0, 1, -5, 10 ** 20, 7])
    if kind == "float":
        return rng.choice([0.5, -1e-7, 1e21, 2.0, 3.14159])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {text(rng, 2): value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def arguments(rng: random.Random) -> Any:
    args = {text(rng, 2) or "k": value(rng) for _ in range(rng.randint(0, 4))}
    roll = rng.random()
    if roll < 0.45:
        return args
    if roll < 0.75:
        return json.dumps(args, ensure_ascii=rng.random() < 0.5)
    if roll < 0.97:
        return rng.choice(["", "   ", None, "not json {", "SELECT 1", "{\"a\": 1} trailing"])
    return rng.choice(["[1, 2]", "\"a string\"", "7"])       # JSON but not an object: refused by both


def content(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.7:
        return text(rng, 12)
    if roll < 0.8:
        return rng.choice([None, ""])
    parts = []
    for _ in range(rng.randint(0, 3)):
        if rng.random() < 0.25:
            parts.append({"type": rng.choice(["image", "image_url"]), "image_url": {"url": "https://x/y.png"}})
        else:
            parts.append({"type": "text", "text": text(rng, 6)})
    return parts


def tool_round(rng: random.Random, names: list[str]) -> list[dict]:
    """An assistant message with calls and the results that answer them, in some order, some ids odd."""
    calls = []
    for i in range(rng.randint(1, 4)):
        call_id: Any = rng.choice([f"call_{i}", f"functions.{names[0]}:{i}", i, "dup"]) if rng.random() < 0.95 else None
        call = {"id": call_id, "type": "function",
                "function": {"name": rng.choice(names), "arguments": arguments(rng)}}
        if rng.random() < 0.05:
            call = {"id": call_id, "name": rng.choice(names), "arguments": arguments(rng)}   # flat call shape
        calls.append(call)
    assistant = {"role": "assistant", "content": content(rng), "tool_calls": calls}
    if rng.random() < 0.6:
        assistant[rng.choice(["reasoning_content", "reasoning"])] = text(rng, 10)
    results = []
    for call in calls:
        result: dict[str, Any] = {"role": "tool", "content": content(rng)}
        roll = rng.random()
        if roll < 0.85:
            result["tool_call_id"] = call["id"] if rng.random() < 0.9 else str(call["id"])
        elif roll < 0.9:
            result["tool_call_id"] = "unknown"
        if rng.random() < 0.5:
            result[rng.choice(["name", "tool"])] = rng.choice(names)
        results.append(result)
    if rng.random() < 0.5:
        rng.shuffle(results)
    if rng.random() < 0.2 and results:
        results.pop()
    return [assistant, *results]


def conversation(rng: random.Random, tool_names: list[str]) -> list[dict]:
    messages: list[dict] = []
    if rng.random() < 0.4:
        messages.append({"role": "system", "content": content(rng)})
    for _ in range(rng.randint(1, 4)):
        message: dict[str, Any] = {"role": "user", "content": content(rng)}
        if rng.random() < 0.1:
            message["name"] = text(rng, 2)
        messages.append(message)
        roll = rng.random()
        if roll < 0.35 and tool_names:
            messages.extend(tool_round(rng, tool_names))
        elif roll < 0.75:
            assistant: dict[str, Any] = {"role": "assistant", "content": content(rng)}
            if rng.random() < 0.6:
                assistant[rng.choice(["reasoning_content", "reasoning"])] = rng.choice([text(rng, 10), "  \n", ""])
            if rng.random() < 0.1:
                assistant["name"] = text(rng, 2)
            messages.append(assistant)
        elif roll < 0.8:
            messages.append({"role": "system", "tools": [tool(rng)], "content": text(rng)})
        elif roll < 0.83:
            messages.append({"role": rng.choice(["developer", "function", "tool"]), "content": text(rng)})
        elif roll < 0.86:
            messages.append({"role": "system", "content": text(rng), "name": text(rng, 2)})
    return messages


def request(rng: random.Random) -> dict[str, Any]:
    tools = [tool(rng) for _ in range(rng.randint(0, 3))] if rng.random() < 0.6 else rng.choice([None, []])
    names = [t["function"]["name"] for t in tools or []] or ([name(rng)] if rng.random() < 0.5 else [])
    out: dict[str, Any] = {"messages": conversation(rng, names), "tools": tools}
    if rng.random() < 0.3:
        out["thinking"] = False
    if rng.random() < 0.6:
        out["effort"] = rng.choice([*EFFORTS, None] if rng.random() < 0.9 else ["medium", "ultra"])
    if rng.random() < 0.15:
        out["add_generation_prompt"] = False
    if rng.random() < 0.2:
        out["tool_choice"] = rng.choice(["auto", "required", "none", {"type": "function", "function": {"name": "x"}}])
    if rng.random() < 0.2:
        out["response_format"] = rng.choice([
            {"type": "text"}, {"type": "json_object"}, "json_object", {"type": "json_schema"},
            {"type": "json_schema", "json_schema": {"name": "n", "schema": schema(rng)}},
            {"type": "json_schema", "json_schema": schema(rng)}])
    return out


# ---- running both ---------------------------------------------------------------------------------------------

def on_purpose(req: dict[str, Any]) -> str | None:
    """Why we refuse a request the original renders, when that is by design; None otherwise."""
    if any(isinstance(m, dict) and m.get("role") not in ROLES for m in req["messages"]):
        return "a role the original drops"
    if not req.get("thinking", True) and req.get("effort", "max") not in (*EFFORTS, None):
        return "an effort the original ignores with thinking off"
    return None


def original_segments(original, req: dict[str, Any]) -> list[tuple[str, bool]]:
    req = copy.deepcopy(req)
    segments = original.build_chat_segments(
        req.pop("messages"), tools=req.pop("tools", None), add_generation_prompt=req.pop("add_generation_prompt", True),
        thinking=req.pop("thinking", True), thinking_effort=req.pop("effort", "max"), **req)
    return [(s.text, s.allow_special) for s in segments]


def features(req: dict[str, Any]) -> list[str]:
    """What a request exercises (counted over the equal cases, to show the fuzz reaches each part)."""
    messages = req["messages"]
    found = []
    if req.get("tools"):
        found.append("declared tools")
    if any(m.get("role") == "system" and m.get("tools") for m in messages):
        found.append("tools declared by a system message")
    if any(m.get("tool_calls") for m in messages):
        found.append("tool calls")
    if in_call_order(messages) != messages:
        found.append("tool results re-sorted")
    calls = [c for m in messages for c in m.get("tool_calls") or []]
    if any(isinstance(args := c.get("function", c).get("arguments"), str) and args.strip() and not _is_json(args)
           for c in calls):
        found.append("arguments kept as raw text")
    if any(m.get("reasoning_content") or m.get("reasoning") for m in messages):
        found.append("reasoning in history")
    if not req.get("thinking", True):
        found.append("thinking off")
    found.append(f"effort {req.get('effort', 'max (default)')}")
    if req.get("response_format") not in (None, {"type": "text"}):
        found.append("response_format")
    if req.get("tool_choice") in ("required", "none"):
        found.append("tool_choice notice")
    if any(isinstance(m.get("content"), list) for m in messages):
        found.append("content parts")
    if "<|" in json.dumps(messages, ensure_ascii=False):
        found.append("typed special-token strings")
    return found


def _is_json(raw: str) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


def compare(original, req: dict[str, Any]) -> tuple[str, str]:
    """(outcome, detail) for one request."""
    try:
        theirs, their_error = original_segments(original, req), None
    except Exception as err:  # noqa: BLE001 - a refusal is an outcome
        theirs, their_error = None, type(err).__name__
    before = copy.deepcopy(req)
    try:
        ours, our_error = [tuple(s) for s in render_segments(**req)], None
    except K3FormatError as err:
        ours, our_error = None, str(err)
    except Exception as err:  # noqa: BLE001 - counted, and the run fails
        return CRASH, f"{type(err).__name__}: {err}"
    if req != before:
        return MUTATES, ""
    if theirs is None:
        return (BOTH_REFUSE, their_error) if ours is None else (THEY_REFUSE, their_error)
    if ours is None:
        reason = on_purpose(req)
        return (ON_PURPOSE, reason) if reason else (WE_REFUSE, our_error)
    if ours == theirs:
        return EQUAL, ""
    if "".join(t for t, _ in ours) != "".join(t for t, _ in theirs):
        return TEXT_DIFFERS, ""
    return SPLIT_DIFFERS, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", type=Path, required=True, help="K3's encoding_k3.py")
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--show", type=int, default=3, help="failing cases to print (as JSON)")
    args = parser.parse_args(argv)
    try:
        original = load_original(args.encoder)
    except ValueError as err:
        print(f"k3_render_fuzz: {err}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    kinds: Counter[tuple[str, str]] = Counter()
    reached: Counter[str] = Counter()
    shown = 0
    for _ in range(args.cases):
        req = request(rng)
        outcome, detail = compare(original, req)
        counts[outcome] += 1
        if outcome == EQUAL:
            reached.update(features(req))
        if detail and outcome != EQUAL:
            kinds[(outcome, detail if outcome in (ON_PURPOSE, BOTH_REFUSE, THEY_REFUSE) else detail[:90])] += 1
        if outcome in FAILING and shown < args.show:
            shown += 1
            print(f"--- {outcome}: {detail}\n{json.dumps(req, ensure_ascii=False)}")
    print(f"{args.cases} requests, seed {args.seed}, encoder {args.encoder}")
    for outcome in OUTCOMES:
        print(f"  {outcome:<48} {counts[outcome]}")
    for (outcome, detail), n in sorted(kinds.items()):
        print(f"    {outcome}: {detail}  {n}")
    print("  the equal cases exercise: " + ", ".join(f"{k} {n}" for k, n in sorted(reached.items())))
    failed = sum(counts[o] for o in FAILING)
    print("OK: no disagreement" if not failed else f"FAIL: {failed} disagreements")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
