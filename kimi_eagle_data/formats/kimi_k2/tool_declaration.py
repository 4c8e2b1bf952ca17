"""Kimi-K2.5 tool declarations: OpenAI-style tools -> the TypeScript `tools_ts_str` its chat template renders.

K2.5's tokenizer (`trust_remote_code`) deep-sorts `tools` by key, then calls `encode_tools_to_typescript_style`
(tool_declaration_ts.py) and hands the result to the template as `tools_ts_str`. This module is our own
implementation of that encoder: every tool list the original renders, we render byte for byte — its quirks
included (an enum string's quotes printed unescaped, a definition of any kind printed as `interface NAME <type>`,
a type list that prints `{}` for object, constraint values in Python spelling, ...), because that text is the prompt
the real model reads. `encode_tools` is what the pipeline calls: deep sort, then encode. The differential fuzz
`scripts/tool_schema_fuzz.py` measures both directions against the original.

Where the original cannot render a tool list, we raise `ToolSchemaUnsupported` (one line naming the tool and the
JSON path), and the prompt is a counted reject instead of a JSON-declared one:

- wherever the original raises (the tokenizer then falls back to JSON declarations): a schema that is not an
  object or `true`, one with neither `type`, `enum`, `anyOf`, `$ref` nor emptiness, a `$ref` other than `#` or
  `#/$defs/...` or to an unknown (or non-object) definition, an enum that contradicts its type, an unknown name in
  a type list, a printed description that is not a string, a printed scalar `type` that is not a string where the
  original concatenates it, `properties`/`$defs` that are not objects, an `enum`/`anyOf`/`required` that is not a
  list (or a string or object, which it iterates as Python does), `required` holding lists/objects, a printed
  `additionalProperties` that is neither a bool nor a schema, a definition that is not an object;
- wherever the original falls back itself: a `false` schema (printed as `null`, with a "not supported" warning),
  a tool it skips (its `type` is not "function", or its `function` is empty: missing from the declaration), a
  function without `name` (declared as `function`);
- nesting deeper than Python's recursion allows (the original gives out first: we use fewer frames per level).
"""

from __future__ import annotations

import json
from typing import Any

from kimi_eagle_data.chat_format import ToolSchemaUnsupported

# "2": a `$ref` to a definition that carries `"$self_ref": true` now prints `parameters`, as the original does
# ("1" printed the definition's name); every other text "1" rendered is unchanged, and "2" also renders what "1"
# refused where the original renders it (scripts/tool_schema_fuzz.py).
ENCODER_VERSION = "2"

_INDENT = "  "
_FIELD_SEP = ",\n"
_UNION_NAMES = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean",
                "null": "null", "object": "{}", "array": "Array<any>"}
_ENUM_CHECKS = {"string": lambda v: isinstance(v, str), "number": lambda v: isinstance(v, (int, float)),
                "integer": lambda v: isinstance(v, int), "boolean": lambda v: isinstance(v, bool)}


class _Reject(Exception):
    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def deep_sort(obj: Any) -> Any:
    """Sort every dict by key, recursively; lists keep their order (K2.5's `deep_sort_dict`)."""
    # Plain loops, not comprehensions: one frame per level, so deep input gives out later here than in K2.5.
    if isinstance(obj, dict):
        out = {}
        for key in sorted(obj):
            out[key] = deep_sort(obj[key])
        return out
    if isinstance(obj, list):
        items = []
        for item in obj:
            items.append(deep_sort(item))
        return items
    return obj


def _comment(text: Any, indent: str, path: str) -> str:
    if not isinstance(text, str):
        raise _Reject(path, f"description is {type(text).__name__}, not a string")
    # Empty lines stay empty (no indent, no `//`), exactly as the original.
    return "\n".join(f"{indent}// {line}" if line else "" for line in text.split("\n"))


def _iterate(value: Any, path: str) -> list:
    """What the original's `for x in value` sees: a list's items, a dict's keys, a string's characters."""
    if not isinstance(value, (list, dict, str)):
        raise _Reject(path, f"{type(value).__name__} {value!r:.40} is not a list")
    return list(value)


def _as_text(text: Any, node: _Node) -> str:
    # Where the original concatenates or joins a type's text, a non-string `type` (e.g. 5) raises there.
    # (Checked on the returned text, not around the call: recursion stays as shallow as the original's.)
    if not isinstance(text, str):
        raise _Reject(f"{node.path}.type", f"type {text!r:.40} is not a type name")
    return text


