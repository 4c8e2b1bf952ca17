"""Our client against real SGLang 0.5.23 on CPU serving the tiny model (scripts/real_engines/).

Selected with `-m real_engine` (scripts/real_engines/run_tier.sh); deselected by the default test command."""

from __future__ import annotations

import json

import pytest

import signal
import subprocess
import sys

from tests.helpers.cli import run_cli
from tests.helpers.servers import wait_for
from tests.helpers.workdirs import completions, prepared_count
from tests.real_engines.servers import CLI_TIMEOUT_S, REPO, TINY, free_port, http, installed_venv, sglang_server

# Real servers start in tens of seconds idle, minutes on a shared 2-core machine; decoding there runs at a few
# tokens per second: the suite's 600 s per test would cut these short (a guard, not a measure).
pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(3 * 3600)]




def prepare_args(workdir, limit: int = 10) -> list[str]:
    # 10 prompts with the tiny profile's 192 new tokens (fewer cut most answers short: no train rows); a CPU
    # serves the tiny model at ~1,000 tok/s idle, at tens when its cores are shared.
    return ["B6", "--workdir", str(workdir), "--profile", "tiny-kimi", "--model", TINY, "--samples", "--limit",
            str(limit)]


def engine_args(url: str) -> list[str]:
    return ["--engine", "sglang", "--server", url, "--no-progress"]


def build_args(workdir, url: str, *extra: str, limit: int = 10) -> list[str]:
    return [*prepare_args(workdir, limit), *engine_args(url), *extra]


