"""Source adapters: the bundled sample files and each upstream pitfall."""

from __future__ import annotations

import collections
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_eagle_data.sources.adapters import ADAPTERS
from kimi_eagle_data.sources.glaive import glaive, parse_glaive_call, parse_glaive_system
from kimi_eagle_data.sources.policies import adapt_row, after_tool_result, first_user
from kimi_eagle_data.sources.rows import content_text
from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.records import SourcePrompt, SourceRowError

ROOT = Path(__file__).resolve().parents[2]
GLAIVE_TOOLS_PREAMBLE = ("SYSTEM: You are a helpful assistant with access to the following functions. "
                         "Use them if required -\n")
GLAIVE_NO_TOOLS = "SYSTEM: You are a helpful assistant, with no access to external functions.\n"
POOL = json.loads((ROOT / "scripts" / "tiny_kimi" / "tool_pool.json").read_text())


def load(config: str) -> list[dict]:
    path = PARTITIONS[config].sample_file
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def first(adapter: str):
    """The adapter under the default policy: row -> its first-user prompt."""
    return lambda row: first_user(ADAPTERS[adapter](row))


def outcomes(config: str) -> tuple[list[SourcePrompt], collections.Counter]:
    adapter = first(PARTITIONS[config].adapter)
    ok, errors = [], collections.Counter()
    for row in load(config):
        try:
            ok.append(adapter(row))
        except SourceRowError as e:
            assert e.message and "\n" not in e.message
            errors[e.code] += 1
    return ok, errors


def error_code(adapter, row) -> str:
    with pytest.raises(SourceRowError) as info:
        adapter(row)
    return info.value.code


def check_prompt(sp: SourcePrompt) -> None:
    assert isinstance(sp.source_id, str) and sp.source_id
    assert sp.messages and sp.messages[-1]["role"] in ("user", "tool")
    for m in sp.messages:
        assert isinstance(m["content"], str)
    if sp.messages[-1]["role"] == "user":
        assert sp.messages[-1]["content"].strip()
    assert all(m["role"] != "system" or m["content"].strip() for m in sp.messages)


def glaive_row(tools: list[dict] | None, chat: str, sep: str = "\n\n") -> dict:
    if tools is None:
        return {"system": GLAIVE_NO_TOOLS, "chat": chat}
    return {"system": GLAIVE_TOOLS_PREAMBLE + sep.join(json.dumps(t, indent=4) for t in tools) + "\n", "chat": chat}


