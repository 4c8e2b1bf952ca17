"""Kimi-K2.5 tool declarations: OpenAI-style tools -> the TypeScript `tools_ts_str` its chat template renders.

K2.5's tokenizer (`trust_remote_code`) deep-sorts `tools` by key, then calls `encode_tools_to_typescript_style`
(tool_declaration_ts.py) and hands the result to the template as `tools_ts_str`. This module is our own
implementation of that encoder, byte-exact with it on every schema it accepts (checked against the 13 public
fixtures of lightseekorg/smg). `encode_tools` is what the pipeline calls: deep sort, then encode, so the text
equals what the real model sees.

Where the original would raise (and the tokenizer silently fall back to JSON declarations), print something that
is not a faithful declaration, or silently skip part of the input, we raise `ToolSchemaUnsupported` instead, with
one line naming the tool and the JSON path. Rejected cases:

- a tool that is not a dict, whose `type` is not "function", or whose `function` is missing/empty/not a dict;
- a function without a non-empty string `name`; a description that is not a string;
- `parameters` that is not a dict, or whose `type` is present but not "object";
- a schema that is not a dict or `true` (`false` would print `null`); a non-empty schema with neither `type`,
  `enum`, `anyOf` nor `$ref` (`{}` is JSON Schema's "anything" and prints `any`, as in the original);
- `type` that is neither a non-empty string nor a non-empty list of JSON Schema type names; a type list that
  contains object/array while the schema has properties/items (the list prints `{}`/`Array<any>`, dropping them);
- `properties` not a dict, `required` not a list of strings, `additionalProperties` not a bool/dict/null,
  `$defs` not a dict of dict schemas;
- `anyOf` not a non-empty list; `items` given as a list (tuple form);
- `enum` not a non-empty list, with a list/dict value, with a string containing `"` or a newline (printed
  unescaped), or contradicting its declared `type` (a bool counts as neither number nor integer here);
  a type list of 3+ types or 2 types without "null" on an enum;
- a constraint (maxLength, minimum, pattern, minItems, ...) whose value is not a number or string, or contains a
  newline (it is printed raw inside a `//` comment);
- a `$ref` other than `#` or `#/$defs/NAME`, or naming an unknown definition (the original raises);
- a definition that is not an object (it would print `interface X "a" | "b"`), `$defs` nested inside a
  definition, or `#` referenced only from a definition (both name a type that is never declared), the same
  definition name registered twice with different schemas (the last silently wins);
- `additionalProperties` on a root that references itself with `#` (the root interface drops it);
- nesting deeper than 64 levels.
"""

from __future__ import annotations

import json
from typing import Any

ENCODER_VERSION = "1"

_INDENT = "  "
_FIELD_SEP = ",\n"
_MAX_DEPTH = 64
_UNION_NAMES = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean",
                "null": "null", "object": "{}", "array": "Array<any>"}
_CONSTRAINT_KEYS = {"string": ("maxLength", "minLength", "pattern"), "number": ("maximum", "minimum"),
                    "integer": ("maximum", "minimum"), "array": ("minItems", "maxItems")}


class ToolSchemaUnsupported(ValueError):
    """A tool schema that cannot be rendered as K2.5's TypeScript declaration faithfully (one-line message)."""


class _Reject(Exception):
    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def deep_sort(obj: Any) -> Any:
    """Sort every dict by key, recursively; lists keep their order (K2.5's `deep_sort_dict`)."""
    if isinstance(obj, dict):
        return {key: deep_sort(obj[key]) for key in sorted(obj)}
    if isinstance(obj, list):
        return [deep_sort(item) for item in obj]
    return obj


def _comment(text: str, indent: str) -> str:
    # Empty lines stay empty (no indent, no `//`), exactly as the original.
    return "\n".join(f"{indent}// {line}" if line else "" for line in text.split("\n"))


def _description(schema: dict, path: str) -> str:
    desc = schema.get("description", "")
    if desc and not isinstance(desc, str):
        raise _Reject(f"{path}.description", f"description is {type(desc).__name__}, not a string")
    return desc or ""


# ---- parsed schema nodes: each knows its leading comment lines and its TypeScript text ----------------------

