"""An SGLang-protocol HTTP server over any in-process engine (the test stand-in for SGLang).

It speaks the subset of SGLang's native API this project uses, with SGLang's field names:
`POST /generate` (`input_ids` single or batch, `sampling_params`, `rid`) -> `{"text", "output_ids",
"meta_info": {"id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens",
"e2e_latency"}}`; `/health`, `/health_generate`, `/model_info` (+ `/get_model_info`), `/server_info`
(+ `/get_server_info`), `/tokenize`, `/flush_cache`. Concurrent requests are gathered into batches
for the engine. The tests' stand-in (tests/helpers/standin_server.py) is a subclass that injects faults (errors,
delays, dropped connections, malformed answers, stale request ids) through the hooks marked as such here.

Log-probs as SGLang gives them (engines/sglang_logprobs.py cites the source): `return_logprob` adds
`meta_info.output_token_logprobs` ([logprob, token_id, null] per sampled token) and, with
`top_logprobs_num` >= 1, `output_top_logprobs` (top-1 only here); a prefill-only request
(`max_new_tokens` 0) with `logprob_start_len` L adds `input_token_logprobs` for positions L.. with a null
log-prob at L, and `input_top_logprobs` (null at L), computed by the engine's `score`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
import uuid
from typing import Any

import orjson
from aiohttp import web

from kimi_eagle_data.engines.base import Engine, GenerationRequest, SamplingParams, ScoreRequest
from kimi_eagle_data.records import RequestFailure
from kimi_eagle_data.engines.local import LocalEngine
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from kimi_eagle_data.stopping import Terminated

log = logging.getLogger(__name__)

# What this stand-in reports as its SGLang version: the behaviour it mirrors is 0.5.5+.
PROTOCOL_VERSION = "0.5.23"


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type="application/json")


# SGLang 0.5.23's `sampling_params` fields, in its schema's order (python/sglang/api/v1/api_types.py
# `SamplingParams`: "unknown keys rejected"); DEFAULT_MAX_NEW_TOKENS is its default for max_new_tokens.
SAMPLING_FIELDS = (
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "stream_interval", "logit_bias", "sampling_seed", "custom_params", "beam_width", "watermark", "choice")
DEFAULT_MAX_NEW_TOKENS = 128


def _error(message: str) -> web.Response:
    """SGLang's 400 for a request its tokenizer manager or scheduler refuses: {"error": {"message"}}."""
    return _json({"error": {"message": message}}, status=400)


def _contract_error(message: str) -> web.Response:
    """SGLang's 400 for a body its JSON schema refuses (api_contract.py): {"error": "<string>"}."""
    return _json({"error": message}, status=400)


def _sampling(sp: Any, eos_ids: tuple[int, ...]) -> SamplingParams | web.Response:
    if not isinstance(sp, dict):
        return _contract_error("invalid type: sampling_params, expected a map")
    unknown = [k for k in sp if k not in SAMPLING_FIELDS]
    if unknown:
        listed = ", ".join(f"`{f}`" for f in SAMPLING_FIELDS)
        return _contract_error(f"unknown field `{unknown[0]}`, expected one of {listed}")
    try:
        max_new = sp.get("max_new_tokens")
        ignore_eos = bool(sp.get("ignore_eos") or False)
        # ignore_eos: no token ends the request, the request's stop_token_ids included (Req.check_finished).
        stops = () if ignore_eos else tuple(int(t) for t in sp.get("stop_token_ids") or ()) + eos_ids
        temperature = sp.get("temperature")
        top_p = sp.get("top_p")
        return SamplingParams(
            max_new_tokens=DEFAULT_MAX_NEW_TOKENS if max_new is None else int(max_new),
            temperature=1.0 if temperature is None else float(temperature),
            top_p=1.0 if top_p is None else float(top_p),
            stop_token_ids=tuple(dict.fromkeys(stops)),
            skip_special_tokens=bool(sp.get("skip_special_tokens", True)),
        )
    except (TypeError, ValueError) as e:
        return _contract_error(f"invalid sampling_params: {e}")


