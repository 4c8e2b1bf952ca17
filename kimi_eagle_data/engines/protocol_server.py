"""An SGLang-protocol HTTP server over any in-process engine (the test stand-in for SGLang).

It speaks the subset of SGLang's native API this project uses, with SGLang's field names:
`POST /generate` (`input_ids` single or batch, `sampling_params`, `rid`) -> `{"text", "output_ids",
"meta_info": {"id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens",
"e2e_latency"}}`; `/health`, `/health_generate`, `/model_info` (+ `/get_model_info`), `/server_info`
(+ `/get_server_info`), `/tokenize`, `/flush_cache`. Concurrent requests are gathered into batches
for the engine. Fault injection (error rate, delay, dropped connections, malformed answers)
exercises the client's retries and response checks in tests.

Log-probs as SGLang gives them (engines/sglang_logprobs.py cites the source): `return_logprob` adds
`meta_info.output_token_logprobs` ([logprob, token_id, null] per sampled token) and, with
`top_logprobs_num` >= 1, `output_top_logprobs` (top-1 only here); a prefill-only request
(`max_new_tokens` 0) with `logprob_start_len` L adds `input_token_logprobs` for positions L.. with a null
log-prob at L, and `input_top_logprobs` (null at L), computed by the engine's `score`.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from kimi_eagle_data.engines.base import Engine, GenerationRequest, SamplingParams, ScoreRequest

# What this stand-in reports as its SGLang version: the behaviour it mirrors is 0.5.5+.
PROTOCOL_VERSION = "0.5.23"


@dataclass
class Faults:
    error_rate: float = 0.0        # share of /generate answered with HTTP 500
    drop_rate: float = 0.0         # share of /generate whose connection is closed without an answer
    delay_s: float = 0.0           # added latency per /generate
    # Every /generate answer malformed, in these ways (BAD_OUTPUT_MODES) taken in turn, answer by answer.
    bad_output: tuple[str, ...] = ()
    seed: int = 0


# Malformed `/generate` answers a broken server could send; the client must refuse each one.
BAD_OUTPUT_MODES = {
    "non_int": "one output id is the string \"x\"",
    "bool": "one output id is `true`",
    "out_of_vocab": "one output id equals the vocabulary size",
    "huge_int": "one output id is 2**70 (beyond int64)",
    "too_long": "max_new_tokens + 1 output ids",
    "meta_mismatch": "meta_info.completion_tokens one more than len(output_ids)",
}


def corrupt(answer: dict[str, Any], mode: str, *, max_new_tokens: int, vocab_size: int) -> None:
    """Make one answer malformed in place (`mode` from BAD_OUTPUT_MODES)."""
    ids, meta = answer["output_ids"], answer["meta_info"]
    first = ids[0] if ids else 0
    if mode == "non_int":
        ids[:1] = ["x"]
    elif mode == "bool":
        ids[:1] = [True]
    elif mode == "out_of_vocab":
        ids[:1] = [vocab_size]
    elif mode == "huge_int":
        ids[:1] = [2 ** 70]
    elif mode == "too_long":
        ids[:] = (ids + [first] * (max_new_tokens + 1))[:max_new_tokens + 1]
    elif mode == "meta_mismatch":
        meta["completion_tokens"] = len(ids) + 1
        return
    else:
        raise ValueError(f"unknown bad_output mode {mode!r}; known: {', '.join(BAD_OUTPUT_MODES)}")
    meta["completion_tokens"] = len(ids)


def _dumps_any(obj: Any) -> bytes:
    """orjson, or the standard library for integers orjson refuses (beyond 64 bits)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        import json

        return json.dumps(obj).encode()


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=_dumps_any(obj), status=status, content_type="application/json")


