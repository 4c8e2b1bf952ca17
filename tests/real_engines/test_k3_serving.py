"""tiny-kimi-k3 served by real SGLang 0.5.23 and real vLLM 0.32.0 on CPU, each started once with the K3 launch flags
of its profile (`kimi-data serve --profile tiny-kimi-k3`: --trust-remote-code, the kimi_k3 tool-call and reasoning
parsers; for vLLM also --tokenizer-mode kimi_k3, which a K3 checkpoint's architecture selects by itself).

In that one server life: the start-up check agrees on K3's marker ids with the served tokenizer (and refuses a
tokenizer that does not), a `kimi-data build` of B1 (tools, own-history conversations, every effort and thinking off)
gives every completion a verdict in K3's reason codes, `check` agrees with every recorded verdict, and the engine's
own chat endpoint renders each prepared prompt (and a typed marker, where the joined text's ids differ) to the ids
prepare recorded. docs/kimi-k3.md, "Serving".

vLLM runs with a drafter as well (`serve --draft`, the tiny K3 model's shipped EAGLE-3 drafter), so the same server
life also shows a drafter recorded: vLLM's development /server_info (which `serve --device cpu` turns on) names it,
each answer its own verify steps, and `generate` keeps what its /metrics counters rose by over the build; the
manifest, card and `plan` report it (docs/production.md, "A drafter"). vLLM's CPU backend keeps greedy outputs with an
EAGLE-3 drafter, not samples (docs/probe.md), so that build is greedy (`--temperature 0`): a sampling one is refused.
One server start per engine keeps the tier within its time.

Selected with `-m real_engine` (scripts/real_engines/run_tier.sh)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.engines.base import EngineError
from kimi_eagle_data.engines.drafter import parse_vllm_metrics
from kimi_eagle_data.records import tokens_per_verify_step
from kimi_eagle_data.formats.kimi_k3.format import KIMI_K3_FORMAT
from kimi_eagle_data.formats.kimi_k3 import TINY_KIMI_K3
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from tests.helpers.cli import run_cli
from tests.real_engines.servers import CLI_TIMEOUT_S, RealServer, free_port, http, serve_cpu

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(1800)]

MODEL = TINY_KIMI_K3.model_path
VERSIONS = {"sglang": "0.5.23", "vllm": "0.32.0"}
# The demo's effort mix: B1's four prompts draw max/high/low/off from their ids, and continue on the model's turns.
EFFORTS_CONFIG = str(Path(MODEL).parents[1] / "sources" / "samples" / "demo-efforts.toml")
# A typed marker stays text in K3 (a non-special segment): tokenizing the joined text would make it the marker id.
TYPED_MARKER = [{"role": "user", "content": "Is <|open|>message<|sep|> a tag?"}]
# SGLang's chat endpoint applies the model's generation_config.json defaults, and the tiny models' top_k 0
# (transformers: no top-k) is a value it refuses.
SGLANG_TOP_K_REFUSAL = "top_k must be -1 (disable) or at least 1, got 0."
# vLLM's drafter: the tiny K3 model's shipped EAGLE-3 drafter, drafting the profile's steps.
DRAFTER = TINY_KIMI_K3.shipped_drafter
STEPS = TINY_KIMI_K3.draft_steps


@pytest.fixture(scope="module")
def tokenizer():
    return open_tokenizer(MODEL)


def k3_server(engine: str, log_dir: Path, warm_ids: list[int]) -> RealServer:
    """`kimi-data serve --engine ENGINE --device cpu --profile tiny-kimi-k3`, the profile's K3 flags included."""
    port = free_port()
    if engine == "sglang":
        options = ("--profile", TINY_KIMI_K3.name, "--no-metrics")
        health, warm = "/health_generate", ("/generate", {"input_ids": warm_ids,
                                                          "sampling_params": {"max_new_tokens": 8}})
        flags = ()
    else:
        options = ("--profile", TINY_KIMI_K3.name, "--draft", DRAFTER)
        health, warm = "/health", ("/inference/v1/generate", {"token_ids": warm_ids,
                                                               "sampling_params": {"max_tokens": 8}})
        flags = ()
    return RealServer(engine, serve_cpu(engine, port, options, flags), port, log_dir / f"{engine}-k3-{port}.log",
                      health, warm)


