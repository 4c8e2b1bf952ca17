"""K2.5 TypeScript tool declarations: renderings of our own schemas, the deep sort, and every rejected case."""

from __future__ import annotations

import copy
import random

import pytest

from kimi_eagle_data.prompts.tool_declaration import (
    ENCODER_VERSION,
    ToolSchemaUnsupported,
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
                                    "properties": {"p": {"$ref": "#/$defs/P/properties/x"}}}), "does not name"),
    ("enum vs type", tool("t", obj({"n": {"type": "integer", "enum": [1, "two"]}})), "parameters.properties.n.enum[1]"),
    ("bool enum as integer", tool("t", obj({"n": {"type": "integer", "enum": [True]}})), "not of type integer"),
    ("enum type pair", tool("t", obj({"n": {"type": ["string", "integer"], "enum": ["a"]}})), "enum type"),
    ("empty enum", tool("t", obj({"n": {"enum": []}})), "enum is not a non-empty list"),
    ("object enum value", tool("t", obj({"n": {"enum": [{"a": 1}]}})), "enum value is not a scalar"),
    ("quote in enum", tool("t", obj({"n": {"enum": ['say "hi"']}})), "quote or newline"),
    ("no name", {"type": "function", "function": {"parameters": obj({})}}, "tool #0: function.name"),
    ("empty name", {"type": "function", "function": {"name": "", "parameters": obj({})}}, "function.name"),
    ("non-dict parameters", tool("t", ["a", "b"]), "tool 't': parameters: parameters is not an object"),
    ("root not object", tool("t", {"type": "string"}), "parameters.type"),
    ("not a function tool", {"type": "retrieval"}, "tool #0: type: tool type 'retrieval'"),
    ("missing function", {"type": "function"}, "function: missing or empty function object"),
    ("tool not a dict", "get_weather", "tool #0: tool is str"),
    ("false schema", tool("t", obj({"p": False})), "parameters.properties.p: schema is bool"),
    ("string schema", tool("t", obj({"p": "string"})), "parameters.properties.p: schema is str"),
    ("empty type", tool("t", obj({"p": {"type": ""}})), "parameters.properties.p.type"),
    ("unknown type in list", tool("t", obj({"p": {"type": ["string", "uuid"]}})), "type list"),
    ("type list drops properties", tool("t", obj({"p": {"type": ["object", "null"], "properties": {}}})),
     "drop its shape"),
    ("empty anyOf", tool("t", obj({"p": {"anyOf": []}})), "parameters.properties.p.anyOf"),
    ("tuple items", tool("t", obj({"p": {"type": "array", "items": [{"type": "string"}]}})), "p.items"),
    ("required not a list", tool("t", {"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"}),
     "parameters.required"),
    ("properties not a dict", tool("t", {"type": "object", "properties": ["a"]}), "parameters.properties"),
    ("bad additionalProperties", tool("t", obj({}, additionalProperties="yes")), "parameters.additionalProperties"),
    ("bad constraint", tool("t", obj({"p": {"type": "string", "maxLength": [3]}})), "parameters.properties.p.maxLength"),
    ("newline constraint", tool("t", obj({"p": {"type": "string", "pattern": "a\nb"}})), "p.pattern"),
    ("non-string description", tool("t", obj({"p": {"type": "string", "description": 5}})), "p.description"),
    ("non-object definition", tool("t", {"type": "object", "$defs": {"Color": {"enum": ["red"]}},
                                         "properties": {"c": {"$ref": "#/$defs/Color"}}}), "parameters.$defs.Color"),
    ("definition not a dict", tool("t", {"type": "object", "$defs": {"X": 3}}), "definition is not a schema object"),
    ("$defs in a definition", tool("t", {"type": "object", "$defs": {"A": {
        "type": "object", "$defs": {"B": obj({})}, "properties": {"b": {"$ref": "#/$defs/B"}}}}}), "$defs.B"),
    ("conflicting definitions", tool("t", {"type": "object", "$defs": {"A": obj({})}, "properties": {
        "x": {"type": "object", "$defs": {"A": obj({"z": {"type": "string"}})}}}}), "already used"),
    ("'#' only in a definition", tool("t", {"type": "object", "$defs": {"A": obj({"up": {"$ref": "#"}})},
                                            "properties": {"a": {"$ref": "#/$defs/A"}}}), "referenced only"),
    ("root additionalProperties with '#'", tool("t", {"type": "object", "additionalProperties": False,
                                                      "properties": {"me": {"$ref": "#"}}}), "additionalProperties"),
    ("too deep", tool("t", obj({"p": _nest(80)})), "nested deeper than 64"),
]


@pytest.mark.parametrize("case,tool_def,fragment", REJECTED, ids=[r[0] for r in REJECTED])
def test_rejected_schema_raises_one_line(case, tool_def, fragment):
    with pytest.raises(ToolSchemaUnsupported) as info:
        encode_tools([tool_def])
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
