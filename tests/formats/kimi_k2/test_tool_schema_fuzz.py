"""scripts/tool_schema_fuzz.py counts both directions and fails on a mismatch. K2.5's encoder is not in this
repository, so stand-ins written here play the original: one that renders exactly as we do, and ones that differ
from us in each way the script must catch."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "tool_schema_fuzz.py"

# Every stand-in delegates to our raw encoder (the original's entry point takes the tools as given) and raises
# where we refuse, as the original raises where it cannot render; `tweak` changes one thing.
STAND_IN = """
import logging
from kimi_eagle_data.chat_format import ToolSchemaUnsupported
from kimi_eagle_data.formats.kimi_k2.tool_declaration import encode_tools_to_typescript
logger = logging.getLogger("stand_in_original")

def encode_tools_to_typescript_style(tools):
{tweak}
"""
TWEAKS = {
    "same": "    return encode_tools_to_typescript(tools)",
    "one space more": "    return encode_tools_to_typescript(tools) + ' '",
    "renders everything": ("    try:\n        return encode_tools_to_typescript(tools)\n"
                           "    except ToolSchemaUnsupported:\n        return '# Tools\\n'"),
    "refuses everything": "    raise ValueError('no')",
    "warns on every call": "    logger.warning('not supported, use null instead')\n"
                           "    return encode_tools_to_typescript(tools)",
}


def fuzz():
    spec = importlib.util.spec_from_file_location("tool_schema_fuzz", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(tmp_path: Path, capsys, tweak: str, cases: int = 150) -> tuple[int, dict[str, int], str]:
    original = tmp_path / "tool_declaration_ts.py"
    original.write_text(STAND_IN.format(tweak=TWEAKS[tweak]))
    code = fuzz().main(["--original", str(original), "--cases", str(cases), "--seed", "5", "--show", "0"])
    out = capsys.readouterr().out
    sorted_table = out.split("deep-sorted, as K2.5's tokenizer calls it\n")[1].split("\n\n")[0]
    counts = {m[1].strip(): int(m[2]) for m in re.finditer(r"^  (.+?)\s+(\d+)$", sorted_table, re.M)}
    return code, counts, out


def test_an_original_that_renders_as_we_do_passes(tmp_path, capsys):
    code, counts, out = run(tmp_path, capsys, "same")
    assert code == 0 and "OK:" in out
    assert counts["both render, equal"] > 0 and counts["both refuse"] > 0
    assert counts["both render, equal"] + counts["both refuse"] == 150


def test_a_differing_text_fails(tmp_path, capsys):
    code, counts, out = run(tmp_path, capsys, "one space more")
    assert code == 1 and "FAIL" in out
    assert counts["both render, differ"] > 0 and counts["both render, equal"] == 0


def test_what_the_original_renders_and_we_refuse_fails(tmp_path, capsys):
    code, counts, out = run(tmp_path, capsys, "renders everything")
    assert code == 1
    # all it refuses then are its own fallbacks, read from the input (a skipped tool, a function without name)
    assert counts["original renders, we refuse"] > 0 and counts["we render, original refuses"] == 0
    assert "skips a tool" in out


def test_what_the_original_cannot_render_but_we_do_fails(tmp_path, capsys):
    code, counts, out = run(tmp_path, capsys, "refuses everything")
    assert code == 1 and counts["we render, original refuses"] > 0 and "raises ValueError" in out


def test_an_original_warning_counts_as_its_fallback(tmp_path, capsys):
    code, counts, out = run(tmp_path, capsys, "warns on every call")
    assert code == 1 and counts["both render, equal"] == 0 and "false schema printed as null" in out


def test_a_file_that_is_not_the_encoder_is_a_usage_error(tmp_path, capsys):
    other = tmp_path / "other.py"
    other.write_text("x = 1\n")
    with pytest.raises(SystemExit) as info:
        fuzz().main(["--original", str(other), "--cases", "1"])
    assert info.value.code == 2 and "encode_tools_to_typescript_style" in capsys.readouterr().err