def spec_counts(url: str):
    status, body = http("GET", url + "/metrics")
    assert status == 200
    return parse_vllm_metrics(body)


def assert_the_drafter_is_recorded(workdir: Path, before, after) -> None:
    """vLLM's drafter in the manifest, `plan` and the card: named by its development /server_info, its acceptance
    from each answer's verify steps (`plan`) and from what its /metrics counters rose by over the build (the card;
    the build was the server's only client)."""
    provenance = json.loads((workdir / "dataset" / "manifest.json").read_text())["provenance"]
    config = provenance["server_args"]["speculative_config"]
    assert (config["method"], config["model"], config["num_speculative_tokens"], config["device"],
            config["reported_by"]) == ("eagle3", DRAFTER, STEPS, "cpu", "/metrics and /server_info"), config
    ran = after.counts - before.counts
    assert provenance["spec_decode"] == ran.to_json() and ran.drafts > 0, (provenance, ran)
    assert 0 <= ran.accepted_tokens <= ran.draft_tokens <= STEPS * ran.drafts
    rate = tokens_per_verify_step(ran)
    assert 1.0 <= rate <= STEPS + 1
    plan = json.loads(run_cli("plan", "--workdir", str(workdir), "--json", timeout=CLI_TIMEOUT_S).stdout)
    d = plan["drafter"]
    assert "num_spec_steps" in d["measured_by"] and d["verify_steps"] > 0, d
    assert 1.0 <= d["tokens_per_verify_step"] <= STEPS + 1, d
    assert d["num_steps"] == STEPS and plan["overall"]["target_steps"]["estimate"] is not None
    card = (workdir / "dataset" / "README.md").read_text()
    assert f"eagle3 `{DRAFTER}` (steps {STEPS}, draft tokens {STEPS}); {rate:.2f} output tokens per target step" in card
    print(f"vLLM EAGLE-3 on CPU: {ran.drafts} verify steps, {ran.accepted_tokens}/{ran.draft_tokens} drafted "
          f"tokens accepted, {rate} output tokens per target step; per request {d['tokens_per_verify_step']}")


def served_engine(engine: str, url: str, vocab_size: int):
    if engine == "sglang":
        from kimi_eagle_data.engines.sglang import SGLangEngine as Engine
    else:
        from kimi_eagle_data.engines.vllm import VLLMEngine as Engine
    return Engine([url], concurrency=2, vocab_size=vocab_size)


def chat_prompt_ids(engine: str, url: str, messages, tools, mode: str, effort: str | None) -> list[int]:
    """The prompt ids the engine's own chat endpoint renders (vLLM: its K3 renderer's /render; SGLang: the prompt
    of a one-token chat completion), with K3's chat arguments as a chat client passes them."""
    body = {"model": MODEL, "messages": messages,
            "chat_template_kwargs": {"thinking": mode != "instant", **({"thinking_effort": effort} if effort else {})}}
    if tools:
        body["tools"] = tools
    if engine == "vllm":
        status, answer = http("POST", url + "/v1/chat/completions/render", body)
        assert status == 200, answer
        return answer["token_ids"]
    body |= {"max_tokens": 1, "return_prompt_token_ids": True}
    status, answer = http("POST", url + "/v1/chat/completions", body)
    assert (status, answer.get("message")) == (400, SGLANG_TOP_K_REFUSAL), answer
    status, answer = http("POST", url + "/v1/chat/completions", {**body, "top_k": -1})
    assert status == 200, answer
    return answer["choices"][0]["prompt_token_ids"]


