"""Affinity benchmark: conversations regenerated on the model's own turns (policy own_history, the B6/B7 shape: 2-4
turns, each turn's prompt the conversation so far) against 4 synthetic SGLang-protocol servers that keep a prefix
cache and spend a fixed time per prompt token not cached (prefill) and per output token (decode), sent by the SGLang
engine through the request loop's follow-ups (as `generate` sends them):

- one server with all the slots (the cache hit share the conversations can get: every turn meets its history),
- 4 servers, each request to the least busy one (the client before affinity: `affinity=False`),
- 4 servers with affinity (engines/server_choice.py: a turn goes back to its conversation's server).

Reported: the share of later turns' prompt tokens served from cache, prompt tokens prefilled, wall time. Then
single-turn prompts (every prompt its own conversation, as `generate` sends them) on the same 4 servers, least busy
vs affinity, wall time (medians of --repeat runs): affinity must not slow them.

    python benchmarks/bench_affinity.py                   # ~2 minutes on 2 cores
    python benchmarks/bench_affinity.py --conversations 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from synthetic_server import launch  # noqa: E402

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams  # noqa: E402
from kimi_eagle_data.engines.request_loop import Kept, RequestRun, run_requests  # noqa: E402
from kimi_eagle_data.engines.sglang import SGLangEngine  # noqa: E402

SYSTEM = list(range(10000, 10000 + 200))     # a system prompt every conversation starts with


@dataclass(frozen=True)
class TurnJob:
    key: str
    request: GenerationRequest


class Conversations:
    """`n` conversations of 2-4 turns (seeded per conversation); turn k+1's prompt is turn k's prompt, its answer and
    a 50-token user message, sent once turn k is kept. Records every completion by turn."""

    def __init__(self, n: int, user_len: int, sp: SamplingParams):
        self.sp, self.user_len = sp, user_len
        self.turns = [random.Random(f"conversation {c}").randint(2, 4) for c in range(n)]
        self.by_turn: dict[int, list] = {}

    @staticmethod
    def rid(c: int, turn: int) -> str:
        return f"v{c}-t{turn}"

    def job(self, c: int, turn: int, ids: list[int]) -> TurnJob:
        rid = self.rid(c, turn)
        return TurnJob(rid, GenerationRequest(rid, ids, self.sp, conversation=self.rid(c, 0)))

    def first(self) -> list[TurnJob]:
        order = sorted(range(len(self.turns)), key=lambda c: -self.turns[c])    # longest first, as generate orders
        return [self.job(c, 0, SYSTEM + [20000 + (c * self.user_len + i) % 100000 for i in range(self.user_len)])
                for c in order]

    def keep(self, job: TurnJob, completion) -> Kept:
        c, turn = (int(x[1:]) for x in job.key.split("-"))
        self.by_turn.setdefault(turn + 1, []).append(completion)
        follow = ()
        if turn + 1 < self.turns[c]:
            user = [3000 + (c * 7 + turn) % 1000] * 50
            follow = (self.job(c, turn + 1, job.request.input_ids + list(completion.output_ids) + user),)
        return Kept(len(completion.output_ids), completion.finish_reason, follow)


def start_servers(n: int, args) -> list:
    slots = args.slots * 4 // n          # the same capacity in all: 4 servers of --slots, or one of 4 × --slots
    return [launch("capacity", "--slots", str(slots), "--token-ms", str(args.token_ms), "--prefill-ms",
                   str(args.prefill_ms), "--median", str(args.median), "--max-len", str(args.max_len),
                   "--prefix-cache") for _ in range(n)]


def with_servers(n: int, args, fn):
    """fn(urls) against `n` fresh servers (equal conditions: empty caches)."""
    servers = start_servers(n, args)
    try:
        return fn([url for _, url in servers])
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait()


def run_conversations(urls: list[str], args, affinity: bool) -> dict:
    sp = SamplingParams(max_new_tokens=args.max_len, temperature=1.0, top_p=0.95, stop_token_ids=(163586,))
    conv = Conversations(args.conversations, args.user_len, sp)
    engine = SGLangEngine(urls, concurrency=args.concurrency, affinity=affinity)
    engine.start()

    def fail(job, failure):
        raise RuntimeError(f"{job.key} failed: {failure.reason}: {failure.message}")

    t0 = time.perf_counter()
    run = run_requests("conversations", conv.first(), engine.generate, conv.keep, fail, RequestRun(),
                       streaming=engine.streams_requests)
    wall = time.perf_counter() - t0
    assert run.completed == run.requested == sum(conv.turns)
    later = [c for t, cs in conv.by_turn.items() if t > 1 for c in cs]
    everything = [c for cs in conv.by_turn.values() for c in cs]
    share = {t: sum(c.cached_tokens for c in cs) / sum(c.prompt_tokens for c in cs)
             for t, cs in sorted(conv.by_turn.items())}
    return {"wall": wall, "requests": run.completed,
            "later_share": sum(c.cached_tokens for c in later) / sum(c.prompt_tokens for c in later),
            "by_turn": share,
            "prompt": sum(c.prompt_tokens for c in everything),
            "prefilled": sum(c.prompt_tokens - c.cached_tokens for c in everything),
            "sticky": engine.choice.counts.sticky, "moved": engine.choice.counts.moved}


def run_single_turn(urls: list[str], args, affinity: bool) -> float:
    sp = SamplingParams(max_new_tokens=args.max_len, temperature=1.0, top_p=0.95, stop_token_ids=(163586,))
    reqs = [GenerationRequest(f"s{i}", SYSTEM + [20000 + (i * 37 + k) % 100000 for k in range(args.user_len)], sp,
                              conversation=f"s{i}") for i in range(args.requests)]
    engine = SGLangEngine(urls, concurrency=args.concurrency, affinity=affinity)
    engine.start()
    t0 = time.perf_counter()
    n = sum(1 for _ in engine.generate(reqs))
    assert n == len(reqs)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=400)
    ap.add_argument("--requests", type=int, default=1200, help="single-turn prompts")
    ap.add_argument("--user-len", type=int, default=300, help="a first turn's own tokens (after a 200-token system)")
    ap.add_argument("--slots", type=int, default=16, help="sequences each of the 4 servers runs at once")
    ap.add_argument("--token-ms", type=float, default=1.0, help="decode time per output token per sequence")
    ap.add_argument("--prefill-ms", type=float, default=0.2, help="prefill time per uncached prompt token")
    ap.add_argument("--median", type=float, default=200, help="median output length (lognormal)")
    ap.add_argument("--max-len", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=128, help="requests in flight")
    ap.add_argument("--repeat", type=int, default=2, help="single-turn runs per side (medians)")
    args = ap.parse_args()
    print(f"4 servers x {args.slots} slots (one server: {4 * args.slots}), decode {args.token_ms} ms/token, "
          f"prefill {args.prefill_ms} ms/uncached prompt token; {args.conversations} conversations of 2-4 turns, "
          f"{args.requests} single-turn prompts; concurrency {args.concurrency}")
    rows = [("1 server (reference)", with_servers(1, args, lambda u: run_conversations(u, args, True))),
            ("4 servers, least busy", with_servers(4, args, lambda u: run_conversations(u, args, False))),
            ("4 servers, affinity", with_servers(4, args, lambda u: run_conversations(u, args, True)))]
    print()
    print("| conversations | later turns' hit share | per turn 1/2/3/4 | prompt tokens | prefilled | wall s |"
          " sticky / moved |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows:
        per_turn = " / ".join(f"{r['by_turn'].get(t, 0):.2f}" for t in range(1, 5))
        print(f"| {name} | {r['later_share']:.3f} | {per_turn} | {r['prompt']:,} | {r['prefilled']:,} | "
              f"{r['wall']:.2f} | {r['sticky']} / {r['moved']} |")
    ratio = rows[2][1]["later_share"] / rows[0][1]["later_share"]
    print(f"\naffinity's hit share of later turns / one server's: {ratio:.3f}; prefilled tokens vs least busy: "
          f"{rows[2][1]['prefilled'] / rows[1][1]['prefilled']:.3f}")
    walls = {aff: [with_servers(4, args, lambda u: run_single_turn(u, args, aff)) for _ in range(args.repeat)]
             for aff in (False, True)}
    busy, aff = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"\n| single-turn ({args.requests} prompts) | wall s (median) | runs |\n|---|---|---|")
    print(f"| 4 servers, least busy | {busy:.2f} | {', '.join(f'{w:.2f}' for w in walls[False])} |")
    print(f"| 4 servers, affinity | {aff:.2f} | {', '.join(f'{w:.2f}' for w in walls[True])} |")
    print(f"\nsingle-turn wall time affinity / least busy: {aff / busy:.3f}")


if __name__ == "__main__":
    main()
