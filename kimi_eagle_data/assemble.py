"""Stage 3, validate: join prompts with their completions, judge each with the Validator, and
write the emitted rows (SPEC §6 schema + a `split` column) to `validated/<CFG>.parquet`.

Accounting per config (SPEC §8): selected = rejected_at_prepare + valid + rejected + failed + pending.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .checkpoint import Checkpoint
from .schema import ROW_SCHEMA, normalize_message
from .validate import Validator
from .workdir import Workdir, atomic_path, read_json, write_json

VALIDATED_SCHEMA = ROW_SCHEMA.append(pa.field("split", pa.string()))
ROWS_PER_BATCH = 1024   # rows per write: memory stays flat however large the config
TOKEN_COLUMNS = ("input_ids", "loss_mask")


@dataclass
class ValidateReport:
    config: str
    selected: int = 0
    rejected_at_prepare: int = 0
    prepared: int = 0
    generated: int = 0
    failed: int = 0
    pending: int = 0
    valid: int = 0
    rejected: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    train_tokens: int = 0
    reasons: Counter = field(default_factory=Counter)
    prepare_reasons: dict = field(default_factory=dict)
    failure_reasons: Counter = field(default_factory=Counter)
    finish: Counter = field(default_factory=Counter)

    @property
    def balanced(self) -> bool:
        return self.selected == self.rejected_at_prepare + self.valid + self.rejected + self.failed + self.pending

    def to_json(self) -> dict[str, Any]:
        d = {k: (dict(sorted(v.items())) if isinstance(v, (Counter, dict)) else v) for k, v in self.__dict__.items()}
        d["balanced"] = self.balanced
        return d


class _PreparedPrompts:
    """A config's prepared prompts as Arrow buffers: prompt ids are numpy views, never Python lists."""

    def __init__(self, path):
        t = pq.read_table(path)
        self.ids = t.column("id").to_pylist()
        self.index = {id_: i for i, id_ in enumerate(self.ids)}
        self.source = t.column("source").to_pylist()
        self.source_id = t.column("source_id").to_pylist()
        self.messages = t.column("messages").to_pylist()
        self.tools = t.column("tools").to_pylist()
        ids = t.column("prompt_ids").combine_chunks()
        self.offsets = ids.offsets.to_numpy()
        self.values = ids.values.to_numpy()

    def prompt(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i]:self.offsets[i + 1]]


class _RowBatch:
    """Rows collected column by column; token columns become ListArrays from one concatenated buffer."""

    def __init__(self):
        self.cols: dict[str, list] = {name: [] for name in VALIDATED_SCHEMA.names if name not in TOKEN_COLUMNS}
        self.chunks: list[np.ndarray] = []     # prompt, completion, prompt, completion, ...

    def __len__(self) -> int:
        return len(self.cols["id"])

    def add(self, prompt: np.ndarray, output: np.ndarray, **row) -> None:
        self.chunks += (prompt, output)
        for k, v in row.items():
            self.cols[k].append(v)

    def table(self) -> pa.Table:
        lengths = np.fromiter((len(c) for c in self.chunks), dtype=np.int64, count=len(self.chunks))
        per_row = lengths[0::2] + lengths[1::2]
        offsets = np.zeros(len(per_row) + 1, dtype=np.int32)
        np.cumsum(per_row, out=offsets[1:])
        values = np.concatenate(self.chunks).astype(np.int32, copy=False) if self.chunks else np.zeros(0, np.int32)
        mask = np.repeat(np.tile(np.array([0, 1], dtype=np.int8), len(per_row)), lengths)
        arrays = {
            "input_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)),
            "loss_mask": pa.ListArray.from_arrays(pa.array(offsets), pa.array(mask)),
            **{k: pa.array(v, type=VALIDATED_SCHEMA.field(k).type) for k, v in self.cols.items()},
        }
        return pa.Table.from_arrays([arrays[n] for n in VALIDATED_SCHEMA.names], schema=VALIDATED_SCHEMA)


def validate_config(workdir: Workdir, config: str, checkpoint: Checkpoint, validator: Validator) -> ValidateReport:
    path = workdir.prepared(config)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; run `kimi-data prepare {config} --workdir {workdir.root}` first")
    prompts = _PreparedPrompts(path)
    prep = read_json(workdir.prepare_report(config))
    rep = ValidateReport(config, selected=prep["selected"], rejected_at_prepare=prep["rejected_total"],
                         prepared=len(prompts.ids), prepare_reasons=prep["rejected"])
    failures = checkpoint.failures(config)
    done: set[str] = set()
    batch = _RowBatch()
    with atomic_path(workdir.validated(config)) as tmp, \
            pq.ParquetWriter(tmp, VALIDATED_SCHEMA, compression="zstd") as writer:
        for c in checkpoint.completions(config):
            i = prompts.index.get(c.id)
            if i is None:  # a completion of a prompt no longer prepared (e.g. prepare re-run with fewer rows)
                continue
            done.add(c.id)
            prompt, output = prompts.prompt(i), np.asarray(c.output_ids, dtype=np.int32)
            tools = orjson.loads(prompts.tools[i]) if prompts.tools[i] else None
            v = validator.validate(prompt, output, c.finish_reason, c.finish_detail, tools)
            rep.generated += 1
            rep.finish[v.finish_reason] += 1
            plen, clen = len(prompt), len(output)
            if v.valid:
                rep.valid += 1
                rep.train_tokens += plen + clen
            else:
                rep.rejected += 1
                rep.reasons.update(v.issues)
            rep.prompt_tokens += plen
            rep.completion_tokens += clen
            batch.add(
                prompt, output, id=c.id, source=prompts.source[i], source_id=prompts.source_id[i],
                prompt_len=plen, completion_len=clen, reasoning_len=v.reasoning_len,
                num_tool_calls=v.num_tool_calls, finish_reason=v.finish_reason,
                messages=[normalize_message(m) for m in orjson.loads(prompts.messages[i])]
                + [normalize_message(v.assistant)],
                tools=prompts.tools[i], issues=list(v.issues), split="train" if v.valid else "rejected",
            )
            if len(batch) >= ROWS_PER_BATCH:
                writer.write_table(batch.table())
                batch = _RowBatch()
        writer.write_table(batch.table())
    for id_, (reason, _message, _attempts) in failures.items():
        if id_ in prompts.index and id_ not in done:
            rep.failed += 1
            rep.failure_reasons[reason] += 1
    rep.pending = rep.prepared - rep.generated - rep.failed
    write_json(workdir.validate_report(config), rep.to_json())
    return rep
