"""Stage 3, validate: join prompts with their completions, judge each with the Validator, and
write the emitted rows (SPEC §6 schema + a `split` column) to `validated/<CFG>.parquet`.

Accounting per config (SPEC §8): selected = rejected_at_prepare + valid + rejected + failed + pending.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .checkpoint import Checkpoint
from .prepare import read_prepared
from .schema import ROW_SCHEMA, normalize_message
from .validate import Validator
from .workdir import Workdir, atomic_path, read_json, write_json

VALIDATED_SCHEMA = ROW_SCHEMA.append(pa.field("split", pa.string()))
ROWS_PER_BATCH = 1024   # rows per write: memory stays flat however large the config


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


def validate_config(workdir: Workdir, config: str, checkpoint: Checkpoint, validator: Validator) -> ValidateReport:
    records = read_prepared(workdir, config)
    prep = read_json(workdir.prepare_report(config))
    rep = ValidateReport(config, selected=prep["selected"], rejected_at_prepare=prep["rejected_total"],
                         prepared=len(records), prepare_reasons=prep["rejected"])
    by_id = {r.id: r for r in records}
    failures = checkpoint.failures(config)
    done: set[str] = set()
    cols: dict[str, list] = {name: [] for name in VALIDATED_SCHEMA.names}
    with atomic_path(workdir.validated(config)) as tmp, \
            pq.ParquetWriter(tmp, VALIDATED_SCHEMA, compression="zstd") as writer:
        def flush():
            writer.write_table(pa.Table.from_pydict(cols, schema=VALIDATED_SCHEMA))
            for v in cols.values():
                v.clear()

        for c in checkpoint.completions(config):
            r = by_id.get(c.id)
            if r is None:  # a completion of a prompt no longer prepared (e.g. prepare re-run with fewer rows)
                continue
            done.add(c.id)
            v = validator.validate(r.prompt_ids, c.output_ids, c.finish_reason, c.finish_detail, r.tools)
            rep.generated += 1
            rep.finish[v.finish_reason] += 1
            plen, clen = len(r.prompt_ids), len(c.output_ids)
            if v.valid:
                rep.valid += 1
                rep.train_tokens += plen + clen
            else:
                rep.rejected += 1
                rep.reasons.update(v.issues)
            rep.prompt_tokens += plen
            rep.completion_tokens += clen
            row = {
                "id": r.id, "source": r.source, "source_id": r.source_id,
                "input_ids": r.prompt_ids + c.output_ids, "loss_mask": [0] * plen + [1] * clen,
                "prompt_len": plen, "completion_len": clen, "reasoning_len": v.reasoning_len,
                "num_tool_calls": v.num_tool_calls, "finish_reason": v.finish_reason,
                "messages": [normalize_message(m) for m in r.messages] + [normalize_message(v.assistant)],
                "tools": orjson.dumps(r.tools).decode() if r.tools else "",
                "issues": list(v.issues), "split": "train" if v.valid else "rejected",
            }
            for k, val in row.items():
                cols[k].append(val)
            if len(cols["id"]) >= ROWS_PER_BATCH:
                flush()
        flush()
    for id_, (reason, _message, _attempts) in failures.items():
        if id_ in by_id and id_ not in done:
            rep.failed += 1
            rep.failure_reasons[reason] += 1
    rep.pending = rep.prepared - rep.generated - rep.failed
    write_json(workdir.validate_report(config), rep.to_json())
    return rep
