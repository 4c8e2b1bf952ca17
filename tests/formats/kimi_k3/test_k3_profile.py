"""Kimi-K3 as a registered profile: stages ask the run's chat format (kimi_eagle_data/formats/), never a profile's
name; K3's format renders through the tokenizer's own code (the tiny K3 class) or ours with the same ids, keeps
typed special-token text as text, and its validator judges completions with K3's grammar and reason codes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kimi_eagle_data.profile import PROFILES, get_profile
from kimi_eagle_data.formats.kimi_k3.segment_ids import encode_segments
from kimi_eagle_data.formats import format_of

ROOT = Path(__file__).resolve().parents[3]
STAGES = ("prompts", "generate", "validate", "emit", "score", "reports", "hub")
# What a profile-name branch looks like: a comparison with a profile's or format's name, a K3 constant, or a
# literal K3 profile name.
BRANCH = re.compile(r"""(profile\.name|profile|chat_format|format\.name)\s*(==|!=|\bin\b)\s*["'(]|\bKIMI_K3\b|"""
                    r"""TINY_KIMI_K3|["'](tiny-)?kimi-k3["']|\b(if|elif)\b[^\n]*([kK]3|[kK]25|[kK]2_5)\b""")


@pytest.fixture(scope="module")
def k3():
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer

    profile = get_profile("tiny-kimi-k3")
    return profile, open_tokenizer(profile.model_path)


def test_registry_holds_both_families():
    assert {"kimi-k2.5", "tiny-kimi", "kimi-k3", "tiny-kimi-k3"} <= set(PROFILES)
    assert format_of(get_profile("kimi-k3")).name == "kimi-k3"
    assert format_of(get_profile("kimi-k2.5")).name == "kimi-k2"
    assert format_of(get_profile("kimi-k3")).efforts == ("low", "high", "max") and format_of(get_profile("kimi-k2.5")).efforts == ()