def assert_start_up_check(engine: str, url: str, tokenizer) -> None:
    """Our start-up check compares K3's markers with the served tokenizer: it passes, and a tokenizer whose
    `<|end_of_msg|>` is another id is refused (so the comparison ran; a server without a tokenizer skips it)."""
    tokens = KIMI_K3_FORMAT.bind(TINY_KIMI_K3, tokenizer).tokens
    assert set(tokens.ids) == {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"}
    client = served_engine(engine, url, len(tokenizer))
    try:
        assert (client.info().engine, client.info().version) == (engine, VERSIONS[engine])
        client.check_served_model(MODEL, tokens)
        other = dataclasses.replace(tokens, ids={**tokens.ids, "<|end_of_msg|>": tokens.ids["<|sep|>"] + 1})
        with pytest.raises(EngineError, match=r"tokenizer differs from --tokenizer \(<\|end_of_msg\|>: ours"):
            client.check_served_model(MODEL, other)
    finally:
        client.close()


def assert_verdicts_in_k3_codes(workdir: Path) -> list[dict]:
    """Every generated turn of B1 is a train row without issues or a rejected one with K3's reason codes; some turns
    are valid and a conversation went on (the tiny model writes ~94% of its turns well)."""
    rows = pq.read_table(workdir / "validated" / "B1.parquet").to_pylist()
    k3_codes = set(KIMI_K3_FORMAT.reason_descriptions())
    for r in rows:
        assert (r["split"], r["issues"]) == ("train", []) or (
            r["split"] == "rejected" and r["issues"] and set(r["issues"]) <= k3_codes), r
    assert {r["mode"] for r in rows} == {"thinking", "instant"}, rows
    assert any(r["split"] == "train" for r in rows), rows
    assert max(r["turn"] for r in rows) >= 2, "no conversation reached a second turn"
    return rows


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_tiny_kimi_k3_served_by_the_real_engine(engine, tokenizer, tmp_path):
    warm_ids = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=True)
    t0 = time.monotonic()
    server = k3_server(engine, tmp_path, warm_ids).start()
    try:
        assert_start_up_check(engine, server.url, tokenizer)

        w = tmp_path / "w"
        before = spec_counts(server.url) if engine == "vllm" else None
        # greedy against vLLM: its CPU drafting keeps greedy outputs only
        greedy = ("--temperature", "0") if engine == "vllm" else ()
        built = run_cli("build", "B1", "--config", EFFORTS_CONFIG, "--workdir", str(w), "--profile",
                        TINY_KIMI_K3.name, "--samples", "--limit", "4", "--engine", engine, "--server", server.url,
                        *greedy, "--no-progress", timeout=CLI_TIMEOUT_S)
        assert "0 failed" in built.stdout, built.stdout
        if engine == "vllm":
            assert before.counts is not None and before.num_speculative_tokens == STEPS    # the warm-up drafted
            assert_the_drafter_is_recorded(w, before, spec_counts(server.url))
        manifest = json.loads((w / "dataset" / "manifest.json").read_text())
        assert (manifest["provenance"]["engine"], manifest["provenance"]["engine_version"]) == (
            engine, VERSIONS[engine])
        rows = assert_verdicts_in_k3_codes(w)

        checked = run_cli("check", str(w / "dataset"), "--profile", TINY_KIMI_K3.name, "--no-progress")
        said = " ".join(checked.stdout.split())
        assert (f"{len(rows)} rows checked" in said
                and f"{len(rows)} with the verdict they record, 0 with another" in said), said

        prepared = pq.read_table(w / "prepared" / "B1.parquet").to_pylist()
        for p in prepared:
            theirs = chat_prompt_ids(engine, server.url, json.loads(p["messages"]),
                                     json.loads(p["tools"]) if p["tools"] else None, p["mode"], p["effort"])
            assert theirs == p["prompt_ids"], (p["messages"][:200], p["mode"], p["effort"])
        ours = tokenizer.apply_chat_template(TYPED_MARKER, tokenize=True, thinking_effort="high")
        joined = tokenizer.encode(tokenizer.apply_chat_template(TYPED_MARKER, thinking_effort="high"),
                                  add_special_tokens=False)
        assert ours != joined           # the case tells per-segment ids from the joined text's
        assert chat_prompt_ids(engine, server.url, TYPED_MARKER, None, "thinking", "high") == ours
        assert server.alive()
    finally:
        server.stop()
    print(f"{engine}: ready in {server.ready_s:.0f} s, whole test {time.monotonic() - t0:.0f} s")
