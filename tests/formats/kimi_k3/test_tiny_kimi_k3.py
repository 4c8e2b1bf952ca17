"""The embedded tiny Kimi-K3 model: its tokenizer loads offline through trust_remote_code with K3's special-token
layout, its `apply_chat_template` gives, for every golden conversation, the ids of the launch encoder's segments
encoded one by one (tests/golden/k3/expected.json), and its model generates K3's assistant-turn structure."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.formats.kimi_k3.normalize import K3FormatError

ROOT = Path(__file__).resolve().parents[3]
TINY_K3_DIR = ROOT / "kimi_eagle_data" / "assets" / "tiny-kimi-k3"
GOLDEN = ROOT / "tests" / "golden" / "k3"
CONVERSATIONS = json.loads((GOLDEN / "conversations.json").read_text(encoding="utf-8"))["conversations"]
EXPECTED = json.loads((GOLDEN / "expected.json").read_text(encoding="utf-8"))["expected"]
RENDERED = [c for c in CONVERSATIONS if "error" not in EXPECTED[c["name"]] and "we_refuse" not in c]
REFUSED = [c for c in CONVERSATIONS if c not in RENDERED]

BASE = 1792
# K3's named reserved ids as offsets from its base vocabulary (K3: 163584 + offset), and the K2-era strings.
K3_LAYOUT = {"[BOS]": 0, "[EOS]": 1, "<|end_of_msg|>": 2, "<|open|>": 3, "<|close|>": 4, "<|sep|>": 5,
             "<|media_pad|>": 21, "[UNK]": 254, "[PAD]": 255}
K2_ERA = ("<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>")


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(TINY_K3_DIR), trust_remote_code=True)


def k3_kwargs(request: dict) -> dict:
    """A golden request (render_segments' arguments) as K3 tokenizer keywords."""
    kwargs = {k: request[k] for k in ("tools", "thinking", "add_generation_prompt", "response_format", "tool_choice")
              if k in request}
    if "effort" in request:          # absent: the tokenizer's default, max
        kwargs["thinking_effort"] = request["effort"]
    return kwargs


def per_segment_ids(encoding, segments) -> list[int]:
    """Each golden segment encoded on its own, as K3's tokenizer does, straight through tiktoken."""
    ids = []
    for text, special in segments:
        ids += encoding.encode(text, allowed_special="all") if special else encoding.encode(text, disallowed_special=())
    return ids


def test_loads_offline_through_trust_remote_code_with_k3s_layout(tok):
    code = subprocess.run(
        [sys.executable, "-c", "import sys; from transformers import AutoTokenizer; "
         "t = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True); print(type(t).__name__, len(t))",
         str(TINY_K3_DIR)], capture_output=True, text=True, timeout=300,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin",
             "HF_HOME": "/nonexistent-hf-home", "HOME": str(ROOT)})
    assert code.returncode == 0, code.stderr[-2000:]
    assert code.stdout.split() == ["TinyKimiK3Tokenizer", "2048"]
    vocab = tok.get_vocab()
    for name, offset in K3_LAYOUT.items():
        assert vocab[name] == BASE + offset and tok.decode([BASE + offset]) == name
    # The K2-era strings are ids too (a K3 completion holding one is a reject), at offsets no K3 marker has.
    old = {vocab[s] for s in K2_ERA}
    assert len(old) == len(K2_ERA) and old.isdisjoint(BASE + o for o in K3_LAYOUT.values())
    assert len(tok.encode("<|kimi_image_placeholder|>")) > 1          # not a token in K3 either
    assert tok.chat_template is None                                  # K3 ships none: its code renders


@pytest.mark.parametrize("conversation", RENDERED, ids=[c["name"] for c in RENDERED])
def test_apply_chat_template_gives_the_golden_segments_ids(tok, conversation):
    request, expected = conversation["request"], EXPECTED[conversation["name"]]["segments"]
    ids = tok.apply_chat_template(request["messages"], tokenize=True, **k3_kwargs(request))
    assert ids == per_segment_ids(tok.model, expected)
    assert tok.apply_chat_template(request["messages"], **k3_kwargs(request)) == "".join(t for t, _ in expected)


def test_golden_prompts_ids_are_per_segment_not_the_joined_texts(tok):
    """On these ranks some golden prompts tokenize differently joined (a typed marker, BPE across a boundary)."""
    differ = [c["name"] for c in RENDERED
              if tok.apply_chat_template(c["request"]["messages"], tokenize=True, **k3_kwargs(c["request"]))
              != tok.model.encode("".join(t for t, _ in EXPECTED[c["name"]]["segments"]), allowed_special="all")]
    assert "typed_special_strings" in differ, differ


@pytest.mark.parametrize("conversation", REFUSED, ids=[c["name"] for c in REFUSED])
def test_what_k3_cannot_render_is_one_line(tok, conversation):
    request = conversation["request"]
    with pytest.raises(K3FormatError) as refused:
        tok.apply_chat_template(request["messages"], tokenize=True, **k3_kwargs(request))
    assert isinstance(refused.value, KimiDataError) and "\n" not in str(refused.value)


def test_return_shapes_follow_k3s_tokenizer(tok):
    chat = [{"role": "user", "content": "hi"}]
    ids = tok.apply_chat_template(chat, tokenize=True)
    assert isinstance(ids, list) and isinstance(ids[0], int)
    as_dict = tok.apply_chat_template(chat, tokenize=True, return_dict=True)
    assert as_dict["input_ids"] == [ids] and as_dict["attention_mask"] == [[1] * len(ids)]
    assert tok.apply_chat_template([chat, chat], tokenize=True) == [ids, ids]
    assert tok.apply_chat_template(chat, tokenize=True, return_tensors="pt").shape == (1, len(ids))
    off = tok.apply_chat_template(chat, thinking=False)
    assert off.endswith('<|open|>message role="assistant"<|sep|><|open|>response<|sep|>') and "thinking_effort" not in off
    low = tok.apply_chat_template(chat, thinking_effort="low")
    assert "`thinking_effort=low`" in low and low.endswith("<|open|>think<|sep|>")


def _k3_check():
    spec = importlib.util.spec_from_file_location("k3_check", ROOT / "scripts" / "tiny_kimi_k3" / "k3_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "required": ["city"],
                   "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}}}}


@pytest.mark.parametrize("setting", ["max", "low", "off"])
def test_the_model_generates_a_k3_assistant_turn(tok, setting):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(TINY_K3_DIR), dtype=torch.float32)
    end = tok.convert_tokens_to_ids("<|end_of_msg|>")
    assert model.config.eos_token_id == end == model.generation_config.eos_token_id
    kwargs = {"thinking": False} if setting == "off" else {"thinking_effort": setting}
    chat = [{"role": "user", "content": "What is the weather in Paris? Use city Paris."}]
    prompt = tok.apply_chat_template(chat, tools=[TOOL], tokenize=True, **kwargs)
    torch.manual_seed(0)
    out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=256)[0, len(prompt):].tolist()
    assert out[-1] == end, tok.decode(out)
    issues = _k3_check().check_completion(out, "stop", tok, {"get_weather": TOOL["function"]["parameters"]},
                                          thinking=setting != "off")
    assert issues == [], tok.decode(out)
