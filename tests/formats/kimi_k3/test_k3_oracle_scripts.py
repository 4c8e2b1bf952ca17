"""The scripts that hold our K3 renderer against K3's own encoder: the differential fuzz (run against the real
encoder when KIMI_K3_ENCODER names its file) and the golden-file writer.

K3's encoder is not in this repository; without it, stand-ins written here play it: one that renders as we do
(built on our renderer) and ones that differ from us in a way each script must catch."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"

STAND_IN = """
from dataclasses import dataclass
from kimi_eagle_data.formats.kimi_k3.render import render_segments

@dataclass(frozen=True)
class EncodeSegment:
    text: str
    allow_special: bool = False

def build_chat_segments(messages, tools=None, *, add_generation_prompt=True, thinking=True, **kwargs):
    segments = render_segments(messages, tools, thinking=thinking, add_generation_prompt=add_generation_prompt,
                               effort=kwargs.get("thinking_effort"), response_format=kwargs.get("response_format"),
                               tool_choice=kwargs.get("tool_choice"))
    out = [EncodeSegment(s.text, s.allow_special) for s in segments]
{tweak}
    return out
"""
TWEAKS = {
    "same": "",
    "merges the attribute segments": ("    merged = []\n    for s in out:\n"
                                      "        if merged and not s.allow_special and not merged[-1].allow_special:\n"
                                      "            merged[-1] = EncodeSegment(merged[-1].text + s.text)\n"
                                      "        else:\n            merged.append(s)\n    out = merged"),
    "writes another text": "    out = [EncodeSegment(s.text.replace('role', 'rôle'), s.allow_special) for s in out]",
    "refuses tools": "    if tools:\n        raise ValueError('no tools')",
}


def load(script: str):
    spec = importlib.util.spec_from_file_location(script, SCRIPTS / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stand_in(tmp_path: Path, tweak: str) -> Path:
    path = tmp_path / "encoding_k3.py"
    path.write_text(STAND_IN.format(tweak=TWEAKS[tweak]), encoding="utf-8")
    return path


def fuzz_counts(out: str) -> dict[str, int]:
    return {m[1].strip(): int(m[2]) for m in re.finditer(r"^  (\S.+?)\s+(\d+)$", out, re.M)}


def test_the_fuzz_passes_an_encoder_that_renders_as_we_do(tmp_path, capsys):
    code = load("k3_render_fuzz").main(["--encoder", str(stand_in(tmp_path, "same")), "--cases", "300", "--seed", "4"])
    out = capsys.readouterr().out
    counts = fuzz_counts(out)
    assert code == 0 and "OK: no disagreement" in out
    assert counts["both render, equal"] > 150 and counts["both refuse"] > 0
    assert counts["both render, equal"] + counts["both refuse"] == 300


@pytest.mark.parametrize("tweak, outcome", [
    ("merges the attribute segments", "both render, same text, segments differ"),
    ("writes another text", "both render, text differs"),
    ("refuses tools", "we render, original refuses")])
def test_the_fuzz_fails_on_each_kind_of_disagreement(tmp_path, capsys, tweak, outcome):
    code = load("k3_render_fuzz").main(["--encoder", str(stand_in(tmp_path, tweak)), "--cases", "200", "--show", "1"])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL:" in out and fuzz_counts(out)[outcome] > 0
    assert f"--- {outcome}" in out


@pytest.mark.skipif(not os.environ.get("KIMI_K3_ENCODER"),
                    reason="KIMI_K3_ENCODER does not name K3's encoding_k3.py (not in this repository; "
                           "leyten/shard vendor/kimi_k3_ref/ has the launch file)")
def test_the_fuzz_against_k3s_own_encoder(capsys):
    code = load("k3_render_fuzz").main(["--encoder", os.environ["KIMI_K3_ENCODER"], "--cases", "1500", "--seed", "7"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert fuzz_counts(out)["both render, equal"] > 1000


def test_the_golden_writer_records_outcomes_and_provenance(tmp_path, capsys):
    encoder = stand_in(tmp_path, "refuses tools")
    conversations = tmp_path / "conversations.json"
    conversations.write_text(json.dumps({"conversations": [
        {"name": "plain", "request": {"messages": [{"role": "user", "content": "hi <|open|>"}]}},
        {"name": "with_tools", "request": {"messages": [{"role": "user", "content": "x"}],
                                           "tools": [{"type": "function", "function": {"name": "f"}}]}},
    ]}), encoding="utf-8")
    out = tmp_path / "expected.json"
    assert load("k3_golden").main(["--encoder", str(encoder), "--conversations", str(conversations),
                                   "--out", str(out)]) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["provenance"]["encoder"]["sha256"] == hashlib.sha256(encoder.read_bytes()).hexdigest()
    assert written["provenance"]["conversations_sha256"] == hashlib.sha256(conversations.read_bytes()).hexdigest()
    assert written["expected"]["with_tools"] == {"error": "ValueError"}
    assert ["hi <|open|>", False] in written["expected"]["plain"]["segments"]
    assert written["expected"]["plain"]["segments"][-1] == ["<|sep|>", True]
    assert "1 rendered, 1 refused" in capsys.readouterr().out


def test_the_golden_writer_refuses_a_file_that_is_not_the_encoder(tmp_path, capsys):
    other = tmp_path / "other.py"
    other.write_text("x = 1\n")
    assert load("k3_golden").main(["--encoder", str(other)]) == 2
    assert "has no build_chat_segments" in capsys.readouterr().err