# ---- parsed schema nodes: each knows its leading comment lines and its TypeScript text ----------------------

class _Node:
    def __init__(self, schema: dict, path: str, constraint_keys: tuple = ()):
        self.path = path
        self.description = schema.get("description", "")
        self.constraints = sorted(((k, v) for k, v in schema.items() if k in constraint_keys), key=lambda kv: kv[0])

    def doc(self, indent: str) -> str:
        lines = []
        if self.description:
            lines.append(_comment(self.description, indent, f"{self.path}.description"))
        if self.constraints:
            lines.append(indent + "// " + ", ".join(f"{k}: {v}" for k, v in self.constraints))
        return "".join(line + "\n" for line in lines)

    def ts(self, indent: str) -> Any:
        raise NotImplementedError


class _Scalar(_Node):
    """A `type` printed as given (`integer` -> `number`; unknown names too), or `any` for `true`/`{}`."""

    def __init__(self, typ: Any, schema: dict, path: str):
        keys = ("maxLength", "minLength", "pattern") if typ == "string" else \
            ("maximum", "minimum") if typ in ("number", "integer") else ()
        super().__init__(schema, path, keys)
        self.typ = typ

    def ts(self, indent: str) -> Any:
        return "number" if self.typ == "integer" else self.typ  # not always a string: see _as_text


class _Enum(_Node):
    def __init__(self, schema: dict, path: str):
        super().__init__(schema, path)
        self.values = schema["enum"]
        if "type" in schema:
            _check_enum(self.values, schema["type"], path)

    def ts(self, indent: str) -> str:
        # Python spelling for non-strings (None, True, [1, 2]), strings quoted as they are (as the original).
        values = _iterate(self.values, f"{self.path}.enum")
        return " | ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values)


def _check_enum(values: Any, typ: Any, path: str) -> None:
    if isinstance(typ, list):
        if len(typ) == 1:
            typ = typ[0]
        elif len(typ) == 2 and "null" in typ:
            typ = typ[0] if typ[0] != "null" else typ[1]
        else:
            raise _Reject(f"{path}.type", f"enum type {typ!r:.60} is not one type (optionally with null)")
    check = next((c for name, c in _ENUM_CHECKS.items() if typ == name), None)
    for i, value in enumerate(_iterate(values, f"{path}.enum")):
        if value is not None and check and not check(value):
            raise _Reject(f"{path}.enum[{i}]", f"enum value {value!r:.40} is not of type {typ}")


class _Union(_Node):
    """A type list: each name printed as a TypeScript type (`object` -> `{}`, `array` -> `Array<any>`)."""

    def __init__(self, schema: dict, path: str):
        super().__init__(schema, path)
        self.names = []
        for t in schema["type"]:
            if not isinstance(t, str) or t not in _UNION_NAMES:
                raise _Reject(f"{path}.type", f"type list entry {t!r:.40} is not a JSON Schema type")
            self.names.append(_UNION_NAMES[t])

    def ts(self, indent: str) -> str:
        return " | ".join(self.names)


class _Ref(_Node):
    def __init__(self, schema: dict, path: str, name: str):
        super().__init__(schema, path)
        self.name = name

    def ts(self, indent: str) -> str:
        return self.name


class _AnyOf(_Node):
    def __init__(self, schema: dict, path: str):
        super().__init__(schema, path)
        self.branches: list[_Node] = []

    def ts(self, indent: str) -> str:
        texts = []
        for branch in self.branches:
            texts.append(_as_text(branch.ts(indent), branch))
        return " | ".join(texts)


class _Array(_Node):
    def __init__(self, schema: dict, path: str):
        super().__init__(schema, path, ("minItems", "maxItems"))
        self.item: _Node = _Scalar("any", {}, f"{path}.items")

    def ts(self, indent: str) -> str:
        inner = indent + _INDENT
        item_doc = self.item.doc(inner)
        if item_doc:
            return f"Array<\n{item_doc}{inner}{_as_text(self.item.ts(inner), self.item)}\n{indent}>"
        # Without item comments the item keeps the outer indent (the original does so; not a typo).
        return f"Array<{self.item.ts(indent)}>"


class _Field:
    def __init__(self, name: str, node: _Node, optional: bool, default: Any):
        self.name, self.node, self.optional, self.default = name, node, optional, default


def _field_text(field: _Field, indent: str) -> str:
    out = field.node.doc(indent)
    if field.default is not None:
        out += f"{indent}// Default: {_default_repr(field.default)}\n"
    return f"{out}{indent}{field.name}{'?' if field.optional else ''}: {field.node.ts(indent)}"


