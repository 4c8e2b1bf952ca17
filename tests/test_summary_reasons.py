"""The dataset summary's "top reasons" keeps prepare's rejects apart from generation's (its failures and the
rejects of its samples): a reader sees which stage lost the rows without looking the codes up."""

from __future__ import annotations

import json

from tests.helpers.cli import run_cli


def test_top_reasons_name_prepare_and_generation_apart(tmp_path):
    rows = tmp_path / "rows.jsonl"
    texts = ["Tell me about rivers.", "", "Name three colours.", "Write a haiku about snow."]
    rows.write_text("".join(json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": t}]}) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")
    done = run_cli("build", "B4", "--source", f"B4={rows}", "--profile", "tiny-kimi", "--engine", "local",
                   "--max-new-tokens", "4", "--workdir", str(tmp_path / "w"), "--no-progress")
    summary = done.stdout[done.stdout.index("dataset summary"):]
    line = next(ln for ln in summary.splitlines() if ln.startswith("│ B4"))
    assert "prepare: empty_user_turn 1; generation: truncated 3" in " ".join(line.replace("│", " ").split()), \
        done.stdout
