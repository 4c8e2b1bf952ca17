"""The one small interface every generation engine implements.

An engine takes `GenerationRequest`s (token ids in) and yields, in whatever order they finish, a
`Completion` (token ids out, exactly as produced) or a `RequestFailure` (why it gave up) for each. The
generate and score stages own storing them and progress (request_loop.py); engines own only talking to a
model, and know nothing of how their results are stored.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.records import Completion, RequestFailure


@dataclass(frozen=True)
class SamplingParams:
    """SGLang's `sampling_params` subset we use. Field names are SGLang's."""

    max_new_tokens: int
    temperature: float
    top_p: float
    stop_token_ids: tuple[int, ...]
    skip_special_tokens: bool = False

    def to_sglang(self) -> dict[str, Any]:
        # field by field, not dataclasses.asdict (a deep copy): it is built for every request sent
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "stop_token_ids": list(self.stop_token_ids), "skip_special_tokens": self.skip_special_tokens}


@dataclass(frozen=True)
class GenerationRequest:
    id: str
    input_ids: list[int]
    sampling: SamplingParams
    # Engines that can seed per request (the local one) derive their randomness from it.
    seed: int = 0
    # Also report the target's log-prob and top-1 id of every sampled token (Completion.output_logprobs,
    # .output_top1_ids); SGLang: `return_logprob` + `top_logprobs_num` 1 on the request.
    return_logprob: bool = False
    # The conversation this request is a turn of (its first turn's id; a single-turn prompt: its own id): a server
    # engine sends its turns to one server, whose prefix cache holds the history (engines/server_choice.py).
    conversation: str | None = None


@dataclass(frozen=True)
class ScoreRequest:
    """Prefill only: the target's log-prob of `input_ids[start:]`, each token given all before it."""

    id: str
    input_ids: list[int]
    start: int                       # first scored position (>= 1): the prompt's length


@dataclass
class ScoreResult:
    """One answer to a ScoreRequest: per scored token (positions start..end-1) its log-prob (natural log)
    and the id the target ranks first there. (A request that failed is answered by a RequestFailure.)"""

    id: str
    logprobs: list[float] = field(default_factory=list)
    top1_ids: list[int] = field(default_factory=list)
    top1_logprobs: list[float] = field(default_factory=list)   # the top-1 token's log-prob (when known)
    # (log-prob, id) of the top-1 token after the whole input (when known): SGLang reports it as a prefill-only
    # request's output_top_logprobs.
    next_top1: tuple[float, int] | None = None


@dataclass
class EngineInfo:
    """Provenance of the engine, recorded in the manifest and card."""

    engine: str                      # "local" / "sglang" / "vllm"
    version: str                     # engine software version
    model_path: str
    context_length: int | None = None
    server_args: dict[str, Any] = field(default_factory=dict)


class EngineError(KimiDataError, RuntimeError):
    """An engine cannot start or serve (one clear line; the CLI prints it and exits 1)."""


class Engine(abc.ABC):
    name: str = "engine"
    # Whether `generate` takes new requests while earlier ones run (it pulls its requests as it goes), so the
    # request loop may feed it follow-ups as they appear; else it gets them in rounds (all of a round up front).
    streams_requests: bool = False

    @abc.abstractmethod
    def info(self) -> EngineInfo: ...

    @abc.abstractmethod
    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Completion | RequestFailure]:
        """Yield one Completion per request as each finishes (any order); a request the engine gives up
        on (aborted, retries spent) yields a RequestFailure, not an exception."""

    def score(self, requests: Iterable[ScoreRequest]) -> Iterator[ScoreResult | RequestFailure]:
        """Prefill-only scoring: yield one ScoreResult per request as each finishes (any order).
        A request that keeps failing comes back as a RequestFailure, not as an exception."""
        raise EngineError(f"the {self.name} engine cannot score token log-probs; use --engine local, sglang or vllm")

    def in_flight(self) -> int | None:
        """Requests currently being served (for the progress bar); None when not meaningful."""
        return None

    def spec_decode_counts(self):
        """The drafter counters its servers keep, summed now (records.SpecDecodeCounts): `generate` keeps
        the difference over its run. None when they keep none (no drafter, or per request: SGLang)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
