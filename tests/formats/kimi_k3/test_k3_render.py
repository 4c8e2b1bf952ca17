"""Our Kimi-K3 renderer renders every golden conversation as K3's launch encoder does, segment for segment.

tests/golden/k3/conversations.json holds our own conversations; expected.json what K3's `encoding_k3.py`
(sha256 below, run from outside the repository by scripts/k3_golden.py) rendered for each: its segments, or the
type of the error it raised."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.formats.kimi_k3.normalize import K3FormatError, in_call_order
from kimi_eagle_data.formats.kimi_k3.render import EffortError, joined_text, render_segments

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "k3"
LAUNCH_ENCODER_SHA256 = "b9cb7ae100fed34b9337f80dacee5abbf7e261fe9b74bc0e76366701d46f5333"
LAUNCH_TOKENIZER_CODE_SHA256 = "f28ea66e2d862a2a5814970b2ce40c2f7d8296ff09aed90a7e7def689b906944"

CONVERSATIONS = json.loads((GOLDEN / "conversations.json").read_text(encoding="utf-8"))["conversations"]
GOLDEN_FILE = json.loads((GOLDEN / "expected.json").read_text(encoding="utf-8"))
EXPECTED = GOLDEN_FILE["expected"]


def test_the_golden_file_is_the_launch_encoders_output_for_these_conversations():
    provenance = GOLDEN_FILE["provenance"]
    assert provenance["encoder"]["sha256"] == LAUNCH_ENCODER_SHA256
    assert provenance["tokenizer_code"]["sha256"] == LAUNCH_TOKENIZER_CODE_SHA256
    # Conversations edited after the golden file was written: rerun scripts/k3_golden.py.
    conversations = (GOLDEN / "conversations.json").read_bytes()
    assert provenance["conversations_sha256"] == hashlib.sha256(conversations).hexdigest()
    assert [c["name"] for c in CONVERSATIONS] == list(EXPECTED)
    assert len(CONVERSATIONS) >= 40


def test_the_golden_conversations_cover_every_part_of_the_format():
    requests = [c["request"] for c in CONVERSATIONS]
    messages = [m for r in requests for m in r["messages"]]
    assert {r.get("effort", "max") for r in requests} >= {"low", "high", "max", None, "medium"}
    assert any(r.get("thinking") is False for r in requests)
    assert any(r.get("add_generation_prompt") is False for r in requests)
    assert {r.get("tool_choice") for r in requests} >= {"required", "none", "auto"}
    assert {(r.get("response_format") or {}).get("type") for r in requests} >= {"json_object", "json_schema", "text"}
    assert sum(bool(r.get("tools")) for r in requests) >= 10
    assert any(m.get("role") == "system" and m.get("tools") for m in messages)
    assert any(m.get("reasoning_content") for m in messages) and any(m.get("reasoning") for m in messages)
    assert any(m.get("content") in ("", None) for m in messages)
    assert any(isinstance(m.get("content"), list) for m in messages)
    assert any("<|open|>" in str(m.get("content")) for m in messages if m["role"] == "user")
    assert any(ord(ch) > 0xFFFF for m in messages for ch in str(m.get("content")))
    # Results out of call order, which the encoder re-sorts.
    assert sum(in_call_order(r["messages"]) != r["messages"] for r in requests) >= 3
    assert sum("error" in o for o in EXPECTED.values()) >= 3


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=[c["name"] for c in CONVERSATIONS])
def test_we_render_each_golden_conversation_as_the_launch_encoder(conversation):
    request = conversation["request"]
    expected = EXPECTED[conversation["name"]]
    before = copy.deepcopy(request)
    if "error" in expected or "we_refuse" in conversation:
        with pytest.raises(K3FormatError) as refused:
            render_segments(**request)
        assert "\n" not in str(refused.value) and isinstance(refused.value, KimiDataError)
        # A refusal of ours where the encoder renders is on purpose, and the golden file shows what it renders.
        assert ("error" in expected) != ("we_refuse" in conversation)
    else:
        assert [list(s) for s in render_segments(**request)] == expected["segments"]
    assert request == before       # the caller's request is left as it was


def test_tool_results_out_of_order_are_rendered_in_call_order():
    segments = EXPECTED["parallel_results_out_of_order"]["segments"]
    text = "".join(t for t, _ in segments)
    # Arrived s3, s1, s2; rendered in call order s1, s2, s3, indexed 1..3 with each call's tool name.
    assert text.index("eagle results") < text.index("-3C") < text.index("kimi results")
    assert 'role="tool" tool="get_weather" index="2"' in text
    assert joined_text(render_segments(**next(c for c in CONVERSATIONS
                                              if c["name"] == "parallel_results_out_of_order")["request"])) == text


def test_medium_effort_is_one_line_naming_what_to_use():
    with pytest.raises(EffortError, match=r"^effort 'medium' .* use low, high or max$"):
        render_segments([{"role": "user", "content": "hi"}], effort="medium")
    with pytest.raises(EffortError, match="unknown effort 'ultra'"):
        render_segments([{"role": "user", "content": "hi"}], effort="ultra", thinking=False)


def test_a_typed_marker_stays_text_and_markers_are_the_only_special_segments():
    segments = render_segments([{"role": "user", "content": "a <|open|> b"}])
    special = {t for t, s in segments if s}
    assert special == {"<|open|>", "<|sep|>", "<|close|>", "<|end_of_msg|>"}
    assert ("a <|open|> b", False) in segments


def test_an_error_numbers_calls_from_1_as_k3_does():
    """K3 writes a message's calls as index="1", "2", …: an error about one names it by that number."""
    calls = [{"function": {"name": "a", "arguments": "{}"}}, {"function": {"name": "b", "arguments": "[1]"}}]
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    with pytest.raises(K3FormatError, match=r"^message 1 \(assistant\), tool call 2: arguments are JSON but not an "
                                            r"object"):
        render_segments(messages)
