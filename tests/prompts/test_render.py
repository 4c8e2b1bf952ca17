"""Prompt rendering goes through the model's own chat template, tools passed natively."""

from __future__ import annotations

from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.prompts.prepare import PromptModes, prepare_rows, sample_id
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS, k2_tokens
from kimi_eagle_data.sources.readers import iter_jsonl
from kimi_eagle_data.formats.kimi_k2.render import render_prompt

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


def test_plain_prompt_renders_like_k25(tiny_tokenizer):
    ids = render_prompt(tiny_tokenizer, [{"role": "user", "content": "hi"}], None)
    assert tiny_tokenizer.decode(ids) == "<|im_user|>user<|im_middle|>hi<|im_end|><|im_assistant|>assistant<|im_middle|><think>"
    assert ids[-1] == tiny_tokenizer.convert_tokens_to_ids("<think>")


def test_tools_are_declared_natively_before_the_conversation(tiny_tokenizer):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
    text = tiny_tokenizer.decode(render_prompt(tiny_tokenizer, messages, TOOLS))
    head = "<|im_system|>tool_declare<|im_middle|>"
    assert text.startswith(head)
    declared = text[len(head):text.index("<|im_end|>")]
    # K2.5's TypeScript-style declaration (the tokenizer class computes tools_ts_str), not JSON
    assert declared == ("# Tools\n\n## functions\nnamespace functions {\n// Weather for a city\n"
                        "type get_weather = (_: {\n  city: string\n}) => any;\n}\n")
    # the system message follows as its own turn; tools are not pasted into it
    rest = text[text.index("<|im_end|>") + len("<|im_end|>"):]
    assert rest.startswith("<|im_system|>system<|im_middle|>Be brief.<|im_end|>")
    assert "get_weather" not in rest
    assert text.endswith("<|im_assistant|>assistant<|im_middle|><think>")


def test_special_tokens_are_single_ids(tiny_tokenizer):
    tokens = k2_tokens(tiny_tokenizer)
    for name in K2_TOKENS.structural_tokens().values():
        assert tiny_tokenizer.encode(name, add_special_tokens=False) == [tokens.ids[name]]
    assert len(set(tokens.ids.values())) == len(tokens.ids)


def test_prepare_rejects_over_long_prompts_with_a_reason(tiny_tokenizer):
    part = PARTITIONS["B6"]
    gen = tiny_tokenizer.encode(K2_TOKENS.generation_prompt, add_special_tokens=False)
    rows = [(1, {"prompt": "a", "prompt_id": "p1", "messages": [{"role": "user", "content": "short question"}]}),
            (2, {"prompt": "b", "prompt_id": "p2", "messages": [{"role": "user", "content": "word " * 400}]})]
    modes = PromptModes.of(TINY_KIMI, tiny_tokenizer, KIMI_K2_FORMAT, gen)
    records, rejections, report = prepare_rows(part, rows, tiny_tokenizer, modes=modes, max_new_tokens=192,
                                               max_seq_len=512, source_desc="test")
    assert [r.source_id for r in records] == ["p1"]
    assert records[0].id == sample_id("B6", part.upstream, "p1", part.prompt_rule)
    assert records[0].prompt_ids[-len(gen):] == gen
    assert [(r.source_id, r.reason) for r in rejections] == [("p2", "prompt_too_long")]
    assert "max_seq_len 512" in rejections[0].message
    assert report.selected == 2 and report.prepared == 1


def test_bundled_b1_prompts_declare_tools(tiny_tokenizer):
    part = PARTITIONS["B1"]
    gen = tiny_tokenizer.encode(K2_TOKENS.generation_prompt, add_special_tokens=False)
    records, _, _ = prepare_rows(part, iter_jsonl(part.sample_file), tiny_tokenizer,
                                 modes=PromptModes.of(TINY_KIMI, tiny_tokenizer, KIMI_K2_FORMAT, gen),
                                 max_new_tokens=192, max_seq_len=512, source_desc="samples")
    with_tools = [r for r in records if r.tools]
    assert len(with_tools) >= len(records) // 2
    for r in with_tools:
        text = tiny_tokenizer.decode(r.prompt_ids)
        assert text.startswith("<|im_system|>tool_declare<|im_middle|>")
        assert all(t["function"]["name"] in text for t in r.tools)


# -- modes: instant prompts go through the template's own switch ---------------------------------------------

def _conversations():
    from tests.prompts.test_tiny_tokenizer import CASES

    for name, (messages, tools, _kwargs, _want) in sorted(CASES.items()):
        yield name, messages, tools


