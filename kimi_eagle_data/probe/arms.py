"""The arms a probe trains, as rows of token ids and loss masks, all on the same training prompts.

- `own`: the dataset's rows (a dataset folder `emit` wrote, or any token-id data `check` reads: a SpecForge JSONL or
  a speculators save_to_disk export; `input_ids` + `loss_mask` or `prompt_len`), matched to the workdir's prepared
  prompts by id, else by the prompt's ids;
- `upstream`: each training prompt followed by the source's own answer, which prepare keeps for `score`, written as
  the target writes an answer (the format's `render_answer`), loss on the answer;
- the learning curve: the own arm's prompts cut to a seeded ¼ and ½.

The training prompts are the first-turn prompts with both an own row and an upstream answer, less the held-out ones;
a row of a held-out conversation is never trained on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow.parquet as pq

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.model_profile import INSTANT
from kimi_eagle_data.probe.split import prompt_key, rank
from kimi_eagle_data.records import PromptRecord
from kimi_eagle_data.validate.check_input import CheckInputError, Unreadable, open_input
from kimi_eagle_data.emit.dataset import load_local
from kimi_eagle_data.store.workdir import dataset_config_dir

log = logging.getLogger(__name__)

CURVE = (0.25, 0.5, 1.0)


class ProbeInputError(KimiDataError):
    """The data to probe cannot be read as token ids (one line)."""


@dataclass
class TrainRow:
    id: str | None
    config: str | None        # its partition (None: matched to no prepared prompt)
    ids: np.ndarray
    mask: np.ndarray
    conversation: str | None = None   # its conversation's first turn's id (a held-out one is never trained on)

    @property
    def loss_tokens(self) -> int:
        return int(np.count_nonzero(self.mask))

    @property
    def prompt(self) -> np.ndarray:
        ones = np.flatnonzero(self.mask)
        return self.ids[:int(ones[0]) if ones.size else len(self.ids)]


def dataset_rows(root: Path) -> Iterator[dict[str, Any]]:
    """The train rows of a dataset `kimi-data emit` wrote (its manifest's shards of split `train`)."""
    ds = load_local(root, verify=False)
    for config, entry in ds.manifest["configs"].items():
        for name in (entry["splits"].get("train") or {}).get("files", []):
            table = pq.read_table(dataset_config_dir(ds.root, config) / name,
                                  columns=["id", "input_ids", "loss_mask", "conversation_id"])
            for row in table.to_pylist():
                yield {**row, "config": config}


def input_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of any data `check` reads, token-id form only."""
    if (path / "manifest.json").is_file():
        yield from dataset_rows(path)
        return
    try:
        rows, _ = open_input(path)
        for n, (row, _) in enumerate(rows, 1):
            if row is None:
                continue
            if isinstance(row, Unreadable):
                where = "line" if path.suffix in (".jsonl", ".json") else "row"
                raise ProbeInputError(f"{path}: {where} {n} cannot be read ({row}); the probe reads token-id rows: "
                                      "a kimi-data dataset, `export --format specforge` (JSONL) or `--format "
                                      "speculators`; check it with `kimi-data check`")
            if not isinstance(row, dict) or row.get("input_ids") is None:
                raise ProbeInputError(f"{path}: row {n} has no input_ids; the probe trains on token ids (input_ids + "
                                      "loss_mask or prompt_len: a kimi-data dataset, `export --format specforge` or "
                                      "`--format speculators`); check it with `kimi-data check`")
            yield row
    except CheckInputError as e:
        raise ProbeInputError(str(e)) from None


def row_arrays(raw: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """A row's (input ids, loss mask) as arrays; the mask from `prompt_len` where the row has none."""
    ids = np.asarray(raw["input_ids"], dtype=np.int64)
    if raw.get("loss_mask") is not None:
        return ids, np.asarray(raw["loss_mask"], dtype=np.int64)[:len(ids)]
    return ids, (np.arange(len(ids)) >= int(raw.get("prompt_len") or 0)).astype(np.int64)


def to_train_row(raw: dict[str, Any], by_id: dict[str, PromptRecord], by_prompt: dict[str, PromptRecord]) -> TrainRow:
    ids, mask = row_arrays(raw)
    rid = raw.get("id")
    row = TrainRow(str(rid) if rid is not None else None, raw.get("config"), ids, mask)
    rec = by_id.get(row.id or "") or by_prompt.get(prompt_key(row.prompt.tolist()))
    if rec is not None:
        row.config = rec.config
        row.id = rec.id if rec.turn == 1 else row.id
    conversation = raw.get("conversation_id")
    row.conversation = str(conversation) if conversation else row.id
    return row


def upstream_row(record: PromptRecord, chat_format, max_len: int) -> TrainRow | None:
    """The prompt and its upstream answer as the target would write it (`chat_format`: the run's, bound); None when
    the format cannot write it."""
    try:
        answer, _ = chat_format.render_answer(record.answer, record.mode == INSTANT)
    except KimiDataError:
        return None
    ids = np.asarray(list(record.prompt_ids) + list(answer), dtype=np.int64)[:max_len]
    mask = (np.arange(len(ids)) >= len(record.prompt_ids)).astype(np.int64)
    return TrainRow(record.id, record.config, ids, mask, record.id)


def subset(rows: list[TrainRow], share: float, seed: int) -> list[TrainRow]:
    """A seeded `share` of the rows' prompts (rows of one prompt stay together)."""
    if share >= 1:
        return rows
    keys = sorted({r.id or "" for r in rows}, key=lambda i: rank(seed, i))
    keep = set(keys[:max(1, round(share * len(keys)))])
    return [r for r in rows if (r.id or "") in keep]


def passes(arms: dict[str, list[TrainRow]], budget: int, compared: tuple[str, str] = ("own", "upstream")
           ) -> dict[str, float]:
    """How often each arm's drafter goes over its loss tokens on `budget` (equal loss tokens per arm); one warning
    line when one of the two `compared` arms repeats its data more than twice as often as the other, since their
    difference then mixes the data with how often each saw it (the learning curve's shares repeat theirs more by
    design: the same budget on less data)."""
    got = {a: round(budget / max(1, sum(r.loss_tokens for r in rows)), 2) for a, rows in arms.items()}
    pair = {a: got[a] for a in compared if a in got}
    if len(pair) == 2 and max(pair.values()) > max(1.0, 2 * min(pair.values())):   # below 1 pass, none repeats
        most, least = max(pair, key=pair.get), min(pair, key=pair.get)
        log.warning("arm %s goes over its data %.1f times and arm %s %.1f times on the same %s-loss-token budget: "
                    "their difference mixes the data with repetition (probe more data, or a smaller --budget)",
                    most, got[most], least, got[least], f"{budget:,}")
    return got


def compared_names(a: Path, b: Path) -> tuple[str, str]:
    """The arms of two datasets compared: their names, told apart where they are the same."""
    names = (Path(a).name, Path(b).name)
    return names if names[0] != names[1] else (f"A {names[0]}", f"B {names[1]}")


def compared_arms(a: list[TrainRow], b: list[TrainRow], firsts: dict[str, PromptRecord], names: tuple[str, str]
                  ) -> dict[str, list[TrainRow]]:
    """Two datasets' first-turn rows on the training prompts both hold, as two arms named `names`."""
    shared = {r.id for r in a if r.id in firsts} & {r.id for r in b if r.id in firsts}
    return {names[0]: [r for r in a if r.id in shared], names[1]: [r for r in b if r.id in shared]}
