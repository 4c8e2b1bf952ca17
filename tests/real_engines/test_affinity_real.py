"""Conversation affinity against two real SGLang 0.5.23 servers on CPU (the tiny model): the share of later turns'
prompt tokens SGLang itself reports from its radix cache (`cached_tokens`), through one server, through both with
each request to the least busy one, and through both with affinity (engines/server_choice.py). Each run starts on
flushed caches (/flush_cache). Prints the three shares (the measurement docs/benchmarks.md cites).

Selected with `-m real_engine` (scripts/real_engines/run_tier.sh); deselected by the default test command."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams
from kimi_eagle_data.engines.request_loop import Kept, RequestRun, run_requests
from kimi_eagle_data.engines.sglang import SGLangEngine
from tests.real_engines.servers import http

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(3 * 3600)]

END = 163586
# A chat prompt of the tiny model's format and the next user message's ids (tests/real_engines/servers.py's ids).
PROMPT = [1795, 320, 1809, 72, 105, 1794, 1796, 631, 1809, 1814]
USER = [1795, 320, 1809, 105, 72, 105, 1794, 1796, 631, 1809, 1814]
CONCURRENCY = 4


@dataclass(frozen=True)
class TurnJob:
    key: str
    request: GenerationRequest


def conversations(urls: list[str], affinity: bool, n: int = 12, turns: int = 3) -> float:
    """`n` conversations of `turns` turns (each turn's prompt: the last prompt, its answer, a user message); the
    later turns' cached share as the servers reported it."""
    sp = SamplingParams(max_new_tokens=24, temperature=1.0, top_p=0.95, stop_token_ids=(END,))
    later: list = []

    def job(c: int, t: int, ids: list[int]) -> TurnJob:
        return TurnJob(f"c{c}-t{t}", GenerationRequest(f"c{c}-t{t}", ids, sp, seed=c * 10 + t, conversation=f"c{c}"))

    def keep(j: TurnJob, completion) -> Kept:
        c, t = (int(x[1:]) for x in j.key.split("-"))
        if t:
            later.append(completion)
        follow = (job(c, t + 1, j.request.input_ids + list(completion.output_ids) + USER),) if t + 1 < turns else ()
        return Kept(len(completion.output_ids), completion.finish_reason, follow)

    def fail(j, failure):
        raise AssertionError(f"{j.key}: {failure}")

    engine = SGLangEngine(urls, concurrency=CONCURRENCY, affinity=affinity)
    # No server can be more than CONCURRENCY requests ahead of another: this slack leaves the overload rule nothing
    # to move, so where a turn goes depends on its conversation only, never on how fast a server answers under load.
    engine.choice.slack = CONCURRENCY
    first = [job(c, 0, PROMPT + [2000 + c] * 8) for c in range(n)]
    run = run_requests("generate", first, engine.generate, keep, fail, RequestRun(), streaming=True)
    assert run.completed == n * turns
    return sum(c.cached_tokens for c in later) / sum(c.prompt_tokens for c in later)


@pytest.fixture
def two_servers(ids_server, second_ids_server):
    """The tier's two shared servers (conftest.py); each run below flushes their caches first."""
    return [ids_server.url, second_ids_server.url]


def flushed(urls: list[str]) -> list[str]:
    for url in urls:
        status, _ = http("POST", url + "/flush_cache")
        assert status == 200
    return urls


def test_affinity_keeps_what_one_server_caches(two_servers):
    a, b = two_servers
    one = conversations(flushed([a]), affinity=True)
    least_busy = conversations(flushed([a, b]), affinity=False)
    sticky = conversations(flushed([a, b]), affinity=True)
    print(f"later turns' cached share (SGLang's cached_tokens): one server {one:.3f}, two least busy "
          f"{least_busy:.3f}, two with affinity {sticky:.3f} ({sticky / one:.3f} of one server's)")
    assert one > 0.5
    assert sticky >= 0.9 * one
