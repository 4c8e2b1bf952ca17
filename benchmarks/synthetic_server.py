"""A synthetic SGLang-protocol server for benchmarks (no model): real HTTP, SGLang's field names.

Modes:
- `zero`: answers every /generate at once with `--output-len` ids (client-ceiling benchmark).
- `capacity`: emulates a GPU with `--slots` sequences decoding in parallel, each token taking
  `--token-ms`; a request waits for a free slot, then holds it for `length * token_ms`. Output
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
import math

import orjson
from aiohttp import web

STOP_ID = 163586


def length_for(rid: str, median: float, sigma: float, max_len: int) -> int:
    """Deterministic long-tailed length from the request id (lognormal via the inverse normal CDF)."""
    u = (int(hashlib.blake2b(rid.encode(), digest_size=8).hexdigest(), 16) + 0.5) / 2**64
    from statistics import NormalDist

    z = NormalDist().inv_cdf(u)
    return max(1, min(max_len, int(round(median * math.exp(sigma * z)))))


def make_app(args) -> web.Application:
    slots = asyncio.Semaphore(args.slots)
    stats = {"requests": 0, "tokens": 0, "prompt_tokens": 0, "cached_tokens": 0}
    cache = None
    if args.prefix_cache:
        from kimi_eagle_data.engines.protocol_server import PrefixCache

        cache = PrefixCache(args.cache_tokens)

    async def generate(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        rid = body.get("rid") or str(stats["requests"])
        prompt = body["input_ids"]
        cached = 0
        if args.mode == "zero":
            n = args.output_len
        else:
            n = length_for(rid, args.median, args.sigma, args.max_len)
            async with slots:
                cached = cache.match(prompt) if cache is not None else 0
                await asyncio.sleep((len(prompt) - cached) * args.prefill_ms / 1000)
                if cache is not None:   # as SGLang's radix cache: a prompt is there once prefilled
                    cache.insert(prompt)
                await asyncio.sleep(n * args.token_ms / 1000)
        stats["requests"] += 1
        stats["tokens"] += n
        stats["prompt_tokens"] += len(prompt)
        stats["cached_tokens"] += cached
        ids = [(i * 7919) % 150000 for i in range(n - 1)] + [STOP_ID]
        if cache is not None:
            cache.insert(prompt + ids)
        return web.Response(body=orjson.dumps({
            "text": "", "output_ids": ids,
            "meta_info": {"id": rid, "finish_reason": {"type": "stop", "matched": STOP_ID},
                          "prompt_tokens": len(prompt), "completion_tokens": n, "cached_tokens": cached,
                          "e2e_latency": 0.0}}), content_type="application/json")

    async def ok(request):
        return web.Response(status=200)

    async def server_info(request):
        return web.Response(body=orjson.dumps({"version": "0.5.23", "model_path": "synthetic", **stats,
                                               "context_length": 1 << 20}), content_type="application/json")

    async def model_info(request):
        return web.Response(body=orjson.dumps({"model_path": "synthetic", "is_generation": True}),
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
    ap.add_argument("--mode", choices=["zero", "capacity"], default="zero")
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
    args = ap.parse_args()
    web.run_app(make_app(args), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
