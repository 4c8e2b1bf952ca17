"""`kimi-data score`: the target's log-probability of the upstream answers, per partition.

EAGLE-3 drafters learn to predict the target's own next tokens. Where a source's answers are already
text the target would likely write, training on them costs nothing; where the target finds them
unlikely, a drafter trained on them learns another model's style and accepts fewer tokens. The issue
that asked for this measured it: drafters trained on the tiny target's own completions reached an
acceptance length of 1.94 / 2.10 (two seeds), against 1.24 / 1.34 for drafters trained on answers in
another style (equal loss tokens); those answers scored -11.1 nats/token under the target, its own
completions -3.5. Where the upstream answers came from the target's own training distribution, both
scored alike and the drafters tied (2.10 vs 2.07).

For a seeded sample of each partition's prepared prompts (`--limit`, default 200; prompts that already
have an own completion first, so the two sets are the same prompts where possible) this stage renders
each upstream answer as the assistant turn the target would produce — the run's chat format's
`render_answer` (each format's folder under formats/ says how it writes an answer) — and asks the engine for the log-prob
of every answer token given the prompt, prefill only. The target's own completions are scored by the sums `generate` recorded; a completion without them (an older
checkpoint, or sampling at a temperature other than 1, where the recorded log-probs are of the scaled
distribution) is scored prefill-only as well. An answer that does not fit `max_seq_len` is scored on the
prefix that fits (counted as `clipped`).

Checkpointed like generate, through the same request loop (engines/request_loop.py) into
`<workdir>/score.sqlite` (store/scores.py): one transaction per scored item, keyed by (sample id, kind); a
rerun scores only what is missing (kill -9 safe); failures are recorded with their reason and skipped until
`--retry-failed`. The report (score/report.py) lands in `<workdir>/score.json`,
which `plan` and the dataset card read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from kimi_eagle_data.engines.base import Engine, ScoreRequest, ScoreResult
from kimi_eagle_data.engines.request_loop import Kept, RequestRun, pending, run_requests
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.model_profile import INSTANT
from kimi_eagle_data.progress import Progress
from kimi_eagle_data.records import LogprobSums, PromptRecord, RequestFailure
from kimi_eagle_data.store.scores import Score, ScoreCheckpoint, ScoreKey

DEFAULT_LIMIT = 200
# The verdict's threshold in nats/token (score/report.py says why 0.5). Beside the sample size: both are the
# command's defaults, which the CLI reads without loading the report (pyarrow and the engines).
REGENERATE_GAP = 0.5


# -- the sample and the work list ---------------------------------------------------------------------

def rank(seed: int, id_: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{id_}".encode()).hexdigest()


def sample(records: list[PromptRecord], generated: set[str], limit: int, seed: int,
           later: Callable[[list[str]], list[PromptRecord]] | None = None, later_ids: Iterable[str] = ()
           ) -> list[PromptRecord]:
    """Up to `limit` prompts with an upstream answer, in seeded order, those with an own completion first.
    `later_ids`: conversations' later turns with a source answer (own_history), drawn alike; only those picked
    are read (`later`: ids -> their records)."""
    candidates = [r.id for r in records if r.answer] + list(later_ids)
    picked = sorted(candidates, key=lambda i: (i not in generated, rank(seed, i)))[:limit]
    first = {r.id: r for r in records if r.answer}
    found = {r.id: r for r in later([i for i in picked if i not in first])} if later is not None else {}
    return [first.get(i) or found[i] for i in picked]


@dataclass
class Item:
    config: str
    id: str
    kind: str
    request: ScoreRequest
    reasoning_n: int
    clipped: bool

    @property
    def key(self) -> ScoreKey:
        return (self.id, self.kind)


@dataclass
class Unrenderable:
    """An upstream answer the run's format cannot write (K3: call arguments that are JSON but not an object): a
    failure of that item (reason `unrenderable`), counted in `failed`, never sent."""

    config: str
    id: str
    kind: str
    message: str

    @property
    def key(self) -> ScoreKey:
        return (self.id, self.kind)

    def failure(self) -> RequestFailure:
        return RequestFailure(f"{self.id}:{self.kind}", "unrenderable", self.message, attempts=0)


def plan_items(config: str, picked: list[PromptRecord], own: dict[str, Any], max_len: int, rescore_own: bool,
               chat_format) -> Iterator[Item | Unrenderable]:
    """What to ask the engine: every sampled upstream answer, and the own completions that have no
    recorded sums (or all of them with `rescore_own`, and those of prompts sampled at a temperature other
    than 1, whose recorded log-probs are of the scaled distribution). `own`: id -> Completion from the
    generation checkpoint; `chat_format`: the run's, bound (`RunContext.format`), which renders the
    answers and says where their reasoning ends (an instant-mode prompt's answers have none). An answer the
    format cannot write is an `Unrenderable`."""
    for r in picked:
        if len(r.prompt_ids) >= max_len:       # nothing of the answer would fit (prepare keeps room; be safe)
            continue
        instant = r.mode == INSTANT
        try:
            ids, k = chat_format.render_answer(r.answer, instant)
        except KimiDataError as e:            # the format's one line: what in the answer it cannot write
            yield Unrenderable(config, r.id, "upstream", str(e))
        else:
            full = list(r.prompt_ids) + ids
            yield Item(config, r.id, "upstream", ScoreRequest(f"{r.id}:upstream", full[:max_len],
                                                              len(r.prompt_ids)), k, len(full) > max_len)
        c = own.get(r.id)
        own_scaled = r.temperature is not None and float(r.temperature) != 1.0
        if c is not None and len(c.output_ids) and (rescore_own or own_scaled or c.logprob_stats is None):
            out = [int(t) for t in c.output_ids]
            full = list(r.prompt_ids) + out
            yield Item(config, r.id, "own", ScoreRequest(f"{r.id}:own", full[:max_len], len(r.prompt_ids)),
                       chat_format.reasoning_length(out, instant), len(full) > max_len)


def run_scoring(items: list[Item], engine: Engine, ckpt: ScoreCheckpoint, *, retry_failed: bool,
                progress: Progress | None = None) -> RequestRun:
    """Score every item not yet in the checkpoint; commit each result as it comes back."""
    run = RequestRun()
    todo = pending(items, set(ckpt.scores()), set(ckpt.failures()), retry_failed=retry_failed, run=run)

    def keep(it: Item, res: ScoreResult) -> Kept | RequestFailure:
        answer_ids = it.request.input_ids[it.request.start:]
        if len(res.logprobs) != len(answer_ids) or len(res.top1_ids) != len(answer_ids):
            return RequestFailure(res.id, "bad_response", "log-probs do not cover the answer")
        ckpt.commit(it.config, it.key, Score(LogprobSums.of(answer_ids, res.logprobs, res.top1_ids, it.reasoning_n),
                                             it.clipped))
        return Kept(len(answer_ids), "scored")

    def fail(it: Item, failure: RequestFailure) -> None:
        ckpt.record_failure(it.config, it.key, failure)

    return run_requests("score", todo, engine.score, keep, fail, run, in_flight=engine.in_flight,
                        progress=progress, streaming=engine.streams_requests)