def _default_repr(value: Any) -> str:
    if isinstance(value, (bool, int, float)):
        return repr(value)  # Python spelling (True, 1.5), as the original prints it
    return json.dumps(value, ensure_ascii=False)


class _Object(_Node):
    def __init__(self, schema: dict, path: str):
        super().__init__(schema, path)
        self.fields: list[_Field] = []
        self.extra: Any = None  # additionalProperties: None, a bool, a parsed schema, or what was given

    def ts(self, indent: str) -> str:
        inner = indent + _INDENT
        ordered = sorted((f for f in self.fields if not f.optional), key=lambda f: f.name)
        ordered += sorted((f for f in self.fields if f.optional), key=lambda f: f.name)
        parts = []
        for field in ordered:  # a loop, not a comprehension: one frame fewer per level of nesting
            parts.append(_field_text(field, inner))
        if self.extra is not None:
            if isinstance(self.extra, bool):
                extra = "any" if self.extra else "never"
            elif isinstance(self.extra, _Node):
                extra = self.extra.ts(inner)
            else:
                raise _Reject(f"{self.path}.additionalProperties",
                              f"additionalProperties {self.extra!r:.40} is neither a bool nor a schema")
            parts.append(f"{inner}[k: string]: {extra}")
        if not parts:
            return "{}"
        return "{\n" + _FIELD_SEP.join(parts) + "\n" + indent + "}"


# ---- parsing (same traversal order as the original: it decides which $defs are known when a $ref is met) ----

class _Parser:
    def __init__(self):
        self.defs: dict[Any, Any] = {}  # a name given twice keeps its first place and its last schema
        self.self_ref = False

    def parse(self, schema: Any, path: str) -> _Node:
        if isinstance(schema, bool):
            if schema:
                return _Scalar("any", {}, path)
            raise _Reject(path, "schema `false`: K2.5's encoder prints it as `null`, warning it is not supported")
        if not isinstance(schema, dict):
            raise _Reject(path, f"schema is {type(schema).__name__} {schema!r:.40}, not an object or true")
        if "$ref" in schema:
            return _Ref(schema, path, self.ref(schema["$ref"], f"{path}.$ref"))
        if "anyOf" in schema:
            return self.parse_any_of(schema, path)
        if "enum" in schema:
            return _Enum(schema, path)
        if "type" in schema:
            typ = schema["type"]
            if isinstance(typ, list):
                return _Union(schema, path)
            if typ == "object":
                return self.parse_object(schema, path)
            if typ == "array":
                node = _Array(schema, path)
                if schema.get("items"):  # `items` false, [] or {} print as Array<any>, as in the original
                    node.item = self.parse(schema["items"], f"{path}.items")
                return node
            return _Scalar(typ, schema, path)
        if not schema:
            return _Scalar("any", {}, path)
        raise _Reject(path, "no type, enum, anyOf or $ref")

    def parse_any_of(self, schema: dict, path: str) -> _AnyOf:
        node = _AnyOf(schema, path)
        for i, branch in enumerate(_iterate(schema["anyOf"], f"{path}.anyOf")):
            node.branches.append(self.parse(branch, f"{path}.anyOf[{i}]"))
        return node

    def parse_object(self, schema: dict, path: str) -> _Object:
        obj = _Object(schema, path)
        if not schema:
            return obj
        if "$defs" in schema and schema["$defs"]:
            if not isinstance(schema["$defs"], dict):
                raise _Reject(f"{path}.$defs", "$defs is not an object")
            self.defs.update(schema["$defs"])
        obj.extra = schema.get("additionalProperties")
        if isinstance(obj.extra, dict):
            obj.extra = self.parse(obj.extra, f"{path}.additionalProperties")
        if "properties" not in schema:
            return obj
        props = schema["properties"]
        if not isinstance(props, dict):
            raise _Reject(f"{path}.properties", "properties is not an object")
        required = _name_set(schema.get("required", []), f"{path}.required")
        for name, prop in props.items():
            node = self.parse(prop, f"{path}.properties.{name}")
            default = prop.get("default") if isinstance(prop, dict) else None
            obj.fields.append(_Field(name, node, name not in required, default))
        return obj

    def ref(self, ref: Any, path: str) -> str:
        if ref == "#":
            self.self_ref = True
            return "parameters"
        if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
            raise _Reject(path, f"unsupported reference {ref!r:.60} (only '#' and '#/$defs/NAME')")
        name = ref.split("/")[-1]  # the last segment names the definition, as in the original
        if name not in self.defs:
            raise _Reject(path, f"reference {ref!r:.60} not found in $defs")
        target = self.defs[name]
        if not isinstance(target, dict):
            raise _Reject(path, f"reference {ref!r:.60} names a definition that is not an object")
        return "parameters" if target.get("$self_ref", False) else name


