"""One request set to our SGLang stand-in (`python -m tests.helpers.standin_server --skip-tokenizer-init`) and to
real SGLang 0.5.23 (`--skip-tokenizer-init`): the same status codes, keys and value types, finish-reason
shapes and log-prob shapes. What the stand-in must mirror is listed in its module doc."""

from __future__ import annotations

import json

import orjson
import pytest

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams, ScoreRequest
from kimi_eagle_data.engines.sglang_logprobs import LOGPROB_FIELDS, score_payload
from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from tests.helpers.servers import Server
from tests.real_engines.servers import http

# Real servers start in tens of seconds idle, minutes on a shared 2-core machine; decoding there runs at a few
# tokens per second: the suite's 600 s per test would cut these short (a guard, not a measure).
pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(3 * 3600)]

# The tiny model's max_position_embeddings: both servers' context length.
CONTEXT = json.loads((TINY_MODEL_DIR / "config.json").read_text())["max_position_embeddings"]
END = 1794         # <|im_end|>, the tiny model's EOS
# <|im_user|>user<|im_middle|>…<|im_end|><|im_assistant|>assistant<|im_middle|><think>
PROMPT = [1795, 320, 1809, 78, 372, 259, 335, 1249, 259, 602, 297, 32, 1060, 46, 1794, 1796, 631, 1809, 1814]
OTHER = [1795, 320, 1809, 72, 105, 1794, 1796, 631, 1809, 1814]


def client_body(ids, max_new: int, *, logprobs: bool, **sampling) -> dict:
    """The body our client sends (engines/sglang.py), from the same dataclasses."""
    sp = SamplingParams(max_new_tokens=max_new, temperature=1.0, top_p=0.95, stop_token_ids=(END,))
    req = GenerationRequest("rid-1", list(ids), sp, return_logprob=logprobs)
    body = {"input_ids": req.input_ids, "sampling_params": {**req.sampling.to_sglang(), **sampling}, "rid": req.id}
    return {**body, **(LOGPROB_FIELDS if logprobs else {})}


def greedy(ids, max_new: int | None, **sampling) -> dict:
    sp = {"temperature": 0, **sampling}
    if max_new is not None:
        sp["max_new_tokens"] = max_new
    return {"input_ids": ids, "sampling_params": sp}


REQUESTS = {
    "client generate with log-probs": ("/generate", client_body(PROMPT, 16, logprobs=True)),
    "client generate": ("/generate", client_body(PROMPT, 16, logprobs=False)),
    "score (prefill only)": ("/generate", orjson.loads(score_payload(ScoreRequest("s", PROMPT + OTHER, len(PROMPT))))),
    "batch": ("/generate", {"input_ids": [PROMPT, OTHER], "sampling_params": {"max_new_tokens": 4, "temperature": 0}}),
    "ignore_eos runs to the length": ("/generate", greedy(OTHER, 12, ignore_eos=True, stop_token_ids=[END])),
    "prompt + max_new_tokens == context": ("/generate", greedy(PROMPT, CONTEXT - len(PROMPT))),
    "prompt + max_new_tokens == context + 1": ("/generate", greedy(PROMPT, CONTEXT - len(PROMPT) + 1)),
    "prompt as long as the context": ("/generate", greedy([OTHER[3]] * CONTEXT, 1)),
    "no max_new_tokens": ("/generate", greedy(OTHER, None, ignore_eos=True)),
    "unknown sampling key": ("/generate", greedy(OTHER, 4, seed=1)),
    "empty input_ids": ("/generate", {"input_ids": [], "sampling_params": {"max_new_tokens": 4}}),
    "logprob_start_len past the prompt": ("/generate", {
        "input_ids": OTHER, "sampling_params": {"max_new_tokens": 0}, "return_logprob": True,
        "logprob_start_len": len(OTHER) + 1, "top_logprobs_num": 1}),
}


def shape(x):
    """Keys and value types, recursively; a list by the distinct shapes of its items, in order."""
    if isinstance(x, dict):
        return {k: shape(v) for k, v in sorted(x.items())}
    if isinstance(x, list):
        seen: list = []
        for item in x:
            s = shape(item)
            if s not in seen:
                seen.append(s)
        return ["list", *seen]
    return type(x).__name__


def exchange(url: str) -> dict:
    answers = {name: http("POST", url + path, body) for name, (path, body) in REQUESTS.items()}
    # The prefix cache: the same prompt again reuses all of it but the last token.
    answers["repeat"] = http("POST", url + "/generate", greedy(PROMPT, 4))
    answers["repeat again"] = http("POST", url + "/generate", greedy(PROMPT, 4))
    answers["server_info"] = http("GET", url + "/server_info")
    answers["tokenize without a tokenizer"] = http("POST", url + "/tokenize", {"prompt": "hi"})
    return answers


@pytest.fixture(scope="module")
def answers(ids_server):
    standin = Server("--skip-tokenizer-init").start()
    try:
        return {"stand-in": exchange(standin.url), "sglang": exchange(ids_server.url)}
    finally:
        standin.kill()


@pytest.mark.parametrize("name", list(REQUESTS) + ["tokenize without a tokenizer"])
def test_same_status_and_shape(answers, name):
    (ours_status, ours), (real_status, real) = answers["stand-in"][name], answers["sglang"][name]
    detail = f"\nstand-in {ours_status}: {json.dumps(ours)[:600]}\nsglang {real_status}: {json.dumps(real)[:600]}"
    assert ours_status == real_status, detail
    if real_status == 200:
        assert shape(ours) == shape(real), detail
    else:   # errors: the body's shape ({"error": "..."} or {"error": {"message": "..."}}), not its words
        assert shape(ours) == shape(real), detail


def test_same_finish_reasons_and_lengths(answers):
    ours, real = answers["stand-in"], answers["sglang"]
    for name in ("ignore_eos runs to the length", "no max_new_tokens", "prompt + max_new_tokens == context"):
        a, b = ours[name][1]["meta_info"], real[name][1]["meta_info"]
        assert a["finish_reason"]["type"] == b["finish_reason"]["type"], name
        if b["finish_reason"]["type"] == "length":
            assert a["completion_tokens"] == b["completion_tokens"], (name, a, b)
    score_ours, score_real = ours["score (prefill only)"][1]["meta_info"], real["score (prefill only)"][1]["meta_info"]
    assert len(score_ours["input_token_logprobs"]) == len(score_real["input_token_logprobs"]) == len(OTHER) + 1
    assert [e[1] for e in score_ours["input_token_logprobs"]] == [e[1] for e in score_real["input_token_logprobs"]]


def test_both_report_prefix_cache_hits_and_no_context_length(answers):
    for side in ("stand-in", "sglang"):
        first, again = answers[side]["repeat"][1]["meta_info"], answers[side]["repeat again"][1]["meta_info"]
        assert 0 < again["cached_tokens"] <= len(PROMPT) - 1, (side, again)
        assert answers[side]["server_info"][1]["context_length"] is None, side
        assert "text" not in answers[side]["client generate"][1], side
    assert (answers["stand-in"]["repeat again"][1]["meta_info"]["cached_tokens"]
            == answers["sglang"]["repeat again"][1]["meta_info"]["cached_tokens"])
