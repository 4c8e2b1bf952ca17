"""Our K3 loss mask against SpecForge's own `kimi-k3-thinking` template (docs/kimi-k3.md, "SpecForge").

tests/golden/k3/specforge.json is what SpecForge itself computed for our rows (scripts/specforge_k3_oracle.py,
run from a SpecForge checkout outside this repository; its commit and file hashes are in the file). Here the same
rows are rebuilt with our code and held to it:

- SpecForge reading a row's own text (`is_preformatted`): its ids are the tokenization of the joined text (ours
  are per segment; they differ where a marker string is typed in text or BPE merges across a segment boundary);
  on a thinking row it masks the completion up to, not including, `<|end_of_msg|>`: where the ids agree, ours is
  SpecForge's plus that one token. An instant row (`…<|open|>response<|sep|>`) gets no mask at all.
- SpecForge reading the row's messages (its `conversations` records, what its K3 recipe trains on): it renders
  them with the tokenizer's defaults, thinking on at effort max, whatever mode and effort the row was made in,
  after its own message cleaning; so an instant turn is trained as a thinking one.

With SPECFORGE_SRC naming a SpecForge checkout, the oracle also runs live and must reproduce the committed file.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_eagle_data.formats.kimi_k3.render import END_OF_MSG

ROOT = Path(__file__).resolve().parents[3]
ORACLE_FILE = ROOT / "tests" / "golden" / "k3" / "specforge.json"
ORACLE = json.loads(ORACLE_FILE.read_text(encoding="utf-8"))
HEADER = ORACLE["provenance"]["template_fields"]["assistant_header"]


def _script():
    spec = importlib.util.spec_from_file_location("specforge_k3_oracle", ROOT / "scripts" / "specforge_k3_oracle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


oracle = _script()


@pytest.fixture(scope="module")
def tokenizer():
    return oracle.tiny_k3_tokenizer()


@pytest.fixture(scope="module")
def rows(tokenizer):
    return {row["id"]: row for row in oracle.k3_rows(tokenizer)}


def joined_ids(tokenizer, text: str) -> list[int]:
    """The ids of a whole text (what SpecForge's parser gets from `tokenizer(text, add_special_tokens=False)`)."""
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def masked_text(tokenizer, ids: list[int], spans) -> list[str]:
    return [tokenizer.decode(ids[a:b]) for a, b in spans]


def specforge_cleaned(messages: list[dict]) -> list[dict]:
    """The messages SpecForge's ThinkingParser hands to `apply_chat_template` (sgl-project/SpecForge@a6b6b023,
    specforge/data/parse.py: `_normalize_message`, a leading system message kept as role and content only,
    `_sanitize_message` keeping role, content, tool_calls, reasoning_content, name, tool_call_id, and call
    arguments that are not JSON replaced by {}). Our rows start with a user or system message and keep the
    order SpecForge requires, so its truncation rules never apply."""
    keys = {"role", "content", "tool_calls", "reasoning_content", "name", "tool_call_id"}
    out = []
    for j, message in enumerate(copy.deepcopy(messages)):
        message = {**message, "content": message.get("content") or message.get("value") or ""}
        if j == 0 and message["role"] == "system":
            out.append({"role": "system", "content": message["content"]})
            continue
        message = {k: v for k, v in message.items() if k in keys}
        if "tool_calls" in message:
            calls = []
            for call in message["tool_calls"]:
                arguments = call.get("function", {}).get("arguments", {})
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments)
                    except json.JSONDecodeError:
                        arguments = {}
                calls.append({"id": call.get("id", ""), "type": call.get("type", "function"),
                              "function": {"name": call["function"].get("name", ""), "arguments": arguments}})
            message["tool_calls"] = calls
        out.append(message)
    return out


def outcome(result: dict) -> dict:
    """A SpecForge outcome without the warnings it gave."""
    return {k: v for k, v in result.items() if k != "warnings"}


def sha(ids) -> str:
    return oracle.ids_sha256(ids)


def test_the_oracle_ran_on_our_rows_and_they_cover_every_kind_of_turn(rows):
    provenance = ORACLE["provenance"]
    assert provenance["conversations_sha256"] == hashlib.sha256(
        (ROOT / "tests" / "golden" / "k3" / "conversations.json").read_bytes()).hexdigest()
    assert len(provenance["specforge"]["commit"]) == 40 and "specforge/data/parse.py" in provenance["specforge"][
        "files_sha256"]
    assert list(ORACLE["rows"]) == list(rows)
    kinds = {"thinking": [r for r in rows.values() if r["thinking"]],
             "instant": [r for r in rows.values() if not r["thinking"]],
             "tool calls": [r for r in rows.values() if r["messages"][-1].get("tool_calls")],
             "multi-turn": [r for r in rows.values() if sum(m["role"] == "assistant" for m in r["messages"]) > 1],
             "efforts": {r["effort"] for r in rows.values() if r["thinking"]}}
    assert all(kinds.values()) and kinds["efforts"] == {"low", "high", "max", None}


