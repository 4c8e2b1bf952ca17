"""`kimi-data inspect` and `kimi-data score` on a tiny-kimi-k3 run, through the real CLI, asking the run's chat
format (formats/): inspect's segments concatenate to each row's input_ids with the loss-mask boundary at
prompt_len, each prompt message and the generation prompt is its own segment, and the completion is split where
K3's completion grammar finds its elements (reasoning, response, the tools element and each call, the end of the
turn); score renders each upstream answer as K3's assistant message, and its numbers for a row are recomputed
here from the whole conversation rendered by K3's renderer and scored by the local engine. The run is the shared
tiny-kimi-k3 demo (conftest `k3_demo_run`)."""

from __future__ import annotations

import json
import shutil
import sqlite3

import numpy as np
import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.profile import get_profile
from kimi_eagle_data.formats.kimi_k3.facts import GENERATION_PROMPTS, K3TokenIds
from kimi_eagle_data.formats.kimi_k3.grammar import parse_completion
from kimi_eagle_data.formats.kimi_k3.render import render_segments
from kimi_eagle_data.formats.kimi_k3.segment_ids import encode_segments
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from tests.helpers.cli import run_cli

PROFILE = get_profile("tiny-kimi-k3")
CONFIGS = [f"B{i}" for i in range(1, 9)]
JSON_KEYS = {"id", "config", "split", "picked", "source", "source_id", "finish_reason", "mode", "length",
             "prompt_len", "completion_len", "reasoning_len", "num_tool_calls", "loss_boundary", "tokenizer",
             "profile", "where", "issues", "warnings", "conversation_id", "turn", "end_reason", "conversation",
             "segments"}
SEGMENT_KEYS = {"index", "kind", "label", "start", "end", "loss", "ids", "text", "n_tokens"}


@pytest.fixture(scope="module")
def k3_run(k3_demo_run):
    """The shared `kimi-data demo --profile tiny-kimi-k3 --limit 2` (every config, both modes, every effort, B1, B6
    and B7 continued on the model's own turns): inspect only reads it."""
    work, demo = k3_demo_run
    assert demo.returncode == 0, demo.stderr[-2000:]
    return work


@pytest.fixture(scope="module")
def tok():
    return open_tokenizer(PROFILE.model_path)


def CLOSE_THINK(tok) -> list[int]:     # noqa: N802 - a constant of the tokenizer
    return encode_segments(tok, [("<|close|>", True), ("think", False), ("<|sep|>", True)])


def rows(work, config):
    out = []
    for f in sorted((work / "dataset" / "data" / config).glob("*.parquet")):
        for r in pq.read_table(f).to_pylist():
            out.append({**r, "split": f.name.split("-", 1)[0]})
    return out


def inspected(work, config, id_):
    return json.loads(run_cli("inspect", str(work), config, id_, "--json").stdout)


