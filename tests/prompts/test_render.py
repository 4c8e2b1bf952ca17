"""Prompt rendering goes through the model's own chat template, tools passed natively."""

from __future__ import annotations

from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.prompts.prepare import prepare_rows, sample_id
from kimi_eagle_data.profile import TINY_KIMI, ProfileTokens
from kimi_eagle_data.sources.readers import iter_jsonl
from kimi_eagle_data.prompts.tokenizer import render_prompt

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
    tokens = ProfileTokens.from_tokenizer(TINY_KIMI, tiny_tokenizer)
    for name in TINY_KIMI.structural_tokens().values():
        assert tiny_tokenizer.encode(name, add_special_tokens=False) == [tokens.ids[name]]
    assert len(set(tokens.ids.values())) == len(tokens.ids)


def test_prepare_rejects_over_long_prompts_with_a_reason(tiny_tokenizer):
    part = PARTITIONS["B6"]
    gen = tiny_tokenizer.encode(TINY_KIMI.generation_prompt, add_special_tokens=False)
    rows = [(1, {"prompt": "a", "prompt_id": "p1", "messages": [{"role": "user", "content": "short question"}]}),
            (2, {"prompt": "b", "prompt_id": "p2", "messages": [{"role": "user", "content": "word " * 400}]})]
    records, rejections, report = prepare_rows(part, rows, tiny_tokenizer, gen_prompt_ids=gen, max_new_tokens=192,
                                               max_seq_len=512, source_desc="test")
    assert [r.source_id for r in records] == ["p1"]
    assert records[0].id == sample_id("B6", part.upstream, "p1", part.prompt_rule)
    assert records[0].prompt_ids[-len(gen):] == gen
    assert [(r.source_id, r.reason) for r in rejections] == [("p2", "prompt_too_long")]
    assert "max_seq_len 512" in rejections[0].message
    assert report.selected == 2 and report.prepared == 1


def test_bundled_b1_prompts_declare_tools(tiny_tokenizer):
    part = PARTITIONS["B1"]
    gen = tiny_tokenizer.encode(TINY_KIMI.generation_prompt, add_special_tokens=False)
    records, _, _ = prepare_rows(part, iter_jsonl(part.sample_file), tiny_tokenizer, gen_prompt_ids=gen,
                                 max_new_tokens=192, max_seq_len=512, source_desc="samples")
    with_tools = [r for r in records if r.tools]
    assert len(with_tools) >= len(records) // 2
    for r in with_tools:
        text = tiny_tokenizer.decode(r.prompt_ids)
        assert text.startswith("<|im_system|>tool_declare<|im_middle|>")
        assert all(t["function"]["name"] in text for t in r.tools)