WEATHER = {"name": "get_weather", "description": "Get the current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
JOKE = {"name": "get_random_joke", "description": "Get a random joke", "parameters": {}}
MUSIC = {"name": "play_music", "description": "Play a song",
         "parameters": {"type": "object", "properties": {"song": {"type": "string"}}, "required": ["song"]}}


# ------------------------------------------------------------------------------------ registry

def test_registry_covers_every_partition_adapter():
    used = {p.adapter for p in PARTITIONS.values()}
    assert used == {"glaive", "input_field", "messages", "openthoughts", "sharegpt", "sweagent"}
    assert used <= set(ADAPTERS)
    assert set(ADAPTERS) - used == {"chat"}   # chat: user-defined partitions
    for p in PARTITIONS.values():
        assert p.sample_file.name == f"{p.config}-{p.name}.jsonl"
        assert p.sample_file.is_file(), p.sample_file


# ------------------------------------------------------------------------------------ bundled files

EXPECTED = {  # config: (rows, adapted, {code: count})
    "B1": (36, 35, {"empty_user_turn": 1}),
    "B2": (28, 27, {"empty_user_turn": 1}),
    "B3": (28, 28, {}),
    "B4": (28, 28, {}),
    "B5": (30, 30, {}),
    "B6": (28, 27, {"wrong_type": 1}),
    "B7": (30, 26, {"starts_with_assistant": 3, "empty_user_turn": 1}),
    "B8": (26, 26, {}),
}


@pytest.mark.parametrize("config", sorted(EXPECTED))
def test_bundled_file_adapts_with_expected_rejections(config):
    rows, adapted, codes = EXPECTED[config]
    assert 24 <= len(load(config)) <= 36
    ok, errors = outcomes(config)
    assert len(load(config)) == rows
    assert len(ok) == adapted
    assert dict(errors) == codes
    for sp in ok:
        check_prompt(sp)


EXPECTED_COLUMNS = {
    "B1": ["system", "chat"],
    "B2": ["id", "input", "output", "domain", "generation_algorithm", "llm_judgement", "unit_tests",
           "tests_execution_status", "average_test_score"],
    "B3": ["id", "input", "output", "source", "license", "dataset", "split", "difficulty", "solution"],
    "B4": ["messages", "num_tokens", "source"],
    "B5": ["system", "conversations"],
    "B6": ["prompt", "prompt_id", "messages"],
    "B7": ["id", "conversations"],
    "B8": ["instance_id", "model_name", "target", "trajectory", "exit_status", "generated_patch", "eval_logs"],
}


@pytest.mark.parametrize("config", sorted(EXPECTED_COLUMNS))
def test_bundled_rows_have_the_upstream_columns(config):
    for row in load(config):
        assert list(row) == EXPECTED_COLUMNS[config]
    if config == "B8":
        for row in load(config):
            for step in row["trajectory"]:
                assert set(step) == {"role", "text", "system_prompt", "mask", "cutoff_date"}
                assert step["role"] in ("system", "user", "ai")


def test_bundled_prompts_are_short_except_the_deliberate_long_ones():
    long_rows = []
    for config, p in PARTITIONS.items():
        adapter = first(p.adapter)
        for row in load(config):
            try:
                sp = adapter(row)
            except SourceRowError:
                continue
            chars = sum(len(m["content"]) for m in sp.messages)
            if chars > 700:
                long_rows.append((config, chars))
    assert [c for c, _ in long_rows] == ["B8", "B8"]
    assert all(n > 4000 for _, n in long_rows)


def test_sample_generator_is_deterministic(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_samples.py"), "--out", str(tmp_path)],
                   check=True, capture_output=True)
    for p in PARTITIONS.values():
        assert (tmp_path / p.sample_file.name).read_bytes() == p.sample_file.read_bytes(), p.sample_file.name


# ------------------------------------------------------------------------------------ B1 glaive

def test_b1_tools_come_from_the_pool_and_requests_name_them():
    pool = {t["function"]["name"]: t for t in POOL["tools"]}
    rows = load("B1")
    with_tools = example = no_access = 0
    for row in rows:
        try:
            sp = first("glaive")(row)
        except SourceRowError:
            continue
        if sp.tools is None:
            assert "no access to external functions" in row["system"]
            no_access += 1
            continue
        with_tools += 1
        assert 2 <= len(sp.tools) <= 3
        for tool in sp.tools:
            assert tool == pool[tool["function"]["name"]]          # identical to the pool declaration
        user = sp.messages[-1]["content"]
        if any(user in POOL["example_requests"].get(t["function"]["name"], []) for t in sp.tools):
            example += 1
    # counted in the bundled kimi_eagle_data/sources/samples/B1-glaive.jsonl (written by scripts/make_samples.py)
    assert no_access == 3
    assert with_tools == 32
    assert 0.6 <= example / len(rows) <= 0.8


def test_b1_bundled_file_has_the_glaive_pitfalls():
    rows = load("B1")
    systems = [r["system"] for r in rows]
    chats = [r["chat"] for r in rows]
    assert sum(len(parse_glaive_system(s)[0] or []) == 3 for s in systems) >= 5      # 3 concatenated tools
    assert any('"parameters": {}' in s for s in systems)                            # empty parameters
    assert any("\"arguments\": '{" in c and "Luigi's" in c for c in chats)            # apostrophe in args
    assert any(c.startswith("USER: \n") for c in chats)                             # empty USER turn


def test_glaive_concatenated_tools_become_native_tools():
    row = glaive_row([WEATHER, JOKE, MUSIC], "USER: What's the weather in Paris right now?\n\n\n"
                     "ASSISTANT: <functioncall> {\"name\": \"get_weather\", \"arguments\": '{\"city\": \"Paris\"}'} "
                     "<|endoftext|>\n\n\n")
    sp = first("glaive")(row)
    assert [t["function"]["name"] for t in sp.tools] == ["get_weather", "get_random_joke", "play_music"]
    assert all(t["type"] == "function" for t in sp.tools)
    assert sp.tools[0]["function"]["parameters"] == WEATHER["parameters"]
    assert sp.messages == [{"role": "user", "content": "What's the weather in Paris right now?"}]
    # never pasted into a system message
    assert not any(m["role"] == "system" for m in sp.messages)
    # concatenation without blank lines, compact JSON, or on one line, parses the same
    for sep in ("\n", " ", ""):
        compact = {"system": GLAIVE_TOOLS_PREAMBLE + sep.join(json.dumps(t) for t in [WEATHER, JOKE, MUSIC]),
                   "chat": row["chat"]}
        assert first("glaive")(compact).tools == sp.tools


def test_glaive_empty_parameters_are_filled():
    for params in ({}, None):
        tool = {"name": "get_random_joke", "description": "Get a random joke"}
        if params is not None:
            tool["parameters"] = params
        sp = first("glaive")(glaive_row([tool, WEATHER], "USER: Tell me a random joke.\n\n\n"))
        assert sp.tools[0]["function"]["parameters"] == {"type": "object", "properties": {}}
    tool = {"name": "x", "description": "d", "parameters": {"type": "object"}}
    assert first("glaive")(glaive_row([tool], "USER: hi\n")).tools[0]["function"]["parameters"] == {
        "type": "object", "properties": {}}


def test_glaive_no_access_rows_have_no_tools_and_no_system():
    sp = first("glaive")(glaive_row(None, "USER: Suggest three names for a pet turtle.\n\n\nASSISTANT: Shelly. <|endoftext|>\n"))
    assert sp.tools is None
    assert sp.messages == [{"role": "user", "content": "Suggest three names for a pet turtle."}]


def test_glaive_meaningful_leftover_system_text_is_kept():
    sp = first("glaive")({"system": "SYSTEM: You are a pirate. Answer like one.\n", "chat": "USER: hi\n"})
    assert sp.messages[0] == {"role": "system", "content": "You are a pirate. Answer like one."}
    assert sp.tools is None


def test_glaive_single_quoted_arguments_keep_apostrophes():
    text = '<functioncall> {"name": "play_music", "arguments": \'{"song": "Rock \'n\' roll", "note": "it\'s"}\'}'
    prose, name, args = parse_glaive_call(text)
    assert (prose, name) == ("", "play_music")
    assert args == {"song": "Rock 'n' roll", "note": "it's"}
    # real JSON arguments (some rows) and an object instead of a string also parse
    assert parse_glaive_call('<functioncall> {"name": "f", "arguments": "{\\"a\\": 1}"}')[2] == {"a": 1}
    assert parse_glaive_call('<functioncall> {"name": "f", "arguments": {"a": "b\'c"}}')[2] == {"a": "b'c"}


def test_glaive_after_tool_result_prefix():
    chat = ("USER: Play the song 'Rock 'n' roll'.\n\n\n"
            "ASSISTANT: <functioncall> {\"name\": \"play_music\", \"arguments\": '{\"song\": \"Rock 'n' roll\"}'} "
            "<|endoftext|>\n\n\n"
            "FUNCTION RESPONSE: {\"status\": \"playing\"}\n\n\n"
            "ASSISTANT: Now playing Rock 'n' roll. <|endoftext|>\n\n\n")
    row = glaive_row([WEATHER, MUSIC], chat)
    sp = after_tool_result(glaive(row))
    assert adapt_row("glaive", row, "after_tool_result") == (sp.source_id, [(sp.source_id, sp)])
    assert [m["role"] for m in sp.messages] == ["user", "assistant", "tool"]
    call = sp.messages[1]["tool_calls"][0]
    assert call["id"] == "functions.play_music:0"
    assert call["type"] == "function"
    assert call["function"]["name"] == "play_music"
    assert json.loads(call["function"]["arguments"]) == {"song": "Rock 'n' roll"}
    assert sp.messages[2] == {"role": "tool", "tool_call_id": "functions.play_music:0", "name": "play_music",
                              "content": '{"status": "playing"}'}
    # the regenerated final answer is not part of the prompt
    assert all("Now playing" not in m["content"] for m in sp.messages)
    # same upstream row, same key, whichever policy
    assert sp.source_id == first("glaive")(row).source_id


def test_glaive_after_tool_result_keeps_clarifying_turns():
    chat = ("USER: I need to convert some money.\n\n\nASSISTANT: How much? <|endoftext|>\n\n\n"
            "USER: 100 USD to EUR.\n\n\n"
            "ASSISTANT: Let me check. <functioncall> {\"name\": \"get_weather\", \"arguments\": '{\"city\": \"Rome\"}'}"
            " <|endoftext|>\n\n\nFUNCTION RESPONSE: {\"t\": 20}\n\n\n")
    sp = after_tool_result(glaive(glaive_row([WEATHER], chat)))
    assert [m["role"] for m in sp.messages] == ["user", "assistant", "user", "assistant", "tool"]
    assert sp.messages[3]["content"] == "Let me check."


def test_glaive_after_tool_result_errors():
    plain = glaive_row([WEATHER], "USER: hi\n\n\nASSISTANT: hello <|endoftext|>\n")
    assert error_code(lambda r: after_tool_result(glaive(r)), plain) == "no_tool_result"
    undeclared = glaive_row([WEATHER], "USER: play\n\n\nASSISTANT: <functioncall> {\"name\": \"play_music\", "
                            "\"arguments\": '{}'} <|endoftext|>\n\n\nFUNCTION RESPONSE: {}\n")
    assert error_code(lambda r: after_tool_result(glaive(r)), undeclared) == "undeclared_tool"
    broken = glaive_row([WEATHER], "USER: x\n\n\nASSISTANT: <functioncall> {\"name\": \"get_weather\", "
                        "\"arguments\": '{city: Paris}'} <|endoftext|>\n\n\nFUNCTION RESPONSE: {}\n")
    assert error_code(lambda r: after_tool_result(glaive(r)), broken) == "bad_tool_call"
    with pytest.raises(ValueError):
        adapt_row("glaive", plain, "nope")


def test_b1_after_tool_result_on_bundled_rows():
    c = collections.Counter()
    for row in load("B1"):
        try:
            sp = after_tool_result(glaive(row))
        except SourceRowError as e:
            c[e.code] += 1
            continue
        c["ok"] += 1
        assert sp.messages[-1]["role"] == "tool"
        declared = {t["function"]["name"] for t in sp.tools}
        for m in sp.messages:
            for call in m.get("tool_calls", []):
                assert call["function"]["name"] in declared
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
    assert c == {"ok": 28, "no_tool_result": 7, "empty_user_turn": 1}


def test_glaive_empty_user_turn_and_bad_rows():
    assert error_code(first("glaive"), glaive_row([WEATHER], "USER: \n\n\nASSISTANT: Hello! <|endoftext|>\n\n\nUSER: hi\n")) \
        == "empty_user_turn"
    assert error_code(first("glaive"), glaive_row([WEATHER], "USER:    \n")) == "empty_user_turn"
    assert error_code(first("glaive"), {"system": GLAIVE_TOOLS_PREAMBLE + '{"name": "f", "description": ',
                               "chat": "USER: hi\n"}) == "bad_tool_json"
    assert error_code(first("glaive"), {"system": GLAIVE_TOOLS_PREAMBLE + '{"description": "no name"}',
                               "chat": "USER: hi\n"}) == "bad_tool_json"
    assert error_code(first("glaive"), {"system": GLAIVE_TOOLS_PREAMBLE + '{"name": "f", "parameters": [1]}',
                               "chat": "USER: hi\n"}) == "bad_tool_json"
    assert error_code(first("glaive"), {"system": GLAIVE_NO_TOOLS}) == "missing_field"
    assert error_code(first("glaive"), {"system": GLAIVE_NO_TOOLS, "chat": ["USER: hi"]}) == "wrong_type"
    assert error_code(first("glaive"), {"system": GLAIVE_NO_TOOLS, "chat": "hello there"}) == "no_user_turn"
    assert error_code(first("glaive"), {"system": GLAIVE_NO_TOOLS, "chat": "ASSISTANT: hi <|endoftext|>\nUSER: x\n"}) \
        == "starts_with_assistant"
    assert error_code(first("glaive"), "not a row") == "wrong_type"


# ------------------------------------------------------------------------------------ B2/B3 input

def test_input_field():
    adapter = first("input_field")
    sp = adapter({"id": "abc123", "input": "Write a function.", "output": "..."})
    assert sp == SourcePrompt("abc123", [{"role": "user", "content": "Write a function."}], None,
                        {"reasoning": None, "content": "..."})
    assert adapter({"id": 17, "input": "x"}).source_id == "17"
    assert error_code(adapter, {"id": "a"}) == "missing_field"
    assert error_code(adapter, {"input": "x"}) == "missing_field"
    assert error_code(adapter, {"id": "a", "input": None}) == "missing_field"
    assert error_code(adapter, {"id": "a", "input": 42}) == "wrong_type"
    assert error_code(adapter, {"id": True, "input": "x"}) == "wrong_type"
    assert error_code(adapter, {"id": "a", "input": " \n\t"}) == "empty_user_turn"
    assert error_code(adapter, {"id": "a", "input": "-"}) == "placeholder_input"        # OCR split_1


def test_b2_rows_keep_the_input_verbatim():
    rows = load("B2")
    for row in rows:
        if row["input"].strip():
            sp = first("input_field")(row)
            assert sp.source_id == row["id"]
            assert sp.messages == [{"role": "user", "content": row["input"]}]
        assert 0 <= float(row["average_test_score"]) <= 1
        assert isinstance(json.loads(row["unit_tests"]), list)
        assert set(json.loads(row["llm_judgement"])) == {
            "requirement_conformance", "logical_correctness", "edge_case_consideration"}


def test_b3_has_repeated_questions_with_one_id_each():
    rows = load("B3")
    ok, _ = outcomes("B3")
    by_input = collections.Counter(r["input"] for r in rows)
    assert len(by_input) == 20 and max(by_input.values()) == 3    # as scripts/make_samples.py writes B3's samples
    assert len({sp.source_id for sp in ok}) == len(by_input)      # dedup by input == dedup by id
    assert {r["split"] for r in rows} == {"train"}


# ------------------------------------------------------------------------------------ B4/B6 messages

def test_messages_first_user_turn_and_ids():
    adapter = first("messages")
    mot = {"messages": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}],
           "num_tokens": 10, "source": "x"}
    sp = adapter(mot)
    assert sp.messages == [{"role": "user", "content": "What is 2+2?"}]
    assert sp.source_id == hashlib.sha1(b"What is 2+2?").hexdigest()[:16]
    uc = {"prompt": "hi", "prompt_id": "f" * 64, "messages": [{"content": "hi", "role": "user"},
                                                              {"content": "hello", "role": "assistant"},
                                                              {"content": "second", "role": "user"}]}
    sp = adapter(uc)
    assert sp.source_id == "f" * 64
    assert sp.messages == [{"role": "user", "content": "hi"}]
    withsys = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}]}
    assert adapter(withsys).messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}]


