"""No module of the package is over 600 lines: a longer one holds more than one responsibility (split it by meaning,
and name the new module in docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kimi_eagle_data"
MAX_LINES = 600


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: " + ", ".join(f"{p} ({n})" for p, n in long.items())
