"""The request loop with follow-up jobs (a conversation's next turn, sent once this turn is kept): through the
SGLang engine against the SGLang-protocol stand-in (one streaming feed) and through the local engine (rounds),
both with the tiny model."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from kimi_eagle_data.engines.base import GenerationRequest, SamplingParams
from kimi_eagle_data.engines.request_loop import Kept, RequestRun, run_requests
from tests.helpers.servers import TINY, Server, wait_for

USER_TURN = [1000, 1001, 1002, 1003, 1004]     # the ids of the next user message, appended after each answer


@dataclass(frozen=True)
class TurnJob:
    key: str
    request: GenerationRequest


class RecordedProgress:
    """A progress.Progress that keeps what it is told."""

    def __init__(self):
        self.events: list = []

    def start(self, label, total):
        self.events.append(("start", label, total))

    def update(self, snapshot):
        self.events.append(snapshot)

    def stop(self):
        self.events.append(("stop",))


@pytest.fixture(scope="module")
def server():
    s = Server().start()
    yield s
    s.kill()


@pytest.fixture(scope="module")
def sampling(tiny_tokenizer):
    return SamplingParams(max_new_tokens=6, temperature=0.0, top_p=1.0,
                          stop_token_ids=(tiny_tokenizer.convert_tokens_to_ids("<|im_end|>"),))


class Conversations:
    """Chains of turns: chain c has `depths[c]` follow-ups; `keep` makes turn k+1 from turn k's prompt and answer.
    Logs, in one order, each request as the engine pulls it ("sent") and each result as it is kept."""

    def __init__(self, depths: list[int], sampling: SamplingParams, tokenizer):
        self.depths, self.sampling = depths, sampling
        self.log: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.prompt = tokenizer.encode("Hello, tell me a story.", add_special_tokens=False)

    def job(self, chain: int, turn: int, input_ids: list[int]) -> TurnJob:
        rid = f"c{chain}-t{turn}"
        return TurnJob(rid, GenerationRequest(rid, input_ids, self.sampling))

    def initial(self) -> list[TurnJob]:
        return [self.job(c, 0, self.prompt + [2000 + c]) for c in range(len(self.depths))]

    def expected(self) -> list[str]:
        return [f"c{c}-t{t}" for c, d in enumerate(self.depths) for t in range(d + 1)]

    def sent(self, requests):
        for r in requests:
            with self.lock:
                self.log.append(("sent", r.id))
            yield r

    def keep(self, job: TurnJob, completion) -> Kept:
        assert completion.prompt_tokens == len(job.request.input_ids)   # the engine saw the grown prompt
        with self.lock:
            self.log.append(("kept", job.key))
        chain, turn = (int(x[1:]) for x in job.key.split("-"))
        follow = ()
        if turn < self.depths[chain]:
            follow = (self.job(chain, turn + 1, job.request.input_ids + completion.output_ids + USER_TURN),)
        return Kept(len(completion.output_ids), completion.finish_reason, follow)

    def check(self, run: RequestRun) -> None:
        kept = [rid for what, rid in self.log if what == "kept"]
        assert sorted(kept) == sorted(self.expected())                   # every turn answered, exactly once
        for c, depth in enumerate(self.depths):
            assert [rid for rid in kept if rid.startswith(f"c{c}-")] == [f"c{c}-t{t}" for t in range(depth + 1)]
            for t in range(depth):                                          # turn t+1 sent after turn t kept
                assert self.log.index(("sent", f"c{c}-t{t + 1}")) > self.log.index(("kept", f"c{c}-t{t}"))
        total = len(self.expected())
        assert (run.requested, run.completed, run.failed) == (total, total, 0)
        assert sum(run.outcomes.values()) == total


def never_fails(job, failure):
    raise AssertionError(f"{job.key} failed: {failure}")


def test_follow_ups_stream_through_one_feed_to_the_sglang_engine(server, sampling, tiny_tokenizer):
    from kimi_eagle_data.engines.sglang import SGLangEngine

    conv = Conversations([1, 2, 3, 4, 1, 3], sampling, tiny_tokenizer)
    engine = SGLangEngine([server.url], concurrency=4)
    assert engine.streams_requests
    calls = []

    def send(requests):
        calls.append(requests)
        return engine.generate(conv.sent(requests))

    progress = RecordedProgress()
    run = run_requests("generate", conv.initial(), send, conv.keep, never_fails, RequestRun(), progress=progress,
                       streaming=True)
    conv.check(run)
    assert len(calls) == 1
    total = len(conv.expected())
    snapshots = progress.events[1:-1]
    assert progress.events[0] == ("start", "generate", len(conv.initial())) and progress.events[-1] == ("stop",)
    assert [s.done for s in snapshots] == list(range(1, total + 1))    # one snapshot per answer
    assert snapshots[0].total < snapshots[-1].total == total           # the total grew with the follow-ups
    assert sum(snapshots[-1].outcomes.values()) == total


def test_follow_ups_go_to_the_local_engine_in_rounds(sampling, tiny_tokenizer):
    from kimi_eagle_data.engines.local import LocalEngine

    conv = Conversations([1, 4, 2, 3], sampling, tiny_tokenizer)
    engine = LocalEngine(TINY, batch_size=4)
    assert not engine.streams_requests
    rounds = []

    def send(requests):
        rounds.append(sorted(r.id for r in requests))
        return engine.generate(list(conv.sent(requests)))

    run = run_requests("generate", conv.initial(), send, conv.keep, never_fails, RequestRun(), streaming=False)
    conv.check(run)
    assert rounds == [sorted(f"c{c}-t{t}" for c, d in enumerate(conv.depths) if d >= t) for t in range(5)]


def test_an_engine_that_reads_all_requests_first_is_refused_a_feed(sampling, tiny_tokenizer):
    from kimi_eagle_data.engines.local import LocalEngine

    conv = Conversations([1, 1], sampling, tiny_tokenizer)
    engine = LocalEngine(TINY, batch_size=4)
    with pytest.raises(RuntimeError, match="streaming=False"):
        run_requests("generate", conv.initial(), engine.generate, conv.keep, never_fails, RequestRun(),
                     streaming=True)


class Boom(Exception):
    pass


def test_a_consumer_that_raises_with_follow_ups_in_flight_ends_the_run(server, sampling, tiny_tokenizer):
    from kimi_eagle_data.engines.sglang import SGLangEngine

    conv = Conversations([3, 3], sampling, tiny_tokenizer)
    engine = SGLangEngine([server.url], concurrency=4)
    follow_sent = threading.Event()
    first: list[str] = []

    def sent(requests):
        for r in conv.sent(requests):
            if r.id.endswith("-t1"):
                follow_sent.set()
            yield r

    def keep(job, completion):
        if not first:
            first.append(job.key)
            return conv.keep(job, completion)
        # The other chain's answer: wait until the first chain's follow-up is pulled (the pull thread then waits
        # on the feed, answers outstanding), then stop.
        assert follow_sent.wait(60), "the follow-up was never sent"
        raise Boom(job.key)

    ended: list[BaseException] = []

    def consume():
        try:
            run_requests("generate", conv.initial(), lambda reqs: engine.generate(sent(reqs)), keep, never_fails,
                         RequestRun(), streaming=True)
        except BaseException as e:
            ended.append(e)

    consumer = threading.Thread(target=consume, name="test-consumer")
    consumer.start()
    consumer.join(120)
    assert not consumer.is_alive(), "the run did not end after its consumer raised"
    assert len(ended) == 1 and isinstance(ended[0], Boom)
    wait_for(lambda: not [t for t in threading.enumerate() if t.name.startswith("sglang-client")], 60,
             "the client's pull and worker threads ended")