def _name_set(required: Any, path: str) -> set:
    """`set(required)` as the original takes it (a string's characters, a dict's keys)."""
    names = _iterate(required, path)
    if any(isinstance(name, (list, dict)) for name in names):
        raise _Reject(path, "required holds a list or object, not a name")
    return set(names)


def _encode_function(function: dict) -> str:
    parser = _Parser()
    params = function.get("parameters") or {}
    if not isinstance(params, dict):
        raise _Reject("parameters", "parameters is not an object")
    # The root is read as an object whatever its `type` says, and its description is never printed.
    root = parser.parse_object(params, "parameters")
    interfaces = []
    # Decided before the definitions are parsed: a '#' met only inside a definition leaves the root inline.
    root_is_interface = parser.self_ref
    if root_is_interface:
        # The self-referencing root keeps properties in input order, and drops additionalProperties (as the original).
        body = _FIELD_SEP.join(_field_text(f, _INDENT) for f in root.fields)
        interfaces.append("interface parameters {" + (f"\n{body}\n" if body else "") + "}")
    for name, schema in dict(parser.defs).items():  # definitions registered while parsing these are not declared
        path = f"parameters.$defs.{name}"
        if not isinstance(schema, dict):
            raise _Reject(path, "definition is not a schema object")
        body = parser.parse(schema, path).ts("")
        desc = schema.get("description", "")
        head = _comment(desc, "", f"{path}.description") + "\n" if desc else ""
        interfaces.append(f"{head}interface {name} {body}")

    signature = "parameters" if root_is_interface else root.ts("")
    desc = function.get("description")
    parts = ["\n".join(interfaces), _comment(desc, "", "description") if desc else "",
             f"type {function['name']} = (_: {signature}) => any;"]
    return "\n".join(part for part in parts if part)


def _label(tool: Any, index: int) -> str:
    function = tool.get("function") if isinstance(tool, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return f"tool {name!r}" if isinstance(name, str) and name else f"tool #{index}"


def _check_tool(tool: Any) -> dict:
    """The function of a tool the original declares; a tool it skips or renames is refused."""
    if not isinstance(tool, dict):
        raise _Reject("", f"tool is {type(tool).__name__}, not an object")
    if tool.get("type") != "function":
        raise _Reject("type", f"tool type {tool.get('type')!r:.40} is not 'function' (K2.5's encoder skips it)")
    function = tool.get("function", {})
    if not function:
        raise _Reject("function", "missing or empty function object (K2.5's encoder skips it)")
    if not isinstance(function, dict):
        raise _Reject("function", f"function is {type(function).__name__}, not an object")
    if "name" not in function:
        raise _Reject("function.name", "no function name (K2.5's encoder declares it as 'function')")
    return function


def encode_tools_to_typescript(tools: list[dict]) -> str:
    """Render `tools` exactly as K2.5's `encode_tools_to_typescript_style` (no sorting); raise where it can't."""
    if not tools:
        return ""
    functions = []
    for index, tool in enumerate(tools):
        label = _label(tool, index)
        try:
            functions.append(_encode_function(_check_tool(tool)))
        except _Reject as err:
            where = f"{err.path}: " if err.path else ""
            raise ToolSchemaUnsupported(_one_line(f"{label}: {where}{err.reason}")) from None
        except RecursionError:
            raise ToolSchemaUnsupported(f"{label}: nested deeper than Python's recursion limit") from None
    return "# Tools\n\n## functions\nnamespace functions {\n" + "\n".join(functions) + "\n}\n"


def _one_line(message: str) -> str:
    return message.replace("\r", "\\r").replace("\n", "\\n")


def encode_tools(tools: list[dict]) -> str:
    """What K2.5's tokenizer passes as `tools_ts_str`: deep-sort the tools by key, then encode them."""
    ordered = []
    for index, tool in enumerate(tools or []):
        try:
            ordered.append(deep_sort(tool))
        except RecursionError:
            raise ToolSchemaUnsupported(f"{_label(tool, index)}: nested deeper than Python's recursion limit") from None
    return encode_tools_to_typescript(ordered)
