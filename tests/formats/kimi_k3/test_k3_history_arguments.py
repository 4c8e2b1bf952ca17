"""Tool-call arguments in a K3 prompt's history that K3's encoder renders but its completion grammar never accepts
from the model (text that is not JSON, rendered as one `json` element; NaN or Infinity): prepare keeps the prompt
as the model renders it, counts it per code in prepared/<CFG>.json (`history_arguments`) and warns in one line
(docs/kimi-k3.md, "Tool calls in the history")."""

from __future__ import annotations

import json

from kimi_eagle_data.formats.kimi_k3.normalize import history_argument_notes

from tests.helpers.cli import run_cli


def _row(i: int, arguments) -> dict:
    return {"id": f"r{i}", "messages": [
        {"role": "user", "content": f"Weather in city {i}?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
        {"role": "assistant", "content": "18C."},
        {"role": "user", "content": "And tomorrow?"}]}


def test_notes_read_text_and_objects():
    assert history_argument_notes(_row(0, '{"city": "Paris"}')["messages"]) == set()
    assert history_argument_notes(_row(0, "city=Paris")["messages"]) == {"arguments_not_json"}
    assert history_argument_notes(_row(0, '{"t": NaN}')["messages"]) == {"arguments_not_finite"}
    assert history_argument_notes(_row(0, {"t": [1, float("-inf")]})["messages"]) == {"arguments_not_finite"}


def _prepare(tmp_path, rows: list[dict], profile: str, *more: str):
    """prepare over `rows` as a chat partition T1 with a prompt per user turn (the later turns carry history)."""
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "cfg.toml").write_text(f"""configs = ["T1"]
[partitions.T1]
source = "{tmp_path / 'rows.jsonl'}"
upstream = "me/tools"
adapter = "chat"
policy = "every_user_prefix"
n = 10
""")
    return run_cli("prepare", "--config", str(tmp_path / "cfg.toml"), "--profile", profile, *more)


def test_prepare_keeps_counts_and_warns(tmp_path):
    rows = [_row(0, '{"city": "Paris"}'), _row(1, "city=Paris"), _row(2, '{"t": NaN}'), _row(3, "not json")]
    work = tmp_path / "work"
    done = _prepare(tmp_path, rows, "tiny-kimi-k3", "--workdir", str(work))
    report = json.loads((work / "prepared" / "T1.json").read_text())
    assert report["prepared"] == 8 and report["rejected"] == {}     # a prompt per user turn: the second has history
    assert report["history_arguments"] == {"arguments_not_finite": 1, "arguments_not_json": 2}
    said = " ".join(done.stderr.split())
    assert ("T1: 1 prompt whose history holds tool-call arguments holding NaN or Infinity, rendered as such though "
            "the completion grammar rejects them (arguments_not_finite); 2 prompts whose history holds tool-call "
            "arguments that are not JSON, rendered as one `json` element (arguments_not_json); kept") in said, said
    dry = _prepare(tmp_path, rows, "tiny-kimi-k3", "--workdir", str(tmp_path / "dry"), "--dry-run")
    assert "(arguments_not_json); kept" in " ".join(dry.stderr.split()), dry.stderr


def test_k25_counts_nothing(tmp_path):
    work = tmp_path / "work"
    _prepare(tmp_path, [_row(1, "city=Paris")], "tiny-kimi", "--workdir", str(work))
    assert json.loads((work / "prepared" / "T1.json").read_text())["history_arguments"] == {}