def test_messages_non_string_content():
    adapter = first("messages")
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Line one."},
                                                       {"type": "text", "text": "Line two."}]}]}
    assert adapter(parts).messages[0]["content"] == "Line one.\nLine two."
    assert adapter({"messages": [{"role": "user", "content": ["a", "b"]}]}).messages[0]["content"] == "a\nb"
    for bad in (None, 42, {"text": "x"}, [{"type": "image_url", "image_url": {"url": "x"}}], [1]):
        assert error_code(adapter, {"messages": [{"role": "user", "content": bad}]}) == "wrong_type", bad
    assert error_code(adapter, {"messages": [{"role": "user", "content": [{"type": "text", "text": "  "}]}]}) \
        == "empty_user_turn"


def test_messages_errors():
    adapter = first("messages")
    assert error_code(adapter, {"prompt": "x"}) == "missing_field"
    assert error_code(adapter, {"messages": "hi"}) == "wrong_type"
    assert error_code(adapter, {"messages": []}) == "no_user_turn"
    assert error_code(adapter, {"messages": ["hi"]}) == "wrong_type"
    assert error_code(adapter, {"messages": [{"content": "hi"}]}) == "missing_field"
    assert error_code(adapter, {"messages": [{"role": "user"}]}) == "missing_field"
    assert error_code(adapter, {"messages": [{"role": "user", "content": ""}]}) == "empty_user_turn"
    assert error_code(adapter, {"messages": [{"role": "assistant", "content": "a"}]}) == "starts_with_assistant"
    assert error_code(adapter, {"messages": [{"role": "system", "content": "s"}]}) == "no_user_turn"
    assert error_code(adapter, {"messages": [{"role": "narrator", "content": "s"}]}) == "unknown_role"
    assert error_code(adapter, {"prompt_id": "", "messages": [{"role": "user", "content": "q"}]}) == "missing_field"


