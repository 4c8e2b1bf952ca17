"""A synthetic SGLang-protocol server for benchmarks (no model): real HTTP, SGLang's field names.

Modes:
- `zero`: answers every /generate at once with `--output-len` ids (client-ceiling benchmark).
- `kimi`: answers at once with a completion that is valid Kimi-K2.5 (bench_rehearsal): its length drawn from the
  `rid` as in `capacity` (cut at the request's `max_new_tokens`: then `length`, as a real server), reasoning, the
  think-close id and an answer in thinking mode (a prompt ending with the think-open id), only an answer in instant
  mode, then the end-of-turn id; the ids come from `--kimi-ids FILE` (JSON: think_open, think_close, end_of_turn
  and `words`, a tokenized English text the answers are cut from, so an answer decodes and re-renders as text).
  With `--kimi-token-ms` > 0 the answers come from the emulated GPU of `capacity` (`--slots`) instead of at once.
- `capacity`: emulates a GPU with `--slots` sequences decoding in parallel, each token taking
  `--token-ms`; a request waits for a free slot, then holds it for `length * token_ms`, on the emulated GPU's own
  clock (`EmulatedGpu`: the emulator's event-loop lag delays answers, never the GPU). Output
  lengths are long-tailed (lognormal, median `--median`, capped at `--max-len`) and drawn from the
  request's `rid`, so every client sees the same workload. With `--prefix-cache` it keeps SGLang's kind of prefix
  cache (prompts and outputs served, the protocol server's PrefixCache), reports `cached_tokens`, and a request
  also holds its slot for `--prefill-ms` per prompt token not in the cache.

    python benchmarks/synthetic_server.py --mode capacity --port 31000
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import heapq
import math
from statistics import NormalDist

import orjson
from aiohttp import web

STOP_ID = 163586
_STOP_JSON = str(STOP_ID).encode()
_NORMAL = NormalDist()


def length_for(rid: str, median: float, sigma: float, max_len: int) -> int:
    """Deterministic long-tailed length from the request id (lognormal via the inverse normal CDF)."""
    u = (int(hashlib.blake2b(rid.encode(), digest_size=8).hexdigest(), 16) + 0.5) / 2**64
    z = _NORMAL.inv_cdf(u)
    return max(1, min(max_len, int(round(median * math.exp(sigma * z)))))


class OutputIds:
    """The ids an answer of `n` tokens holds (n - 1 filler ids, then the stop id), and their JSON text, cut from
    one list made at start-up: the emulated GPU's answers cost the emulator a slice, not a loop per token, so on
    a small machine it leaves the client the CPU a real server's HTTP layer would leave it."""

    def __init__(self, longest: int):
        self.ids = [(i * 7919) % 150000 for i in range(max(longest - 1, 0))]
        text = orjson.dumps(self.ids)
        # ends[k]: the length of the JSON text up to and including the k-th id (no comma), after the "["
        commas = [i for i, b in enumerate(text) if b == 44]          # 44: ","
        self.ends = [1] + commas + [len(text) - 1]
        self.text = text

    def list(self, n: int) -> list[int]:
        return self.ids[:n - 1] + [STOP_ID]

    def json(self, n: int) -> bytes:
        head = self.text[1:self.ends[n - 1]]
        return b"[" + head + (b"," if n > 1 else b"") + _STOP_JSON + b"]"


