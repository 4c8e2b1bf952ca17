"""Scheduler benchmark: achieved / ideal throughput against a capacity-limited
SGLang-protocol server with long-tailed output lengths (median ~470, tail to 10,240).

Compares the SGLang engine's continuous scheduling (a new request the moment one finishes) with a
batch-synchronous baseline (send a batch, wait for all of it, send the next) that many
regeneration scripts use, and with a bare aiohttp client that keeps as many requests in flight and does nothing
with the answers (what the emulated server and the machine allow a client). "Ideal" is the lower bound on the
makespan for this workload on this server: max(total decode work / slots, longest request), both from the server's
timing model. The emulated GPU keeps its own clock (synthetic_server.py `EmulatedGpu`): a client that is late
leaves slots idle; the emulator's own event-loop lag does not.

Then conversations: 1-6 turns each (seeded per conversation), turn k+1 made only once turn k's answer
is back (its prompt: turn k's prompt + answer + ~50 user tokens), through the request loop's follow-ups
(`run_requests`, `Kept.follow`) on the same engine. Ideal: max(total decode work / slots, the longest
conversation's turns one after another).

    python benchmarks/bench_scheduler.py               # ~2 minutes on 2 cores
    python benchmarks/bench_scheduler.py --requests 40000 --token-ms 0.02
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).parent))
from synthetic_server import launch, length_for  # noqa: E402

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams  # noqa: E402
from kimi_eagle_data.engines.request_loop import Kept, RequestRun, run_requests  # noqa: E402
from kimi_eagle_data.engines.sglang import SGLangEngine  # noqa: E402

USER_TURN = [2000] * 50     # the next user message's ids, after each answer


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


@dataclass(frozen=True)
class BenchJob:
    key: str
    request: GenerationRequest


class Conversations:
    """`n` conversations of 1-6 turns; the first turns are the jobs, each kept turn names the next."""

    def __init__(self, n: int, sp: SamplingParams):
        self.sp = sp
        self.turns = [random.Random(f"conversation {c}").randint(1, 6) for c in range(n)]

    @staticmethod
    def rid(c: int, turn: int) -> str:
        return f"v{c}-t{turn}"

    def first(self) -> list[BenchJob]:
        """The first turns, the conversations with the most turns first: generate orders them so too, by the
        turns the source's script has left (conversation/next_turn.py `turns_left`)."""
        order = sorted(range(len(self.turns)), key=lambda c: -self.turns[c])
        return [BenchJob(self.rid(c, 0), GenerationRequest(self.rid(c, 0), [1000 + (c % 500)] * 100, self.sp))
                for c in order]

    def keep(self, job: BenchJob, completion) -> Kept:
        c, turn = (int(x[1:]) for x in job.key.split("-"))
        follow = ()
        if turn + 1 < self.turns[c]:
            rid = self.rid(c, turn + 1)
            follow = (BenchJob(rid, GenerationRequest(rid, job.request.input_ids + completion.output_ids + USER_TURN,
                                                      self.sp)),)
        return Kept(len(completion.output_ids), completion.finish_reason, follow)

    def lengths(self, args) -> list[list[int]]:
        """Each conversation's output lengths, turn by turn (the server's timing model)."""
        return [[length_for(self.rid(c, t), args.median, 1.0, args.max_len) for t in range(n)]
                for c, n in enumerate(self.turns)]


def run_conversations(url: str, conv: Conversations, concurrency: int) -> float:
    engine = SGLangEngine([url], concurrency=concurrency)
    engine.start()

    def fail(job, failure):
        raise RuntimeError(f"{job.key} failed: {failure.reason}: {failure.message}")

    run = run_requests("conversations", conv.first(), engine.generate, conv.keep, fail, RequestRun(),
                       streaming=engine.streams_requests)
    assert run.completed == run.requested == sum(conv.turns)
    return run.seconds


def _body(r: GenerationRequest) -> bytes:
    """A bare client's SGLang /generate request body."""
    return orjson.dumps({"input_ids": r.input_ids, "sampling_params": r.sampling.to_sglang(), "rid": r.id})


async def _batch_sync(url: str, reqs, batch: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=batch + 8)) as s:
        async def one(r):
            async with s.post(url + "/generate", data=_body(r)) as resp:
                orjson.loads(await resp.read())

        for i in range(0, len(reqs), batch):
            await asyncio.gather(*(one(r) for r in reqs[i:i + batch]))


async def _bare_continuous(url: str, reqs, concurrency: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency + 8)) as s:
        slots = asyncio.Semaphore(concurrency)

        async def one(r):
            try:
                async with s.post(url + "/generate", data=_body(r)) as resp:
                    await resp.read()
            finally:
                slots.release()

        tasks = []
        for r in reqs:
            await slots.acquire()
            tasks.append(asyncio.create_task(one(r)))
        await asyncio.gather(*tasks)


def run_bare_continuous(url: str, reqs, concurrency: int) -> float:
    """The least a continuous client can do (aiohttp, a new request the moment one ends, the answer not even
    parsed): what the emulated server and this machine allow, the ceiling for ours."""
    t0 = time.perf_counter()
    asyncio.run(_bare_continuous(url, reqs, concurrency))
    return time.perf_counter() - t0


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
    ap.add_argument("--conversations", type=int, default=4600, help="multi-turn workload (1-6 turns each)")
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
    conv = Conversations(args.conversations, sp)
    turn_lengths = conv.lengths(args)
    conv_tokens = sum(map(sum, turn_lengths))
    conv_ideal = max(conv_tokens * args.token_ms / 1000 / args.slots,
                     max(map(sum, turn_lengths)) * args.token_ms / 1000)
    print(f"conversations: {len(conv.turns)} of 1-6 turns, {sum(conv.turns)} requests, {conv_tokens:,} output "
          f"tokens, longest conversation {max(map(sum, turn_lengths)):,} tokens; ideal makespan {conv_ideal:.2f} s")
    rows = []
    for name, fn, tokens, best in (
            ("single-turn continuous (kimi-data sglang engine)", lambda u: run_continuous(u, reqs, args.concurrency),
             sum(lengths), ideal),
            ("single-turn continuous, bare aiohttp (the ceiling)",
             lambda u: run_bare_continuous(u, reqs, args.concurrency), sum(lengths), ideal),
            (f"single-turn batch-synchronous baseline (batch {args.slots})",
             lambda u: run_batch_sync(u, reqs, args.slots), sum(lengths), ideal),
            ("conversations continuous (request loop follow-ups)",
             lambda u: run_conversations(u, conv, args.concurrency), conv_tokens, conv_ideal)):
        proc, url = start_server(args)   # a fresh server per run: equal conditions
        try:
            wall = fn(url)
        finally:
            proc.terminate()
            proc.wait()
        rows.append((name, wall, tokens / wall, best / wall))
    print()
    print(f"| {'scheduler':<52} | {'wall s':>7} | {'output tok/s':>12} | {'achieved/ideal':>14} |")
    print(f"|{'-' * 54}|{'-' * 9}|{'-' * 14}|{'-' * 16}|")
    for name, wall, tps, ratio in rows:
        print(f"| {name:<52} | {wall:7.2f} | {tps:12,.0f} | {ratio:14.3f} |")


if __name__ == "__main__":
    main()