def assert_built_and_checked(workdir, build_stdout: str) -> None:
    n = prepared_count(workdir)
    assert n > 0 and f"generate: {n} completed, 0 failed" in build_stdout, build_stdout
    manifest = json.loads((workdir / "dataset" / "manifest.json").read_text())
    assert manifest["provenance"]["engine"] == "sglang"
    assert manifest["provenance"]["engine_version"] == "0.5.23"
    train = sorted((workdir / "dataset").glob("data/B6/train-*.parquet"))
    assert train, "no train rows from the real engine"
    for f in train:
        proc = run_cli("check", str(f), "--profile", "tiny-kimi", "--no-progress", check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_build_then_score_through_real_sglang_ids_only(ids_server, tmp_path):
    w = tmp_path / "w"
    proc = run_cli("build", *build_args(w, ids_server.url), timeout=CLI_TIMEOUT_S)
    assert_built_and_checked(w, proc.stdout)
    rep = json.loads(run_cli("score", "B6", "--workdir", str(w), "--limit", "8", "--engine", "sglang",
                             "--server", ids_server.url, "--json", "--no-progress", timeout=CLI_TIMEOUT_S).stdout)
    b6 = rep["configs"]["B6"]
    assert b6["failed"] == 0 and b6["upstream"]["samples"] == b6["sampled"] > 0
    assert b6["upstream"]["nats_per_token"] < 0 and b6["own"]["samples"] > 0
    assert ids_server.alive()


def test_kill_9_of_the_client_then_the_rerun_completes_the_rest(ids_server, tmp_path):
    w = tmp_path / "w"
    run_cli("prepare", *prepare_args(w))
    n = prepared_count(w)
    proc = subprocess.Popen([sys.executable, "-m", "kimi_eagle_data", "generate", "--workdir", str(w),
                             *engine_args(ids_server.url), "--concurrency", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(lambda: len(completions(w)) >= 2, CLI_TIMEOUT_S, "no completion committed", proc=proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(completions(w))
    assert 2 <= done < n, f"the kill did not land mid-run ({done} of {n})"
    rerun = run_cli("generate", "--workdir", str(w), "--no-progress", timeout=CLI_TIMEOUT_S)
    assert f"{n - done} completed, 0 failed, {done} already done" in rerun.stdout
    assert sorted(completions(w)) == sorted(set(completions(w))) and len(completions(w)) == n


def test_server_killed_and_restarted_mid_run(tmp_path):
    """kill -9 of the real server mid-run, a new one on the same port: retries carry the run to the end. No train
    rows needed: 6 prompts, 2 at a time, still most of the run to do when the kill follows the first commit."""
    port = free_port()
    servers = [sglang_server(tmp_path, "--skip-tokenizer-init", port=port).start()]
    w = tmp_path / "w"
    gen = None
    try:
        run_cli("prepare", *prepare_args(w, limit=6))
        n = prepared_count(w)
        with open(tmp_path / "generate.out", "w") as out, open(tmp_path / "generate.err", "w") as err:
            gen = subprocess.Popen([sys.executable, "-m", "kimi_eagle_data", "generate", "--workdir", str(w),
                                    *engine_args(servers[0].url), "--concurrency", "2", "--max-attempts", "40",
                                    "--retry-backoff", "0.5"], stdout=out, stderr=err)
        wait_for(lambda: len(completions(w)) >= 1, CLI_TIMEOUT_S, "no completion committed", proc=gen)
        servers[0].kill9()
        assert len(completions(w)) < n, "the run ended before the server was killed"
        servers.append(sglang_server(tmp_path, "--skip-tokenizer-init", port=port))
        servers[1].start()
        gen.wait(timeout=CLI_TIMEOUT_S)
        out = (tmp_path / "generate.out").read_text()
        assert gen.returncode == 0, out + (tmp_path / "generate.err").read_text()
        assert f"generate: {n} completed, 0 failed" in out, out
        assert sorted(completions(w)) == sorted(set(completions(w))) and len(completions(w)) == n
    finally:
        if gen is not None and gen.poll() is None:
            gen.kill()
            gen.wait()
        for server in servers:
            server.stop()


def test_two_real_servers_behind_the_real_sglang_router(ids_server, second_ids_server, tmp_path):
    second = second_ids_server
    venv_python = str(installed_venv("sglang") / "bin" / "python")
    port = free_port()
    router = subprocess.Popen([venv_python, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port",
                               str(port), "--worker-urls", ids_server.url, second.url, "--policy", "round_robin",
                               "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        def both_healthy():
            status, body = http("GET", url + "/workers", timeout=10)
            return status == 200 and sum(bool(x.get("is_healthy", True)) for x in body.get("workers", [])) == 2

        wait_for(both_healthy, 300, "the router did not register both workers", proc=router)
        w = tmp_path / "w"
        proc = run_cli("build", *build_args(w, url, "--concurrency", "4"), timeout=CLI_TIMEOUT_S)
        n = prepared_count(w)
        assert f"generate: {n} completed, 0 failed" in proc.stdout
        manifest = json.loads((w / "dataset" / "manifest.json").read_text())
        assert manifest["provenance"]["engine_version"] == "0.5.23"
    finally:
        router.kill()
        router.wait()


@pytest.fixture(scope="module")
def tokenizer_server(tmp_path_factory):
    """--trust-remote-code: the tiny tokenizer class loads, /tokenize works and our start-up check compares the
    server's special-token ids with ours."""
    server = sglang_server(tmp_path_factory.mktemp("sglang-tok"), "--trust-remote-code").start()
    yield server
    server.stop()


def test_build_through_real_sglang_with_its_tokenizer(tokenizer_server, tmp_path):
    status, tok = http("POST", tokenizer_server.url + "/tokenize", {"prompt": ["<|im_end|>"],
                                                                    "add_special_tokens": False})
    assert status == 200 and tok["tokens"] == [[1794]]
    w = tmp_path / "w"
    proc = run_cli("build", *build_args(w, tokenizer_server.url), timeout=CLI_TIMEOUT_S)
    assert_built_and_checked(w, proc.stdout)


def test_contract_check_script_passes_against_real_sglang(tokenizer_server):
    script = REPO / "scripts" / "sglang_contract_check.py"
    proc = subprocess.run([sys.executable, str(script), "--url", tokenizer_server.url], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout and "FAIL" not in proc.stdout


def test_own_history_conversations_through_real_sglang(ids_server, tmp_path):
    """Each later turn's prompt, built from the turn before as real SGLang generated it, is the template's render
    of the conversation with the model's own turn sent back (tests/helpers/conversations.py)."""
    from tests.helpers.conversations import CONFIG, check_conversations, write_source

    config_file, source_rows = write_source(tmp_path)
    w = tmp_path / "w"
    run_cli("build", CONFIG, "--config", str(config_file), "--workdir", str(w), "--profile", "tiny-kimi", "--model",
            TINY, "--engine", "sglang", "--server", ids_server.url, "--max-new-tokens", "96", "--no-progress",
            timeout=CLI_TIMEOUT_S)
    convs = check_conversations(w, source_rows)
    assert any(len(turns) >= 2 for turns in convs.values()), "no conversation reached a second turn"
    report = json.loads((w / "validated" / f"{CONFIG}.json").read_text())
    assert report["balanced"] and report["failed"] == 0
