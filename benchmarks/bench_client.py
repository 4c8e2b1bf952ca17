"""Client-ceiling benchmark: how many completions per second the client ingests
from a zero-latency SGLang-protocol server with 1k-token prompts and outputs, and how much client
CPU each 1,000-token completion costs (target <= 5 ms).

Rows:
- kimi-data SGLang engine alone (aiohttp + orjson, asyncio loop in a worker thread);
- the same plus the generate stage's checkpoint commit (SQLite, one transaction per sample);
- a baseline written the way regeneration scripts usually are: a thread pool of blocking HTTP
  calls with the standard json module (`urllib` here, like `requests`).
The server runs in its own process, so the CPU time measured is the client's alone.

    python benchmarks/bench_client.py --requests 3000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kimi_eagle_data.store.checkpoint import Checkpoint
from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams
from kimi_eagle_data.engines.sglang import SGLangEngine

sys.path.insert(0, str(Path(__file__).parent))
from synthetic_server import launch  # noqa: E402


def start_server(output_len: int):
    return launch("zero", "--output-len", str(output_len))


def measure(fn) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def ours(url, reqs, concurrency, commit: bool):
    engine = SGLangEngine([url], concurrency=concurrency)
    engine.start()
    with tempfile.TemporaryDirectory() as d:
        ckpt = Checkpoint(Path(d) / "c.sqlite") if commit else None

        def run():
            n = 0
            for c in engine.generate(reqs):
                if ckpt is not None:
                    ckpt.commit("B0", c)
                n += 1
            assert n == len(reqs)

        result = measure(run)
        if ckpt is not None:
            ckpt.close()
    return result


def baseline(url, reqs, concurrency):
    def one(r):
        body = json.dumps({"input_ids": r.input_ids, "sampling_params": r.sampling.to_sglang(), "rid": r.id}).encode()
        req = urllib.request.Request(url + "/generate", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            out = json.loads(resp.read())
        return list(out["output_ids"])

    def run():
        with ThreadPoolExecutor(concurrency) as pool:
            assert sum(1 for _ in pool.map(one, reqs)) == len(reqs)

    return measure(run)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--prompt-len", type=int, default=1000)
    ap.add_argument("--output-len", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    sp = SamplingParams(max_new_tokens=args.output_len, temperature=1.0, top_p=0.95, stop_token_ids=(163586,))
    reqs = [GenerationRequest(f"c{i}", [(i * 31 + j) % 160000 for j in range(args.prompt_len)], sp)
            for i in range(args.requests)]
    per_k = args.output_len / 1000
    rows = []
    for name, fn in (("kimi-data sglang engine", lambda u: ours(u, reqs, args.concurrency, False)),
                     ("kimi-data engine + checkpoint commit", lambda u: ours(u, reqs, args.concurrency, True)),
                     ("baseline: thread pool + urllib + json", lambda u: baseline(u, reqs, args.concurrency))):
        proc, url = start_server(args.output_len)
        try:
            wall, cpu = fn(url)
        finally:
            proc.terminate()
            proc.wait()
        rows.append((name, wall, args.requests / wall, cpu / args.requests * 1000 / per_k))
    print(f"{args.requests} requests, {args.prompt_len}-token prompts, {args.output_len}-token outputs, "
          f"concurrency {args.concurrency}, zero-latency server in its own process\n")
    print(f"| {'client':<38} | {'wall s':>7} | {'completions/s':>13} | {'client CPU ms / 1k-token completion':>35} |")
    print(f"|{'-' * 40}|{'-' * 9}|{'-' * 15}|{'-' * 37}|")
    for name, wall, cps, ms in rows:
        print(f"| {name:<38} | {wall:7.2f} | {cps:13,.0f} | {ms:35.2f} |")


if __name__ == "__main__":
    main()
