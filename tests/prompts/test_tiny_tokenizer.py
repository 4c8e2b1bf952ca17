"""The embedded tiny tokenizer ships the way Kimi-K2.5's does (tiktoken ranks + our class through trust_remote_code,
K2.5's special-token layout), renders conversations to the same text as K2.5's real template, decodes fast through
its tiktoken core, and loading any tokenizer fails in one line for a reason we can name."""

from __future__ import annotations

import copy
import inspect
import json
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.formats.kimi_k2.tokens import k2_tokens
from kimi_eagle_data.decoding import SegmentDecoder, fast_decoder
from kimi_eagle_data.prompts.tokenizer import TokenizerLoadError, open_tokenizer, tokenizer_fingerprint

BASE = 1792   # BPE ranks in tiktoken.model; 256 reserved special ids follow

# Offsets of K2.5's named reserved ids from its base vocabulary (163,584), and whether each is `special`.
LAYOUT = {"[BOS]": (0, True), "[EOS]": (1, True), "<|im_end|>": (2, True), "<|im_user|>": (3, True),
          "<|im_assistant|>": (4, True), "<|im_system|>": (10, True),
          "<|tool_calls_section_begin|>": (11, False), "<|tool_calls_section_end|>": (12, False),
          "<|tool_call_begin|>": (13, False), "<|tool_call_argument_begin|>": (14, False),
          "<|tool_call_end|>": (15, False), "<|im_middle|>": (17, True), "<|media_begin|>": (18, True),
          "<|media_content|>": (19, True), "<|media_end|>": (20, True), "<|media_pad|>": (21, True),
          "<think>": (22, False), "</think>": (23, False), "[UNK]": (254, True), "[PAD]": (255, True)}

# ---- conversation -> text, each checked against Kimi-K2.5's real chat_template.jinja under transformers'
# apply_chat_template (tools deep-sorted and tools_ts_str from our encoder, as K2.5's tokenizer class does).
W = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
     "parameters": {"type": "object", "required": ["city"],
                    "properties": {"unit": {"type": "string", "enum": ["c", "f"]}, "city": {"type": "string"}}}}}