class _Node:
    def __init__(self, description: str = "", constraints: list[tuple[str, Any]] | None = None):
        self.description, self.constraints = description, constraints or []

    def doc(self, indent: str) -> str:
        lines = []
        if self.description:
            lines.append(_comment(self.description, indent))
        if self.constraints:
            lines.append(indent + "// " + ", ".join(f"{k}: {v}" for k, v in self.constraints))
        return "".join(line + "\n" for line in lines)

    def ts(self, indent: str) -> str:
        raise NotImplementedError


class _Text(_Node):
    """A type printed as fixed text: scalars (`integer` -> `number`), enums, type lists and `$ref` names."""

    def __init__(self, text: str, description: str = "", constraints: list | None = None):
        super().__init__(description, constraints)
        self.text = text

    def ts(self, indent: str) -> str:
        return self.text


class _Array(_Node):
    def __init__(self, item: _Node, description: str, constraints: list):
        super().__init__(description, constraints)
        self.item = item

    def ts(self, indent: str) -> str:
        inner = indent + _INDENT
        item_doc = self.item.doc(inner)
        if item_doc:
            return f"Array<\n{item_doc}{inner}{self.item.ts(inner)}\n{indent}>"
        # Without item comments the item keeps the outer indent (the original does so; not a typo).
        return f"Array<{self.item.ts(indent)}>"


class _AnyOf(_Node):
    def __init__(self, branches: list[_Node], description: str):
        super().__init__(description)
        self.branches = branches

    def ts(self, indent: str) -> str:
        return " | ".join(branch.ts(indent) for branch in self.branches)


class _Field:
    def __init__(self, name: str, node: _Node, optional: bool, default: Any):
        self.name, self.node, self.optional, self.default = name, node, optional, default

    def ts(self, indent: str) -> str:
        out = self.node.doc(indent)
        if self.default is not None:
            out += f"{indent}// Default: {_default_repr(self.default)}\n"
        return f"{out}{indent}{self.name}{'?' if self.optional else ''}: {self.node.ts(indent)}"


def _default_repr(value: Any) -> str:
    if isinstance(value, (bool, int, float)):
        return repr(value)  # Python spelling (True, 1.5), as the original prints it
    return json.dumps(value, ensure_ascii=False)


class _Object(_Node):
    def __init__(self, description: str):
        super().__init__(description)
        self.fields: list[_Field] = []
        self.extra: _Node | bool | None = None  # additionalProperties

    def ts(self, indent: str) -> str:
        inner = indent + _INDENT
        ordered = sorted((f for f in self.fields if not f.optional), key=lambda f: f.name)
        ordered += sorted((f for f in self.fields if f.optional), key=lambda f: f.name)
        parts = [f.ts(inner) for f in ordered]
        if self.extra is not None:
            extra = {True: "any", False: "never"}[self.extra] if isinstance(self.extra, bool) \
                else self.extra.ts(inner)
            parts.append(f"{inner}[k: string]: {extra}")
        if not parts:
            return "{}"
        return "{\n" + _FIELD_SEP.join(parts) + "\n" + indent + "}"


# ---- parsing (same traversal order as the original: it decides which $defs are known when a $ref is met) ----