def test_inspect_splits_k3_rows_as_k3_reads_them(k3_run, tok):
    k3 = K3TokenIds.from_vocab(tok.get_vocab())
    b1 = rows(k3_run, "B1")
    picks = {"tool calls": next((r for r in b1 if r["num_tool_calls"] and r["split"] == "train"), None),
             "instant": next((r for r in b1 if r["mode"] == "instant"), None),
             "later turn": next((r for r in b1 if r["turn"] > 1 and r["mode"] == "thinking"), None)}
    assert all(picks.values()), f"the demo's B1 has no row with {[k for k, v in picks.items() if v is None]}"
    for what, r in picks.items():
        got = inspected(k3_run, "B1", r["id"])
        assert set(got) == JSON_KEYS and all(set(s) == SEGMENT_KEYS for s in got["segments"]), what
        segs, p = got["segments"], r["prompt_len"]
        assert sum((s["ids"] for s in segs), []) == r["input_ids"], what
        assert [s["start"] for s in segs[1:]] == [s["end"] for s in segs[:-1]]
        assert got["loss_boundary"] == p == got["prompt_len"] and p in {s["start"] for s in segs}
        assert [t for s in segs for t in [s["loss"]] * s["n_tokens"]] == r["loss_mask"]
        assert got["mode"] == r["mode"] and got["profile"] == PROFILE.name and got["issues"] == []
        # the prompt: one segment per message (each through its <|end_of_msg|>), then the generation prompt
        prompt = [s for s in segs if s["end"] <= p]
        assert prompt[-1]["kind"] == "generation_prompt" and prompt[-1]["text"] == GENERATION_PROMPTS[r["mode"]]
        for s in prompt[:-1]:
            assert s["text"].startswith("<|open|>message role=") and s["text"].endswith("<|end_of_msg|>"), what
        kinds = [s["kind"] for s in prompt]
        assert "user" in kinds and ("tools" in kinds) == bool(r["tools"])
        effort = [s for s in prompt if s["label"] == "system (thinking-effort)"]     # the effort announcement
        assert len(effort) == (r["mode"] == "thinking") and all(s["kind"] == "system" for s in effort)
        # the completion: as K3's grammar reads it
        done = [s for s in segs if s["start"] >= p]
        c = parse_completion(r["input_ids"][p:], k3, tok.decode, instant=r["mode"] == "instant")
        if r["mode"] == "thinking":
            reasoning = done[0]
            assert reasoning["kind"] == "reasoning" and reasoning["text"].endswith("<|close|>think<|sep|>")
            assert reasoning["n_tokens"] == c.reasoning_end + len(CLOSE_THINK(tok)) == r["reasoning_len"] + \
                len(CLOSE_THINK(tok))
        else:
            assert done[0]["kind"] == "answer" and "reasoning" not in [s["kind"] for s in done]
        answer = next(s for s in done if s["kind"] == "answer")
        assert answer["text"].endswith("<|close|>response<|sep|>")
        calls = [s for s in done if s["kind"] == "tool_call"]
        assert [s["label"] for s in calls] == [f"tool call {x.index}: {x.tool}" for x in c.calls]
        assert [s["start"] - p for s in calls] == [x.position for x in c.calls]
        for s, x in zip(calls, c.calls):
            assert s["text"].startswith(f'<|open|>call tool="{x.tool}" index="{x.index}"<|sep|>')
            assert s["text"].endswith("<|close|>call<|sep|>")
        assert len(calls) == r["num_tool_calls"]
        if calls:
            section = [s["text"] for s in done if s["kind"] == "tool_section"]
            assert section == ["<|open|>tools<|sep|>", "<|close|>tools<|sep|>"]
        assert done[-1]["kind"] == "end" and done[-1]["text"] == "<|close|>message<|sep|><|end_of_msg|>"
        assert "text" not in [s["kind"] for s in segs]
    later = inspected(k3_run, "B1", picks["later turn"]["id"])["segments"]
    assert "assistant" in [s["kind"] for s in later]          # the model's own earlier turn, in the prompt
    effort = f"Now the system is invoked with `thinking_effort={picks['later turn']['effort']}`."
    assert any(s["label"] == "system (thinking-effort)" and effort in s["text"] for s in later)
    # the human view: the same segments, the boundary between prompt and completion
    text = " ".join(run_cli("inspect", str(k3_run), "B1", picks["tool calls"]["id"]).stdout.split())
    assert f"loss-mask boundary at position {picks['tool calls']['prompt_len']}" in text
    assert "reasoning + <|close|>think<|sep|>" in text and "tool call 1: " in text and "end of turn" in text


def test_inspect_a_k3_reject_with_k3_reason_codes(k3_run):
    from kimi_eagle_data.formats import format_of

    reasons = format_of(PROFILE).reason_descriptions()
    rejected = [r for c in CONFIGS for r in rows(k3_run, c) if r["split"] == "rejected" and r["issues"]]
    assert rejected, "the K3 demo rejected nothing: no reject to inspect"
    r = rejected[0]
    config = r["id"].split("-", 1)[0]
    got = json.loads(run_cli("inspect", str(k3_run), config, "--rejected", r["issues"][0], "--json").stdout)
    assert got["id"] == r["id"] and r["issues"][0] in [i["code"] for i in got["issues"]]
    for i in got["issues"]:
        assert i["description"] == reasons[i["code"]] and i["detail"]      # K3's validator's line
    assert sum((s["ids"] for s in got["segments"]), []) == r["input_ids"]
    assert got["loss_boundary"] == r["prompt_len"] and r["prompt_len"] in {s["start"] for s in got["segments"]}
    unknown = run_cli("inspect", str(k3_run), "B1", "--rejected", "malformed_tool_section", check=False)  # K2.5's
    assert unknown.returncode == 1 and "is not a validation reason code" in unknown.stderr


