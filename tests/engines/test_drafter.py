"""A drafter as the engines report it (engines/drafter.py): vLLM's /metrics counters read into the drafter and its
acceptance, what `generate` keeps of them over a run, how plan and the card report them, and the one-line refusal
of a drafter that would not sample the target's distribution at the run's temperature. Real vLLM drafting on CPU:
tests/real_engines/test_k3_serving.py."""

from __future__ import annotations

import json

import numpy as np

from kimi_eagle_data.cards.card import drafter_line
from kimi_eagle_data.engines.drafter import lossy_drafter, parse_vllm_metrics, vllm_speculative_config
from kimi_eagle_data.records import SpecDecodeCounts, describe_drafter, tokens_per_verify_step
from kimi_eagle_data.generate.stage import record_spec_decode
from kimi_eagle_data.reports.prefill import drafter_acceptance
from kimi_eagle_data.store.checkpoint import Checkpoint
from tests.helpers.cli import error_lines, run_cli
from tests.helpers.servers import TINY, Server

DRAFT = "lightseekorg/kimi-k2.5-eagle3"


def vllm_metrics(drafts: list[int], draft_tokens: list[int], accepted: list[int], positions: int = 3) -> str:
    """A /metrics body as vLLM 0.32.0's prometheus_client writes SpecDecodingProm's counters, one series per engine
    (labels model_name, engine; the per-position counter adds `position`), with the HELP/TYPE and `_created` lines
    it also writes."""
    lines = ['# HELP vllm:num_requests_running Number of requests in model execution batches.',
             '# TYPE vllm:num_requests_running gauge',
             'vllm:num_requests_running{engine="0",model_name="m"} 2.0']
    for name, values in (("drafts", drafts), ("draft_tokens", draft_tokens), ("accepted_tokens", accepted)):
        lines += [f"# HELP vllm:spec_decode_num_{name}_total x", f"# TYPE vllm:spec_decode_num_{name} counter"]
        for engine, v in enumerate(values):
            lines += [f'vllm:spec_decode_num_{name}_total{{engine="{engine}",model_name="m"}} {float(v)}',
                      f'vllm:spec_decode_num_{name}_created{{engine="{engine}",model_name="m"}} 1.7e+09']
    for pos in range(positions):
        lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",'
                     f'position="{pos}"}} 1.0')
    return "\n".join(lines) + "\n"


def test_vllms_counters_are_summed_over_its_engines():
    m = parse_vllm_metrics(vllm_metrics([10, 5], [30, 15], [12, 6]))
    assert m.counts == SpecDecodeCounts(drafts=15, draft_tokens=45, accepted_tokens=18)
    assert m.num_speculative_tokens == 3
    assert tokens_per_verify_step(m.counts) == 2.2          # 1 + 18 / 15
    # A server without a --speculative-config has no such counters.
    none = parse_vllm_metrics('vllm:num_requests_running{engine="0",model_name="m"} 0.0\n')
    assert none.counts is None and vllm_speculative_config(none, None) is None


def test_the_drafter_vllm_reports_with_and_without_its_dev_endpoint():
    m = parse_vllm_metrics(vllm_metrics([1], [3], [1]))
    plain = vllm_speculative_config(m, None)
    assert plain == {"method": None, "model": None, "num_speculative_tokens": 3, "rejection_sample_method": None,
                     "reported_by": "/metrics"}
    dev = vllm_speculative_config(m, {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 3,
                                      "rejection_sample_method": "standard"})
    assert (dev["method"], dev["model"], dev["reported_by"]) == ("eagle3", DRAFT, "/metrics and /server_info")
    assert "device" not in dev and vllm_speculative_config(m, None, "cpu")["device"] == "cpu"
    assert describe_drafter({"speculative_config": dev}) == {"algorithm": "eagle3", "model": DRAFT, "num_steps": 3,
                                                     "topk": None, "num_draft_tokens": 3}


def test_generate_keeps_what_the_counters_rose_by_over_each_run(tmp_path):
    ckpt = Checkpoint(tmp_path / "generations.sqlite")
    try:
        record_spec_decode(ckpt, SpecDecodeCounts(100, 300, 150), SpecDecodeCounts(110, 330, 160))
        record_spec_decode(ckpt, SpecDecodeCounts(0, 0, 0), SpecDecodeCounts(5, 15, 5))      # a restarted server
        assert ckpt.get_meta("spec_decode") == {"drafts": 15, "draft_tokens": 45, "accepted_tokens": 15}
        # Counters that fell (restarted mid-run) or went unread: that run is not counted.
        record_spec_decode(ckpt, SpecDecodeCounts(50, 150, 50), SpecDecodeCounts(3, 9, 3))
        record_spec_decode(ckpt, SpecDecodeCounts(3, 9, 3), None)
        assert ckpt.get_meta("spec_decode") == {"drafts": 15, "draft_tokens": 45, "accepted_tokens": 15}
    finally:
        ckpt.close()


def test_plan_reads_vllms_acceptance_from_the_counters():
    args = {"speculative_config": {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 3}}
    d = drafter_acceptance(args, np.array([100.0, 50.0]), np.array([np.nan, np.nan]), SpecDecodeCounts(40, 120, 60))
    assert d["tokens_per_verify_step"] == 2.5 and (d["verify_steps"], d["accepted_draft_tokens"]) == (40, 60)
    assert (d["algorithm"], d["model"], d["requests"]) == ("eagle3", DRAFT, None)
    # A drafter vLLM reported, nothing counted yet: named, no acceptance.
    assert drafter_acceptance(args, np.array([100.0]), np.array([np.nan]))["tokens_per_verify_step"] is None