def parse_generate(body: Any, *, context_length: int | None, eos_ids: tuple[int, ...] = ()):
    """A /generate body -> (prompts, rids, sampling, batch, return_logprob, logprob_start_len, top_logprobs_num,
    seed), or the 400 response SGLang 0.5.23 gives for it (checked against a real server, tests/real_engines)."""
    if not isinstance(body, dict):
        return _contract_error("invalid type: expected a map")
    input_ids = body.get("input_ids")
    if not isinstance(input_ids, list):
        return _error("Either text, input_ids or input_embeds should be provided.")
    if not input_ids:
        return _error("input_ids cannot be empty.")
    batch = isinstance(input_ids[0], list)
    prompts = input_ids if batch else [input_ids]
    if any(not p or not all(type(t) is int for t in p) for p in prompts):
        return _error("input_ids cannot be empty." if any(not p for p in prompts) else
                      "input_ids must be a list of token ids (or of lists of them)")
    sp = body.get("sampling_params")
    sampling = _sampling({} if sp is None else sp, eos_ids)
    if isinstance(sampling, web.Response):
        return sampling
    rids = body.get("rid")
    rids = rids if isinstance(rids, list) else [rids] * len(prompts)
    try:
        want_lp = bool(body.get("return_logprob") or False)
        start = int(body["logprob_start_len"]) if body.get("logprob_start_len") is not None else -1
        top_n = int(body.get("top_logprobs_num") or 0)
        seed = int(sp.get("sampling_seed") or 0) if isinstance(sp, dict) else 0
    except (TypeError, ValueError) as e:
        return _contract_error(f"invalid value: {e}")
    for ids in prompts:
        ctx = context_length
        # SGLang's tokenizer manager (_validate_one_request) refuses these; it does not truncate. Without
        # max_new_tokens in the request it checks the input only (the scheduler clips the default).
        if ctx and len(ids) >= ctx:
            return _error(f"The input ({len(ids)} tokens) is longer than the model's context length ({ctx} tokens).")
        if ctx and sp and sp.get("max_new_tokens") is not None and len(ids) + sampling.max_new_tokens > ctx:
            total = len(ids) + sampling.max_new_tokens
            return _error(f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You "
                          f"requested a total of {total} tokens: {len(ids)} tokens from the input messages and "
                          f"{sampling.max_new_tokens} tokens for the completion. Please reduce the number of tokens "
                          "in the input messages or the completion to fit within the limit.")
        if want_lp and start > len(ids):
            return _error(f"req.logprob_start_len={start} is higher than the number of input tokens "
                          f"len(req.origin_input_ids)={len(ids)}. Please use a smaller logprob_start_len.")
    return prompts, rids, sampling, batch, want_lp, start, top_n, seed


class PrefixCache:
    """Token sequences served before, as SGLang's radix cache keeps them (prompt and output): `match` is how
    many leading tokens of a prompt were computed before, at most all but the last (the last prompt token is
    always run: its logits give the first output token). Cleared by /flush_cache, or whole when full."""

    def __init__(self, max_tokens: int = 1 << 20):
        self.root: dict[int, dict] = {}
        self.size = 0
        self.max_tokens = max_tokens

    def match(self, ids: list[int]) -> int:
        node, n = self.root, 0
        for t in ids[:-1]:
            node = node.get(t)
            if node is None:
                break
            n += 1
        return n

    def insert(self, ids: list[int]) -> None:
        if self.size + len(ids) > self.max_tokens:
            self.clear()
        node = self.root
        for t in ids:
            nxt = node.get(t)
            if nxt is None:
                nxt = node[t] = {}
                self.size += 1
            node = nxt

    def clear(self) -> None:
        self.root, self.size = {}, 0