def test_b4_and_b6_bundled_non_string_content():
    b4 = load("B4")
    listed = [r for r in b4 if isinstance(r["messages"][0]["content"], list)]
    assert len(listed) == 1
    assert first("messages")(listed[0]).messages[0]["content"] == "\n".join(
        p["text"] for p in listed[0]["messages"][0]["content"])
    b6 = load("B6")
    assert sum(isinstance(r["messages"][0]["content"], list) for r in b6) == 1
    assert sum(r["messages"][0]["content"] is None for r in b6) == 1
    for sp, row in zip(outcomes("B6")[0], [r for r in b6 if r["messages"][0]["content"] is not None]):
        assert sp.source_id == row["prompt_id"]


# ------------------------------------------------------------------------------------ B5 openthoughts

SKY = "Your role as an assistant involves thoroughly exploring questions ... Now, try to solve the following question"


def test_openthoughts_drops_the_sky_t1_system_prompt():
    adapter = first("openthoughts")
    row = {"system": SKY, "conversations": [{"from": "user", "value": "What is 3*7?"},
                                            {"from": "assistant", "value": "<|begin_of_thought|>..."}]}
    sp = adapter(row)
    assert sp.messages == [{"role": "user", "content": "What is 3*7?"}]
    assert sp.tools is None
    # OpenThoughts3 style `human`/`gpt` turns work the same
    row3 = {"conversations": [{"from": "human", "value": "What is 3*7?"}, {"from": "gpt", "value": "21"}]}
    sp3 = adapter(row3)             # the same prompt (its upstream answer is the row's own)
    assert (sp3.source_id, sp3.messages, sp3.tools) == (sp.source_id, sp.messages, sp.tools)