class _Parser:
    def __init__(self):
        self.defs: dict[str, dict] = {}
        self.self_ref = False

    def register(self, defs: Any, path: str) -> None:
        if not isinstance(defs, dict):
            raise _Reject(path, "$defs is not an object")
        for name, schema in defs.items():
            if not isinstance(schema, dict):
                raise _Reject(f"{path}.{name}", "definition is not a schema object")
            if name in self.defs and self.defs[name] != schema:
                raise _Reject(f"{path}.{name}", "definition name already used by a different schema")
            self.defs[name] = schema

    def parse(self, schema: Any, path: str, depth: int = 0) -> _Node:
        if depth > _MAX_DEPTH:
            raise _Reject(path, f"nested deeper than {_MAX_DEPTH} levels")
        if schema is True:
            return _Text("any")
        if not isinstance(schema, dict):
            raise _Reject(path, f"schema is {type(schema).__name__} {schema!r:.40}, not an object or true")
        desc = _description(schema, path)
        if "$ref" in schema:
            return _Text(self.ref(schema["$ref"], f"{path}.$ref"), desc)
        if "anyOf" in schema:
            branches = schema["anyOf"]
            if not isinstance(branches, list) or not branches:
                raise _Reject(f"{path}.anyOf", "anyOf is not a non-empty list")
            return _AnyOf([self.parse(b, f"{path}.anyOf[{i}]", depth + 1) for i, b in enumerate(branches)], desc)
        if "enum" in schema:
            return _Text(_enum_text(schema, path), desc)
        if "type" in schema:
            typ = schema["type"]
            if isinstance(typ, list):
                return _Text(_union_text(schema, path), desc)
            if not isinstance(typ, str) or not typ:
                raise _Reject(f"{path}.type", f"type {typ!r:.40} is not a type name")
            if typ == "object":
                return self.parse_object(schema, path, depth)
            if typ == "array":
                items = schema.get("items")
                if isinstance(items, list) and items:
                    raise _Reject(f"{path}.items", "tuple-form items (a list) is not supported")
                item = self.parse(items, f"{path}.items", depth + 1) if items else _Text("any")
                return _Array(item, desc, _constraints(schema, "array", path))
            # Unknown names (e.g. "uuid") print as they are, as in the original.
            return _Text("number" if typ == "integer" else typ, desc, _constraints(schema, typ, path))
        if not schema:
            return _Text("any")
        raise _Reject(path, "no type, enum, anyOf or $ref")

    def parse_object(self, schema: dict, path: str, depth: int, root: bool = False) -> _Object:
        # The root's description is never printed (the original ignores it), so it is not checked either.
        obj = _Object("" if root else _description(schema, path))
        if "$defs" in schema and schema["$defs"]:
            self.register(schema["$defs"], f"{path}.$defs")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            obj.extra = self.parse(extra, f"{path}.additionalProperties", depth + 1)
        elif extra is None or isinstance(extra, bool):
            obj.extra = extra
        else:
            raise _Reject(f"{path}.additionalProperties", "additionalProperties is not a bool or schema")
        if "properties" not in schema:
            return obj
        props, required = schema["properties"], schema.get("required", [])
        if not isinstance(props, dict):
            raise _Reject(f"{path}.properties", "properties is not an object")
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise _Reject(f"{path}.required", "required is not a list of names")
        for name, prop in props.items():
            node = self.parse(prop, f"{path}.properties.{name}", depth + 1)
            default = prop.get("default") if isinstance(prop, dict) else None
            obj.fields.append(_Field(name, node, name not in required, default))
        return obj

    def ref(self, ref: Any, path: str) -> str:
        if ref == "#":
            self.self_ref = True
            return "parameters"
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/"):]
            if "/" in name or not name:
                raise _Reject(path, f"reference {ref!r} does not name a definition")
            if name not in self.defs:
                raise _Reject(path, f"reference {ref!r} not found in $defs")
            return name
        raise _Reject(path, f"unsupported reference {ref!r:.60} (only '#' and '#/$defs/NAME')")