class KimiAnswers:
    """Valid Kimi-K2.5 completions as JSON text, cut from one tokenized text made at start-up (no loop per token:
    the server leaves the client the CPU, as a real server's HTTP layer would)."""

    def __init__(self, spec: dict, longest: int):
        self.think_open, self.think_close, self.end = spec["think_open"], spec["think_close"], spec["end_of_turn"]
        words = spec["words"]
        self.ids = (words * (2 * longest // len(words) + 2))[:2 * longest + 2]
        text = orjson.dumps(self.ids)
        commas = [i for i, b in enumerate(text) if b == 44]
        self.starts = [1] + [c + 1 for c in commas]          # where id k's digits start
        self.ends = commas + [len(text) - 1]                  # where they end (exclusive)
        self.text = text

    def _cut(self, start: int, n: int) -> bytes:
        return self.text[self.starts[start]:self.ends[start + n - 1]] if n > 0 else b""

    def answer(self, rid: str, prompt: list[int], n: int, max_new: int) -> tuple[bytes, int, bool]:
        """(the output ids' JSON, how many, whether cut at max_new) for an answer of `n` tokens drawn for `rid`."""
        offset = int(hashlib.blake2b(rid.encode(), digest_size=4).hexdigest(), 16) % (len(self.ids) // 2)
        thinking = not prompt or prompt[-1] != self.think_close
        n = max(n, 4 if thinking else 2)
        if thinking:
            reasoning = n * 7 // 10
            parts = [self._cut(offset, reasoning), str(self.think_close).encode(),
                     self._cut(offset + reasoning, n - reasoning - 2)]
        else:
            parts = [self._cut(offset, n - 1)]
        parts.append(str(self.end).encode())
        ids = b",".join(p for p in parts if p)
        if n <= max_new:
            return b"[" + ids + b"]", n, False
        return orjson.dumps(orjson.loads(b"[" + ids + b"]")[:max_new]), max_new, True


class EmulatedGpu:
    """`slots` sequences decoding at once, first come first served, on a clock of the GPU's own: a request starts
    when it arrives or when a slot frees, whichever is later, and holds the slot exactly its prefill + decode time.
    The emulator's event loop only delivers the answer; were it to time the slots too (sleep, then free the slot),
    its own lag under load would hold every slot longer than the work (1.6 ms per request at bench_scheduler's
    default size on 2 cores: 4% of the capacity), a waste no real GPU has and no client could avoid."""

    def __init__(self, slots: int):
        self.free_at = [0.0] * slots       # a heap: when each slot's last request ends

    def reserve(self, now: float, seconds: float) -> tuple[float, float]:
        """A request arriving at `now` that needs `seconds` of a slot: its (start, end) on the GPU's clock."""
        start = max(now, heapq.heappop(self.free_at))
        heapq.heappush(self.free_at, start + seconds)
        return start, start + seconds


def make_app(args) -> web.Application:
    gpu = EmulatedGpu(args.slots)
    stats = {"requests": 0, "tokens": 0, "prompt_tokens": 0, "cached_tokens": 0}
    outputs = OutputIds(max(args.max_len, args.output_len))
    kimi = None
    if args.mode == "kimi":
        with open(args.kimi_ids, "rb") as f:
            kimi = KimiAnswers(orjson.loads(f.read()), args.max_len)
    cache = None
    if args.prefix_cache:
        from kimi_eagle_data.engines.protocol_server import PrefixCache

        cache = PrefixCache(args.cache_tokens)

    async def generate(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        rid = body.get("rid") or str(stats["requests"])
        prompt = body["input_ids"]
        cached = 0
        if kimi is not None:
            n = length_for(rid, args.median, args.sigma, args.max_len)
            max_new = int((body.get("sampling_params") or {}).get("max_new_tokens") or n)
            ids, n, cut = kimi.answer(rid, prompt, n, max_new)
            if args.kimi_token_ms > 0:
                loop = asyncio.get_running_loop()
                _, end = gpu.reserve(loop.time(), n * args.kimi_token_ms / 1000)
                await asyncio.sleep(end - loop.time())
            stats["requests"] += 1
            stats["tokens"] += n
            stats["prompt_tokens"] += len(prompt)
            finish = {"type": "length", "length": n} if cut else {"type": "stop", "matched": kimi.end}
            meta = orjson.dumps({"id": rid, "finish_reason": finish, "prompt_tokens": len(prompt),
                                 "completion_tokens": n, "cached_tokens": 0, "e2e_latency": 0.0})
            return web.Response(body=b'{"text":"","output_ids":' + ids + b',"meta_info":' + meta + b"}",
                                content_type="application/json")
        if args.mode == "zero":
            n = args.output_len
        else:
            loop = asyncio.get_running_loop()
            n = length_for(rid, args.median, args.sigma, args.max_len)
            cached = cache.match(prompt) if cache is not None else 0
            prefill = (len(prompt) - cached) * args.prefill_ms / 1000
            start, end = gpu.reserve(loop.time(), prefill + n * args.token_ms / 1000)
            if cache is not None:   # as SGLang's radix cache: a prompt is there once prefilled
                loop.call_at(start + prefill, cache.insert, prompt)
            await asyncio.sleep(end - loop.time())
        stats["requests"] += 1
        stats["tokens"] += n
        stats["prompt_tokens"] += len(prompt)
        stats["cached_tokens"] += cached
        if cache is not None:
            cache.insert(prompt + outputs.list(n))
        meta = orjson.dumps({"id": rid, "finish_reason": {"type": "stop", "matched": STOP_ID},
                             "prompt_tokens": len(prompt), "completion_tokens": n, "cached_tokens": cached,
                             "e2e_latency": 0.0})
        return web.Response(body=b'{"text":"","output_ids":' + outputs.json(n) + b',"meta_info":' + meta + b"}",
                            content_type="application/json")

    async def ok(request):
        return web.Response(status=200)

    async def server_info(request):
        return web.Response(body=orjson.dumps({"version": "0.5.23", "model_path": args.model_path, **stats,
                                               "context_length": 1 << 20}), content_type="application/json")

    async def model_info(request):
        return web.Response(body=orjson.dumps({"model_path": args.model_path, "is_generation": True}),
                            content_type="application/json")

    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/generate", generate)
    app.router.add_get("/health", ok)
    app.router.add_get("/health_generate", ok)
    app.router.add_get("/server_info", server_info)
    app.router.add_get("/model_info", model_info)
    return app


def launch(mode: str, *args: str):
    """Start this server in its own process (so a benchmark measures the client alone); return (proc, url)."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, __file__, "--mode", mode, "--port", str(port), *args])
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("synthetic server did not start")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["zero", "capacity", "kimi"], default="zero")
    ap.add_argument("--port", type=int, default=31000)
    ap.add_argument("--output-len", type=int, default=1000)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--token-ms", type=float, default=0.05)
    ap.add_argument("--median", type=float, default=470)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--max-len", type=int, default=10240)
    ap.add_argument("--prefix-cache", action="store_true", help="keep a prefix cache, report cached_tokens")
    ap.add_argument("--cache-tokens", type=int, default=1 << 23, help="the prefix cache's size (emptied when full)")
    ap.add_argument("--prefill-ms", type=float, default=0.0, help="prefill time per uncached prompt token")
    ap.add_argument("--kimi-ids", help="kimi mode: JSON of the profile's ids and the text answers are cut from")
    ap.add_argument("--kimi-token-ms", type=float, default=0.0,
                    help="kimi mode: time per output token on the emulated GPU (0: answer at once)")
    ap.add_argument("--model-path", default="synthetic", help="what /model_info names as the served model")
    args = ap.parse_args()
    web.run_app(make_app(args), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
