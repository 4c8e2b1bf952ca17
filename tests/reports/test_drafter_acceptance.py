"""A drafter's acceptance, measured: the SGLang engine keeps meta_info.spec_verify_ct (the target's verify steps),
the checkpoint stores it, and `plan` reads output tokens per verify step from it (reports/prefill.py)."""

from __future__ import annotations

import numpy as np

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams
from kimi_eagle_data.engines.sglang import SGLangEngine
from kimi_eagle_data.records import Completion
from kimi_eagle_data.reports.prefill import drafter_acceptance
from kimi_eagle_data.store.checkpoint import Checkpoint

END = 163586
EAGLE = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "lightseekorg/kimi-k2.5-eagle3",
         "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}


def sglang_answer(ids, verify=None):
    """An SGLang 0.5.23 /generate answer's fields this client reads; spec_verify_ct as SGLang adds it when it runs
    a drafter (tokenizer_manager: meta_info["spec_verify_ct"] once the request finishes)."""
    meta = {"id": "r", "finish_reason": {"type": "stop", "matched": END}, "prompt_tokens": 5,
            "completion_tokens": len(ids), "cached_tokens": 0}
    if verify is not None:
        meta["spec_verify_ct"] = verify
    return {"output_ids": ids, "meta_info": meta}


def test_the_sglang_engine_keeps_the_verify_steps():
    engine = SGLangEngine(["http://127.0.0.1:1"], vocab_size=200000)     # never started: only reads answers
    req = GenerationRequest("r", [1, 2, 3, 4, 5], SamplingParams(16, 1.0, 0.95, (END,)))
    assert engine._completion(req, sglang_answer([7, 8, 9, 10, 11, 12, END], verify=3), 0.1).spec_verify_ct == 3
    assert engine._completion(req, sglang_answer([7, END]), 0.1).spec_verify_ct is None      # no drafter


def test_the_vllm_engine_keeps_each_answers_own_verify_steps():
    """vLLM 0.32.0 under --per-request-spec-decode-metrics adds `metrics.speculative_decoding` to each token-in answer
    (vllm/v1/metrics/stats.py RequestSpecDecodeMetrics.to_dict; these numbers from a real CPU server's answer)."""
    from kimi_eagle_data.engines.vllm import VLLMEngine

    engine = VLLMEngine(["http://127.0.0.1:1"], vocab_size=200000)     # never started: only reads answers
    req = GenerationRequest("r", [1, 2, 3, 4, 5], SamplingParams(96, 0.0, 1.0, (END,)))
    ids = [7] * 39 + [END]
    answer = {"choices": [{"token_ids": ids, "finish_reason": "stop", "stop_reason": END}],
              "usage": {"prompt_tokens": 5, "completion_tokens": len(ids)},
              "metrics": {"time_to_first_token_ms": None, "speculative_decoding": {
                  "mean_acceptance_length": 1.3928571428571428, "draft_acceptance_rate": 0.13095238095238096,
                  "acceptance_histogram": [23, 1, 2, 2], "num_spec_steps": 28, "num_accepted_draft_tokens": 11,
                  "num_draft_tokens": 84, "num_spec_tokens": 3}}}
    assert engine._completion(req, answer, 0.1).spec_verify_ct == 28
    del answer["metrics"]
    assert engine._completion(req, answer, 0.1).spec_verify_ct is None       # no drafter, or not asked for


def test_the_checkpoint_stores_them(tmp_path):
    ckpt = Checkpoint(tmp_path / "generations.sqlite")
    try:
        ckpt.commit("B1", Completion("B1-a", [7, 8, END], "stop", prompt_tokens=5, completion_tokens=3,
                                     spec_verify_ct=2))
        ckpt.commit("B1", Completion("B1-b", [7, END], "stop", prompt_tokens=5, completion_tokens=2))
        assert [r.spec_verify_ct for r in ckpt.request_stats()] == [2, None]
    finally:
        ckpt.close()


def test_acceptance_is_output_tokens_per_verify_step_over_the_requests_that_say():
    d = drafter_acceptance(EAGLE, np.array([100, 50, 30]), np.array([40, 20, np.nan]))
    assert d["tokens_per_verify_step"] == 2.5 and (d["requests"], d["verify_steps"], d["output_tokens"]) == (2, 60, 150)
    assert (d["algorithm"], d["model"], d["num_steps"]) == ("EAGLE3", "lightseekorg/kimi-k2.5-eagle3", 3)
    assert drafter_acceptance({}, np.array([100]), np.array([np.nan])) is None
    assert drafter_acceptance({"speculative_algorithm": None}, np.array([100]), np.array([np.nan])) is None