def test_the_card_names_vllms_drafter_and_its_counted_acceptance():
    args = {"speculative_config": {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 3}}
    assert drafter_line(args, {"drafts": 40, "draft_tokens": 120, "accepted_tokens": 60}) == (
        f"eagle3 `{DRAFT}` (steps 3, draft tokens 3); 2.50 output tokens per target step (the engine's counters); "
        "every token accepted by sampling from the target's distribution")
    unnamed = {"speculative_config": {"method": None, "model": None, "num_speculative_tokens": 3}}
    assert drafter_line(unnamed).startswith("a drafter (the engine did not name its model) (steps 3")


def test_only_a_drafter_that_changes_the_samples_is_refused():
    sglang = {"urls": ["http://h:1"], "speculative_algorithm": "EAGLE3", "speculative_draft_model_path": DRAFT}
    assert "whatever the temperature" in lossy_drafter("sglang", {**sglang, "device": "cpu"}, 1.0)
    assert lossy_drafter("sglang", {**sglang, "device": "cpu"}, 0.0) is None      # greedy: argmax is the sample
    assert lossy_drafter("sglang", {**sglang, "device": "cuda"}, 1.0) is None
    assert lossy_drafter("sglang", {"device": "cpu", "speculative_algorithm": None}, 1.0) is None
    vllm = {"urls": ["http://h:1"], "speculative_config": {"method": "eagle3", "rejection_sample_method": "standard"}}
    assert lossy_drafter("vllm", vllm, 1.0) is None
    synthetic = {**vllm, "speculative_config": {"method": "eagle3", "rejection_sample_method": "synthetic"}}
    assert "fixed rates" in lossy_drafter("vllm", synthetic, 0.7)
    on_cpu = {**vllm, "speculative_config": {"method": "draft_model", "rejection_sample_method": "standard",
                                             "device": "cpu"}}
    assert "on device cpu" in lossy_drafter("vllm", on_cpu, 0.0)      # even greedy outputs change there
    on_gpu = {**vllm, "speculative_config": {**on_cpu["speculative_config"], "device": "cuda"}}
    assert lossy_drafter("vllm", on_gpu, 1.0) is None
    # EAGLE-3 on vLLM's CPU backend keeps greedy outputs, not samples (measured: engines/drafter.py)
    eagle_cpu = {**vllm, "speculative_config": {**on_cpu["speculative_config"], "method": "eagle3"}}
    assert lossy_drafter("vllm", eagle_cpu, 0.0) is None
    why = lossy_drafter("vllm", eagle_cpu, 1.0)
    assert "keeps greedy outputs but not samples" in why and "--temperature 0" in why
    unreported = {**vllm, "speculative_config": {**on_cpu["speculative_config"], "method": None}}
    assert "(not reported)" in lossy_drafter("vllm", unreported, 0.0)


def test_generate_refuses_an_sglang_server_that_drafts_on_cpu_in_one_line(tmp_path):
    """The stand-in (a CPU server) reports the launch arguments of an SGLang drafting with EAGLE-3: at temperature
    1 generate stops before sending anything, in one line naming the server and what to do."""
    server = Server("--report-arg", f"speculative_algorithm={json.dumps('EAGLE3')}",
                    "--report-arg", f"speculative_draft_model_path={json.dumps(DRAFT)}").start()
    try:
        proc = run_cli("build", "B6", "--samples", "--limit", "2", "--profile", "tiny-kimi", "--model", TINY,
                       "--workdir", str(tmp_path / "w"), "--engine", "sglang", "--server", server.url,
                       "--no-progress", check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert len(error_lines(proc)) == 1, proc.stderr
        assert f"{server.url} runs drafter EAGLE3 on device cpu" in proc.stderr
        assert "would not be the target's" in proc.stderr and "Traceback" not in proc.stderr
        assert server.served() == 0
    finally:
        server.kill()


def test_a_partitions_sampled_mix_makes_a_greedy_run_refuse_an_sglang_cpu_drafter(tmp_path):
    """The run's highest temperature is what counts: `--temperature 0` alone keeps an SGLang CPU drafter's argmax
    the sample (nothing refused), but a partition whose mix samples half its prompts at 1.0 is refused in one line."""
    server = Server("--report-arg", f"speculative_algorithm={json.dumps('EAGLE3')}",
                    "--report-arg", f"speculative_draft_model_path={json.dumps(DRAFT)}").start()
    mixed = tmp_path / "mixed.toml"
    mixed.write_text("[partitions.B4.sampling]\nmix = [{ share = 0.5, temperature = 1.0 }, { share = 0.5 }]\n")
    try:
        def build(workdir: str, *config: str):
            return run_cli("build", "B4", "--samples", "--limit", "2", "--profile", "tiny-kimi", "--model", TINY,
                           "--workdir", str(tmp_path / workdir), "--engine", "sglang", "--server", server.url,
                           "--temperature", "0", "--no-progress", *config, check=False)

        proc = build("mixed", "--config", str(mixed))
        assert proc.returncode == 1 and len(error_lines(proc)) == 1, proc.stdout + proc.stderr
        assert "would not be the target's" in proc.stderr and "temperature 1" in proc.stderr
        assert server.served() == 0
        proc = build("greedy")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert server.served() > 0
    finally:
        server.kill()
