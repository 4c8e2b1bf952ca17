"""A synthetic SGLang-protocol server for benchmarks (no model): real HTTP, SGLang's field names.

Modes:
- `zero`: answers every /generate at once with `--output-len` ids (client-ceiling benchmark).
- `capacity`: emulates a GPU with `--slots` sequences decoding in parallel, each token taking
  `--token-ms`; a request waits for a free slot, then holds it for `length * token_ms`. Output
  lengths are long-tailed (lognormal, median `--median`, capped at `--max-len`) and drawn from the
  request's `rid`, so every client sees the same workload.

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
    stats = {"requests": 0, "tokens": 0}

    async def generate(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        rid = body.get("rid") or str(stats["requests"])
        prompt = body["input_ids"]
        if args.mode == "zero":
            n = args.output_len
        else:
            n = length_for(rid, args.median, args.sigma, args.max_len)
            async with slots:
                await asyncio.sleep(n * args.token_ms / 1000)
        stats["requests"] += 1
        stats["tokens"] += n
        ids = [(i * 7919) % 150000 for i in range(n - 1)] + [STOP_ID]
        return web.Response(body=orjson.dumps({
            "text": "", "output_ids": ids,
            "meta_info": {"id": rid, "finish_reason": {"type": "stop", "matched": STOP_ID},
                          "prompt_tokens": len(prompt), "completion_tokens": n, "cached_tokens": 0,
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
    args = ap.parse_args()
    web.run_app(make_app(args), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