class ProtocolServer:
    def __init__(self, engine: Engine, *, tokenizer=None, max_batch: int = 16, faults: Faults | None = None,
                 served_model_name: str | None = None, extra_stop_ids: tuple[int, ...] = ()):
        self.engine = engine
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        self.faults = faults or Faults()
        self.rng = random.Random(self.faults.seed)
        info = engine.info()
        self.info = info
        self.served_model_name = served_model_name or info.model_path
        self.extra_stop_ids = extra_stop_ids
        self.queue: asyncio.Queue | None = None
        self.requests_served = 0
        self.bad_answers = 0           # answers malformed so far (Faults.bad_output)

    # -- app ----------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/generate", self.generate)
        for path in ("/health", "/health_generate"):
            app.router.add_get(path, self.health)
        for path in ("/model_info", "/get_model_info"):
            app.router.add_get(path, self.model_info)
        for path in ("/server_info", "/get_server_info"):
            app.router.add_get(path, self.server_info)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_route("*", "/flush_cache", self.flush_cache)
        app.on_startup.append(self._start_batcher)
        return app

    async def _start_batcher(self, app: web.Application) -> None:
        self.queue = asyncio.Queue()
        app["batcher"] = asyncio.get_running_loop().create_task(self._batcher())

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

    # -- endpoints ----------------------------------------------------------------------------
    async def generate(self, request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter()
        f = self.faults
        if f.delay_s:
            await asyncio.sleep(f.delay_s)
        if f.drop_rate and self.rng.random() < f.drop_rate:
            request.transport.close()     # the client sees a dropped connection
            raise web.HTTPInternalServerError()
        if f.error_rate and self.rng.random() < f.error_rate:
            return _json({"error": {"message": "injected fault"}}, status=500)
        try:
            body = orjson.loads(await request.read())
            input_ids = body["input_ids"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return _json({"error": {"message": "expected a JSON body with input_ids"}}, status=400)
        batch = bool(input_ids) and isinstance(input_ids[0], list)
        prompts = input_ids if batch else [input_ids]
        sp = body.get("sampling_params") or {}
        rids = body.get("rid")
        rids = rids if isinstance(rids, list) else [rids] * len(prompts)
        try:
            sampling = SamplingParams(
                max_new_tokens=int(sp.get("max_new_tokens", 128)),
                temperature=float(sp.get("temperature", 1.0)),
                top_p=float(sp.get("top_p", 1.0)),
                stop_token_ids=tuple(sp.get("stop_token_ids") or ()) + self.extra_stop_ids,
                skip_special_tokens=bool(sp.get("skip_special_tokens", True)),
            )
        except (TypeError, ValueError) as e:
            return _json({"error": {"message": f"bad sampling_params: {e}"}}, status=400)
        ctx = self.info.context_length
        for ids in prompts:
            # SGLang's tokenizer manager refuses these with HTTP 400 (it does not truncate).
            if ctx and len(ids) >= ctx:
                return _json({"error": {"message": f"The input ({len(ids)} tokens) is longer than the model's "
                                                   f"context length ({ctx} tokens)."}}, status=400)
            if ctx and len(ids) + sampling.max_new_tokens >= ctx:
                return _json({"error": {"message": f"Requested token count exceeds the model's maximum context "
                                                   f"length of {ctx} tokens. You requested a total of "
                                                   f"{len(ids) + sampling.max_new_tokens} tokens: {len(ids)} tokens "
                                                   f"from the input messages and {sampling.max_new_tokens} tokens "
                                                   "for the completion."}}, status=400)
        try:
            want_lp = bool(body.get("return_logprob", False))
            start = int(body.get("logprob_start_len", -1) if body.get("logprob_start_len") is not None else -1)
            top_n = int(body.get("top_logprobs_num") or 0)
        except (TypeError, ValueError) as e:
            return _json({"error": {"message": f"bad logprob fields: {e}"}}, status=400)
        if want_lp and sampling.max_new_tokens == 0 and start >= 0:
            return await self._prefill_only(prompts, rids, start, top_n, batch, t0)
        loop = asyncio.get_running_loop()
        futures = []
        for ids, rid in zip(prompts, rids):
            req = GenerationRequest(id=rid or uuid.uuid4().hex, input_ids=list(ids), sampling=sampling,
                                    seed=int(sp.get("sampling_seed", 0)), return_logprob=want_lp)
            fut = loop.create_future()
            await self.queue.put((req, fut))
            futures.append((req, fut))
        out = []
        for req, fut in futures:
            try:
                c = await fut
            except Exception as e:
                return _json({"error": {"message": f"generation failed: {e}"}}, status=500)
            text = ""
            if self.tokenizer is not None:
                text = self.tokenizer.decode(c.output_ids, skip_special_tokens=sampling.skip_special_tokens)
            answer = {
                "text": text,
                "output_ids": list(c.output_ids),
                "meta_info": {
                    "id": req.id,
                    "finish_reason": c.finish_detail,
                    "prompt_tokens": len(req.input_ids),
                    "completion_tokens": len(c.output_ids),
                    "cached_tokens": c.cached_tokens or 0,
                    "e2e_latency": time.perf_counter() - t0,
                },
            }
            if want_lp:
                _add_output_logprobs(answer["meta_info"], c, top_n)
            if f.bad_output:
                vocab = len(self.tokenizer) if self.tokenizer is not None else 1 << 31
                mode = f.bad_output[self.bad_answers % len(f.bad_output)]
                self.bad_answers += 1
                corrupt(answer, mode, max_new_tokens=sampling.max_new_tokens, vocab_size=vocab)
            out.append(answer)
        self.requests_served += len(out)
        return _json(out if batch else out[0])

    async def _prefill_only(self, prompts, rids, start: int, top_n: int, batch: bool, t0: float) -> web.Response:
        """max_new_tokens 0 + return_logprob: the engine's `score` from position start+1 (SGLang reports a
        null log-prob at logprob_start_len itself)."""
        loop = asyncio.get_running_loop()
        futures = []
        for ids, rid in zip(prompts, rids):
            s = min(start, len(ids) - 1)     # SGLang clamps a start past the prompt to its last position
            req = ScoreRequest(id=rid or uuid.uuid4().hex, input_ids=list(ids), start=s + 1)
            fut = loop.create_future()
            await self.queue.put((req, fut))
            futures.append((req, s, fut))
        out = []
        for req, s, fut in futures:
            try:
                r = await fut
            except Exception as e:
                return _json({"error": {"message": f"scoring failed: {e}"}}, status=500)
            if r.error:
                return _json({"error": {"message": r.error.get("message", "scoring failed")}}, status=400)
            ids = req.input_ids
            meta = {
                "id": req.id, "finish_reason": {"type": "length", "length": 0},
                "prompt_tokens": len(ids), "completion_tokens": 0, "cached_tokens": 0,
                "input_token_logprobs": [[None, ids[s], None]] + [[lp, t, None] for lp, t in zip(r.logprobs, ids[s + 1:])],
                "output_token_logprobs": [],
                "e2e_latency": time.perf_counter() - t0,
            }
            if top_n > 0:
                meta["input_top_logprobs"] = [None] + [[[lp, t, None]] for lp, t in zip(r.top1_logprobs, r.top1_ids)]
                meta["output_top_logprobs"] = []
            out.append({"text": "", "output_ids": [], "meta_info": meta})
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
            "context_length": self.info.context_length,
            "version": PROTOCOL_VERSION,
            "engine": f"kimi-eagle-data {self.info.engine} engine ({self.info.version})",
            "requests_served": self.requests_served,
            "bad_answers": self.bad_answers,
            "pid": os.getpid(),         # which process answers a port (test harnesses start several)
            **self.info.server_args,
        })

    async def tokenize(self, request: web.Request) -> web.Response:
        if self.tokenizer is None:
            return _json({"error": {"message": "no tokenizer loaded"}}, status=400)
        body = orjson.loads(await request.read())
        prompt = body.get("prompt")
        add = bool(body.get("add_special_tokens", True))
        if isinstance(prompt, list):
            tokens = [self.tokenizer.encode(p, add_special_tokens=add) for p in prompt]
            count = [len(t) for t in tokens]
        else:
            tokens = self.tokenizer.encode(prompt, add_special_tokens=add)
            count = len(tokens)
        return _json({"tokens": tokens, "count": count, "max_model_len": self.info.context_length})

    async def flush_cache(self, request: web.Request) -> web.Response:
        return web.Response(text="Cache flushed.\n")


def _add_output_logprobs(meta: dict[str, Any], c, top_n: int) -> None:
    lps = c.output_logprobs if c.output_logprobs is not None else []
    meta["input_token_logprobs"] = []
    meta["output_token_logprobs"] = [[lp, int(t), None] for lp, t in zip(lps, c.output_ids)]
    if top_n > 0:
        meta["input_top_logprobs"] = []
        meta["output_top_logprobs"] = [[[lp, int(t), None]] for lp, t in
                                       zip(c.output_top1_logprobs or [], c.output_top1_ids or [])]


def run_server(server: ProtocolServer, host: str, port: int, *, print_url=print) -> None:
    async def on_startup(app):
        print_url(f"serving SGLang protocol at http://{host}:{port} (model {server.info.model_path})")

    app = server.app()
    app.on_startup.append(on_startup)
    web.run_app(app, host=host, port=port, print=None, handle_signals=True, access_log=None)
