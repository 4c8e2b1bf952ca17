"""The data a probe trains on, checked against the workdir it is probed in: do its rows belong to this workdir's
prompts, tokenizer and format?

A row belongs to the prompts when its id is one of the workdir's samples (a first turn, or a later turn of one of
its conversations: `turn_id`), its conversation is one of them, or its prompt's ids are a prepared prompt's. It
belongs to the tokenizer when every id is in the workdir's vocabulary and, matched to a prepared prompt, its ids
begin with that prompt's; to the format when the format's validator passes it (`kimi-data check`'s verdict, the
prompt taken as the matched prepared prompt where there is one, so that a damaged loss mask is measured, not
refused). Data with fewer than MIN_SHARE of its rows belonging is refused in one line: it was made for another
workdir, or with another model's tokenizer, and a probe of it here would measure rows the held-out split does not
know.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kimi_eagle_data.conversation.next_turn import turn_id
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.probe.split import prompt_key
from kimi_eagle_data.records import PromptRecord
from kimi_eagle_data.probe.arms import input_rows, row_arrays
from kimi_eagle_data.prompts.prepared_file import read_prepared
from kimi_eagle_data.validate.check import Checker

log = logging.getLogger(__name__)

MIN_SHARE = 0.5


class DataMismatch(KimiDataError):
    """The data to probe was not made from this workdir's prompts, tokenizer or format (one line)."""


@dataclass
class DataCheck:
    rows: int = 0
    unmatched: int = 0          # no id, conversation nor prompt of this workdir
    other_tokenizer: int = 0    # ids out of the vocabulary, or not beginning with the matched prompt's ids
    invalid: int = 0            # the format's validator fails it

    @property
    def belonging(self) -> int:
        return self.rows - self.unmatched - self.other_tokenizer - self.invalid

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "matched_rows": self.rows - self.unmatched, "other_tokenizer_rows":
                self.other_tokenizer, "invalid_rows": self.invalid, "min_share": MIN_SHARE}


class RowJudge:
    """Each row's verdict against one workdir: its prompts (all turns' ids), tokenizer and format."""

    def __init__(self, ctx, records: dict[str, list[PromptRecord]]):
        firsts = [r for rs in records.values() for r in rs if r.turn == 1]
        self.prompts = {r.id: r for r in firsts}
        self.by_key = {prompt_key(r.prompt_ids): r for r in firsts}
        self.ids = {r.id for rs in records.values() for r in rs}
        for r in firsts:
            partition = ctx.partitions.partition(r.config) if r.config in ctx.partitions.partitions else None
            for k in range(2, (getattr(partition, "max_turns", 1) or 1) + 1):
                self.ids.add(turn_id(r.id, k))
        self.vocab = len(ctx.tokenizer)
        self.checker = Checker(ctx.profile, ctx.tokenizer, ctx.max_seq_len, chat_format=ctx.format)
        self.check = DataCheck()

    def judge(self, raw: dict[str, Any], ids: np.ndarray, mask: np.ndarray, n: int) -> bool:
        """Whether row `n` (its ids and loss mask) belongs; counted in `self.check`."""
        self.check.rows += 1
        start = int(np.flatnonzero(mask)[0]) if mask.any() else len(ids)
        rid, conversation = str(raw.get("id") or ""), str(raw.get("conversation_id") or "")
        record = self.prompts.get(rid) or self.by_key.get(prompt_key(ids[:start].tolist()))
        if record is None and rid not in self.ids and conversation not in self.prompts:
            self.check.unmatched += 1
            return False
        if ids.size and (int(ids.max()) >= self.vocab or int(ids.min()) < 0):
            self.check.other_tokenizer += 1
            return False
        if record is not None:
            prompt = np.asarray(record.prompt_ids)
            if len(ids) < len(prompt) or not np.array_equal(ids[:len(prompt)], prompt):
                self.check.other_tokenizer += 1
                return False
            start = len(prompt)
        if not self.checker.check({"input_ids": ids, "prompt_len": start}, n).valid:
            self.check.invalid += 1
            return False
        return True

    def refuse_or_warn(self, data: Path, workdir: Path) -> None:
        c = self.check
        if c.rows == 0:
            raise DataMismatch(f"{data} holds no row; give a dataset folder, a SpecForge JSONL or a speculators "
                               "save_to_disk export with rows")
        if c.belonging < MIN_SHARE * c.rows:
            raise DataMismatch(
                f"{data}: {c.belonging} of {c.rows} rows belong to {workdir} (below {MIN_SHARE:.0%}): "
                f"{c.unmatched} match none of its prompts (by id, conversation or prompt ids), {c.other_tokenizer} "
                f"hold ids of another tokenizer, {c.invalid} fail its format's validator; probe the data in the "
                "workdir that made it, or check it with `kimi-data check`")
        if c.belonging < c.rows:
            log.warning("%s: %d of %d rows are left out of training: %d match none of the workdir's prompts, %d "
                        "hold ids of another tokenizer, %d fail the format's validator", data, c.rows - c.belonging,
                        c.rows, c.unmatched, c.other_tokenizer, c.invalid)


def belonging_rows(ctx, data: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows of `data` that belong to the workdir, whichever of its partitions are probed (refused in one line
    when too few do), and the counts."""
    wd = ctx.workdir
    judge = RowJudge(ctx, {c: read_prepared(wd, c) for c in ctx.partitions.partitions if wd.prepared(c).exists()})
    kept = [raw for n, raw in enumerate(input_rows(data), 1) if judge.judge(raw, *row_arrays(raw), n)]
    judge.refuse_or_warn(data, ctx.workdir.root)
    return kept, judge.check.to_json()
