"""Differential fuzz of our TypeScript tool encoder against Kimi-K2.5's own (`tool_declaration_ts.py`).

A seeded generator writes OpenAI-style tool lists with JSON-schema parameters (every type, nested objects and
arrays, enums, anyOf/oneOf/allOf, type lists and other nullable forms, `$ref`/`$defs` with definitions of every
kind, descriptions with special characters, required/optional, defaults, additionalProperties, odd values in every
slot). Each list is rendered twice:

- by the original, called as K2.5's tokenizer calls it (deep-sort the tools by key, then encode);
- by `kimi_eagle_data.formats.kimi_k2.tool_declaration.encode_tools`.

and the outcomes are counted in both directions. The original "cannot render" a list when it raises (the
tokenizer then declares the tools as JSON), returns nothing (the template then falls back to JSON), or falls back
itself: a `false` schema printed as `null` (it logs "not supported, use null instead"), a tool it skips (not a
function tool, or an empty `function`), a function without `name` printed as `function`. Everything else it
renders, and we must render it byte for byte. The same cases also run through `encode_tools_to_typescript` against
the original without the sort (input order), which our raw encoder mirrors too.

No third-party code is in this repository: the original is loaded at run time from the path you give
(it is `tool_declaration_ts.py` in the moonshotai/Kimi-K2.5 model repository).

Usage: python scripts/tool_schema_fuzz.py --original PATH/tool_declaration_ts.py [--cases N] [--seed S] [--show K]
Exit 0 when no case differs, none is rendered by the original but refused by us, and none it cannot render is
rendered by us (nesting past its recursion limit aside); 1 otherwise; 2 on usage errors.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from kimi_eagle_data.chat_format import ToolSchemaUnsupported
from kimi_eagle_data.formats.kimi_k2.tool_declaration import encode_tools, encode_tools_to_typescript

OUTCOMES = ["both render, equal", "both render, differ", "original renders, we refuse",
            "we render, original refuses", "  of which: the original ran out of recursion", "both refuse",
            "we crash (not ToolSchemaUnsupported)"]
FAILING = {"both render, differ", "original renders, we refuse", "we crash (not ToolSchemaUnsupported)"}
SHOWN = FAILING | {"we render, original refuses"}
# Where Python's recursion gives out depends on the caller's stack and the Python version, not on the schema:
# we use fewer frames per level than the original, so only nesting far past any real tool lands here.
RECURSION = "  of which: the original ran out of recursion"


# ---- the original, loaded from a path ------------------------------------------------------------------------

def load_original(path: Path):
    """K2.5's encoder module from `path`; ValueError (one line) when the file is not it."""
    spec = importlib.util.spec_from_file_location("k25_tool_declaration_ts", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python file; give the path of K2.5's tool_declaration_ts.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - whatever the file does wrong, one line says so
        raise ValueError(f"{path} cannot be loaded ({type(err).__name__}: {err})") from None
    if not hasattr(module, "encode_tools_to_typescript_style") or not hasattr(module, "logger"):
        raise ValueError(f"{path} has no encode_tools_to_typescript_style/logger; is it K2.5's tool_declaration_ts.py?")
    return module


def deep_sort_dict(obj: Any) -> Any:
    """K2.5's tokenizer's sort before encoding: every dict by key, recursively; lists keep their order."""
    if isinstance(obj, dict):
        return {k: deep_sort_dict(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [deep_sort_dict(item) for item in obj]
    return obj


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def original_outcome(module, tools: list, sort: bool) -> tuple[bool, str]:
    """(True, text) when the original renders `tools`; (False, why) when it cannot."""
    handler = _Warnings()
    module.logger.addHandler(handler)
    module.logger.propagate = False
    try:  # (the sort is outside the tokenizer's try; a sort that fails means no prompt at all)
        text = module.encode_tools_to_typescript_style(deep_sort_dict(tools) if sort else tools)
    except Exception as err:  # noqa: BLE001 - the tokenizer catches every exception and falls back to JSON
        return False, f"raises {type(err).__name__}"
    finally:
        module.logger.removeHandler(handler)
    if not text:
        return False, "renders nothing"
    if handler.messages:
        return False, "false schema printed as null"
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function" or not tool.get("function"):
            return False, "skips a tool"
        if not isinstance(tool["function"], dict) or "name" not in tool["function"]:
            return False, "names a function 'function'"
    return True, text


def our_outcome(tools: list, sort: bool) -> tuple[str, str]:
    try:
        return "render", (encode_tools(tools) if sort else encode_tools_to_typescript(tools))
    except ToolSchemaUnsupported as err:
        return "refuse", str(err)
    except Exception as err:  # noqa: BLE001 - a crash is a bug the table reports
        return "crash", f"{type(err).__name__}: {err}"


def classify(original: tuple[bool, str], ours: tuple[str, str]) -> str:
    if ours[0] == "crash":
        return "we crash (not ToolSchemaUnsupported)"
    if original[0]:
        if ours[0] == "refuse":
            return "original renders, we refuse"
        return "both render, equal" if ours[1] == original[1] else "both render, differ"
    return "both refuse" if ours[0] == "refuse" else "we render, original refuses"


# ---- the generator ---------------------------------------------------------------------------------------------

TEXTS = ["Plain words.", "", "Two lines.\nSecond line.", "Blank line.\n\nAfter it.", 'Quote " and \\ backslash',
         "Unicode: Größe → 大きさ 🌍", "Comment markers // and /* */ and */", "Trailing newline\n", "\nLeading newline",
         "Carriage\r\nreturn", "Tab\there", "{braces} [brackets] <angles> `ticks`", "Dollar $ref and #/$defs/X",
         "  indented  ", "emoji 🚀 and null\u0000byte"]
NAMES = ["city", "days", "unit", "query", "limit", "tags", "a", "b", "z_last", "A_upper", "städte", "with space",
         "x-dash", "default", "type", "enum", "$ref", "properties", "1digit", "", "new\nline", "quote\"d"]
TYPE_NAMES = ["string", "number", "integer", "boolean", "null", "object", "array"]
DEF_NAMES = ["Item", "Address", "Color", "Node", "Zone", "Opt", "Big", "a", "Z", "with space", ""]
SCALARS = ["x", "with \"quote\"", "line\nbreak", "", "ü", 0, 1, -7, 2.5, 1e21, True, False, None]


class Gen:
    """Schemas biased toward what real tools use, with an odd value in some slot now and then."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.def_names: list[str] = []

    def odd(self, p: float = 0.06) -> bool:
        return self.rng.random() < p

    def text(self) -> Any:
        if self.odd(0.04):
            return self.rng.choice([5, 0, [], ["a"], {}, {"k": "v"}, None, False, True])
        return self.rng.choice(TEXTS)

    def value(self, depth: int = 0) -> Any:
        r = self.rng.random()
        if r < 0.7 or depth > 1:
            return self.rng.choice(SCALARS)
        if r < 0.85:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 3))]
        return {self.rng.choice(NAMES): self.value(depth + 1) for _ in range(self.rng.randint(0, 2))}

    def decorate(self, schema: dict) -> dict:
        if self.rng.random() < 0.35:
            schema["description"] = self.text()
        if self.rng.random() < 0.15:
            schema["default"] = self.value()
        if self.odd(0.05):
            schema[self.rng.choice(["title", "examples", "format", "nullable", "deprecated", "const"])] = self.value()
        return schema

    def constraint(self, key: str) -> Any:
        if self.odd(0.1):
            return self.rng.choice([None, True, [3], {"a": 1}, "a\nb", "x", 1.5])
        return {"pattern": self.rng.choice(["^[a-z]+$", "\\d{3}", ".*", "a|b"])}.get(key, self.rng.randint(0, 100))

    def scalar(self) -> dict:
        typ = self.rng.choice(["string", "number", "integer", "boolean", "null", "string", "integer"])
        if self.odd():
            typ = self.rng.choice(["uuid", "any", "", None, 5, "Integer", {"a": 1}, ["string"]])
        schema: dict = {"type": typ}
        keys = {"string": ["maxLength", "minLength", "pattern"], "number": ["maximum", "minimum"],
                "integer": ["maximum", "minimum"]}.get(typ if isinstance(typ, str) else "", [])
        for key in keys + ["minItems", "maxLength"]:
            if self.rng.random() < 0.2:
                schema[key] = self.constraint(key)
        return self.decorate(schema)

    def enum(self) -> dict:
        kind = self.rng.choice(["string", "integer", "number", "boolean", None, None])
        pools = {"string": ["a", "b", "north", "with space", "ü"], "integer": [1, 2, 3, -1],
                 "number": [1, 2.5, -0.5], "boolean": [True, False], None: ["x", 1, 2.0, True, None]}
        values: Any = [self.rng.choice(pools[kind]) for _ in range(self.rng.randint(1, 4))]
        if self.odd(0.15):
            values.append(self.rng.choice(SCALARS + [[1, 2], {"k": 1}, None]))
        if self.odd(0.05):
            values = self.rng.choice([[], "abc", {"p": 1}, 5, None, ""])
        schema: dict = {"enum": values}
        if kind and self.rng.random() < 0.7:
            schema["type"] = kind
            if self.odd(0.2):
                schema["type"] = self.rng.choice([[kind, "null"], ["null", kind], [kind], [kind, "string"],
                                                  [kind, "null", "string"], [], "integer", "number"])
        return self.decorate(schema)

    def type_list(self, depth: int) -> dict:
        types: list = self.rng.sample(TYPE_NAMES, self.rng.randint(1, 3))
        if self.rng.random() < 0.5 and "null" not in types:
            types.append("null")
        if self.odd():
            types = self.rng.choice([[], ["uuid"], [5], [["string"]], ["string", "string"]])
        schema: dict = {"type": types}
        if "object" in types and self.rng.random() < 0.3:
            schema["properties"] = {"k": self.schema(depth + 1)}
        if "array" in types and self.rng.random() < 0.3:
            schema["items"] = self.schema(depth + 1)
        return self.decorate(schema)

    def any_of(self, depth: int) -> dict:
        key = self.rng.choice(["anyOf", "anyOf", "anyOf", "oneOf", "allOf"])
        branches: Any = [self.schema(depth + 1) for _ in range(self.rng.randint(1, 3))]
        if self.rng.random() < 0.3:
            branches.append({"type": "null"})
        if self.odd(0.05):
            branches = self.rng.choice([[], {}, "", "abc", None, {"type": "string"}])
        schema: dict = {key: branches}
        if key != "anyOf" and self.rng.random() < 0.5:
            schema["type"] = self.rng.choice(TYPE_NAMES)
        return self.decorate(schema)

    def array(self, depth: int) -> dict:
        schema: dict = {"type": "array"}
        r = self.rng.random()
        if r < 0.8:
            schema["items"] = self.schema(depth + 1)
        elif r < 0.9 or not self.odd(0.5):
            pass
        else:
            schema["items"] = self.rng.choice([[], [{"type": "string"}], False, True, {}, "string", 0])
        for key in ["minItems", "maxItems"]:
            if self.rng.random() < 0.2:
                schema[key] = self.constraint(key)
        return self.decorate(schema)

    def defs(self, depth: int) -> Any:
        if self.odd(0.03):
            return self.rng.choice([[], ["A"], "A", 5, None, {}])
        out = {}
        for _ in range(self.rng.randint(1, 3)):
            name = self.rng.choice(DEF_NAMES)
            self.def_names.append(name)
            out[name] = self.definition(depth + 1)
        return out

    def definition(self, depth: int) -> Any:
        """A `$defs` entry: an object most often, but any kind of schema (and now and then not a schema)."""
        r = self.rng.random()
        if r < 0.45:
            schema = self.object(depth)
        elif r < 0.55:
            schema = self.enum()
        elif r < 0.63:
            schema = self.scalar()
        elif r < 0.7:
            schema = self.array(depth)
        elif r < 0.77:
            schema = self.any_of(depth)
        elif r < 0.82:
            schema = self.type_list(depth)
        elif r < 0.87:
            schema = self.ref()
        elif r < 0.9:
            schema = {}
        else:
            return self.rng.choice([True, False, 5, "string", None, [], {"$self_ref": True, "type": "object"},
                                    {"description": "only a description"}])
        if self.rng.random() < 0.3:
            schema["description"] = self.text()
        return schema

    def ref(self) -> dict:
        r = self.rng.random()
        if r < 0.25 or r < 0.92 and not self.def_names:
            target = "#"
        elif r < 0.92:
            target = "#/$defs/" + self.rng.choice(self.def_names)
        else:
            target = self.rng.choice(["#/$defs/Missing", "#/definitions/Item", "#/$defs/Item/properties/x",
                                      "#/$defs/", "other.json#/X", 5, None, "#/$defs/a/b/Z"])
        schema: dict = {"$ref": target}
        if self.odd(0.1):
            schema["type"] = "object"
        return self.decorate(schema)

    def object(self, depth: int, root: bool = False) -> dict:
        schema: dict = {"type": "object"}
        if root and self.odd(0.1):
            schema["type"] = self.rng.choice(["string", None, ["object", "null"], "array"])
        if root and self.odd(0.03):
            del schema["type"]
        if self.rng.random() < (0.3 if root else 0.12) and depth < 4:
            schema["$defs"] = self.defs(depth)
        if self.odd(0.02):
            schema["definitions"] = {"Old": {"type": "string"}}
        names = self.rng.sample(NAMES[:10] if not self.odd(0.3) else NAMES, self.rng.randint(0, 4))
        if self.rng.random() < 0.93:
            props: Any = {name: self.schema(depth + 1) for name in names}
            if self.odd(0.03):
                props = self.rng.choice([[], ["a"], "a", None, 5])
            schema["properties"] = props
        if self.rng.random() < 0.8:
            required: Any = [n for n in names if self.rng.random() < 0.5]
            if self.odd(0.08):
                required = self.rng.choice([["not_a_property"], "ab", None, {"a": 1}, [1], [["a"]], True, []])
            schema["required"] = required
        if self.rng.random() < 0.25:
            schema["additionalProperties"] = self.rng.choice(
                [True, False, {}, {"type": "string"}, self.schema(depth + 1), None]
                + ([self.rng.choice(["yes", 0, 1, [], ["string"]])] if self.odd(0.3) else []))
        if root and self.rng.random() < 0.2:
            schema["description"] = self.text()
        return schema if root else self.decorate(schema)

    def schema(self, depth: int) -> Any:
        if depth > 5:
            return self.scalar()
        r = self.rng.random()
        if r < 0.03:
            return self.rng.choice([True, True, False, {}, None, "string", 5, [], [{"type": "string"}]])
        if r < 0.38:
            return self.scalar()
        if r < 0.5:
            return self.enum()
        if r < 0.62:
            return self.object(depth)
        if r < 0.74:
            return self.array(depth)
        if r < 0.82:
            return self.any_of(depth)
        if r < 0.88:
            return self.type_list(depth)
        if r < 0.97:
            return self.ref()
        return self.decorate({self.rng.choice(["description", "title", "default", "format"]): self.value()})

    def deep(self) -> dict:
        """Nesting far deeper than any real tool: both encoders must agree on where recursion gives out."""
        depth = self.rng.choice([50, 100, 150, 200, 250, 300, 400, 800])
        schema: dict = {"type": "string"}
        for _ in range(depth):
            schema = self.rng.choice([{"type": "array", "items": schema},
                                      {"type": "object", "properties": {"n": schema}, "required": ["n"]},
                                      {"anyOf": [schema, {"type": "null"}]}])
        return {"type": "object", "properties": {"root": schema}}

    def tool(self) -> Any:
        self.def_names = []
        function: dict = {"name": self.rng.choice(["get_weather", "search", "f", "do_it", "a.b", "x-y"])}
        if self.odd(0.04):
            function["name"] = self.rng.choice(["", None, 5, "with space", "new\nline"])
        if self.odd(0.02):
            del function["name"]
        if self.rng.random() < 0.7:
            function["description"] = self.text()
        if self.rng.random() < 0.005:
            function["parameters"] = self.deep()
        elif self.rng.random() < 0.95:
            function["parameters"] = self.object(0, root=True)
        else:
            function["parameters"] = self.rng.choice([None, {}, [], "x", 5, {"type": "object"}, {"properties": {}}])
        tool: Any = {"type": "function", "function": function}
        if self.odd(0.03):
            tool = self.rng.choice([{"type": "retrieval"}, {"function": function}, {"type": "function"},
                                    {"type": "function", "function": {}}, "get_weather", None])
        return tool

    def tools(self) -> list:
        return [self.tool() for _ in range(self.rng.choice([1, 1, 1, 2, 3]))]


# ---- which constructs a case holds (to show the cases the original renders cover them all) ---------------------

def kind(schema: Any) -> str:
    if isinstance(schema, bool) or not isinstance(schema, dict):
        return f"{schema!r:.10}" if isinstance(schema, bool) else "not a schema"
    for key, name in (("$ref", "$ref"), ("anyOf", "anyOf"), ("enum", "enum")):
        if key in schema:
            return name
    typ = schema.get("type", "(none)")
    if isinstance(typ, list):
        return "type list"
    if typ in TYPE_NAMES or typ == "(none)":
        return "empty {}" if not schema else f"type {typ}"
    return "unknown type name" if isinstance(typ, str) else "non-string type"


def features(tools: list) -> set[str]:
    found: set[str] = set()

    def walk(schema: Any, where: str) -> None:
        k = kind(schema)
        found.add(f"{where}{k}")
        if not isinstance(schema, dict):
            return
        if k == "$ref":
            ref = schema["$ref"]
            found.add("$ref '#'" if ref == "#" else "$ref to a definition" if str(ref).startswith("#/$defs/")
                      else "$ref of another form")
        if k == "enum":
            values = schema["enum"]
            found.add("enum with a type list" if isinstance(schema.get("type"), list) else
                      "enum with a type" if "type" in schema else "enum without a type")
            if not isinstance(values, list):
                found.add("enum that is not a list")
            elif any(isinstance(v, str) and ('"' in v or "\n" in v) for v in values):
                found.add("enum string with a quote or newline")
            elif any(isinstance(v, (list, dict)) for v in values):
                found.add("enum with a list/object value")
        if k == "type list" and ("properties" in schema or "items" in schema):
            found.add("type list with properties/items")
        for key in ("oneOf", "allOf"):
            if key in schema:
                found.add(f"{key} (the original ignores it)")
        if isinstance(schema.get("description"), str) and "\n" in schema["description"]:
            found.add("multi-line description")
        if "default" in schema:
            found.add(f"default {type(schema['default']).__name__}")
        if any(key in schema for key in ("maxLength", "minLength", "pattern", "maximum", "minimum", "minItems",
                                           "maxItems")):
            found.add("constraint")
        extra = schema.get("additionalProperties", "absent")
        if extra != "absent":
            found.add(f"additionalProperties {kind(extra) if isinstance(extra, dict) else repr(extra):.20}")
        if isinstance(schema.get("required"), (str, dict)):
            found.add("required given as a string/object")
        defs = schema.get("$defs")
        if isinstance(defs, dict):
            for d in defs.values():
                walk(d, "$defs entry: ")
                if where == "$defs entry: ":
                    found.add("$defs inside a definition")
        for key in ("properties",):
            if isinstance(schema.get(key), dict):
                for prop in schema[key].values():
                    walk(prop, "")
        if isinstance(schema.get("items"), (dict, bool)):
            walk(schema["items"], "")
        if isinstance(schema.get("anyOf"), list):
            for branch in schema["anyOf"]:
                walk(branch, "")
        if isinstance(extra, dict):
            walk(extra, "")

    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("parameters"), dict):
            params = function["parameters"]
            if params.get("type", "object") != "object":
                found.add("root whose type is not object")
            walk(params, "root: ")
    return found


# ---- running ----------------------------------------------------------------------------------------------

def run(module, cases: int, seed: int, show: int) -> dict[str, Counter]:
    rng = random.Random(seed)
    gen = Gen(rng)
    tables = {"deep-sorted, as K2.5's tokenizer calls it": Counter(), "input order (raw encoders)": Counter()}
    reasons: Counter = Counter()
    covered: Counter = Counter()
    shown = 0
    for index in range(cases):
        tools = gen.tools()
        for sort, table in zip((True, False), tables.values()):
            # Neither encoder changes its input, so both read the same objects (no copy: some are very deep).
            original = original_outcome(module, tools, sort)
            ours = our_outcome(tools, sort)
            outcome = classify(original, ours)
            table[outcome] += 1
            if sort and not original[0]:
                reasons[original[1]] += 1
            if sort and original[0]:
                try:
                    covered.update(features(tools))
                except RecursionError:
                    covered["nesting deeper than 50 levels"] += 1
            if outcome == "we render, original refuses" and original[1] == "raises RecursionError":
                table[RECURSION] += 1
            if outcome in SHOWN and shown < show:
                shown += 1
                print(f"--- case {index} ({outcome}, {'sorted' if sort else 'input order'})\n"
                      f"tools: {_dump(tools)}\n"
                      f"original: {original[1]!r:.1500}\nours: {ours[1]!r:.1500}\n")
    tables["why the original cannot render (deep-sorted)"] = reasons
    tables["constructs present in the cases the original renders (cases holding each)"] = covered
    return tables


def _dump(tools: list) -> str:
    try:
        return json.dumps(tools, ensure_ascii=False)[:2000]
    except RecursionError:
        return "(nested too deep to print)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--original", type=Path, required=True, help="K2.5's tool_declaration_ts.py")
    parser.add_argument("--cases", type=int, default=20000, help="tool lists to generate (default 20000)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    parser.add_argument("--show", type=int, default=3, help="print up to this many mismatching cases (default 3)")
    args = parser.parse_args(argv)
    if not args.original.is_file():
        parser.error(f"--original {args.original}: no such file")
    if args.cases < 1:
        parser.error("--cases must be at least 1")
    try:
        module = load_original(args.original)
    except ValueError as err:
        parser.error(f"--original: {err}")
    tables = run(module, args.cases, args.seed, args.show)
    print(f"tool-schema fuzz: {args.cases} cases, seed {args.seed}, original {args.original}")
    failed = False
    for title, counts in tables.items():
        print(f"\n{title}")
        rows = OUTCOMES if title.startswith(("deep", "input")) else \
            sorted(counts, key=lambda k: -counts[k]) if title.startswith("why") else sorted(counts)
        for row in rows:
            print(f"  {row:<42} {counts[row]:>7}")
            failed |= row in FAILING and counts[row] > 0
        # What the original cannot render must stay a reject here too (recursion aside: see RECURSION).
        failed |= counts["we render, original refuses"] > counts[RECURSION]
    print("\nFAIL" if failed else "\nOK: nothing differs, nothing the original renders is refused, and nothing it"
          " cannot render is rendered (but for nesting past its recursion limit)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
