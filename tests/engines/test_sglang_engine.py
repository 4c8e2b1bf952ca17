"""The SGLang engine against real SGLang-protocol servers over loopback (`kimi-data serve --engine local`),
and against the real `sglang-router` in front of two of them."""

from __future__ import annotations

import contextlib

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.helpers.cli import popen_cli, run_cli
from tests.helpers.servers import TINY, Server, free_port, get_json, sglang_router, wait_for
from tests.helpers.workdirs import (CONFIGS, completions, engine_args, failure_reasons, generate_in_flight,
                                    prepare_args, prepared_count, report, sglang_args)


@pytest.fixture
def server():
    s = Server().start()
    yield s
    s.kill()


def test_greedy_tokens_equal_the_in_process_engine(server, tiny_tokenizer):
    from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams
    from kimi_eagle_data.engines.local import LocalEngine
    from kimi_eagle_data.engines.sglang import SGLangEngine
    from kimi_eagle_data.formats.kimi_k2.render import render_prompt

    stop = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    sp = SamplingParams(max_new_tokens=64, temperature=0.0, top_p=1.0, stop_token_ids=(stop,))
    prompts = ["What is the capital of France?", "Write a haiku about rain.", "Sum 2 and 3."]
    reqs = [GenerationRequest(f"r{i}", render_prompt(tiny_tokenizer, [{"role": "user", "content": p}], None), sp)
            for i, p in enumerate(prompts)]
    local = {c.id: c for c in LocalEngine(TINY, batch_size=1).generate(reqs)}
    remote = {c.id: c for c in SGLangEngine([server.url], concurrency=1).generate(reqs)}
    for r in reqs:
        assert remote[r.id].output_ids == local[r.id].output_ids
        assert remote[r.id].finish_detail == local[r.id].finish_detail
        assert remote[r.id].prompt_tokens == len(r.input_ids)


def test_generate_against_server_then_validate(server, tmp_path):
    w = tmp_path / "w"
    proc = run_cli("build", *sglang_args(w, server.url))
    n = prepared_count(w)
    assert f"generate: {n} completed" in proc.stdout
    assert sorted(completions(w)) == sorted(set(completions(w))) and len(completions(w)) == n
    assert report(w, "B6")["valid"] > 0
    manifest = json.loads((w / "dataset" / "manifest.json").read_text())
    assert manifest["provenance"]["engine"] == "sglang"
    assert manifest["provenance"]["engine_version"] == "0.5.23"


def test_injected_faults_are_retried_and_accounted(tmp_path):
    flaky = Server("--error-rate", "0.3", "--drop-rate", "0.1", "--fault-seed", "7").start()
    try:
        w = tmp_path / "w"
        run_cli("build", *sglang_args(w, flaky.url, extra=("--max-attempts", "12")))
        n = prepared_count(w)
        assert len(set(completions(w))) == n
        for c in CONFIGS:
            assert report(w, c)["balanced"] and report(w, c)["failed"] == 0
    finally:
        flaky.kill()


def test_exhausted_retries_are_recorded_as_failed_then_retried(tmp_path):
    broken = Server("--error-rate", "1.0").start()
    w = tmp_path / "w"
    try:
        proc = run_cli("build", *sglang_args(w, broken.url, extra=("--max-attempts", "2")), check=False)
        assert proc.returncode == 3, proc.stderr        # samples failed in this run
        n = prepared_count(w)
        assert f"0 completed, {n} failed" in proc.stdout
        reps = [report(w, c) for c in CONFIGS]
        assert sum(r["failed"] for r in reps) == n and all(r["balanced"] for r in reps)
        assert all(set(r["failure_reasons"]) == {"http_500"} for r in reps)
        again = run_cli("generate", "--workdir", str(w), "--server", broken.url)   # none failed in *this* run: 0
        assert f"{n} failed earlier (rerun with --retry-failed)" in again.stdout
        # ...but they are still missing, and the last line says so (a script loops on --retry-failed's exit 3)
        assert again.stderr.strip().splitlines()[-1] == (
            f"warning: {n} samples failed earlier and were not sent again, so the dataset lacks them; rerun with "
            "--retry-failed (it exits 3 while any still fails)"), again.stderr
    finally:
        broken.kill()
    healthy = Server().start()
    try:
        proc = run_cli("build", "--workdir", str(w), "--server", healthy.url, "--retry-failed")
        assert f"generate: {n} completed, 0 failed" in proc.stdout
        assert sum(report(w, c)["failed"] for c in CONFIGS) == 0
    finally:
        healthy.kill()


