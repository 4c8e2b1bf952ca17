"""The history arms of `kimi-data probe`, for partitions whose conversations go on the model's own turns (policy
own_history): what a drafter gains from later turns whose history holds the target's own earlier answers, against
the same turns carried on the source's history.

- `own history`: the dataset's later turns (turn 2 on): each prompt holds the target's own earlier turns;
- `source history`: the same conversations and turns, their prompts the source's conversation up to that user turn
  (the source's own assistant answers in the history: the prompt `every_user_prefix` prepares for it), answered by
  the target in-process at the run's sampling settings, each request seeded from its turn's id as `generate` seeds
  it; a completion the format's validator does not find a whole, valid turn is left out, as emit leaves it out.

Both arms train on later turns only (the first turns are the same in both), on the same loss-token budget; they are
measured on the later turns of the held-out conversations as the dataset holds them (the model's own history: what a
deployed drafter sees when a conversation goes on).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Iterable

import numpy as np

from kimi_eagle_data.conversation.next_turn import turn_id
from kimi_eagle_data.conversation.script import script_steps, step
from kimi_eagle_data.probe.arms import TrainRow
from kimi_eagle_data.probe.split import rank
from kimi_eagle_data.records import PromptRecord
from kimi_eagle_data.generate.records import GenerationJob

log = logging.getLogger(__name__)

OWN, SOURCE = "own history", "source history"


@dataclass
class LaterTurn:
    """A later turn of the dataset: its row, its conversation's first prompt and its index."""

    row: TrainRow
    first: PromptRecord
    turn: int


def later_turns(rows: Iterable[TrainRow], firsts: dict[str, PromptRecord], max_turns: dict[str, int]
                ) -> list[LaterTurn]:
    """The rows that are a later turn of a conversation of a config in `max_turns` (the own_history configs), each
    with its index (a later turn's id is `turn_id(conversation, k)`)."""
    out = []
    for r in rows:
        first = firsts.get(r.conversation or "")
        if first is None or first.config not in max_turns or r.id == first.id:
            continue
        k = next((k for k in range(2, max_turns[first.config] + 1) if turn_id(first.id, k) == r.id), None)
        if k is not None:
            out.append(LaterTurn(r, first, k))
    return out


def source_history_prompt(first: PromptRecord, turn: int, chat_format) -> PromptRecord | None:
    """Turn `turn` of the conversation with the source's answers as its history: the first prompt's messages, then
    each earlier step of the script (the source's answer and what follows it). None where the source has no answer
    for an earlier turn or nothing after it."""
    steps = script_steps(first.script)
    messages = [dict(m) for m in first.messages]
    for k in range(1, turn):
        s = step(steps, k)
        if s.answer is None or not s.next:
            return None
        messages += [dict(s.answer), *(dict(m) for m in s.next)]
    ids = chat_format.render_prompt(messages, first.tools, first.mode, first.effort)
    return replace(first, id=turn_id(first.id, turn), messages=messages, prompt_ids=list(ids),
                   answer=step(steps, turn).answer, conversation_id=first.id, turn=turn, script=None)


def source_history_rows(turns: list[LaterTurn], ctx, engine) -> list[TrainRow]:
    """The `source history` arm: each later turn's source-history prompt answered by `engine`, as training rows
    (loss on the completion); the turns whose prompt cannot be made or whose completion is not a whole valid turn
    are left out (counted in the log)."""
    prompts = [p for p in (source_history_prompt(t.first, t.turn, ctx.format) for t in turns)
               if p is not None and len(p.prompt_ids) + ctx.sampling.max_new_tokens <= ctx.max_seq_len]
    by_id = {p.id: p for p in prompts}
    validator = ctx.format.validator(ctx.max_seq_len, keep_truncated=False)
    rows = []
    for c in engine.generate(GenerationJob.of(p, ctx.sampling).request for p in prompts):
        p = by_id.get(getattr(c, "id", ""))
        if p is None or getattr(c, "output_ids", None) is None:
            continue
        verdict, _, whole = validator.judge_turn(p.prompt_ids, c.output_ids, c.finish_reason, c.finish_detail,
                                                 p.tools)
        if not whole or verdict.issues:
            continue
        ids = np.asarray(list(p.prompt_ids) + list(c.output_ids), dtype=np.int64)
        mask = (np.arange(len(ids)) >= len(p.prompt_ids)).astype(np.int64)
        rows.append(TrainRow(p.id, p.config, ids, mask, p.conversation_id))
    log.info("probe: %d of %d later turns answered on the source's history (%d could not be made from the source, "
             "%d not a whole valid turn)", len(rows), len(turns), len(turns) - len(prompts), len(prompts) - len(rows))
    return rows


def held_out_later(turns: list[LaterTurn], held_ids: set[str], count: int, seed: int, max_prompt_len: int
                   ) -> dict[str, list[TrainRow]]:
    """Per config, up to `count` later turns of its held-out conversations, as the dataset holds them (their own
    history), ranked as the held-out first turns are."""
    out: dict[str, list[TrainRow]] = {}
    for t in sorted(turns, key=lambda t: rank(seed, t.row.id or "")):
        if t.first.id in held_ids and len(t.row.prompt) < max_prompt_len:
            picked = out.setdefault(t.first.config, [])
            if len(picked) < count:
                picked.append(t.row)
    return out