C0 = {"id": "functions.get_weather:0", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
C1 = {"id": "functions.get_weather:1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
DECL = ('<|im_system|>tool_declare<|im_middle|># Tools\n\n## functions\nnamespace functions {\n// Weather for a city\n'
        'type get_weather = (_: {\n  city: string,\n  unit?: "c" | "f"\n}) => any;\n}\n<|im_end|>')
CALL0 = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
         '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>')
GEN = '<|im_assistant|>assistant<|im_middle|><think>'

CASES = {
    "tools_and_system": (
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}], [W], {},
        DECL + '<|im_system|>system<|im_middle|>Be brief.<|im_end|>'
        '<|im_user|>user<|im_middle|>Weather in Paris?<|im_end|>' + GEN),
    "history_reasoning_dropped": (
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "reasoning_content": "old"},
         {"role": "user", "content": "c"}], None, {},
        '<|im_user|>user<|im_middle|>a<|im_end|><|im_assistant|>assistant<|im_middle|><think></think>b<|im_end|>'
        '<|im_user|>user<|im_middle|>c<|im_end|>' + GEN),
    "tool_results_keep_reasoning_after_last_plain_turn": (
        [{"role": "user", "content": "q"},
         {"role": "assistant", "content": "", "reasoning_content": "call it", "tool_calls": [C0]},
         {"role": "tool", "tool_call_id": "functions.get_weather:0", "name": "get_weather", "content": "{\"t\": 20}"},
         {"role": "assistant", "content": "20C.", "reasoning_content": "done"},
         {"role": "user", "content": "and Oslo?"},
         {"role": "assistant", "content": None, "reasoning_content": "again", "tool_calls": [C1]},
         {"role": "tool", "tool_call_id": "functions.get_weather:1", "content": "3"}], [W], {},
        DECL + '<|im_user|>user<|im_middle|>q<|im_end|>'
        '<|im_assistant|>assistant<|im_middle|><think></think>' + CALL0 + '<|im_end|>'
        '<|im_system|>get_weather<|im_middle|>## Return of functions.get_weather:0\n{"t": 20}<|im_end|>'
        '<|im_assistant|>assistant<|im_middle|><think></think>20C.<|im_end|>'
        '<|im_user|>user<|im_middle|>and Oslo?<|im_end|>'
        '<|im_assistant|>assistant<|im_middle|><think>again</think><|tool_calls_section_begin|><|tool_call_begin|>'
        'functions.get_weather:1<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|>'
        '<|tool_calls_section_end|><|im_end|>'
        '<|im_system|>tool<|im_middle|>## Return of functions.get_weather:1\n3<|im_end|>' + GEN),
    "media_image_and_video": (
        [{"role": "user", "content": [{"type": "text", "text": "see "}, {"type": "image_url", "image_url": {"url": "x"}},
                                      {"type": "video_url", "video_url": {"url": "v"}}, {"type": "text", "text": "ok?"}]}],
        None, {},
        '<|im_user|>user<|im_middle|>see <|media_begin|>image<|media_content|><|media_pad|><|media_end|>\n'
        '<|kimi_k25_video_placeholder|>\nok?<|im_end|>' + GEN),
    "thinking_false_and_names": (
        [{"role": "system", "name": "rules", "content": "r"}, {"role": "user", "name": "alice", "content": "hi"},
         {"role": "assistant", "content": "x", "reasoning_content": "kept?", "tool_calls": [C0]},
         {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "ok"}], [W], {"thinking": False},
        DECL + '<|im_system|>rules<|im_middle|>r<|im_end|><|im_user|>alice<|im_middle|>hi<|im_end|>'
        '<|im_assistant|>assistant<|im_middle|><think></think>x' + CALL0 + '<|im_end|>'
        '<|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\nok<|im_end|>'
        '<|im_assistant|>assistant<|im_middle|><think></think>'),
    "none_contents_and_reasoning": (
        [{"role": "system", "content": None}, {"role": "user", "content": "u"},
         {"role": "assistant", "content": None, "reasoning_content": None, "tool_calls": [C0]},
         {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": None}], [W], {},
        DECL + '<|im_system|>system<|im_middle|><|im_end|><|im_user|>user<|im_middle|>u<|im_end|>'
        '<|im_assistant|>assistant<|im_middle|><think></think>' + CALL0 + '<|im_end|>'
        '<|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\n<|im_end|>' + GEN),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_renders_as_k25_real_template(tiny_tokenizer, name):
    messages, tools, kwargs, want = CASES[name]
    text = tiny_tokenizer.apply_chat_template(copy.deepcopy(messages), tools=copy.deepcopy(tools), tokenize=False,
                                              add_generation_prompt=True, **kwargs)
    assert text == want
    # the ids are the text's tokens, special-token strings as single ids
    ids = tiny_tokenizer.apply_chat_template(copy.deepcopy(messages), tools=copy.deepcopy(tools), tokenize=True,
                                             return_dict=False, add_generation_prompt=True, **kwargs)
    assert tiny_tokenizer.decode(ids, skip_special_tokens=False) == want
    assert ids.count(tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")) == want.count("<|im_end|>")


def test_loaded_through_trust_remote_code_from_the_module_cache(tiny_tokenizer):
    # The demo and every test load the tiny model as production loads K2.5: our class, via auto_map.
    from transformers.utils import HF_MODULES_CACHE

    cls = type(tiny_tokenizer)
    assert cls.__name__ == "TinyKimiTokenizer"
    assert cls.__module__.startswith("transformers_modules.")
    source = os.path.realpath(inspect.getsourcefile(cls))
    assert source.startswith(os.path.realpath(HF_MODULES_CACHE)), source
    cfg = json.loads((TINY_MODEL_DIR / "tokenizer_config.json").read_text())
    assert cfg["auto_map"]["AutoTokenizer"][0] == "tokenization_tiny_kimi.TinyKimiTokenizer"
    assert not (TINY_MODEL_DIR / "tokenizer.json").exists()
    lines = (TINY_MODEL_DIR / "tiktoken.model").read_text().splitlines()
    assert len(lines) == BASE and lines[-1].endswith(f" {BASE - 1}")


def test_k25_special_token_layout(tiny_tokenizer):
    tok = tiny_tokenizer
    assert len(tok) == BASE + 256
    special = {i for i, t in tok.added_tokens_decoder.items() if t.special}
    for s, (off, is_special) in LAYOUT.items():
        assert tok.convert_tokens_to_ids(s) == BASE + off, s
        assert tok.encode(s, add_special_tokens=False) == [BASE + off], s
        assert ((BASE + off) in special) == is_special, s
    assert tok.decode([BASE + 5], skip_special_tokens=False) == f"<|reserved_token_{BASE + 5}|>"
    assert tok.convert_tokens_to_ids("<|kimi_k25_video_placeholder|>") >= BASE
    ids = tok.encode("a</think>b<|tool_call_begin|>c<|im_end|>", add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == "a</think>b<|tool_call_begin|>c"
    # the video placeholder and every media token are forbidden in completions
    tokens = k2_tokens(tok)
    for s in ("<|kimi_k25_video_placeholder|>", "<|media_begin|>", "<|media_pad|>"):
        assert tokens.ids[s] in tokens.forbidden_ids


def test_fast_decode_equals_the_tokenizers_decode_on_text_segments(tiny_tokenizer):
    tok = tiny_tokenizer
    core = fast_decoder(tok)
    assert core is tok.model
    text = ("Héllo wörld 中文字符 😀 emoji, code `x = 1`\n\n  indented</think><|tool_call_begin|>functions.f:0"
            "<|tool_call_argument_begin|>{\"a\": \"ü\"}<|tool_call_end|><|im_end|>")
    ids = tok.encode(text, add_special_tokens=False)
    rng = random.Random(0)
    segments = [ids] + [ids[a:b] for a, b in (sorted(rng.sample(range(len(ids) + 1), 2)) for _ in range(200))]
    segments.append(list(range(0, BASE + 256, 7)))       # every kind of id, reserved ones included
    decoder = SegmentDecoder(tok, len(tok))
    assert decoder.token_bytes is not None     # the byte-table path is the one under test
    for seg in segments:   # multi-byte characters cut in half too: both replace them the same way
        want = tok.decode(seg, skip_special_tokens=False)
        assert core.decode(seg) == want
        assert decoder.decode(np.asarray(seg, dtype=np.int64)) == want


def test_changed_tokenizer_code_changes_the_fingerprint(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(TINY_MODEL_DIR, a)
    shutil.copytree(TINY_MODEL_DIR, b)
    with open(b / "tokenization_tiny_kimi.py", "a") as f:
        f.write("\n# a later revision of the tokenizer code\n")
    fa, fb = tokenizer_fingerprint(open_tokenizer(str(a))), tokenizer_fingerprint(open_tokenizer(str(b)))
    assert fa["tokenizer_sha256"] == fb["tokenizer_sha256"]
    assert fa["chat_template_sha256"] == fb["chat_template_sha256"]
    assert fa["tokenizer_code_sha256"] != fb["tokenizer_code_sha256"]
    assert fa["tokenizer_code_sha256"] == tokenizer_fingerprint(open_tokenizer(str(TINY_MODEL_DIR)))[
        "tokenizer_code_sha256"]


def test_a_tokenizer_whose_token_ids_do_not_round_trip_is_refused(tmp_path):
    # What transformers 5.4.0-5.5.3 did to kimi_k25: the vocabulary maps a token string to an id that decodes as
    # something else. Here the tokenizer's own code does it (a real class, loaded through trust_remote_code).
    bad = tmp_path / "bad"
    shutil.copytree(TINY_MODEL_DIR, bad)
    with open(bad / "tokenization_tiny_kimi.py", "a") as f:     # a method of the class, the file's last
        f.write("\n    def get_vocab(self):\n        v = super().get_vocab()\n"
                "        v['<|im_end|>'] = v['<|im_user|>']\n        return v\n")
    with pytest.raises(TokenizerLoadError) as e:
        open_tokenizer(str(bad))
    msg = str(e.value)
    assert "\n" not in msg and "'<|im_end|>'" in msg and "'<|im_user|>'" in msg and "transformers>=5.5.4" in msg


def test_unloadable_tokenizer_is_one_line(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(TokenizerLoadError) as e:
        open_tokenizer(str(tmp_path))
    assert "\n" not in str(e.value) and str(tmp_path) in str(e.value)


BLOCK_TIKTOKEN = """
import sys
class _NoTiktoken:
    # a machine without tiktoken: every import of it fails, as when the package is not installed
    def find_spec(self, name, path=None, target=None):
        if name == "tiktoken" or name.startswith("tiktoken."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoTiktoken())
"""


def test_missing_tiktoken_is_one_line_from_the_cli(tmp_path):
    code = BLOCK_TIKTOKEN + (
        "from kimi_eagle_data.cli.main import main\n"
        f"sys.argv = ['kimi-data', 'prepare', 'B4', '--workdir', {str(tmp_path / 'w')!r}, '--profile', 'tiny-kimi',"
        f" '--model', {str(TINY_MODEL_DIR)!r}]\n"
        "main()\n")
    env = {**os.environ, "COLUMNS": "400", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 1, out
    assert "Traceback" not in out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1, out
    assert "tiktoken" in lines[0] and "pip install tiktoken" in lines[0] and str(TINY_MODEL_DIR) in lines[0]