class ProtocolServer:
    def __init__(self, engine: Engine, *, tokenizer=None, max_batch: int = 16, served_model_name: str | None = None,
                 eos_ids: tuple[int, ...] = (), skip_tokenizer_init: bool = False,
                 context_length_arg: int | None = None):
        self.engine = engine
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        info = engine.info()
        self.info = info
        self.served_model_name = served_model_name or info.model_path
        # The model's EOS ids: SGLang stops on them besides the request's stop_token_ids (not with ignore_eos).
        self.eos_ids = tuple(eos_ids)
        # As SGLang's --skip-tokenizer-init: answers carry no `text`, /tokenize fails.
        self.skip_tokenizer_init = skip_tokenizer_init or tokenizer is None
        # What /server_info reports as context_length: SGLang's --context-length argument (None unless given;
        # the model's own context still bounds every request).
        self.context_length_arg = context_length_arg
        self.context_length = context_length_arg or info.context_length
        self.prefix_cache = PrefixCache()
        self.queue: asyncio.Queue | None = None
        self.batcher: asyncio.Task | None = None
        self.requests_served = 0
        # Requests being answered, by rid: as SGLang, another request with a running rid is refused as a duplicate,
        # and /abort_request ends a running one (its answer: finish_reason abort). A client that disconnects does
        # not end its requests here (aiohttp does not cancel the handler): they run on, as stale ones.
        self.running: dict[str, asyncio.Event] = {}
        self.aborted: list[str] = []   # rids /abort_request ended while they ran

    # -- app ----------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/generate", self.generate)
        app.router.add_post("/abort_request", self.abort_request)
        for path in ("/health", "/health_generate"):
            app.router.add_get(path, self.health)
        for path in ("/model_info", "/get_model_info"):
            app.router.add_get(path, self.model_info)
        for path in ("/server_info", "/get_server_info"):
            app.router.add_get(path, self.server_info)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_route("*", "/flush_cache", self.flush_cache)
        app.on_startup.append(self._start_batcher)
        return app

    def stop(self) -> None:
        """A shutdown: no batch starts, and the one being decoded ends at its next token (an engine that can end it:
        LocalEngine.stop), so the process exits without waiting for it."""
        if self.batcher is not None:
            self.batcher.cancel()
        getattr(self.engine, "stop", lambda: None)()

    async def _start_batcher(self, app: web.Application) -> None:
        self.queue = asyncio.Queue()
        self.batcher = app["batcher"] = asyncio.get_running_loop().create_task(self._batcher())

    async def _batcher(self) -> None:
        """Gather waiting requests into one engine batch; run it in a worker thread."""
        loop = asyncio.get_running_loop()
        while True:
            first = await self.queue.get()
            batch = [first]
            await asyncio.sleep(0.002)   # let concurrent arrivals join
            while len(batch) < self.max_batch and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            reqs = [req for req, _ in batch]

            def run(reqs=reqs):   # generation and prefill-only scoring share the queue and the model
                gen = [r for r in reqs if isinstance(r, GenerationRequest)]
                score = [r for r in reqs if isinstance(r, ScoreRequest)]
                found = {c.id: c for c in self.engine.generate(gen)} if gen else {}
                found.update({x.id: x for x in self.engine.score(score)} if score else {})
                return found

            try:
                done = await loop.run_in_executor(None, run)
            except Exception as e:  # the engine failed: every waiting request gets the error
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            for req, fut in batch:
                if not fut.done():
                    fut.set_result(done[req.id])

    # -- hooks the tests' stand-in overrides to inject faults (tests/helpers/standin_server.py) ------------
    def before_generate(self, request: web.Request) -> web.StreamResponse | None:
        """A /generate answered before its body is read (None: it is served)."""
        return None

    def received(self, raw: bytes) -> None:
        """A /generate body as it came."""

    def still_running(self, rid: str | None) -> bool:
        """Whether a request with this rid runs here (a new one with it is refused as a duplicate)."""
        return rid in self.running

    def aborting(self, rid: str, abort_all: bool) -> None:
        """/abort_request for rids starting with `rid` (or all) arrived."""

    async def before_work(self) -> None:
        """Spent as a running request (abortable by rid) before it is queued for the engine."""

    def answering(self, answer: dict[str, Any], max_new_tokens: int) -> None:
        """A /generate answer about to be sent (changed in place)."""

    def answer_response(self, body: Any) -> web.Response:
        """A /generate answer as the HTTP response."""
        return _json(body)

    def more_server_info(self) -> dict[str, Any]:
        """/server_info keys besides the engine's own."""
        return {}

    # -- endpoints ----------------------------------------------------------------------------
    async def abort_request(self, request: web.Request) -> web.Response:
        """SGLang's `POST /abort_request {"rid", "abort_all"}` (0.5.23 `AbortReq`): every running request whose rid
        starts with `rid` ends (its answer: finish_reason abort), as SGLang's scheduler matches them; an empty rid
        without abort_all is ignored. 200 either way."""
        try:
            body = orjson.loads(await request.read())
            rid, abort_all = body.get("rid") or "", bool(body.get("abort_all"))
        except (orjson.JSONDecodeError, AttributeError):
            return _json({"error": {"message": "expected a JSON object with rid"}}, status=400)
        if not rid and not abort_all:
            return web.Response(status=200)
        self.aborting(rid, abort_all)
        for running, event in self.running.items():
            if (abort_all or running.startswith(rid)) and not event.is_set():
                event.set()
                self.aborted.append(running)
        return web.Response(status=200)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter()
        refused = self.before_generate(request)
        if refused is not None:
            return refused
        raw = await request.read()
        self.received(raw)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            return _json({"error": {"message": f"invalid JSON: {e}"}}, status=400)
        parsed = parse_generate(body, context_length=self.context_length, eos_ids=self.eos_ids)
        if isinstance(parsed, web.Response):
            return parsed
        prompts, rids, sampling, batch, want_lp, start, top_n, seed = parsed
        for rid in rids:
            if self.still_running(rid):   # SGLang's tokenizer manager, word for word
                return _json({"error": {"message": f"Duplicate request ID detected: {rid}"}}, status=400)

        async def work() -> web.Response:
            await self.before_work()
            if want_lp and sampling.max_new_tokens == 0 and start >= 0:
                return await self._prefill_only(prompts, rids, start, top_n, batch, t0)
            return await self._generate(prompts, rids, sampling, batch, want_lp, top_n, seed, t0)

        running = {rid: asyncio.Event() for rid in rids if rid}
        self.running.update(running)
        answer = asyncio.ensure_future(work())
        try:
            if await _aborted_first(answer, list(running.values())):
                return _json(self._aborted(prompts, rids, batch, t0))
            return answer.result()
        finally:
            answer.cancel()      # aborted: the batch it waits in drops it
            for rid, event in running.items():
                if self.running.get(rid) is event:
                    del self.running[rid]

    def _aborted(self, prompts, rids, batch: bool, t0: float):
        """SGLang's answer to a request /abort_request ended: no tokens, finish_reason abort."""
        out = []
        for ids, rid in zip(prompts, rids):
            answer = {"output_ids": [], "meta_info": _meta_info(rid or uuid.uuid4().hex, {
                "type": "abort", "message": "Abort in waiting queue"}, len(ids), 0, 0, t0)}
            out.append(answer if self.skip_tokenizer_init else {"text": "", **answer})
        return out if batch else out[0]

    async def _generate(self, prompts, rids, sampling, batch: bool, want_lp: bool, top_n: int, seed,
                        t0: float) -> web.Response:
        loop = asyncio.get_running_loop()
        futures = []
        for ids, rid in zip(prompts, rids):
            req = GenerationRequest(id=rid or uuid.uuid4().hex, input_ids=list(ids), sampling=sampling,
                                    seed=seed, return_logprob=want_lp)
            cached = self.prefix_cache.match(req.input_ids)
            self.prefix_cache.insert(req.input_ids)
            fut = loop.create_future()
            await self.queue.put((req, fut))
            futures.append((req, cached, fut))
        out = []
        for req, cached, fut in futures:
            try:
                c = await fut
            except Exception as e:
                return _json({"error": {"message": f"generation failed: {e}"}}, status=500)
            self.prefix_cache.insert(req.input_ids + list(c.output_ids))
            answer = {
                "output_ids": list(c.output_ids),
                "meta_info": _meta_info(req.id, c.finish_detail, len(req.input_ids), len(c.output_ids), cached, t0),
            }
            if not self.skip_tokenizer_init:
                answer = {"text": self.tokenizer.decode(c.output_ids, skip_special_tokens=sampling.skip_special_tokens),
                          **answer}
            if want_lp:
                _add_output_logprobs(answer["meta_info"], c, top_n)
            self.answering(answer, sampling.max_new_tokens)
            out.append(answer)
        self.requests_served += len(out)
        return self.answer_response(out if batch else out[0])

    async def _prefill_only(self, prompts, rids, start: int, top_n: int, batch: bool, t0: float) -> web.Response:
        """max_new_tokens 0 + return_logprob: the engine's `score` from position start+1 (SGLang reports a
        null log-prob at logprob_start_len itself, and the top-1 after the prompt as output_top_logprobs)."""
        loop = asyncio.get_running_loop()
        futures = []
        for ids, rid in zip(prompts, rids):
            s = min(start, len(ids) - 1)     # start == len(ids): the last position (past it is a 400 already)
            req = ScoreRequest(id=rid or uuid.uuid4().hex, input_ids=list(ids), start=s + 1)
            # Positions from logprob_start_len on are computed again for their log-probs: no cache hit there.
            cached = min(self.prefix_cache.match(req.input_ids), s)
            self.prefix_cache.insert(req.input_ids)
            fut = loop.create_future()
            await self.queue.put((req, fut))
            futures.append((req, s, cached, fut))
        out = []
        for req, s, cached, fut in futures:
            try:
                r = await fut
            except Exception as e:
                return _json({"error": {"message": f"scoring failed: {e}"}}, status=500)
            if isinstance(r, RequestFailure):
                return _error(r.message)
            ids = req.input_ids
            meta = _meta_info(req.id, {"type": "length", "length": 0}, len(ids), 0, cached, t0)
            meta["input_token_logprobs"] = [[None, ids[s], None]] + [[lp, t, None] for lp, t in
                                                                     zip(r.logprobs, ids[s + 1:])]
            meta["output_token_logprobs"] = []
            meta["output_token_logprobs_length"] = 0
            if top_n > 0:
                meta["input_top_logprobs"] = [None] + [[[lp, t, None]] for lp, t in zip(r.top1_logprobs, r.top1_ids)]
                meta["output_top_logprobs"] = [[[r.next_top1[0], r.next_top1[1], None]]] if r.next_top1 else []
            answer = {"output_ids": [], "meta_info": meta}
            out.append(answer if self.skip_tokenizer_init else {"text": "", **answer})
        self.requests_served += len(out)
        return _json(out if batch else out[0])

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def model_info(self, request: web.Request) -> web.Response:
        return _json({
            "model_path": self.info.model_path,
            "tokenizer_path": self.info.model_path,
            "served_model_name": self.served_model_name,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "model_type": "llama",
        })

    async def server_info(self, request: web.Request) -> web.Response:
        return _json({
            "model_path": self.info.model_path,
            "tokenizer_path": self.info.model_path,
            "context_length": self.context_length_arg,
            "version": PROTOCOL_VERSION,
            "engine": f"kimi-eagle-data {self.info.engine} engine ({self.info.version})",
            "requests_served": self.requests_served,
            "running_rids": sorted(self.running),
            "aborted_rids": self.aborted,
            "pid": os.getpid(),         # which process answers a port (test harnesses start several)
            **self.info.server_args,
            **self.more_server_info(),
        })

    async def models(self, request: web.Request) -> web.Response:
        """The OpenAI-compatible model list: where SGLang reports the context length it serves with."""
        return _json({"object": "list", "data": [{
            "id": self.served_model_name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
            "root": self.served_model_name, "parent": None, "max_model_len": self.context_length}]})

    async def tokenize(self, request: web.Request) -> web.Response:
        if self.skip_tokenizer_init:    # SGLang 0.5.23 fails the same way (its tokenizer is None)
            return _json({"object": "error", "message": "Internal server error during tokenization: 'NoneType' object "
                          "has no attribute 'encode'", "type": "InternalServerError", "param": None, "code": 500},
                         status=500)
        body = orjson.loads(await request.read())
        prompt = body.get("prompt")
        add = bool(body.get("add_special_tokens", True))
        if isinstance(prompt, list):
            tokens = [self.tokenizer.encode(p, add_special_tokens=add) for p in prompt]
            count = [len(t) for t in tokens]
        else:
            tokens = self.tokenizer.encode(prompt, add_special_tokens=add)
            count = len(tokens)
        return _json({"tokens": tokens, "count": count, "max_model_len": self.context_length})

    async def flush_cache(self, request: web.Request) -> web.Response:
        self.prefix_cache.clear()
        return web.Response(text="Cache flushed.\n")