def test_no_stage_branches_on_a_profile_name():
    hits = []
    for folder in (*(ROOT / "kimi_eagle_data" / s for s in STAGES), ROOT / "cards"):
        for path in sorted(folder.rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if BRANCH.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "stages ask the run's chat format (ctx.format), not a profile's name:\n" + "\n".join(hits)


def test_the_branch_pattern_catches_a_branch():
    assert BRANCH.search('if profile.name == "kimi-k3":') and BRANCH.search("if is_k3:")
    assert BRANCH.search("elif ctx.profile.name != 'tiny-kimi':") and BRANCH.search("x = KIMI_K3.max_seq_len")
    assert not BRANCH.search("validator = format_of(ctx.profile).validator(ctx.tokens)")


def test_checkpoint_code_and_our_renderer_give_the_same_ids(k3):
    profile, tok = k3
    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2? <|open|>x<|sep|>"}]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    for mode, effort in (("thinking", "low"), ("thinking", None), ("instant", None)):
        ids = format_of(profile).bind(profile, tok).render_prompt(chat, tools, mode, effort)
        assert ids == encode_segments(tok, format_of(profile).segments(chat, tools, mode, effort))
        ending = format_of(profile).bind(profile, tok).generation_prompt_ids(mode)
        assert ids[-len(ending):] == ending


def test_typed_markers_are_text_in_k3_and_special_in_k25(k3):
    profile, tok = k3
    open_id = tok.convert_tokens_to_ids("<|open|>")
    plain = format_of(profile).bind(profile, tok).render_prompt([{"role": "user", "content": "hello"}], None)
    typed = format_of(profile).bind(profile, tok).render_prompt([{"role": "user", "content": "<|open|>"}], None)
    assert typed.count(open_id) == plain.count(open_id)          # the typed marker is a non-special segment
    assert format_of(profile).bind(profile, tok).special_text() is None
    from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer

    k25 = open_tokenizer(TINY_KIMI.model_path)
    finder = format_of(TINY_KIMI).bind(TINY_KIMI, k25).special_text()
    assert finder.in_chat([{"role": "user", "content": "<|im_end|>"}]) is not None


def _judge(k3, completion: str, mode: str = "thinking", finish: str = "stop", tools=None):
    profile, tok = k3
    validator = format_of(profile).bind(profile, tok).validator(profile.max_seq_len)
    prompt = format_of(profile).bind(profile, tok).render_prompt([{"role": "user", "content": "hi"}], tools, mode)
    output = tok.encode(completion)            # special-token strings as the ids themselves
    return validator.validate(np.asarray(prompt), np.asarray(output), finish, None, tools)


GOOD = ("Let me think.<|close|>think<|sep|><|open|>response<|sep|>Hello!<|close|>response<|sep|>"
        "<|close|>message<|sep|><|end_of_msg|>")


def test_k3_validator_accepts_a_well_formed_turn(k3):
    v = _judge(k3, GOOD)
    assert v.valid, v.details
    assert v.mode == "thinking" and v.assistant["content"] == "Hello!" and v.assistant["reasoning_content"]
    instant = _judge(k3, GOOD.split("<|close|>think<|sep|><|open|>response<|sep|>")[1], mode="instant")
    assert instant.valid and instant.mode == "instant", instant.details


def test_k3_validator_rejects_a_k2_era_token_with_its_own_code(k3):
    v = _judge(k3, GOOD.replace("Hello!", "Hello!<|im_end|>"))
    assert "legacy_k2_token" in v.issues


def test_k3_validator_truncation_and_undeclared_tools(k3):
    cut = _judge(k3, "Let me think", finish="length")
    assert cut.issues == ["truncated"]
    call = ('x<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>'
            '<|open|>call tool="add" index="1"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>'
            '<|close|>message<|sep|><|end_of_msg|>')
    assert "tool_call_without_tools" in _judge(k3, call).issues
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    v = _judge(k3, call, tools=tools)
    assert v.valid and v.num_tool_calls == 1, v.details


@pytest.mark.parametrize("engine,parser", [("sglang", "kimi_k3"), ("vllm", "kimi_k3")])
def test_serve_dry_run_prints_k3_flags(engine, parser):
    out = subprocess.run([sys.executable, "-m", "kimi_eagle_data", "serve", "--profile", "kimi-k3", "--engine",
                          engine, "--dry-run"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "moonshotai/Kimi-K3" in out.stdout and f"--reasoning-parser {parser}" in out.stdout


def test_tiny_k3_serves_on_vllm_with_its_k3_renderer():
    """vLLM picks its K3 chat renderer from K3's architecture; the tiny model (a Llama) names it
    (tests/real_engines/test_k3_serving.py serves it)."""
    said = {}
    for profile in ("kimi-k3", "tiny-kimi-k3"):
        out = subprocess.run([sys.executable, "-m", "kimi_eagle_data", "serve", "--profile", profile, "--engine",
                              "vllm", "--dry-run"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        said[profile] = out.stdout
    assert "--tokenizer-mode kimi_k3" in said["tiny-kimi-k3"] and "--tokenizer-mode" not in said["kimi-k3"]
    assert "--reasoning-parser kimi_k3" in said["tiny-kimi-k3"]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kimi_eagle_data", *args], capture_output=True, text=True,
                          timeout=120)


def test_render_cli_k3_efforts_and_ids(tmp_path, k3):
    profile, tok = k3
    row = tmp_path / "row.json"
    chat = [{"role": "user", "content": "hi <|open|>"}]
    row.write_text('{"messages": [{"role": "user", "content": "hi <|open|>"}]}', encoding="utf-8")
    low = _cli("render", str(row), "--profile", "tiny-kimi-k3", "--effort", "low")
    assert low.returncode == 0, low.stderr
    assert "thinking_effort=low" in low.stdout and low.stdout.rstrip().endswith("<|open|>think<|sep|>")
    ids = _cli("render", str(row), "--profile", "tiny-kimi-k3", "--mode", "instant", "--ids")
    assert ids.returncode == 0, ids.stderr
    rendered = format_of(profile).bind(profile, tok).render_prompt(chat, None, "instant")
    assert ids.stdout.strip() == str(rendered).replace(" ", "")
    refused = _cli("render", str(row), "--profile", "tiny-kimi", "--effort", "low")
    assert refused.returncode == 2 and "no thinking effort" in refused.stderr


def test_check_cli_k3_rows(tmp_path):
    import json

    rows = [{"id": "typed", "messages": [{"role": "user", "content": "hi <|open|>"}], "completion": GOOD,
             "finish_reason": "stop"},
            {"id": "legacy", "messages": [{"role": "user", "content": "hi"}],
             "completion": GOOD.replace("Hello!", "Hello!<|im_end|>"), "finish_reason": "stop"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = _cli("check", str(path), "--profile", "tiny-kimi-k3", "--json")
    verdicts = {v["id"]: v for v in map(json.loads, out.stdout.splitlines()) if "id" in v}
    assert verdicts["typed"]["issues"] == [], verdicts["typed"]      # typed marker: text, no special_token_in_text
    assert verdicts["legacy"]["issues"] == ["legacy_k2_token"], verdicts["legacy"]
