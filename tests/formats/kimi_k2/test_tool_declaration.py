"""K2.5 TypeScript tool declarations: renderings of our own schemas, every construct K2.5's own encoder renders
(its output as the golden text), the deep sort, and every case it cannot render (a counted reject here)."""

from __future__ import annotations

import copy
import random

import pytest

from kimi_eagle_data.chat_format import ToolSchemaUnsupported
from kimi_eagle_data.formats.kimi_k2.tool_declaration import (
    ENCODER_VERSION,
    deep_sort,
    encode_tools,
    encode_tools_to_typescript,
)

HEAD = "# Tools\n\n## functions\nnamespace functions {\n"


def tool(name: str, parameters: dict | None = None, description: str | None = None) -> dict:
    function: dict = {"name": name}
    if description is not None:
        function["description"] = description
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def obj(properties: dict, required: list[str] | None = None, **extra) -> dict:
    return {"type": "object", "properties": properties, "required": required or [], **extra}


def render(*tools: dict) -> str:
    return encode_tools(list(tools))


def test_version_is_a_string():
    assert isinstance(ENCODER_VERSION, str) and ENCODER_VERSION


def test_simple_string_with_description():
    out = render(tool("lookup", obj({"query": {"type": "string"}}, ["query"]), "Look a word up."))
    assert out == HEAD + "// Look a word up.\ntype lookup = (_: {\n  query: string\n}) => any;\n}\n"


def test_required_first_then_optional_each_sorted_integer_as_number():
    params = obj({"zeta": {"type": "integer"}, "alpha": {"type": "number"}, "mid": {"type": "boolean"},
                  "beta": {"type": "string"}}, ["zeta", "mid"])
    assert render(tool("f", params)) == HEAD + (
        "type f = (_: {\n  mid: boolean,\n  zeta: number,\n  alpha?: number,\n  beta?: string\n}) => any;\n}\n")


def test_constraints_and_defaults_as_comments():
    params = obj({
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10, "description": "How many."},
        "ratio": {"type": "number", "default": 0.5},
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8, "default": "bob"},
        "flag": {"type": "boolean", "default": False},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "default": ["x", "y"]},
    }, ["limit"])
    assert render(tool("g", params)) == HEAD + (
        "type g = (_: {\n"
        "  // How many.\n  // maximum: 50, minimum: 1\n  // Default: 10\n  limit: number,\n"
        "  // Default: False\n  flag?: boolean,\n"
        "  // maxLength: 8, pattern: ^[a-z]+$\n  // Default: \"bob\"\n  name?: string,\n"
        "  // Default: 0.5\n  ratio?: number,\n"
        "  // minItems: 1\n  // Default: [\"x\", \"y\"]\n  tags?: Array<string>\n"
        "}) => any;\n}\n")


def test_nested_object_indents_two_spaces_per_level():
    params = obj({"user": obj({"name": {"type": "string"}, "address": obj({"city": {"type": "string"}})},
                              ["name"], description="Who.")}, ["user"])
    assert render(tool("create", params)) == HEAD + (
        "type create = (_: {\n  // Who.\n  user: {\n    name: string,\n    address?: {\n      city?: string\n"
        "    }\n  }\n}) => any;\n}\n")


def test_arrays_plain_and_with_commented_items():
    params = obj({
        "words": {"type": "array", "items": {"type": "string"}},
        "anything": {"type": "array"},
        "points": {"type": "array", "items": {"type": "integer", "description": "A point.", "minimum": 0}},
        "rows": {"type": "array", "items": obj({"id": {"type": "string"}}, ["id"])},
    }, ["words", "anything", "points", "rows"])
    assert render(tool("arr", params)) == HEAD + (
        "type arr = (_: {\n"
        "  anything: Array<any>,\n"
        "  points: Array<\n    // A point.\n    // minimum: 0\n    number\n  >,\n"
        "  rows: Array<{\n    id: string\n  }>,\n"
        "  words: Array<string>\n"
        "}) => any;\n}\n")


def test_two_tools_in_input_order():
    out = render(tool("second_b", obj({})), tool("first_a", obj({}), "A."))
    assert out == HEAD + "type second_b = (_: {}) => any;\n// A.\ntype first_a = (_: {}) => any;\n}\n"


