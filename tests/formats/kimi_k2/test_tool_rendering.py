"""Tools are declared TypeScript-style for every tokenizer (docs/token-rules.md): render_prompt passes our encoder's
`tools_ts_str`, a tokenizer that renders tools itself must agree with it (start-up self-check), and a schema
the encoder cannot render is a counted prepare reject, never a JSON-declared prompt."""

from __future__ import annotations

import copy
import json

import orjson
import pytest
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.chat_format import ToolSchemaUnsupported
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.formats.kimi_k2.render import (TOOL_PROBES, ToolRenderingError, check_tool_rendering,
                                                    render_prompt, render_text)
from kimi_eagle_data.prompts.tokenizer import TokenizerLoadError, load_tokenizer, open_tokenizer, own_chat_code
from kimi_eagle_data.formats.kimi_k2.tool_declaration import encode_tools

from tests.helpers.cli import run_cli

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather",
    "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}}
USER = [{"role": "user", "content": "Weather in Rome?"}]


def test_prompt_declares_tools_in_typescript(tiny_tokenizer):
    text = render_text(tiny_tokenizer, USER, [WEATHER])
    assert "<|im_system|>tool_declare<|im_middle|>" + encode_tools([WEATHER]) + "<|im_end|>" in text
    assert "type get_weather = (_: {" in text
    assert '"parameters"' not in text                       # no JSON declaration anywhere


def test_render_prompt_equals_the_template_tokenized(tiny_tokenizer):
    """The ids are what apply_chat_template(tokenize=True) gives for the same call."""
    ts = encode_tools([WEATHER])
    expected = tiny_tokenizer.apply_chat_template(USER, tools=[WEATHER], tools_ts_str=ts, add_generation_prompt=True,
                                                  tokenize=True, return_dict=False)
    assert render_prompt(tiny_tokenizer, USER, [WEATHER]) == list(expected)


def test_key_order_of_tools_does_not_change_the_prompt(tiny_tokenizer):
    shuffled = {"function": {"parameters": {"properties": {"city": {"type": "string"}}, "required": ["city"],
                                            "type": "object"},
                             "description": "Get the weather", "name": "get_weather"}, "type": "function"}
    assert render_prompt(tiny_tokenizer, USER, [shuffled]) == render_prompt(tiny_tokenizer, USER, [WEATHER])


def test_self_check_passes_for_the_tiny_tokenizer(tiny_tokenizer):
    # its class renders tools itself (deep sort + tools_ts_str, as K2.5's does): the probes agree with ours
    assert own_chat_code(tiny_tokenizer)
    check_tool_rendering(tiny_tokenizer)


def _stand_in(tokenizer, apply):
    """A tokenizer of a class that renders tools itself (as Kimi-K2.5's does), with `apply` as its
    apply_chat_template."""
    other = copy.copy(tokenizer)
    other.__class__ = type("StandInTokenizer", (type(tokenizer),), {"apply_chat_template": apply})
    return other


# The template call underneath any tokenizer class: kwargs such as `tools_ts_str` reach the template as given.
base = PreTrainedTokenizerBase


def test_self_check_refuses_a_tokenizer_whose_own_declarations_differ(tiny_tokenizer):

    def apply(self, conversation, tools=None, **kw):
        # its own encoder: drops descriptions (renders differently from ours unless handed our string)
        if tools and "tools_ts_str" not in kw:
            stripped = [{**t, "function": {k: v for k, v in t["function"].items() if k != "description"}}
                        for t in tools]
            kw["tools_ts_str"] = encode_tools(stripped)
        return base.apply_chat_template(self, conversation, tools=tools, **kw)

    with pytest.raises(ToolRenderingError, match=f"probe {TOOL_PROBES[0][0]!r}"):
        check_tool_rendering(_stand_in(tiny_tokenizer, apply))


def test_self_check_refuses_a_template_that_falls_back_to_json(tiny_tokenizer):

    def apply(self, conversation, tools=None, **kw):
        kw.pop("tools_ts_str", None)          # like K2.5's tokenizer when its encoder fails: JSON fallback
        return base.apply_chat_template(self, conversation, tools=tools, **kw)

    bad = _stand_in(tiny_tokenizer, apply)
    with pytest.raises(ToolRenderingError, match="probe"):
        check_tool_rendering(bad)
    with pytest.raises(ToolRenderingError, match="TypeScript"):
        render_prompt(bad, USER, [WEATHER])


def test_loading_for_the_format_refuses_a_tokenizer_whose_template_falls_back_to_json(tmp_path):
    """`load_tokenizer(path, format)` runs the format's `check_tokenizer`: a model directory whose tokenizer code
    drops `tools_ts_str` (its template then declares tools as JSON) is refused at load, in one line naming the
    probe; opened without a format (`open_tokenizer`: a server that renders no prompt), it loads."""
    import shutil

    model = tmp_path / "json-fallback"
    shutil.copytree(TINY_MODEL_DIR, model)
    code = model / "tokenization_tiny_kimi.py"
    text = code.read_text()
    anchor = "        tools = deep_sort(tools)\n"
    assert anchor in text
    code.write_text(text.replace(anchor, anchor + "        kwargs.pop('tools_ts_str', None)\n"
                                 "        kwargs['tools_ts_str'] = None\n", 1))
    with pytest.raises(TokenizerLoadError) as e:
        load_tokenizer(str(model), KIMI_K2_FORMAT)
    assert "cannot render kimi-k2 prompts: tool-rendering self-check failed on probe" in str(e.value)
    assert "\n" not in str(e.value)
    assert open_tokenizer(str(model)) is not None


def test_unsupported_schema_raises(tiny_tokenizer):
    untyped = copy.deepcopy(WEATHER)
    untyped["function"]["parameters"]["properties"]["city"] = {"description": "no type at all"}
    with pytest.raises(ToolSchemaUnsupported):
        render_prompt(tiny_tokenizer, USER, [untyped])


def test_unsupported_schema_is_a_counted_prepare_reject(tmp_path):
    rows = []
    for i in range(4):
        tool = copy.deepcopy(WEATHER)
        if i == 2:
            tool["function"]["parameters"]["properties"]["city"] = {"description": "a property without a type"}
        rows.append({"id": f"r{i}", "messages": [{"role": "user", "content": f"Weather in city {i}?"}],
                     "tools": [tool]})
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "cfg.toml").write_text(f"""
configs = ["T1"]
[partitions.T1]
source = "{tmp_path / 'rows.jsonl'}"
upstream = "me/tools"
adapter = "chat"
n = 10
""")
    work = tmp_path / "work"
    run_cli("prepare", "--config", str(tmp_path / "cfg.toml"), "--workdir", str(work), "--profile", "tiny-kimi",
            "--model", str(TINY_MODEL_DIR), "--max-new-tokens", "64")
    report = orjson.loads((work / "prepared" / "T1.json").read_bytes())
    assert report["rejected"] == {"tool_schema_unsupported": 1}
    assert report["prepared"] == 3
    rejects = [orjson.loads(line) for line in (work / "prepared" / "T1.rejects.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in rejects] == ["tool_schema_unsupported"]
    assert "city" in rejects[0]["message"]