def test_openthoughts_duplicates_share_one_source_id():
    rows = load("B5")
    assert all(r["system"].startswith("Your role as an assistant") for r in rows)
    ok, _ = outcomes("B5")
    assert all(m["role"] != "system" for sp in ok for m in sp.messages)
    counts = collections.Counter(sp.source_id for sp in ok)
    assert sorted(n for n in counts.values() if n > 1) == [3, 4, 4]
    by_id = collections.defaultdict(set)
    for sp in ok:
        by_id[sp.source_id].add(sp.messages[0]["content"])
    assert all(len(texts) == 1 for texts in by_id.values())


def test_openthoughts_errors():
    adapter = first("openthoughts")
    assert error_code(adapter, {"system": SKY}) == "missing_field"
    assert error_code(adapter, {"conversations": [{"from": "assistant", "value": "x"}]}) == "starts_with_assistant"
    assert error_code(adapter, {"conversations": [{"from": "user", "value": "   "}]}) == "empty_user_turn"
    assert error_code(adapter, {"conversations": [{"from": "user", "value": 5}]}) == "wrong_type"
    assert error_code(adapter, {"conversations": [{"value": "x"}]}) == "missing_field"
    assert error_code(adapter, {"conversations": [{"from": "robot", "value": "x"}]}) == "unknown_role"