def test_kill_9_at_random_moments_loses_nothing_and_duplicates_nothing(tmp_path):
    # Slow enough (1.5 s a request, 2 at a time) that four kills land mid-run on a fast machine too.
    rng = random.Random(1234)
    with generate_in_flight(tmp_path, delay=1.5) as run:
        w, n = run.workdir, run.prepared
        for trial in range(4):
            if trial:
                run.again()     # mid-run: after this process has committed something...
            time.sleep(rng.uniform(0.0, 1.5))   # ...at a random point of the next request (again() was the wait)
            os.kill(run.proc.pid, signal.SIGKILL)
            run.proc.wait()
            ids = completions(w)
            assert len(ids) == len(set(ids)), f"duplicate after kill {trial}"
        done_before = len(completions(w))
        assert done_before < n, "the run finished before any kill; slow the server down"
        final = run_cli("generate", "--workdir", str(w))
        assert f"{n - done_before} completed, 0 failed, {done_before} already done" in final.stdout
        ids = completions(w)
        assert len(ids) == len(set(ids)) == n
        run_cli("validate", "--workdir", str(w))
        assert all(report(w, c)["balanced"] and report(w, c)["pending"] == 0 for c in CONFIGS)


def test_server_killed_and_restarted_mid_run(tmp_path):
    port = free_port()
    first = Server("--delay", "0.5", "--max-batch", "2", port=port).start()
    w = tmp_path / "w"
    run_cli("prepare", *prepare_args(w))
    n = prepared_count(w)
    gen = popen_cli("generate", "--workdir", str(w), *engine_args(first.url), "--concurrency", "2", "--max-attempts",
                    "30", "--retry-backoff", "0.2", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: first.served() >= 1, 300, "the first server served nothing", proc=gen)
    first.kill()   # the client now sees connection refused until the second server is up (seconds)
    second = Server(port=port).start()
    try:
        out, err = gen.communicate(timeout=300)
        assert gen.returncode == 0, err
        assert len(set(completions(w))) == n
        assert second.served() > 0, "the run finished before the server was killed"
    finally:
        second.kill()