def test_instant_render_is_the_templates_thinking_false(tiny_tokenizer):
    """prepare's renderer in instant mode gives exactly the ids the chat template gives with thinking=False, and
    in thinking mode those of the template's default; the two differ only by the closing `</think>`."""
    import copy

    think_close = tiny_tokenizer.convert_tokens_to_ids("</think>")
    for name, messages, tools in _conversations():
        instant = render_prompt(tiny_tokenizer, copy.deepcopy(messages), copy.deepcopy(tools), "instant")
        want = tiny_tokenizer.apply_chat_template(copy.deepcopy(messages), tools=copy.deepcopy(tools),
                                                  add_generation_prompt=True, tokenize=True, return_dict=False,
                                                  thinking=False)
        assert instant == list(want), name
        assert tiny_tokenizer.decode(instant).endswith("<|im_assistant|>assistant<|im_middle|><think></think>")
        thinking = render_prompt(tiny_tokenizer, copy.deepcopy(messages), copy.deepcopy(tools))
        assert render_prompt(tiny_tokenizer, copy.deepcopy(messages), copy.deepcopy(tools), "thinking") == thinking
        if not any(m["role"] == "assistant" for m in messages):   # past reasoning differs between the modes
            assert instant == thinking + [think_close], name


def test_tiny_template_equals_the_real_k25_template_in_both_modes(tiny_tokenizer):
    """The tiny model's template renders as Kimi-K2.5's real chat_template.jinja, thinking=False included.
    The real template is not part of this repository: point KIMI_K25_CHAT_TEMPLATE at a copy of it (the public
    copy the README names) to run this comparison."""
    import copy
    import os

    import pytest

    path = os.environ.get("KIMI_K25_CHAT_TEMPLATE")
    if not path:
        pytest.skip("KIMI_K25_CHAT_TEMPLATE is not set (a copy of Kimi-K2.5's chat_template.jinja)")
    real = open(path, encoding="utf-8").read()
    for name, messages, tools in _conversations():
        for kwargs in ({}, {"thinking": False}, {"thinking": True}):
            ours = tiny_tokenizer.apply_chat_template(copy.deepcopy(messages), tools=copy.deepcopy(tools),
                                                      add_generation_prompt=True, tokenize=False, **kwargs)
            theirs = tiny_tokenizer.apply_chat_template(copy.deepcopy(messages), tools=copy.deepcopy(tools),
                                                        add_generation_prompt=True, tokenize=False,
                                                        chat_template=real, **kwargs)
            assert ours == theirs, (name, kwargs)


def test_prepare_draws_modes_per_prompt_and_keeps_thinking_ids(tiny_tokenizer, tmp_path):
    """With an instant share, each prompt's mode is drawn from its thinking id: the thinking prompts keep exactly
    the ids (and prompts) they have without modes; instant ones get other ids and the thinking=False rendering."""
    import dataclasses

    from kimi_eagle_data.prompts.prepare import PromptModes
    from kimi_eagle_data.sources.modes import ModePlan

    part = PARTITIONS["B6"]
    rows = list(iter_jsonl(part.sample_file))
    modes = PromptModes.of(TINY_KIMI, tiny_tokenizer, KIMI_K2_FORMAT)
    kw = dict(max_new_tokens=64, max_seq_len=510,
              source_desc="samples", modes=modes)
    base, _, _ = prepare_rows(part, rows, tiny_tokenizer, **kw)
    mixed, _, report = prepare_rows(dataclasses.replace(part, modes=ModePlan(instant_share=0.5)), rows,
                                    tiny_tokenizer, **kw)
    assert {r.mode for r in base} == {"thinking"} and {r.mode for r in mixed} == {"thinking", "instant"}
    by_source = {r.source_id: r for r in base}
    for r in mixed:
        b = by_source[r.source_id]
        if r.mode == "thinking":
            assert (r.id, r.prompt_ids, r.temperature, r.top_p) == (b.id, b.prompt_ids, 1.0, 0.95)
        else:
            assert r.id != b.id and r.id == sample_id(part.config, part.upstream, r.source_id, part.id_rule, "instant")
            assert r.prompt_ids == render_prompt(tiny_tokenizer, r.messages, r.tools, "instant")
            assert (r.temperature, r.top_p) == (0.6, 0.95)      # the profile's instant defaults
    again, _, _ = prepare_rows(dataclasses.replace(part, modes=ModePlan(instant_share=0.5)), rows, tiny_tokenizer,
                               **kw)
    assert [(r.id, r.mode) for r in again] == [(r.id, r.mode) for r in mixed]      # seeded, not random
    assert report.prepared == len(mixed) == len(base)