# ------------------------------------------------------------------------------------ B7 sharegpt

def test_sharegpt_roles():
    adapter = first("sharegpt")
    for who in ("gpt", "chatgpt", "bing", "bard"):
        row = {"id": "x_0", "conversations": [{"from": "human", "value": "Hi"}, {"from": who, "value": "Hello"}]}
        assert adapter(row).messages == [{"role": "user", "content": "Hi"}]
        starts = {"id": "x_1", "conversations": [{"from": who, "value": "...continued"},
                                                 {"from": "human", "value": "thanks"}]}
        assert error_code(adapter, starts) == "starts_with_assistant"
        after_system = {"id": "x_2", "conversations": [{"from": "system", "value": "S"},
                                                       {"from": who, "value": "..."}]}
        assert error_code(adapter, after_system) == "starts_with_assistant"
    row = {"id": "s_0", "conversations": [{"from": "system", "value": "Talk like a pirate."},
                                          {"from": "human", "value": "Boil an egg?"}, {"from": "gpt", "value": "Arr"}]}
    sp = adapter(row)
    assert sp.source_id == "s_0"
    assert sp.messages == [{"role": "system", "content": "Talk like a pirate."},
                           {"role": "user", "content": "Boil an egg?"}]
    assert error_code(adapter, {"id": "e", "conversations": [{"from": "human", "value": ""}]}) == "empty_user_turn"
    assert error_code(adapter, {"id": "e", "conversations": [{"from": "alien", "value": "x"}]}) == "unknown_role"
    assert error_code(adapter, {"id": "e", "conversations": []}) == "no_user_turn"
    assert error_code(adapter, {"id": "e", "conversations": [{"from": "system", "value": "x"}]}) == "no_user_turn"
    assert error_code(adapter, {"conversations": [{"from": "human", "value": "x"}]}) == "missing_field"