def test_preformatted_thinking_rows_ours_is_specforges_plus_the_end_of_msg_token(rows, tokenizer):
    end_of_msg = tokenizer.convert_tokens_to_ids(END_OF_MSG)
    agreeing = 0
    for rid, row in rows.items():
        if not row["thinking"]:
            continue
        theirs = ORACLE["rows"][rid]["preformatted"]
        ids, text = row["input_ids"], row["text"]
        (start, end), = oracle.mask_spans(row["loss_mask"])
        assert ids[end - 1] == end_of_msg and end == len(ids), rid
        # SpecForge tokenizes the joined text; ours are the segments' ids
        whole = joined_ids(tokenizer, text)
        assert theirs["ids_sha256"] == sha(whole) and theirs["n_tokens"] == len(whole), rid
        if whole == ids:
            assert theirs["mask"] == [[start, end - 1]], rid        # ours = SpecForge's + <|end_of_msg|>
            agreeing += 1
        else:
            # the same text trained: our completion up to its first <|end_of_msg|> (a typed one cuts it short)
            completion = tokenizer.decode(ids[start:end])
            assert masked_text(tokenizer, whole, theirs["mask"]) == [completion.split(END_OF_MSG)[0]], rid
    assert agreeing >= len([r for r in rows.values() if r["thinking"]]) * 3 // 4


def test_preformatted_instant_rows_get_no_mask_from_the_thinking_template(rows, tokenizer):
    instant = [rid for rid, row in rows.items() if not row["thinking"]]
    for rid in instant:
        theirs = ORACLE["rows"][rid]["preformatted"]
        assert HEADER not in rows[rid]["text"] and theirs["mask"] == [], rid
        assert theirs["ids_sha256"] == sha(joined_ids(tokenizer, rows[rid]["text"])), rid
    assert instant


def test_conversations_are_rendered_thinking_at_effort_max_whatever_the_row(rows, tokenizer):
    """SpecForge's `conversations` path: its cleaned messages through the tokenizer's own apply_chat_template
    with no mode or effort (the template passes neither), the last assistant turn masked from its think header
    to its <|end_of_msg|>; every turn so in `all_turns`."""
    same_as_ours = 0
    for rid, row in rows.items():
        theirs = ORACLE["rows"][rid]
        text = tokenizer.apply_chat_template(specforge_cleaned(row["messages"]), tools=row["tools"] or None,
                                             tokenize=False, add_generation_prompt=False)
        whole = joined_ids(tokenizer, text)
        assert theirs["last_turn"]["ids_sha256"] == theirs["all_turns"]["ids_sha256"] == sha(whole), rid
        bodies = [part.split(END_OF_MSG)[0] for part in text.split(HEADER)[1:]]
        assert masked_text(tokenizer, whole, theirs["last_turn"]["mask"]) == bodies[-1:], rid
        assert masked_text(tokenizer, whole, theirs["all_turns"]["mask"]) == bodies, rid
        if text == row["text"]:
            # SpecForge renders our row's text: the same outcome as reading that text (only at K3's defaults)
            assert row["thinking"] and row["effort"] == "max", rid
            assert outcome(theirs["last_turn"]) == outcome(theirs["preformatted"]), rid
            same_as_ours += 1
        else:
            # its cleaning (`reasoning` dropped, a system name dropped, None content as "", text arguments that
            # are not JSON as {}) or its defaults (thinking on, effort max) trained another text than the row's
            other = (sha(row["input_ids"]), theirs["preformatted"]["ids_sha256"])
            assert theirs["last_turn"]["ids_sha256"] not in other, rid
    assert same_as_ours > len(rows) // 2


@pytest.mark.skipif(not os.environ.get("SPECFORGE_SRC"), reason="SPECFORGE_SRC names no SpecForge checkout")
def test_specforge_itself_reproduces_the_committed_oracle(tmp_path):
    src = Path(os.environ["SPECFORGE_SRC"])
    out = tmp_path / "specforge.json"
    commit = ORACLE["provenance"]["specforge"]["commit"]
    is_git = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True).returncode == 0
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "specforge_k3_oracle.py"), "--specforge", str(src),
                           "--out", str(out), *([] if is_git else ["--commit", commit])],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    live = json.loads(out.read_text(encoding="utf-8"))
    assert live["provenance"]["specforge"]["files_sha256"] == ORACLE["provenance"]["specforge"]["files_sha256"]
    assert live == ORACLE
