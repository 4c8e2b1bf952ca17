"""The SGLang engine: a client of SGLang's native `/generate` (token ids in, token ids out) on the HTTP
client machinery every server engine shares (http_client.py: requests kept in flight, the least busy
server, retries, answer checks).

- Start-up: wait for `/health_generate` (or `/health`), read `/model_info` and `/server_info` (falling back
  to the old `get_` names; behind an sglang-router, those of one of its workers), refuse SGLang < 0.5.5
  (0.5.2-0.5.3 leaked prompt tokens into `output_ids`).
- Every answer is checked before it is handed on (`check_output_ids`): `output_ids` a list of ints
  in [0, vocab_size), at most the request's `max_new_tokens` long, as long as
  `meta_info.completion_tokens` says.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, Iterator

import orjson

from kimi_eagle_data.records import Completion, RequestFailure
from kimi_eagle_data.engines.base import EngineError, EngineInfo, GenerationRequest, ScoreRequest, ScoreResult
from kimi_eagle_data.engines.http_client import (  # noqa: F401 - RetryPolicy: re-exported for callers
    HTTPEngine, RetryPolicy, Waiting)
from kimi_eagle_data.engines.response_checks import Failure, check_output_ids, storable
from kimi_eagle_data.engines.sglang_logprobs import (LOGPROB_FIELDS, parse_score, score_payload,
                                                    with_output_logprobs)

MIN_SGLANG = (0, 5, 5)


class SGLangEngine(HTTPEngine):
    name = "sglang"
    generate_path = "/generate"
    health_paths = ("/health_generate", "/health")
    # SGLang refuses input + max_new_tokens >= context length (HTTP 400) and clips to context - input - 2:
    # a prompt prepare accepted must fit.
    context_margin = 2
    context_flag = "--context-length"
    # POST {"rid"}: the request stops and frees its slot (0.5.23 http_server.py `abort_request`, an `AbortReq`; the
    # scheduler aborts every request whose rid starts with it). A client that disconnects is noticed only when the
    # tokenizer manager next polls (every SGLANG_REQUEST_STATE_WAIT_TIMEOUT, 4 s): a timed-out request is aborted here.
    abort_path = "/abort_request"

    def __init__(self, urls: list[str], **kw):
        super().__init__(urls, **kw)
        self._model_info: dict[str, Any] = {}
        self._server_info: dict[str, Any] = {}

    async def _start(self) -> EngineInfo:
        import aiohttp

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
            await asyncio.gather(*(self._wait_healthy(s, u) for u in self.urls))
            url = self.urls[0]
            self._model_info = await self._get_json(s, url, "/model_info", "/get_model_info")
            self._server_info = await self._get_json(s, url, "/server_info", "/get_server_info")
            if "router_manager" in self._server_info or "version" not in self._server_info:
                # An sglang-router: its own info has no SGLang version; ask one of its workers.
                workers = await self._router_workers(s, url)
                if workers:
                    self._server_info = {**await self._get_json(s, workers[0], "/server_info", "/get_server_info"),
                                         "router": url, "router_workers": workers}
                    if not self._model_info:
                        self._model_info = await self._get_json(s, workers[0], "/model_info", "/get_model_info")
            if "version" not in self._server_info:
                await self._refuse_vllm(s, (self._server_info.get("router_workers") or [url])[0])
        version = str(self._server_info.get("version", ""))
        self.check_version(version, MIN_SGLANG, "0.5.2-0.5.3 put prompt tokens into output_ids")
        context_length = self._server_info.get("context_length")
        if context_length is None:   # SGLang reports --context-length only when given; /v1/models has the one in use
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
                where = (self._server_info.get("router_workers") or self.urls)[0]
                models = (await self._get_json(s, where, "/v1/models")).get("data") or [{}]
            context_length = models[0].get("max_model_len") if isinstance(models[0], dict) else None
        # Launch arguments and versions only: live counters would make provenance differ between reads.
        volatile = {"requests_served", "status", "internal_states", "last_gen_throughput"}
        args = {k: v for k, v in self._server_info.items()
                if k not in volatile and (isinstance(v, (str, int, float, bool)) or v is None)}
        return EngineInfo(
            engine=self.name, version=version,
            model_path=str(self._model_info.get("model_path") or self._server_info.get("model_path", "")),
            context_length=context_length if type(context_length) is int else None,
            server_args={"urls": self.urls, **args},
        )

    async def _refuse_vllm(self, session, url: str) -> None:
        """A server without SGLang's /server_info that answers vLLM's /version is vLLM: say so (EngineError)."""
        if "version" in await self._get_json(session, url, "/version"):
            raise EngineError(f"this is a vLLM server at {url} (it serves /version, not SGLang's /server_info): use "
                              "--engine vllm")

    async def _router_workers(self, session, url: str) -> list[str]:
        """Healthy worker URLs behind a router; waits for registration (its /health answers before)."""
        waiting = Waiting(f"a healthy worker behind the router at {url}", self.health_timeout_s)
        while True:
            body = await self._get_json(session, url, "/workers")
            if "workers" not in body:
                return []          # not a router after all
            healthy = [w["url"] for w in body["workers"] if w.get("is_healthy", True) and w.get("url")]
            if healthy:
                waiting.done()
                return sorted(healthy)
            if waiting.over():
                raise EngineError(f"router {url} has no healthy worker after {self.health_timeout_s:.0f}s; "
                                  "check its --worker-urls")
            waiting.report(f"{len(body['workers'])} workers registered, none healthy yet")
            await asyncio.sleep(0.5)

    def served_models(self) -> set[str]:
        return {str(self._model_info.get(k) or "") for k in ("model_path", "tokenizer_path", "served_model_name")}

    async def _tokenize(self, session, texts: list[str]) -> list[list[int]]:
        async with session.post(self.urls[0] + "/tokenize",
                                data=orjson.dumps({"prompt": texts, "add_special_tokens": False}),
                                headers={"Content-Type": "application/json"}) as r:
            if r.status != 200:
                raise Failure("no_tokenize", f"/tokenize answered {r.status}", False)
            return orjson.loads(await r.read())["tokens"]

    def _score_payload(self, req: ScoreRequest, rid: str | None) -> bytes:
        return score_payload(req, rid)

    def _parse_score(self, req: ScoreRequest, answer: dict) -> ScoreResult:
        return parse_score(req, answer)      # BadLogprobs is a ValueError: not retried

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Completion | RequestFailure]:
        return self._stream(requests, self._request_with_retries, "sglang-client")

    async def _request_with_retries(self, session, req: GenerationRequest) -> Completion | RequestFailure:
        # sampling_seed: the request's own seed (drawn from its id), so a server started with
        # --enable-deterministic-inference samples a resumed request as it sampled the first try.
        body = {"input_ids": req.input_ids, "sampling_params": {**req.sampling.to_sglang(), "sampling_seed": req.seed},
                "rid": req.id}
        if req.return_logprob:
            body.update(LOGPROB_FIELDS)
        return await self._with_retries(
            session, req.input_ids, lambda rid: orjson.dumps({**body, "rid": rid}),
            lambda url, answer, seconds: self._answer(req, answer, seconds),
            lambda f, attempts: f.gave_up(req.id, attempts), rid=req.id, conversation=req.conversation)

    def _answer(self, req: GenerationRequest, body: dict[str, Any], latency: float) -> Completion | RequestFailure:
        c = self._completion(req, body, latency)
        return with_output_logprobs(c, body) if isinstance(c, Completion) else c

    def _completion(self, req: GenerationRequest, body: dict[str, Any], latency: float) -> Completion | RequestFailure:
        meta = body.get("meta_info") or {}
        output_ids = body.get("output_ids")
        finish = meta.get("finish_reason") if isinstance(meta, dict) else None
        if not isinstance(output_ids, list) or not isinstance(finish, dict) or not isinstance(finish.get("type"), str):
            raise Failure("bad_response", "response lacks output_ids or meta_info.finish_reason "
                                           "(is the server running with --skip-tokenizer-init off?)", False)
        ftype = finish["type"]
        if ftype != "abort":
            problem = check_output_ids(output_ids, max_new_tokens=req.sampling.max_new_tokens,
                                       vocab_size=self.vocab_size, completion_tokens=meta.get("completion_tokens"))
            if problem:
                raise Failure("bad_response", f"rid {req.id}: {problem}", True)
        storable(finish, req.id)   # stored as JSON: an int beyond 64 bits in it would fail in the checkpoint
        if ftype == "abort":
            return RequestFailure(req.id, "abort", str(finish.get("message", "abort")))
        count = (lambda k: meta[k] if type(meta.get(k)) is int else None)  # noqa: E731 - counters are advisory
        return Completion(
            id=req.id, output_ids=output_ids, finish_reason=ftype, finish_detail=finish,
            prompt_tokens=count("prompt_tokens"), completion_tokens=count("completion_tokens"),
            cached_tokens=count("cached_tokens"), spec_verify_ct=count("spec_verify_ct"), engine=self.name,
            latency_s=latency)
