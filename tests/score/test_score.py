"""`kimi-data score`: upstream answers kept by the adapters, prefill-only log-probs from the local engine and
the SGLang-protocol server, the recorded sums of generate, the ranking of two answer sets, resume after
kill -9, and the demo workdir scored through the real CLI."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS, k2_tokens

from tests.helpers.cli import run_cli
from tests.helpers.servers import Server

TINY = str(TINY_MODEL_DIR)


# -- adapters ---------------------------------------------------------------------------------------

def sample_items():
    from kimi_eagle_data.sources.policies import adapt_row
    from kimi_eagle_data.sources.config import load_config
    from kimi_eagle_data.sources.readers import iter_source

    conf = load_config(None)
    for c in conf.configs:
        part = conf.partition(c)
        _, rows = iter_source(part, None, samples=True, revision=None, limit=None)
        for _, row in rows:
            try:
                yield c, part, adapt_row(part.adapter, row, part.policy, id_field=part.id_field)[1]
            except Exception as e:   # noqa: BLE001 - a row-level reject; its code enters the digest
                yield c, part, getattr(e, "code", type(e).__name__)


def test_default_prompt_ids_do_not_change():
    """The sample ids of the bundled rows under the default policies, as before answers were kept
    (digest computed at commit d567080; recomputed when the B1 sample rows gained follow-up turns and 4 rows:
    a glaive row's id hashes the whole row, and every other config's ids stayed as they were)."""
    from kimi_eagle_data.prompts.prepare import sample_id
    from kimi_eagle_data.records import SourcePrompt

    out = []
    for c, part, items in sample_items():
        if isinstance(items, str):
            out.append(f"{c} err {items}")
            continue
        for sid, it in items:
            out.append(sample_id(c, part.upstream, sid, part.id_rule) if isinstance(it, SourcePrompt)
                       else f"{c} rej {it.code}")
    assert len(out) == 234
    assert hashlib.sha256("\n".join(out).encode()).hexdigest() == \
        "fee33fefef60199e681fe983c8d0aee130ca256d54b270d2bf19fd4e0ddaeae5"


def test_adapters_keep_the_upstream_answer():
    from kimi_eagle_data.records import SourcePrompt

    answers = {}
    for c, _, items in sample_items():
        if not isinstance(items, str):
            answers.setdefault(c, []).extend(it.answer for _, it in items if isinstance(it, SourcePrompt))
    for c, got in answers.items():
        assert got and all(a is not None for a in got), c
    # reasoning split off where the source has it (OpenCodeReasoning <think>, OpenThoughts' thought section)
    for c in ("B3", "B4", "B5"):
        assert all(a["reasoning"] for a in answers[c]), c
        assert not any("<think>" in a["content"] or "<|begin_of_solution|>" in a["content"] for a in answers[c])
    assert all(a["reasoning"] is None and a["content"] for a in answers["B2"])
    calls = [a["tool_calls"][0] for a in answers["B1"] if a.get("tool_calls")]
    assert calls and all(c["id"].startswith("functions.") and c["id"].endswith(":0") for c in calls)


def test_rows_without_an_answer_are_counted_not_dropped(tiny_tokenizer):
    from kimi_eagle_data.sources.config import load_config
    from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
    from kimi_eagle_data.prompts.prepare import PromptModes, prepare_rows

    part = load_config(None).partition("B7")
    rows = [(1, {"id": "a", "conversations": [{"from": "human", "value": "Hi, who are you?"}]}),
            (2, {"id": "b", "conversations": [{"from": "human", "value": "Name a colour."},
                                              {"from": "gpt", "value": "Blue."}]})]
    gen = tiny_tokenizer.encode(K2_TOKENS.generation_prompt, add_special_tokens=False)
    modes = PromptModes.of(TINY_KIMI, tiny_tokenizer, KIMI_K2_FORMAT, gen)
    records, _, report = prepare_rows(part, rows, tiny_tokenizer, modes=modes, max_new_tokens=64,
                                      max_seq_len=510, source_desc="test", n=None)
    assert report.prepared == 2 and report.without_answer == 1
    assert {r.source_id: r.answer for r in records} == {"a": None, "b": {"reasoning": None, "content": "Blue."}}


def test_render_answer_uses_profile_tokens(tiny_tokenizer):
    from kimi_eagle_data.formats.kimi_k2.answer import render_answer

    tokens = k2_tokens(tiny_tokenizer)
    ids, k = render_answer({"reasoning": "think first", "content": "Done.", "tool_calls": [
        {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        tiny_tokenizer, tokens)
    assert ids[k] == tokens.think_close and ids[-1] == tokens.end_of_turn
    assert tiny_tokenizer.decode(ids[:k]) == "think first"
    text = tiny_tokenizer.decode(ids)
    assert text.endswith("</think>Done.<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
                         "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|><|im_end|>")


# -- engines ----------------------------------------------------------------------------------------

def prompt(tok, text: str) -> list[int]:
    from kimi_eagle_data.formats.kimi_k2.render import render_prompt

    return render_prompt(tok, [{"role": "user", "content": text}], None)


def test_protocol_server_and_local_engine_give_the_same_logprobs(tiny_tokenizer):
    from kimi_eagle_data.engines.base import (
        GenerationRequest,
        SamplingParams,
        ScoreRequest,
        ScoreResult,
    )
    from kimi_eagle_data.engines.local import LocalEngine
    from kimi_eagle_data.engines.sglang import SGLangEngine

    answer = tiny_tokenizer.encode("a plain answer in prose.</think>Yes.<|im_end|>", add_special_tokens=False)
    reqs = [ScoreRequest(f"s{i}", prompt(tiny_tokenizer, q) + answer[: 4 + 3 * i], len(prompt(tiny_tokenizer, q)))
            for i, q in enumerate(["Sum 2 and 3.", "Write a haiku about rain, please, in English.", "Hi"])]
    local = {r.id: r for r in LocalEngine(TINY, batch_size=2).score(reqs)}
    srv = Server("--max-batch", "3").start()
    try:
        engine = SGLangEngine([srv.url], concurrency=3)
        remote = {r.id: r for r in engine.score(reqs)}
        stop = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
        gen = GenerationRequest("g", reqs[0].input_ids[:reqs[0].start], SamplingParams(24, 1.0, 0.95, (stop,)),
                                return_logprob=True)
        c = next(iter(engine.generate([gen])))
    finally:
        srv.kill()
    for r in reqs:
        assert isinstance(remote[r.id], ScoreResult)
        assert len(remote[r.id].logprobs) == len(r.input_ids) - r.start == len(local[r.id].logprobs)
        assert max(abs(a - b) for a, b in zip(remote[r.id].logprobs, local[r.id].logprobs)) < 1e-4
        assert remote[r.id].top1_ids == local[r.id].top1_ids
    # what generate records for a sampled completion = the prefill score of the same tokens
    assert c.output_logprobs is not None and len(c.output_logprobs) == len(c.output_ids) > 0
    rescored = next(iter(LocalEngine(TINY).score([ScoreRequest("g", gen.input_ids + list(c.output_ids),
                                                               len(gen.input_ids))])))
    assert max(abs(a - b) for a, b in zip(c.output_logprobs, rescored.logprobs)) < 1e-4
    assert list(c.output_top1_ids) == rescored.top1_ids


def test_own_samples_rank_above_answers_in_another_style(tiny_tokenizer):
    """Two answer sets for the same prompts: the target's own samples re-scored, and answers in another
    style (plain English prose). Own must score higher, with a gap whose interval excludes zero, while a
    second set of own samples scores alike (the issue's measured direction: -3.5 vs -11.1 nats/token)."""
    from kimi_eagle_data.engines.base import (
        GenerationRequest,
        SamplingParams,
        ScoreRequest,
    )
    from kimi_eagle_data.engines.local import LocalEngine
    from kimi_eagle_data.records import LogprobSums
    from kimi_eagle_data.formats.kimi_k2.answer import render_answer
    from kimi_eagle_data.score.report import summarize

    tokens = k2_tokens(tiny_tokenizer)
    questions = ["What is 7 times 8?", "Name three primary colours.", "Write a function that adds two numbers.",
                 "Translate 'good morning' to French.", "What is the boiling point of water?",
                 "Give me a synonym for happy.", "List two prime numbers.", "Who wrote Hamlet?"]
    prose = ["Well, I suppose the honest answer depends on how one looks at it, my dear friend.",
             "Let me tell you a story about the old lighthouse keeper and his faithful dog.",
             "In the grand tapestry of history, few questions have stirred the soul quite like this one."]
    engine = LocalEngine(TINY, batch_size=8)
    sp = SamplingParams(40, 1.0, 0.95, (tokens.end_of_turn,))
    prompts = {f"q{i}": prompt(tiny_tokenizer, q) for i, q in enumerate(questions)}
    sets = {}
    for name, seed in (("own", 1), ("own_again", 2)):
        done = engine.generate([GenerationRequest(k, p, sp, seed=seed) for k, p in prompts.items()])
        sets[name] = {c.id: list(c.output_ids) for c in done}
    sets["other"] = {k: render_answer({"reasoning": None, "content": prose[i % 3]}, tiny_tokenizer, tokens)[0]
                     for i, k in enumerate(prompts)}

    def scored(answers):
        reqs = [ScoreRequest(k, prompts[k] + a, len(prompts[k])) for k, a in answers.items()]
        return [LogprobSums.of(answers[r.id], r.logprobs, r.top1_ids, 0).as_dict() for r in engine.score(reqs)]

    own, again, other = scored(sets["own"]), scored(sets["own_again"]), scored(sets["other"])
    style = summarize(other, own)
    assert style["own"]["nats_per_token"] > style["upstream"]["nats_per_token"]
    assert style["gap"]["low"] > 1.0 and style["verdict"] == "regenerate"
    alike = summarize(again, own)
    assert abs(alike["gap"]["estimate"]) < style["gap"]["estimate"] / 3
    assert alike["gap"]["low"] < style["gap"]["low"]


def test_old_checkpoint_gains_the_column(tmp_path):
    from kimi_eagle_data.store.checkpoint import Checkpoint, _checksum, ids_to_blob

    path = tmp_path / "generations.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""CREATE TABLE completions (id TEXT PRIMARY KEY, config TEXT NOT NULL, output_ids BLOB NOT NULL,
        finish_reason TEXT NOT NULL, finish_detail TEXT NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER,
        cached_tokens INTEGER, engine TEXT, latency_s REAL, created_at REAL NOT NULL, checksum TEXT NOT NULL);""")
    blob = ids_to_blob([5, 6, 7])
    db.execute("INSERT INTO completions VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
               ("B1-x", "B1", blob, "stop", "{}", 3, 3, 0, "local", 0.1, 1.0, _checksum("B1-x", blob, "stop")))
    db.commit()
    db.close()
    ckpt = Checkpoint(path)
    (c,) = list(ckpt.completions("B1"))
    assert c.logprob_stats is None and list(c.output_ids) == [5, 6, 7]
    ckpt.close()


# -- the CLI on the demo workdir ----------------------------------------------------------------------

@pytest.fixture
def demo_copy(demo_run, tmp_path):
    """A private copy of the shared demo workdir (scoring writes into it and re-emits its card)."""
    workdir, _ = demo_run
    dst = tmp_path / "work"
    shutil.copytree(workdir, dst)
    return dst


def test_demo_is_scored_for_every_config(demo_copy):
    w = demo_copy
    # B4's own completions lose their recorded sums: score re-scores them prefill-only, and must agree
    db = sqlite3.connect(w / "generations.sqlite")
    recorded = db.execute("SELECT logprob_stats FROM completions WHERE config='B4'").fetchall()
    db.execute("UPDATE completions SET logprob_stats=NULL WHERE config='B4'")
    db.commit()
    db.close()
    rep = json.loads(run_cli("score", "--workdir", str(w), "--json", "--no-progress").stdout)
    assert list(rep["configs"]) == [f"B{i}" for i in range(1, 9)]
    for cfg, c in rep["configs"].items():
        assert c["upstream"]["samples"] == c["sampled"] > 0 and c["own"]["samples"] > 0, cfg
        assert c["verdict"] in ("regenerate", "either") and c["failed"] == 0
        assert c["upstream"]["nats_per_token"] < 0 and c["own"]["nats_per_token"] < 0
    for cfg in ("B3", "B4", "B5"):
        assert set(rep["configs"][cfg]["segments"]) == {"reasoning", "answer"}
    b4 = rep["configs"]["B4"]
    assert b4["own_rescored"] == b4["own"]["samples"]
    stats = [json.loads(r[0]) for r in recorded]
    mean = sum(s["sum"] for s in stats) / sum(s["n"] for s in stats)
    assert abs(mean - b4["own"]["nats_per_token"]) < 1e-3
    assert rep.pop("probe") is None                     # no probe ran on this dataset
    assert json.loads((w / "score.json").read_text()) == rep

    table = run_cli("score", "--workdir", str(w), "--no-progress").stdout   # nothing left: reads the checkpoint
    assert "B8" in table and "verdict" in table and "scored " not in table   # nothing left: no run line
    plan = json.loads(run_cli("plan", "--workdir", str(w), "--json").stdout)
    assert plan["score"]["configs"]["B1"] == rep["configs"]["B1"]
    assert "verdict" in run_cli("plan", "--workdir", str(w)).stdout
    run_cli("emit", "--workdir", str(w))
    card = (w / "dataset" / "README.md").read_text()
    assert "## Where regeneration pays" in card and "| B8 | all |" in card

    # With a probe of this dataset beside it, score says per config where the probe's measured gain disagrees
    verdicts = {c: r["verdict"] for c, r in rep["configs"].items()}
    gains = {c: ({"estimate": 0.2, "low": 0.1, "high": 0.3} if v == "regenerate" else
                 {"estimate": 0.0, "low": -0.1, "high": 0.1}) for c, v in verdicts.items()}
    gains["B1"] = {"estimate": -0.06, "low": -0.15, "high": 0.06, "exploratory": True}
    (w / "probe.json").write_text(json.dumps({"setup": {"data": str(w / "dataset")}, "configs": {
        c: {"gain_over_upstream": g} for c, g in gains.items()}}))
    shown = json.loads(run_cli("score", "--workdir", str(w), "--json", "--no-progress").stdout)["probe"]
    assert set(shown) == set(verdicts)
    assert [c for c, a in shown.items() if not a["agrees"]] == (["B1"] if verdicts["B1"] == "regenerate" else [])
    text = run_cli("score", "--workdir", str(w), "--no-progress").stdout
    assert "against the probe" in text and "the probe agrees with the score on" in text


def test_score_resumes_after_kill(demo_copy, tmp_path):
    """kill -9 mid-run against a slow SGLang-protocol server, then rerun: every item scored once, and the
    same numbers as an uninterrupted run with the local engine."""
    w = demo_copy
    fresh = tmp_path / "fresh"
    shutil.copytree(w, fresh)
    srv = Server("--delay", "0.4", "--max-batch", "1").start()
    try:
        args = ["-m", "kimi_eagle_data", "score", "B6", "--workdir", str(w), "--limit", "8", "--engine", "sglang",
                "--server", srv.url, "--concurrency", "1", "--no-progress"]
        proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        db_path = w / "score.sqlite"
        deadline = time.monotonic() + 120
        n = 0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                n = sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM scores").fetchone()[0]
            except sqlite3.Error:
                n = 0
            if n >= 2:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert 2 <= n < 8, f"the kill did not land mid-run ({n} of 8 scored)"
        run_cli("score", "B6", "--workdir", str(w), "--limit", "8", "--engine", "sglang", "--server", srv.url,
                "--no-progress")
    finally:
        srv.kill()
    rows = sqlite3.connect(w / "score.sqlite").execute("SELECT id, kind FROM scores").fetchall()
    resumed = json.loads((w / "score.json").read_text())["configs"]["B6"]
    ref = json.loads(run_cli("score", "B6", "--workdir", str(fresh), "--limit", "8", "--json",
                             "--no-progress").stdout)["configs"]["B6"]
    # 8 upstream answers, and the own completions sampled at a temperature other than 1 (instant mode's 0.6),
    # rescored: the same items as the uninterrupted run, each once
    ref_rows = sqlite3.connect(fresh / "score.sqlite").execute("SELECT id, kind FROM scores").fetchall()
    assert len(rows) == len(set(rows)) == len(ref_rows) and set(rows) == set(ref_rows)
    assert sum(kind == "upstream" for _, kind in rows) == 8
    assert abs(resumed["upstream"]["nats_per_token"] - ref["upstream"]["nats_per_token"]) < 1e-4
    assert resumed["upstream"]["top1"] == ref["upstream"]["top1"] and resumed["verdict"] == ref["verdict"]
