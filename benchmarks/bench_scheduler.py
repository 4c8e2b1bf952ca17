"""Scheduler benchmark: achieved / ideal throughput against a capacity-limited
SGLang-protocol server with long-tailed output lengths (median ~470, tail to 10,240).

Compares the SGLang engine's continuous scheduling (a new request the moment one finishes) with a
batch-synchronous baseline (send a batch, wait for all of it, send the next) that many
regeneration scripts use. "Ideal" is the lower bound on the makespan for this workload on this
server: max(total decode work / slots, longest request), both from the server's timing model.

    python benchmarks/bench_scheduler.py               # ~1 minute on 2 cores
    python benchmarks/bench_scheduler.py --requests 40000 --token-ms 0.02
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).parent))
from synthetic_server import launch, length_for  # noqa: E402

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams  # noqa: E402
from kimi_eagle_data.engines.sglang import SGLangEngine  # noqa: E402


def start_server(args):
    return launch("capacity", "--slots", str(args.slots), "--token-ms", str(args.token_ms), "--median",
                  str(args.median), "--max-len", str(args.max_len))


def run_continuous(url: str, reqs, concurrency: int) -> float:
    engine = SGLangEngine([url], concurrency=concurrency)
    engine.start()
    t0 = time.perf_counter()
    n = sum(1 for _ in engine.generate(reqs))
    assert n == len(reqs)
    return time.perf_counter() - t0


async def _batch_sync(url: str, reqs, batch: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=batch + 8)) as s:
        async def one(r):
            async with s.post(url + "/generate", data=orjson.dumps(
                    {"input_ids": r.input_ids, "sampling_params": r.sampling.to_sglang(), "rid": r.id})) as resp:
                orjson.loads(await resp.read())

        for i in range(0, len(reqs), batch):
            await asyncio.gather(*(one(r) for r in reqs[i:i + batch]))


def run_batch_sync(url: str, reqs, batch: int) -> float:
    t0 = time.perf_counter()
    asyncio.run(_batch_sync(url, reqs, batch))
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=16000)
    ap.add_argument("--slots", type=int, default=64, help="sequences the emulated GPU decodes at once")
    ap.add_argument("--token-ms", type=float, default=0.05, help="decode time per token per sequence")
    ap.add_argument("--median", type=float, default=470)
    ap.add_argument("--max-len", type=int, default=10240)
    ap.add_argument("--concurrency", type=int, default=128, help="continuous client: requests in flight")
    args = ap.parse_args()

    sp = SamplingParams(max_new_tokens=args.max_len, temperature=1.0, top_p=0.95, stop_token_ids=(163586,))
    reqs = [GenerationRequest(f"s{i}", [1000 + (i % 500)] * 100, sp) for i in range(args.requests)]
    lengths = [length_for(r.id, args.median, 1.0, args.max_len) for r in reqs]
    work = sum(lengths) * args.token_ms / 1000
    ideal = max(work / args.slots, max(lengths) * args.token_ms / 1000)
    srt = sorted(lengths)
    print(f"workload: {len(reqs)} requests, {sum(lengths):,} output tokens, median {srt[len(srt) // 2]}, "
          f"p99 {srt[int(len(srt) * 0.99)]}, max {srt[-1]}; server: {args.slots} slots x {args.token_ms} ms/token; "
          f"ideal makespan {ideal:.2f} s")
    rows = []
    for name, fn in (("continuous (kimi-data sglang engine)", lambda u: run_continuous(u, reqs, args.concurrency)),
                     (f"batch-synchronous baseline (batch {args.slots})", lambda u: run_batch_sync(u, reqs, args.slots))):
        proc, url = start_server(args)   # a fresh server per run: equal conditions
        try:
            wall = fn(url)
        finally:
            proc.terminate()
            proc.wait()
        rows.append((name, wall, sum(lengths) / wall, ideal / wall))
    print()
    print(f"| {'scheduler':<44} | {'wall s':>7} | {'output tok/s':>12} | {'achieved/ideal':>14} |")
    print(f"|{'-' * 46}|{'-' * 9}|{'-' * 14}|{'-' * 16}|")
    for name, wall, tps, ratio in rows:
        print(f"| {name:<44} | {wall:7.2f} | {tps:12,.0f} | {ratio:14.3f} |")


if __name__ == "__main__":
    main()