def test_k3_segments_of_golden_turns_with_parallel_calls(tok):
    """In-process over every golden assistant turn (tests/golden/k3, parallel calls included) after its generation
    prompt: each call is a segment where K3's grammar finds it, and the segments cover the turn once."""
    from kimi_eagle_data.formats import format_of
    from tests.formats.kimi_k3.test_k3_grammar import TURNS

    fmt = format_of(PROFILE).bind(PROFILE, tok)
    seg = fmt.segmenter()
    k3 = fmt.k3
    many = 0
    for name, k, instant, golden in TURNS:
        mode = "instant" if instant else "thinking"
        gen = fmt.generation_prompt_ids(mode)
        turn = encode_segments(tok, [(t, special) for t, special in golden])
        spans = seg.spans(gen + turn, len(gen))
        assert [s[2] for s in spans[1:]] == [s[3] for s in spans[:-1]] and spans[-1][3] == len(gen) + len(turn)
        assert spans[0][:3] == ("generation_prompt", "generation prompt (instant mode)" if instant
                                else "generation prompt", 0)
        c = parse_completion(turn, k3, tok.decode, instant=instant)
        calls = [s for s in spans if s[0] == "tool_call"]
        assert [(s[1], s[2] - len(gen)) for s in calls] == [(f"tool call {x.index}: {x.tool}", x.position)
                                                            for x in c.calls], (name, k)
        assert spans[-1][:2] == ("end", "end of turn") and "text" not in [s[0] for s in spans], (name, k)
        many += len(calls) > 1
    assert many >= 3


def _assistant(answer: dict) -> dict:
    return {"role": "assistant", "reasoning_content": answer.get("reasoning"), "content": answer.get("content"),
            "tool_calls": answer.get("tool_calls")}


def test_score_k3_rows_recomputed_independently(k3_run, tok, tmp_path):
    from kimi_eagle_data.engines.base import ScoreRequest
    from kimi_eagle_data.engines.local import LocalEngine
    from kimi_eagle_data.prompts.prepared_file import read_prepared
    from kimi_eagle_data.store.workdir import Workdir

    work = tmp_path / "w"
    shutil.copytree(k3_run, work)        # score writes into its workdir: a private copy of the shared demo
    rep = json.loads(run_cli("score", "--workdir", str(work), "--json", "--no-progress").stdout)
    assert list(rep["configs"]) == CONFIGS
    for c in rep["configs"].values():
        assert c["failed"] == 0 and c["upstream"]["samples"] == c["sampled"] > 0 and c["own"]["samples"] > 0
    assert rep["configs"]["B1"]["modes"].keys() == {"thinking", "instant"}

    db = sqlite3.connect(work / "score.sqlite")
    stored = {r[0]: r[1:] for r in db.execute("SELECT id, n, sum, reasoning_n, reasoning_sum FROM scores "
                                              "WHERE kind='upstream'")}
    db.close()
    engine = LocalEngine(PROFILE.model_path)
    close_think = CLOSE_THINK(tok)
    checked, with_reasoning = 0, 0
    for config in CONFIGS:
        for rec in read_prepared(Workdir(work), config):
            if rec.id not in stored:
                continue
            thinking = rec.mode == "thinking"
            # the whole conversation, answer included, rendered by K3's renderer: it starts with the prompt
            whole = encode_segments(tok, render_segments(rec.messages + [_assistant(rec.answer)], rec.tools or None,
                                                         thinking=thinking,
                                                         effort=(rec.effort or "max") if thinking else None,
                                                         add_generation_prompt=False))
            assert whole[:len(rec.prompt_ids)] == list(rec.prompt_ids), rec.id
            answer = whole[len(rec.prompt_ids):]
            reasoning = (rec.answer.get("reasoning") or "") if thinking else ""
            k = len(encode_segments(tok, [(reasoning, False)])) if reasoning.strip() else 0
            if thinking:
                assert answer[k:k + len(close_think)] == close_think, rec.id
            (res,) = engine.score([ScoreRequest(rec.id, list(rec.prompt_ids) + answer, len(rec.prompt_ids))])
            n, total, rn, rsum = stored[rec.id]
            assert (n, rn) == (len(answer), k), rec.id
            assert abs(total - float(np.sum(res.logprobs))) < 1e-3
            assert abs(rsum - float(np.sum(res.logprobs[:k]))) < 1e-3
            checked += 1
            with_reasoning += k > 0
    assert checked >= 12 and with_reasoning >= 2
    for config in ("B4", "B5"):       # the config's upstream numbers are these rows' (B4, B5: no later turns)
        sums = [stored[i] for i in stored if i.startswith(f"{config}-")]
        up = rep["configs"][config]["upstream"]
        assert up["tokens"] == sum(s[0] for s in sums) and up["samples"] == len(sums)
        assert abs(up["nats_per_token"] - sum(s[1] for s in sums) / sum(s[0] for s in sums)) < 1e-4


