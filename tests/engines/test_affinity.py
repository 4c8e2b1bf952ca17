"""Conversation affinity (engines/server_choice.py): a conversation's turns go to the server that answered its last
turn while it is healthy and not overloaded, else to the least busy healthy server. The rule on its own, then the
SGLang engine against several SGLang-protocol stand-ins (each recording what it was sent) and behind the real
sglang-router."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams
from kimi_eagle_data.engines.request_loop import Kept, RequestRun, run_requests
from kimi_eagle_data.engines.server_choice import ServerChoice, default_slack
from kimi_eagle_data.engines.sglang import RetryPolicy, SGLangEngine
from tests.helpers.servers import Server, sglang_router

USER_TURN = [1000, 1001, 1002, 1003, 1004]
A, B, C = "http://a", "http://b", "http://c"


# -- the rule --------------------------------------------------------------------------------------

def test_the_slack_is_a_quarter_of_a_servers_share_and_at_least_two():
    assert default_slack(256, 4) == 16
    assert default_slack(8, 4) == 2


def test_a_turn_goes_home_unless_its_home_is_overloaded():
    choice = ServerChoice([A, B, C], concurrency=24)      # slack 2
    first = choice.pick("conv")
    choice.done(first, "conv", "ok")
    assert choice.home("conv") == first
    # Its home with 2 more in flight than the least busy: still home.
    held = [choice.pick(None) for _ in range(3)]           # one on each server
    for _ in range(2):
        choice.in_flight[first] += 1
    assert choice.pick("conv") == first
    choice.done(first, "conv", "ok")
    choice.in_flight[first] += 1                           # now 3 more: overloaded, the turn moves
    moved = choice.pick("conv")
    assert moved != first and choice.counts.moved == 1 and choice.counts.sticky == 1
    choice.done(moved, "conv", "ok")
    assert choice.home("conv") == moved                    # the server that answered is the new home
    for u in held:
        choice.done(u, None, "ok")


def test_a_failing_server_is_passed_over_and_a_retry_avoids_it():
    choice = ServerChoice([A, B], concurrency=8, cooldown_s=60)
    choice.done(choice.pick("conv"), "conv", "ok")
    home = choice.home("conv")
    other = B if home == A else A
    url = choice.pick("conv")
    assert url == home
    choice.done(url, "conv", "server")                     # its try failed on the server's side
    assert choice.pick("conv", avoid=home) == other        # the retry goes elsewhere
    choice.done(other, "conv", "ok")
    assert choice.home("conv") == other
    assert choice.pick("fresh") == other                   # the failing one waits out its cooldown
    choice.done(other, "fresh", "ok")


def test_with_every_server_failing_every_server_is_a_candidate():
    choice = ServerChoice([A, B], concurrency=8, cooldown_s=60)
    for u in (A, B):
        choice.in_flight[u] += 1
        choice.done(u, None, "server")
    assert choice.pick(None, avoid=A) == B
    assert choice.pick(None, avoid=B) == A


def test_without_affinity_every_request_goes_to_the_least_busy():
    choice = ServerChoice([A, B], concurrency=8, affinity=False)
    choice.done(choice.pick("conv"), "conv", "ok")
    assert choice.home("conv") is None
    busy = choice.pick(None)
    assert choice.pick("conv") != busy


# -- against stand-in servers ------------------------------------------------------------------------

@dataclass(frozen=True)
class TurnJob:
    key: str
    request: GenerationRequest


class Chains:
    """`n` conversations of `turns` turns each; turn k+1's prompt is turn k's prompt, answer and a user message."""

    def __init__(self, n: int, turns: int, sampling: SamplingParams, tokenizer, on_kept=None):
        self.n, self.turns, self.sampling, self.on_kept = n, turns, sampling, on_kept
        self.prompt = tokenizer.encode("Hello, tell me a story.", add_special_tokens=False)
        self.completions: dict[str, object] = {}

    def job(self, chain: int, turn: int, ids: list[int]) -> TurnJob:
        rid = f"c{chain}-t{turn}"
        return TurnJob(rid, GenerationRequest(rid, ids, self.sampling, conversation=f"c{chain}"))

    def initial(self) -> list[TurnJob]:
        return [self.job(c, 0, self.prompt + [2000 + c]) for c in range(self.n)]

    def keep(self, job: TurnJob, completion) -> Kept:
        self.completions[job.key] = completion
        if self.on_kept:
            self.on_kept(job)
        chain, turn = (int(x[1:]) for x in job.key.split("-"))
        follow = ()
        if turn + 1 < self.turns:
            follow = (self.job(chain, turn + 1, job.request.input_ids + list(completion.output_ids) + USER_TURN),)
        return Kept(len(completion.output_ids), completion.finish_reason, follow)

    def run(self, engine) -> RequestRun:
        def fail(job, failure):
            raise AssertionError(f"{job.key} failed: {failure}")

        run = run_requests("generate", self.initial(), engine.generate, self.keep, fail, RequestRun(),
                           streaming=engine.streams_requests)
        assert run.completed == self.n * self.turns and run.failed == 0
        return run

    def later_hit_share(self) -> float:
        later = [c for k, c in self.completions.items() if not k.endswith("-t0")]
        return sum(c.cached_tokens for c in later) / sum(c.prompt_tokens for c in later)


def served_where(records: dict[str, Path]) -> dict[str, str]:
    """rid -> the server whose record holds it."""
    where = {}
    for url, path in records.items():
        for line in path.read_text().splitlines() if path.exists() else ():
            where[json.loads(line)["rid"]] = url
    return where


@pytest.fixture
def sampling(tiny_tokenizer):
    return SamplingParams(max_new_tokens=6, temperature=0.0, top_p=1.0,
                          stop_token_ids=(tiny_tokenizer.convert_tokens_to_ids("<|im_end|>"),))


@pytest.fixture
def recorded_servers(tmp_path):
    records = [tmp_path / f"server{i}.jsonl" for i in range(3)]
    servers = [Server("--record-requests", str(r), "--max-batch", "4").start() for r in records]
    yield servers, {s.url: r for s, r in zip(servers, records)}
    for s in servers:
        s.kill()


def test_each_conversation_stays_on_one_server_and_meets_its_cache(recorded_servers, sampling, tiny_tokenizer):
    servers, records = recorded_servers
    chains = Chains(12, 3, sampling, tiny_tokenizer)
    engine = SGLangEngine([s.url for s in servers], concurrency=6)
    # With 6 requests in flight no server can be more than 6 ahead of another: a slack of 6 leaves the overload rule
    # (tested on its own above) out of this test, so which turn goes where does not depend on how fast each answers.
    engine.choice.slack = 6
    chains.run(engine)
    where = served_where(records)
    homes = {c: {where[f"c{c}-t{t}"] for t in range(3)} for c in range(12)}
    assert all(len(h) == 1 for h in homes.values()), homes           # every turn on its first turn's server
    assert len({next(iter(h)) for h in homes.values()}) == 3          # the conversations spread over all three
    assert engine.choice.counts.sticky == 24 and engine.choice.counts.moved == 0
    # Every later turn's prompt is the turn before's prompt + answer: that server holds all but the user message.
    for key, c in chains.completions.items():
        if not key.endswith("-t0"):
            assert c.cached_tokens >= c.prompt_tokens - len(USER_TURN) - 1, (key, c.cached_tokens, c.prompt_tokens)
    assert chains.later_hit_share() > 0.8


def test_a_conversation_whose_server_dies_moves_to_another(recorded_servers, sampling, tiny_tokenizer):
    servers, records = recorded_servers
    by_url = {s.url: s for s in servers}
    killed: list[str] = []

    def kill_home(job):
        if job.key == "c0-t0":           # c0's first answer is in: its server dies before c0's next turn
            killed.append(engine.choice.home("c0"))
            by_url[killed[0]].kill()

    chains = Chains(6, 3, sampling, tiny_tokenizer, on_kept=kill_home)
    engine = SGLangEngine([s.url for s in servers], concurrency=3,
                          retry=RetryPolicy(max_attempts=5, backoff_s=0.05))
    engine.choice.slack = 3       # 3 in flight: only the dead server moves a turn, never an imbalance
    chains.run(engine)       # every turn completed, none failed
    where = served_where(records)
    assert where["c0-t0"] == killed[0]
    assert where["c0-t1"] != killed[0] and where["c0-t2"] == where["c0-t1"]   # moved once, then stays


def test_the_routers_session_policy_keeps_a_conversation_on_one_worker(tmp_path, sampling, tiny_tokenizer):
    """sglang-router's `manual` policy pins a session by the X-SMG-Routing-Key header the client sends."""
    records = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    a, b = (Server("--record-requests", str(r)).start() for r in records)
    try:
        with sglang_router(a.url, b.url, policy="manual") as url:
            chains = Chains(8, 3, sampling, tiny_tokenizer)
            chains.run(SGLangEngine([url], concurrency=4))
        where = served_where({a.url: records[0], b.url: records[1]})
        assert all(len({where[f"c{c}-t{t}"] for t in range(3)}) == 1 for c in range(8)), where
        assert chains.later_hit_share() > 0.8
    finally:
        a.kill()
        b.kill()


def test_turns_without_a_conversation_still_spread(recorded_servers, sampling, tiny_tokenizer):
    servers, records = recorded_servers
    engine = SGLangEngine([s.url for s in servers], concurrency=6)
    prompt = tiny_tokenizer.encode("Hello", add_special_tokens=False)
    t0 = time.perf_counter()
    results = list(engine.generate([GenerationRequest(f"p{i}", prompt + [2000 + i], sampling) for i in range(18)]))
    assert len(results) == 18 and time.perf_counter() - t0 < 300
    assert len(set(served_where(records).values())) == 3
    assert engine.choice.counts.fresh == 18