def test_enum_anyof_and_type_list():
    params = obj({
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit."},
        "level": {"enum": [1, 2, None]},
        "value": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        "maybe": {"type": ["string", "integer", "null"]},
        "box": {"type": ["object", "array"]},
    }, ["unit", "value"])
    assert render(tool("e", params)) == HEAD + (
        "type e = (_: {\n  // Unit.\n  unit: \"celsius\" | \"fahrenheit\",\n  value: string | number | null,\n"
        "  box?: {} | Array<any>,\n  level?: 1 | 2 | None,\n  maybe?: string | number | null\n}) => any;\n}\n")


def test_defs_become_interfaces_in_name_order_after_sorting():
    params = {"type": "object", "$defs": {
        "Zone": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        "Area": {"type": "object", "description": "An area.\nTwo lines.",
                 "properties": {"zone": {"$ref": "#/$defs/Zone"}}},
    }, "properties": {"where": {"$ref": "#/$defs/Area", "description": "Place."}}, "required": ["where"]}
    # A definition's description is printed as comment lines just above its `interface`.
    expected = HEAD + ("// An area.\n// Two lines.\ninterface Area {\n  zone?: Zone\n}\n"
                       "interface Zone {\n  code: string\n}\n"
                       "type place = (_: {\n  // Place.\n  where: Area\n}) => any;\n}\n")
    assert render(tool("place", params)) == expected
    # Without the sort, $defs come out in input order (the raw encoder mirrors the original).
    raw = encode_tools_to_typescript([tool("place", params)])
    assert raw.index("interface Zone") < raw.index("interface Area")


def test_self_reference_declares_root_interface():
    params = {"type": "object", "properties": {"name": {"type": "string"},
                                               "children": {"type": "array", "items": {"$ref": "#"}}},
              "required": ["name"]}
    # The root interface keeps the (sorted) property order, not required-first.
    assert render(tool("tree", params)) == HEAD + (
        "interface parameters {\n  children?: Array<parameters>,\n  name: string\n}\n"
        "type tree = (_: parameters) => any;\n}\n")


def test_additional_properties_true_false_and_schema():
    params = obj({"env": obj({}, additionalProperties={"type": "string"}),
                  "open": obj({}, additionalProperties=True)}, ["env", "open"], additionalProperties=False)
    assert render(tool("run", params)) == HEAD + (
        "type run = (_: {\n  env: {\n    [k: string]: string\n  },\n  open: {\n    [k: string]: any\n  },\n"
        "  [k: string]: never\n}) => any;\n}\n")


def test_multiline_description_keeps_blank_lines_bare():
    params = obj({"note": {"type": "string", "description": "First.\n\nThird."}}, ["note"])
    assert render(tool("m", params, "Top.\n\nMore.")) == HEAD + (
        "// Top.\n\n// More.\ntype m = (_: {\n  // First.\n\n  // Third.\n  note: string\n}) => any;\n}\n")


def test_unicode_passes_through():
    params = obj({"städte": {"type": "string", "description": "都市の名前"}}, ["städte"])
    assert render(tool("suche", params, "Größe → 大きさ")) == HEAD + (
        "// Größe → 大きさ\ntype suche = (_: {\n  // 都市の名前\n  städte: string\n}) => any;\n}\n")


@pytest.mark.parametrize("parameters", [None, {}, {"type": "object"}, {"type": "object", "properties": {}}])
def test_empty_or_missing_parameters(parameters):
    assert render(tool("noop", parameters, "Nothing.")) == HEAD + "// Nothing.\ntype noop = (_: {}) => any;\n}\n"


def test_unknown_type_and_empty_schema_print_as_given():
    params = obj({"id": {"type": "uuid"}, "blob": {}, "yes": True}, ["id", "blob"])
    assert render(tool("u", params)) == HEAD + "type u = (_: {\n  blob: any,\n  id: uuid,\n  yes?: any\n}) => any;\n}\n"


def test_no_tools_renders_nothing():
    assert encode_tools([]) == ""


# ---- deep sort -----------------------------------------------------------------------------------------------

def _shuffled(value, rng):
    if isinstance(value, dict):
        items = [(k, _shuffled(v, rng)) for k, v in value.items()]
        rng.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def test_deep_sort_orders_keys_recursively_and_keeps_lists():
    data = {"b": [{"z": 1, "a": 2}, 3], "a": {"y": {"d": 0, "c": 1}}}
    out = deep_sort(data)
    assert list(out) == ["a", "b"] and list(out["a"]["y"]) == ["c", "d"] and list(out["b"][0]) == ["a", "z"]
    assert out["b"][1] == 3 and data == out and list(data) == ["b", "a"]  # input left untouched