def test_an_answer_renders_as_every_golden_assistant_turn():
    """What score scores an upstream answer as (`completion_segments`) is, segment for segment, the assistant turn
    K3's launch encoder rendered for the same message (tests/golden/k3), after the generation prompt."""
    from kimi_eagle_data.formats.kimi_k3.render import completion_segments
    from tests.formats.kimi_k3.test_k3_grammar import CONVERSATIONS, TURNS

    assert len(TURNS) >= 45
    for name, k, instant, golden in TURNS:
        message = [m for m in CONVERSATIONS[name]["request"]["messages"] if m["role"] == "assistant"][k]
        assert [[t, s] for t, s in completion_segments(message, thinking=not instant)] == golden, (name, k)


def test_an_answer_k3_cannot_write_is_an_unrenderable_failure_k25_writes_it(tok):
    from kimi_eagle_data.formats import format_of
    from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
    from kimi_eagle_data.records import PromptRecord
    from kimi_eagle_data.score.scoring import Item, Unrenderable, plan_items

    answer = {"reasoning": None, "content": "", "tool_calls": [
        {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}}]}
    k3 = format_of(PROFILE).bind(PROFILE, tok)
    rec = PromptRecord("B1-x", "B1", "src", "0", [{"role": "user", "content": "hi"}], None,
                       k3.render_prompt([{"role": "user", "content": "hi"}], None), answer=answer)
    (got,) = plan_items("B1", [rec], {}, 1022, False, k3)
    assert isinstance(got, Unrenderable) and got.failure().reason == "unrenderable"
    assert "not an object" in got.message
    k25 = format_of(TINY_KIMI).bind(TINY_KIMI, open_tokenizer(TINY_KIMI.model_path))
    rec.prompt_ids = k25.render_prompt(rec.messages, None)
    (got,) = plan_items("B1", [rec], {}, 1022, False, k25)
    assert isinstance(got, Item) and got.kind == "upstream"


def test_check_reads_k3_conversations_rows(k3_run, tmp_path):
    """A SpecForge `conversations` row's last assistant turn is read as K3 writes it (the format's render_answer):
    the run's own thinking-mode rows, written as conversations, are all valid; one whose call arguments K3 cannot
    write is an unreadable row, in one line."""
    out = []
    for config in CONFIGS:
        for r in rows(k3_run, config):
            if r["mode"] == "thinking" and r["split"] == "train":
                turns = [{k: v for k, v in m.items() if v is not None} for m in r["messages"]]
                out.append({"id": r["id"], "conversations": turns,
                            "tools": json.loads(r["tools"]) if r["tools"] else None})
    assert any(t.get("tool_calls") for r in out for t in r["conversations"][-1:])
    good = tmp_path / "conv.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    said = " ".join(run_cli("check", str(good), "--profile", PROFILE.name, "--no-progress").stdout.split())
    assert f"{len(out)} valid, 0 invalid" in said, said
    bad_row = next(r for r in out if r["conversations"][-1].get("tool_calls"))
    bad_row["conversations"][-1]["tool_calls"][0]["function"]["arguments"] = "[1]"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(bad_row) + "\n", encoding="utf-8")
    proc = run_cli("check", str(bad), "--profile", PROFILE.name, "--no-progress", check=False)
    assert "unreadable_row: the last conversations turn" in proc.stderr and "not an object" in proc.stderr
    assert "0 valid, 1 invalid" in " ".join(proc.stdout.split())