async def _aborted_first(work: asyncio.Future, aborts: list[asyncio.Event]) -> bool:
    """Wait for `work`, or for one of `aborts` to be set first (then True)."""
    waiters = [asyncio.ensure_future(e.wait()) for e in aborts]
    try:
        done, _ = await asyncio.wait([work, *waiters], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
    return work not in done


def _meta_info(rid: str, finish: dict[str, Any], prompt_tokens: int, completion_tokens: int, cached: int,
               t0: float) -> dict[str, Any]:
    """The meta_info keys SGLang 0.5.23 sends on a /generate answer (its values where this stand-in has them)."""
    return {
        "id": rid, "finish_reason": finish, "prompt_tokens": prompt_tokens, "weight_version": "default",
        "num_retractions": 0, "reasoning_tokens": 0, "completion_tokens": completion_tokens, "cached_tokens": cached,
        "weight_versions": [{"version": "default", "start": 0, "end": completion_tokens}],
        "cached_tokens_details": {"device": cached, "host": 0}, "dp_rank": None,
        "e2e_latency": time.perf_counter() - t0, "response_sent_to_client_ts": time.time(),
    }


def _add_output_logprobs(meta: dict[str, Any], c, top_n: int) -> None:
    lps = c.output_logprobs if c.output_logprobs is not None else []
    meta["input_token_logprobs"] = []
    meta["output_token_logprobs"] = [[lp, int(t), None] for lp, t in zip(lps, c.output_ids)]
    meta["output_token_logprobs_length"] = len(meta["output_token_logprobs"])
    if top_n > 0:
        meta["input_top_logprobs"] = []
        meta["output_top_logprobs"] = [[[lp, int(t), None]] for lp, t in
                                       zip(c.output_top1_logprobs or [], c.output_top1_ids or [])]


def serve_model(model: str, *, host: str, port: int, tokenizer: str | None = None, max_batch: int = 16,
                context_length: int | None = None, skip_tokenizer_init: bool = False,
                server_class: type[ProtocolServer] | None = None, print_url=log.info, **server_options) -> None:
    """Serve `model` (a local HF model or Hub id, run in this process on CPU) over SGLang's protocol until stopped:
    `kimi-data serve --engine local`; with a `server_class` (and its `server_options`), the tests' stand-in
    (tests/helpers/standin_server.py)."""
    tok = None if skip_tokenizer_init else open_tokenizer(tokenizer or model)   # no format: it renders no prompt
    local = LocalEngine(model, batch_size=max_batch)
    server = (server_class or ProtocolServer)(
        local, tokenizer=tok, max_batch=max_batch, eos_ids=local.eos_token_ids, skip_tokenizer_init=skip_tokenizer_init,
        context_length_arg=context_length, **server_options)
    run_server(server, host, port, print_url=print_url)


# How long a stopped server lets its in-flight requests finish before it drops their connections (as a stopped
# SGLang does: the clients retry them elsewhere or on the next run).
SHUTDOWN_GRACE_S = 0.1


def run_server(server: ProtocolServer, host: str, port: int, *, print_url=log.info) -> None:
    """Serve until SIGINT or SIGTERM, then shut down quietly: in-flight requests' connections close (no answer: a
    client retries them), the engine's batch ends at its next token, and the stop is raised in the caller's thread
    as KeyboardInterrupt (Ctrl-C) or stopping.Terminated (SIGTERM), for the command's usual line and exit status."""
    stopped_by = asyncio.run(_serve(server, host, port, print_url))
    raise Terminated() if stopped_by == signal.SIGTERM else KeyboardInterrupt()


async def _serve(server: ProtocolServer, host: str, port: int, print_url) -> int:
    loop = asyncio.get_running_loop()
    signalled: asyncio.Future = loop.create_future()

    def on_signal(signum: int) -> None:
        if not signalled.done():      # one stop is enough: a repeated signal must not break the shutdown
            signalled.set_result(signum)

    runner = web.AppRunner(server.app(), access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal, signum)
        await web.TCPSite(runner, host, port).start()
        print_url(f"serving SGLang protocol at http://{host}:{port} (model {server.info.model_path})")
        stopped_by = await signalled
    finally:
        await runner.cleanup()     # first: the in-flight requests' connections close, no answer cut short is sent
        server.stop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(signum)
        signal.signal(signum, signal.SIG_IGN)    # the stop is under way: a second signal changes nothing
    return stopped_by