def test_real_sglang_router_in_front_of_two_servers(tmp_path):
    a, b = Server("--delay", "0.02").start(), Server("--delay", "0.02").start()
    try:
        with sglang_router(a.url, b.url) as url:
            w = tmp_path / "w"
            gen = popen_cli("build", *sglang_args(w, url, extra=("--concurrency", "4", "--max-attempts", "20")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            # Kill b once it has served something (the build is past start-up), not after a fixed time.
            wait_for(lambda: b.served() >= 1, 300, "worker b served nothing", proc=gen)
            served_b = b.served()
            b.kill()   # one worker dies mid-run: the router and our retries carry on with the other
            out, err = gen.communicate(timeout=600)
            assert gen.returncode == 0, err
            assert a.served() > 0 and served_b > 0
            assert len(set(completions(w))) == prepared_count(w)
    finally:
        a.kill()
        b.kill()


def test_a_stopped_client_aborts_its_requests_on_every_worker_behind_the_router(tmp_path):
    """SIGTERM stops generate with requests in flight through the real sglang-router. The workers would run them on
    (a stopped client does not end them) and refuse the rerun's requests, which carry the same ids, as duplicates;
    the router has no abort endpoint, so the client aborts each request on every worker the router lists."""
    a, b = Server("--delay", "600").start(), Server("--delay", "600").start()   # a request runs until aborted
    try:
        with sglang_router(a.url, b.url) as url:
            w = tmp_path / "w"
            run_cli("prepare", *prepare_args(w))
            gen = popen_cli("generate", "--workdir", str(w), *engine_args(url), "--concurrency", "4",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            wait_for(lambda: len(a.running()) == len(b.running()) == 2, 300, "four requests in flight", proc=gen)
            in_flight = a.running() | b.running()
            gen.send_signal(signal.SIGTERM)
            out, err = gen.communicate(timeout=120)
            assert gen.returncode == 143, err
            assert a.running() == b.running() == set(), "a stopped client left requests running"
            assert set(a.aborted()) | set(b.aborted()) == in_flight
            assert completions(w) == [] and failure_reasons(w) == {}   # aborted answers are not recorded
    finally:
        a.kill()
        b.kill()


def test_contract_check_script_passes_against_the_protocol_server(server):
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "sglang_contract_check.py"
    proc = subprocess.run([sys.executable, str(script), "--url", server.url], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout
    assert "0 failed" in proc.stdout and "FAIL" not in proc.stdout


def test_serve_dry_run_prints_the_kimi_launch_command():
    proc = run_cli("serve", "--dry-run", "--context-length", "32768", "--port", "30123")
    cmd = proc.stdout.split()
    assert cmd[:3] == ["python", "-m", "sglang.launch_server"]
    flags = dict(zip(cmd[3::1], cmd[4::1]))
    assert flags["--model-path"] == "moonshotai/Kimi-K2.5" and flags["--tp"] == "8"
    assert flags["--tool-call-parser"] == "kimi_k2" and flags["--reasoning-parser"] == "kimi_k2"
    assert flags["--context-length"] == "32768" and flags["--port"] == "30123"
    assert "--trust-remote-code" in cmd and "--enable-metrics" in cmd


def ids_in(checkpoint) -> set[str]:
    # Closed at once: a connection left to the garbage collector removes the -shm file whenever it goes, e.g.
    # in the middle of the copytree below.
    with contextlib.closing(sqlite3.connect(checkpoint)) as db:
        return {r[0] for r in db.execute("SELECT id FROM completions")}


def test_shards_generate_disjoint_sets_that_build_merges(server, tmp_path):
    w = tmp_path / "w"
    run_cli("prepare", *prepare_args(w))
    n = prepared_count(w)
    run_cli("generate", "--workdir", str(w), *engine_args(server.url), "--shard", "0/2")
    run_cli("generate", "--workdir", str(w), "--shard", "1/2")
    a, b = (ids_in(w / f"generations.shard-{k}-of-2.sqlite") for k in (0, 1))
    assert a and b and not (a & b) and len(a | b) == n
    proc = run_cli("build", "--workdir", str(w))
    assert f"generate: 0 completed, 0 failed, {n} already done" in proc.stdout
    assert sum(report(w, c)["generated"] for c in CONFIGS) == n
    # A second workdir (another node without a shared filesystem) merged into a third.
    other = tmp_path / "other"
    shutil.copytree(w, other)
    (w / "generations.shard-1-of-2.sqlite").unlink()
    proc = run_cli("validate", "--workdir", str(w), "--merge", str(other))
    assert sum(report(w, c)["generated"] for c in CONFIGS) == n


def test_ctrl_c_stops_cleanly_and_the_rerun_resumes(tmp_path):
    # Ctrl-C as a terminal delivers it (popen_cli's child raises KeyboardInterrupt on SIGINT, as an
    # interpreter started from a terminal does, even when this test run ignores SIGINT).
    with generate_in_flight(tmp_path, output=True) as run:
        w, n, proc = run.workdir, run.prepared, run.proc
        assert n > 2, f"too few prompts ({n}) for a run to be interrupted mid-way"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, f"exit {proc.returncode}\nstdout: {out}\nstderr: {err}"
        assert "interrupted" in err and "rerun the same command to resume" in err
        assert "Traceback" not in err
        done = len(completions(w))
        assert 0 < done < n
        final = run_cli("generate", "--workdir", str(w))
        assert f"{n - done} completed, 0 failed, {done} already done" in final.stdout
        assert len(set(completions(w))) == len(completions(w)) == n


@pytest.fixture
def tiny_kimi_one_id_short():
    """tiny-kimi with an embedding one id short of its tokenizer, for one test, then the shipped one again."""
    from dataclasses import replace

    from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
    from kimi_eagle_data.profile import register_profile, unregister_profile

    unregister_profile(TINY_KIMI.name)
    register_profile(replace(TINY_KIMI, vocab_size=2047))
    yield
    unregister_profile(TINY_KIMI.name)
    register_profile(TINY_KIMI)


def test_out_of_vocabulary_prompt_is_a_counted_prepare_reject_and_never_sent(tmp_path, tiny_kimi_one_id_short):
    """A model whose embedding is one id short of its tokenizer (as K2.5's tokenizer names ids past the
    model's 163,840): a prompt holding [PAD] (2047) would crash a real server; prepare counts it out."""
    from click.testing import CliRunner

    from kimi_eagle_data.cli.main import main as cli
    source = tmp_path / "b6.jsonl"
    texts = ["How many legs do 3 spiders have?", "Repeat after me: [PAD]", "Name a prime above 10."]
    source.write_text("".join(json.dumps({"prompt": t, "prompt_id": f"p{i}", "messages": [
        {"role": "user", "content": t}]}) + "\n" for i, t in enumerate(texts)))
    # The text "[PAD]" is the special token's own string: kept as served (special_text), so the id reaches the bound.
    config = tmp_path / "as_served.toml"
    config.write_text('[partitions.B6]\nspecial_text = "as_served"\n')
    sent = tmp_path / "sent.jsonl"
    s = Server("--record-requests", str(sent)).start()
    try:
        w = tmp_path / "w"
        args = [a for a in sglang_args(w, s.url) if a != "--samples"]
        result = CliRunner().invoke(cli, ["build", *args, "--source", f"B6={source}", "--config", str(config)],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
    finally:
        s.kill()
    prepared = json.loads((w / "prepared" / "B6.json").read_text())
    assert prepared["rejected"] == {"prompt_id_out_of_vocab": 1} and prepared["prepared"] == 2
    rejects = [json.loads(line) for line in (w / "prepared" / "B6.rejects.jsonl").read_text().splitlines()]
    assert [r["source_id"] for r in rejects] == ["p1"] and "first 2047" in rejects[0]["message"]
    bodies = [json.loads(line) for line in sent.read_text().splitlines()]
    assert bodies and all(max(b["input_ids"]) < 2047 for b in bodies)
    assert len({tuple(b["input_ids"]) for b in bodies}) == 2


def test_the_client_refuses_to_send_an_id_the_model_cannot_embed(server):
    from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams, ScoreRequest
    from kimi_eagle_data.engines.sglang import SGLangEngine
    from kimi_eagle_data.records import RequestFailure

    engine = SGLangEngine([server.url], vocab_size=2047)
    sp = SamplingParams(max_new_tokens=4, temperature=0.0, top_p=1.0, stop_token_ids=())
    before = server.served()
    [c] = list(engine.generate([GenerationRequest("r", [1795, 2047, 1809], sp)]))
    [r] = list(engine.score([ScoreRequest("s", [1795, 2047, 1809], start=1)]))
    assert isinstance(c, RequestFailure) and c.reason == "prompt_out_of_vocab"
    assert c.attempts == 0 and "2047" in c.message
    assert isinstance(r, RequestFailure) and r.reason == "prompt_out_of_vocab"
    assert server.served() == before


def test_young_collections_are_spaced_while_requests_stream_and_restored_after(server):
    import gc

    from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams
    from kimi_eagle_data.engines.async_bridge import STREAM_GC_THRESHOLD
    from kimi_eagle_data.engines.sglang import SGLangEngine

    sp = SamplingParams(max_new_tokens=4, temperature=0.0, top_p=1.0, stop_token_ids=())
    reqs = [GenerationRequest(f"r{i}", [1795, 1809], sp) for i in range(3)]
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        during = []
        for _ in SGLangEngine([server.url], concurrency=2).generate(reqs):
            during.append(gc.get_threshold())
        assert during and all(t == (STREAM_GC_THRESHOLD, 10, 10) for t in during)
        assert gc.get_threshold() == (700, 10, 10)
        stream = SGLangEngine([server.url], concurrency=2).generate(reqs)
        next(stream)
        stream.close()           # a consumer that breaks off: restored too
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