def _enum_text(schema: dict, path: str) -> str:
    values, typ = schema["enum"], schema.get("type")
    if not isinstance(values, list) or not values:
        raise _Reject(f"{path}.enum", "enum is not a non-empty list")
    if isinstance(typ, list):
        others = [t for t in typ if t != "null"]
        if not typ or len(typ) > 2 or len(typ) == 2 and len(others) != 1:
            raise _Reject(f"{path}.type", f"enum type {typ!r} is not one type (optionally with null)")
        typ = others[0] if others else typ[0]
    checks = {"string": lambda v: isinstance(v, str),
              "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "boolean": lambda v: isinstance(v, bool)}
    texts = []
    for i, value in enumerate(values):
        if isinstance(value, (list, dict)):
            raise _Reject(f"{path}.enum[{i}]", "enum value is not a scalar")
        if value is not None and typ in checks and not checks[typ](value):
            raise _Reject(f"{path}.enum[{i}]", f"enum value {value!r:.40} is not of type {typ}")
        if isinstance(value, str):
            if '"' in value or "\n" in value:
                raise _Reject(f"{path}.enum[{i}]", 'enum string contains a quote or newline (printed unescaped)')
            texts.append(f'"{value}"')
        else:
            texts.append(str(value))  # Python spelling (None, True), as the original prints it
    return " | ".join(texts)


def _union_text(schema: dict, path: str) -> str:
    types = schema["type"]
    if not types or not all(isinstance(t, str) and t in _UNION_NAMES for t in types):
        raise _Reject(f"{path}.type", f"type list {types!r:.60} is not a list of JSON Schema types")
    if "object" in types and ("properties" in schema or isinstance(schema.get("additionalProperties"), dict)) \
            or "array" in types and schema.get("items"):
        raise _Reject(f"{path}.type", "type list with object/array would print {} / Array<any> and drop its shape")
    return " | ".join(_UNION_NAMES[t] for t in types)


def _constraints(schema: dict, typ: str, path: str) -> list[tuple[str, Any]]:
    out = []
    for key in sorted(k for k in schema if k in _CONSTRAINT_KEYS.get(typ, ())):
        value = schema[key]
        if isinstance(value, bool) or not isinstance(value, (int, float, str)) or "\n" in str(value):
            raise _Reject(f"{path}.{key}", f"constraint value {value!r:.40} cannot be printed in a comment")
        out.append((key, value))
    return out


def _encode_function(function: dict) -> str:
    parser = _Parser()
    params = function.get("parameters") or {}
    if not isinstance(params, dict):
        raise _Reject("parameters", "parameters is not an object")
    if "type" in params and params["type"] != "object":
        raise _Reject("parameters.type", f"root type {params['type']!r:.40} is not 'object'")
    # An empty parameters object renders as `{}` without being parsed (the original returns early too).
    root = parser.parse_object(params, "parameters", 0, root=True) if params else _Object("")

    interfaces = []
    root_is_interface = parser.self_ref
    if root_is_interface:
        if root.extra is not None:
            raise _Reject("parameters.additionalProperties", "dropped by the original when the root uses '#'")
        # The self-referencing root keeps properties in input order, not required-first (as the original).
        body = _FIELD_SEP.join(f.ts(_INDENT) for f in root.fields)
        interfaces.append("interface parameters {" + (f"\n{body}\n" if body else "") + "}")
    known = dict(parser.defs)
    for name, schema in known.items():
        node = parser.parse(schema, f"parameters.$defs.{name}")
        if not isinstance(node, _Object):
            raise _Reject(f"parameters.$defs.{name}", "only object definitions can be printed as interfaces")
        desc = schema.get("description", "")
        head = _comment(desc, "") + "\n" if desc else ""
        interfaces.append(f"{head}interface {name} {node.ts('')}")
    if parser.defs.keys() != known.keys():
        new = sorted(parser.defs.keys() - known.keys())
        raise _Reject(f"parameters.$defs.{new[0]}", "$defs nested inside a definition are never declared")
    if parser.self_ref and not root_is_interface:
        raise _Reject("parameters.$defs", "'#' referenced only from a definition; the root is not declared")

    name = function["name"]
    signature = "parameters" if root_is_interface else root.ts("")
    desc = _description(function, "function")
    parts = ["\n".join(interfaces), _comment(desc, "") if desc else "", f"type {name} = (_: {signature}) => any;"]
    return "\n".join(part for part in parts if part)


def _tool_name(tool: Any) -> str | None:
    function = tool.get("function") if isinstance(tool, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) and name else None


def encode_tools_to_typescript(tools: list[dict]) -> str:
    """Render `tools` exactly as K2.5's `encode_tools_to_typescript_style` (no sorting); raise on what it can't."""
    if not tools:
        return ""
    functions = []
    for index, tool in enumerate(tools):
        name = _tool_name(tool)
        label = f"tool {name!r}" if name else f"tool #{index}"
        try:
            if not isinstance(tool, dict):
                raise _Reject("", f"tool is {type(tool).__name__}, not an object")
            if tool.get("type") != "function":
                raise _Reject("type", f"tool type {tool.get('type')!r:.40} is not 'function'")
            function = tool.get("function")
            if not isinstance(function, dict) or not function:
                raise _Reject("function", "missing or empty function object")
            if name is None:
                raise _Reject("function.name", "missing or empty function name")
            functions.append(_encode_function(function))
        except _Reject as err:
            where = f"{err.path}: " if err.path else ""
            message = f"{label}: {where}{err.reason}".replace("\r", "\\r").replace("\n", "\\n")  # one line
            raise ToolSchemaUnsupported(message) from None
    return "# Tools\n\n## functions\nnamespace functions {\n" + "\n".join(functions) + "\n}\n"


def encode_tools(tools: list[dict]) -> str:
    """What K2.5's tokenizer passes as `tools_ts_str`: deep-sort the tools by key, then encode them."""
    return encode_tools_to_typescript(deep_sort(tools))