def test_b7_bundled_roles():
    rows = load("B7")
    froms = collections.Counter(t["from"] for r in rows for t in r["conversations"])
    assert set(froms) == {"human", "gpt", "chatgpt", "bing", "bard", "system"}
    firsts = collections.Counter(r["conversations"][0]["from"] for r in rows)
    assert firsts["gpt"] == 2 and firsts["chatgpt"] == 1 and firsts["system"] == 1
    ok, _ = outcomes("B7")
    assert sum(sp.messages[0]["role"] == "system" for sp in ok) == 1


def conversations(config: str) -> list[list[dict]]:
    """The bundled rows of a config read whole by its adapter (rows it rejects left out)."""
    adapter = ADAPTERS[PARTITIONS[config].adapter]
    out = []
    for row in load(config):
        try:
            conv = adapter(row)
        except SourceRowError:
            continue
        if conv.error is None:
            out.append(conv.messages)
    return out


@pytest.mark.parametrize("config", ["B6", "B7"])
def test_bundled_chat_conversations_are_multi_turn_like_their_upstreams(config):
    """The demo continues B6/B7 conversations on the model's own turns (policy own_history): like ultrachat_200k
    and ShareGPT, most bundled conversations have 2-3 user turns, each after the source's assistant answer."""
    convs = conversations(config)
    users = collections.Counter(sum(m["role"] == "user" for m in msgs) for msgs in convs)
    assert set(users) <= {1, 2, 3}
    assert users[2] + users[3] >= 0.75 * len(convs) and users[3] >= 3
    for msgs in convs:
        roles = [m["role"] for m in msgs if m["role"] != "system"]
        assert roles == ["user", "assistant"] * (len(roles) // 2)


def test_b1_bundled_tool_loops_on_tools_without_parameters_go_on():
    """Calls without arguments are the ones the tiny model makes exactly as the source does, so the source's tool
    result follows the model's own call (own_history): several such loops, each answered and followed by another
    USER turn, as most glaive rows go on after the tool's answer."""
    loops = 0
    for msgs in conversations("B1"):
        roles = [m["role"] for m in msgs]
        first_call = next((m for m in msgs if m.get("tool_calls")), None)
        if first_call is None or json.loads(first_call["tool_calls"][0]["function"]["arguments"]) != {}:
            continue
        assert roles[:5] == ["user", "assistant", "tool", "assistant", "user"]
        assert msgs[0]["content"] in POOL["example_requests"][first_call["tool_calls"][0]["function"]["name"]]
        loops += 1
    assert loops >= 6


# ------------------------------------------------------------------------------------ B8 sweagent

def test_sweagent_system_and_first_user():
    adapter = first("sweagent")
    row = {"instance_id": "psf__requests-2317", "model_name": "swe-agent-llama-70b", "target": True,
           "trajectory": [
               {"role": "system", "text": None, "system_prompt": "SETTING: ...", "mask": False, "cutoff_date": "01.01.2023"},
               {"role": "user", "text": "ISSUE: fix it", "system_prompt": None, "mask": False, "cutoff_date": "01.01.2023"},
               {"role": "ai", "text": "DISCUSSION ...", "system_prompt": None, "mask": True, "cutoff_date": "01.01.2023"},
               {"role": "user", "text": "observation", "system_prompt": None, "mask": False, "cutoff_date": "01.01.2023"}],
           "exit_status": "submitted", "generated_patch": "", "eval_logs": ""}
    sp = adapter(row)
    assert sp.messages == [{"role": "system", "content": "SETTING: ..."}, {"role": "user", "content": "ISSUE: fix it"}]
    assert sp.source_id.startswith("psf__requests-2317/swe-agent-llama-70b/")
    assert adapter(row).source_id == sp.source_id
    # the system prompt in `text` instead of `system_prompt` is found too
    alt = json.loads(json.dumps(row))
    alt["trajectory"][0].update(text="SETTING: ...", system_prompt=None)
    assert adapter(alt).messages == sp.messages
    # another model on the same instance is another row key
    other = dict(row, model_name="swe-agent-llama-8b")
    assert adapter(other).source_id != sp.source_id
    # errors
    no_user = dict(row, trajectory=row["trajectory"][:1])
    assert error_code(adapter, no_user) == "no_user_turn"
    ai_first = dict(row, trajectory=[row["trajectory"][2], row["trajectory"][1]])
    assert error_code(adapter, ai_first) == "starts_with_assistant"
    empty = json.loads(json.dumps(row))
    empty["trajectory"][1]["text"] = "  "
    assert error_code(adapter, empty) == "empty_user_turn"
    assert error_code(adapter, {k: v for k, v in row.items() if k != "instance_id"}) == "missing_field"
    assert error_code(adapter, dict(row, trajectory="x")) == "wrong_type"


def test_b8_bundled_has_two_overlong_system_prompts():
    ok, _ = outcomes("B8")
    systems = [sp.messages[0]["content"] for sp in ok]
    assert all(sp.messages[0]["role"] == "system" and sp.messages[1]["role"] == "user" for sp in ok)
    assert sorted(len(s) > 4000 for s in systems).count(True) == 2
    assert len({sp.source_id for sp in ok}) == len(ok)


# ------------------------------------------------------------------------------------ helpers

def test_content_text():
    assert content_text("  keep  ", "x") == "  keep  "
    assert content_text([{"type": "text", "text": "a"}, {"text": "b"}], "x") == "a\nb"
    with pytest.raises(SourceRowError) as info:
        content_text(3.5, "the user turn")
    assert info.value.code == "wrong_type" and "the user turn" in info.value.message


def test_glaive_history_call_ids_are_numbered_across_the_conversation():
    """Kimi numbers tool-call ids over the whole conversation (vLLM and SGLang count the calls already
    in the history): a second call in a later turn is `:1`, and its result refers to `:1`."""
    chat = ("USER: Weather in Rome?\n\n\n"
            "ASSISTANT: <functioncall> {\"name\": \"get_weather\", \"arguments\": '{\"city\": \"Rome\"}'} "
            "<|endoftext|>\n\n\nFUNCTION RESPONSE: {\"t\": 20}\n\n\n"
            "ASSISTANT: 20 degrees. <|endoftext|>\n\n\n"
            "USER: Now play a song.\n\n\n"
            "ASSISTANT: <functioncall> {\"name\": \"play_music\", \"arguments\": '{\"song\": \"Volare\"}'} "
            "<|endoftext|>\n\n\nFUNCTION RESPONSE: {\"status\": \"playing\"}\n\n\n")
    msgs = glaive(glaive_row([WEATHER, MUSIC], chat)).messages
    ids = [c["id"] for m in msgs for c in m.get("tool_calls") or []]
    assert ids == ["functions.get_weather:0", "functions.play_music:1"]
    assert [m["tool_call_id"] for m in msgs if m["role"] == "tool"] == ids


# -- the columns each adapter declares ----------------------------------------------------------------

@pytest.mark.parametrize("config", list(PARTITIONS))
def test_declared_columns_cover_the_upstream_schema(config):
    """The bundled rows are in the upstream's exact schema: none of their columns is unknown to the adapter, so a
    source in that schema gets no warning."""
    from kimi_eagle_data.sources.adapters import adapter_columns

    cols = adapter_columns(PARTITIONS[config].adapter)
    seen = {k for row in load(config) for k in row}
    assert cols.ignored(seen) == []
    assert set(cols.required) <= seen


def test_declared_columns_name_what_an_adapter_drops():
    from kimi_eagle_data.sources.adapters import adapter_columns

    row = {"id": "c1", "messages": [{"role": "user", "content": "hi"}], "tools": [], "extra": 1}
    assert adapter_columns("messages").ignored(row) == ["id", "tools", "extra"]
    assert adapter_columns("messages").reads() == "messages; optional prompt_id"
    assert adapter_columns("chat").ignored(row) == ["extra"]
    assert adapter_columns("chat", id_field="extra").ignored(row) == []
    assert adapter_columns("chat").reads().startswith("messages or conversations; optional system, tools")
    assert adapter_columns("glaive").ignored(row) == ["id", "messages", "tools", "extra"]