def test_shuffled_key_order_gives_identical_output():
    params = {"type": "object", "$defs": {"B": obj({"x": {"type": "string"}}), "A": obj({"y": {"$ref": "#/$defs/B"}})},
              "properties": {"one": {"$ref": "#/$defs/A"}, "two": {"enum": ["p", "q"], "default": "p"},
                             "three": obj({"k": {"type": "integer", "maximum": 3}}, ["k"])},
              "required": ["two", "one"]}
    tools = [tool("first", params, "F."), tool("second", obj({"s": {"type": "string"}}, ["s"]))]
    expected = encode_tools(tools)
    rng = random.Random(7)
    outputs = {encode_tools(_shuffled(copy.deepcopy(tools), rng)) for _ in range(20)}
    assert outputs == {expected}
    assert expected.index("interface A") < expected.index("interface B")


# ---- what K2.5's encoder renders, however odd, we render byte for byte -------------------------------------
# Each expected text is the original encoder's output for this schema (K2.5's tool_declaration_ts.py, called as its
# tokenizer calls it: deep sort, then encode), between the `namespace functions {` line and its closing `}`.

RENDERED_AS_ORIGINAL = [
    ("enum values in Python spelling, bools for an integer type",
     tool("t", obj({"n": {"type": "integer", "enum": [True, 1, None]},
                    "m": {"enum": [[1, 2], {"a": 1}, 1.5]}}, ["n", "m"])),
     "type t = (_: {\n  m: [1, 2] | {'a': 1} | 1.5,\n  n: True | 1 | None\n}) => any;"),
    ("enum strings printed unescaped",
     tool("t", obj({"q": {"enum": ['say "hi"', "two\nlines"]}}, ["q"])),
     'type t = (_: {\n  q: "say "hi"" | "two\nlines"\n}) => any;'),
    ("enum given as a string or an object",
     tool("t", obj({"s": {"enum": "ab"}, "d": {"enum": {"x": 1, "y": 2}, "type": "string"}, "e": {"enum": []}},
                   ["s", "d", "e"])),
     'type t = (_: {\n  d: "x" | "y",\n  e: ,\n  s: "a" | "b"\n}) => any;'),
    ("empty name and any root type",
     tool("", {"type": "string", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
     "type  = (_: {\n  a: string\n}) => any;"),
    ("scalar type names printed as given",
     tool("t", obj({"u": {"type": "uuid"}, "e": {"type": ""}, "n": {"type": None}, "five": {"type": 5}},
                   ["u", "e", "n", "five"])),
     "type t = (_: {\n  e: ,\n  five: 5,\n  n: None,\n  u: uuid\n}) => any;"),
    ("type list prints object and array as {} and Array<any>",
     tool("t", obj({"p": {"type": ["object", "null"], "properties": {"k": {"type": "string"}}},
                    "q": {"type": ["array"], "items": {"type": "string"}}, "r": {"type": []}}, ["p", "q", "r"])),
     "type t = (_: {\n  p: {} | null,\n  q: Array<any>,\n  r: \n}) => any;"),
    ("anyOf empty, and branch descriptions never printed",
     tool("t", obj({"a": {"anyOf": []},
                    "b": {"anyOf": [{"type": "string", "description": 5}, {"type": "null", "description": "gone"}],
                          "description": "Kept."}}, ["a", "b"])),
     "type t = (_: {\n  a: ,\n  // Kept.\n  b: string | null\n}) => any;"),
    ("required given as a string or an object",
     tool("t", {"type": "object", "required": "ab",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "ab": {"type": "string"}}}),
     "type t = (_: {\n  a: string,\n  b: string,\n  ab?: string\n}) => any;"),
    ("constraint values in Python spelling, newlines raw",
     tool("t", obj({"s": {"type": "string", "maxLength": [3], "pattern": "a\nb", "minLength": None},
                    "n": {"type": "number", "minimum": True, "maximum": {"v": 1}},
                    "l": {"type": "array", "minItems": 1.5}}, ["s", "n", "l"])),
     "type t = (_: {\n  // minItems: 1.5\n  l: Array<any>,\n  // maximum: {'v': 1}, minimum: True\n"
     "  n: number,\n  // maxLength: [3], minLength: None, pattern: a\nb\n  s: string\n}) => any;"),
    ("array items false, [], {} print Array<any>",
     tool("t", obj({"f": {"type": "array", "items": False}, "e": {"type": "array", "items": []},
                    "o": {"type": "array", "items": {}}}, ["f", "e", "o"])),
     "type t = (_: {\n  e: Array<any>,\n  f: Array<any>,\n  o: Array<any>\n}) => any;"),
    ("definitions of every kind",
     tool("t", {"type": "object", "properties": {"box": {"$ref": "#/$defs/Box"}}, "required": ["box"], "$defs": {
         "Color": {"enum": ["red", "blue"], "description": "A colour."},
         "Name": {"type": "string", "maxLength": 9},
         "List": {"type": "array", "items": {"$ref": "#/$defs/Name"}},
         "Either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
         "Pair": {"type": ["string", "null"]},
         "Alias": {"$ref": "#/$defs/Color"},
         "Anything": {},
         "Box": obj({"c": {"$ref": "#/$defs/Color"}}, ["c"])}}),
     'interface Alias Color\ninterface Anything any\ninterface Box {\n  c: Color\n}\n// A colour.\n'
     'interface Color "red" | "blue"\ninterface Either string | null\ninterface List Array<Name>\n'
     "interface Name string\ninterface Pair string | null\ntype t = (_: {\n  box: Box\n}) => any;"),
    ("a definition's own $defs are used but never declared",
     tool("t", {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {
         "A": {"type": "object", "$defs": {"B": obj({})}, "properties": {"b": {"$ref": "#/$defs/B"}}}}}),
     "interface A {\n  b?: B\n}\ntype t = (_: {\n  a?: A\n}) => any;"),
    ("a reference names its last segment",
     tool("t", {"type": "object", "$defs": {"P": obj({}), "x": obj({"v": {"type": "string"}})},
                "properties": {"p": {"$ref": "#/$defs/P/properties/x"}}}),
     "interface P {}\ninterface x {\n  v?: string\n}\ntype t = (_: {\n  p?: x\n}) => any;"),
    ("a definition given twice keeps its first place and its last schema",
     tool("t", {"type": "object", "$defs": {"A": obj({}), "B": obj({})},
                "properties": {"x": {"type": "object", "$defs": {"A": obj({"z": {"type": "string"}})}}}}),
     "interface A {\n  z?: string\n}\ninterface B {}\ntype t = (_: {\n  x?: {}\n}) => any;"),
    ("a definition marked $self_ref is referenced as parameters",
     tool("t", {"type": "object", "$defs": {"S": {"$self_ref": True, "type": "object"}},
                "properties": {"s": {"$ref": "#/$defs/S"}}}),
     "interface S {}\ntype t = (_: {\n  s?: parameters\n}) => any;"),
    ("'#' only inside a definition leaves the root inline",
     tool("t", {"type": "object", "$defs": {"A": obj({"up": {"$ref": "#"}})},
                "properties": {"a": {"$ref": "#/$defs/A"}}}),
     "interface A {\n  up?: parameters\n}\ntype t = (_: {\n  a?: A\n}) => any;"),
    ("a self-referencing root drops additionalProperties, even an invalid one",
     tool("t", {"type": "object", "additionalProperties": "yes", "properties": {"me": {"$ref": "#"}}}),
     "interface parameters {\n  me?: parameters\n}\ntype t = (_: parameters) => any;"),
    ("additionalProperties {} prints any",
     tool("t", obj({}, additionalProperties={})),
     "type t = (_: {\n  [k: string]: any\n}) => any;"),
    ("odd property names and falsy descriptions",
     tool("t", obj({"": {"type": "string", "description": 0}, "new\nline": {"type": "string", "description": []}},
                   [""]), description=0),
     "type t = (_: {\n  : string,\n  new\nline?: string\n}) => any;"),
]


@pytest.mark.parametrize("case,tool_def,expected", RENDERED_AS_ORIGINAL, ids=[r[0] for r in RENDERED_AS_ORIGINAL])
def test_renders_what_the_original_renders(case, tool_def, expected):
    assert render(tool_def) == HEAD + expected + "\n}\n"


def test_nesting_within_pythons_recursion_renders():
    # the original's output for 80 nested arrays: each level one `Array<`, none of them commented
    assert render(tool("t", obj({"p": _nest(80)}))) == HEAD + (
        "type t = (_: {\n  p?: " + "Array<" * 80 + "string" + ">" * 80 + "\n}) => any;\n}\n")


# ---- rejected schemas: one line naming the tool and the JSON path --------------------------------------------

def _nest(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


REJECTED = [
    ("no type", tool("get_weather", obj({"unit": {"description": "C or F"}})),
     "tool 'get_weather': parameters.properties.unit: no type, enum, anyOf or $ref"),
    ("unknown $ref", tool("t", obj({"p": {"$ref": "#/$defs/Missing"}})), "parameters.properties.p.$ref: reference"),
    ("foreign $ref", tool("t", obj({"p": {"$ref": "#/definitions/P"}})), "unsupported reference"),
    ("nested $ref path", tool("t", {"type": "object", "$defs": {"P": obj({})},
                                    "properties": {"p": {"$ref": "#/$defs/P/properties/x"}}}), "not found in $defs"),
    ("enum vs type", tool("t", obj({"n": {"type": "integer", "enum": [1, "two"]}})), "parameters.properties.n.enum[1]"),
    ("enum type pair", tool("t", obj({"n": {"type": ["string", "integer"], "enum": ["a"]}})), "enum type"),
    ("no name", {"type": "function", "function": {"parameters": obj({})}}, "tool #0: function.name"),
    ("non-dict parameters", tool("t", ["a", "b"]), "tool 't': parameters: parameters is not an object"),
    ("not a function tool", {"type": "retrieval"}, "tool #0: type: tool type 'retrieval'"),
    ("missing function", {"type": "function"}, "function: missing or empty function object"),
    ("tool not a dict", "get_weather", "tool #0: tool is str"),
    ("false schema", tool("t", obj({"p": False})), "parameters.properties.p: schema `false`"),
    ("string schema", tool("t", obj({"p": "string"})), "parameters.properties.p: schema is str"),
    ("unknown type in list", tool("t", obj({"p": {"type": ["string", "uuid"]}})), "type list"),
    ("tuple items", tool("t", obj({"p": {"type": "array", "items": [{"type": "string"}]}})), "p.items"),
    ("properties not a dict", tool("t", {"type": "object", "properties": ["a"]}), "parameters.properties"),
    ("bad additionalProperties", tool("t", obj({}, additionalProperties="yes")), "parameters.additionalProperties"),
    ("non-string description", tool("t", obj({"p": {"type": "string", "description": 5}})), "p.description"),
    ("definition not a dict", tool("t", {"type": "object", "$defs": {"X": 3}}), "definition is not a schema object"),
    # a tool the original skips when others are declared, and more places where the original raises
    ("skipped tool among others", [{"type": "retrieval"}, tool("t", obj({}))], "tool #0: type: tool type 'retrieval'"),
    ("non-string type in an anyOf", tool("t", obj({"p": {"anyOf": [{"type": 5}]}})), "p.anyOf[0].type: type 5"),
    ("non-string type of a commented array item",
     tool("t", obj({"p": {"type": "array", "items": {"type": 5, "description": "d"}}})), "p.items.type: type 5"),
    ("reference to a non-object definition",
     tool("t", {"type": "object", "$defs": {"X": 3}, "properties": {"x": {"$ref": "#/$defs/X"}}}), "x.$ref: reference"),
    ("enum not a list, with a type", tool("t", obj({"p": {"enum": 5, "type": "integer"}})), "p.enum: int 5 is not a list"),
    ("required holds a list", tool("t", {"type": "object", "properties": {"a": {"type": "string"}}, "required": [["a"]]}),
     "parameters.required"),
    ("non-string function description", tool("t", obj({}), description=5), "tool 't': description: description is int"),
    ("non-string definition description",
     tool("t", {"type": "object", "$defs": {"A": {"type": "object", "description": ["x"]}}}), "$defs.A.description"),
    ("deeper than Python's recursion", tool("t", obj({"p": _nest(5000)})), "tool 't': nested deeper than Python's recursion limit"),
]


@pytest.mark.parametrize("case,tool_def,fragment", REJECTED, ids=[r[0] for r in REJECTED])
def test_rejected_schema_raises_one_line(case, tool_def, fragment):
    with pytest.raises(ToolSchemaUnsupported) as info:
        encode_tools(tool_def if isinstance(tool_def, list) else [tool_def])
    message = str(info.value)
    assert fragment in message and "\n" not in message and message.startswith("tool ")
    assert isinstance(info.value, ValueError)


def test_rejection_names_the_tool_among_several():
    tools = [tool("fine", obj({})), tool("broken", obj({"x": {"minimum": 1}}))]
    with pytest.raises(ToolSchemaUnsupported, match=r"^tool 'broken': parameters\.properties\.x: "):
        encode_tools(tools)


def test_newline_in_property_name_stays_on_one_line():
    with pytest.raises(ToolSchemaUnsupported) as info:
        encode_tools([tool("t", obj({"a\nb": {"description": "x"}}))])
    assert "\n" not in str(info.value) and "a\\nb" in str(info.value)
