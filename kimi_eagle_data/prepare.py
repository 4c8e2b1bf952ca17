"""Stage 1, prepare: source rows -> adapter -> the model's chat template -> PromptRecords.

Rejects (with a reason per row, never silently): rows the adapter cannot read, prompts the
template cannot render, duplicates of an earlier prompt, and prompts with
`prompt_len + max_new_tokens > max_seq_len` (rejected, never truncated; SPEC §3).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .adapters import ADAPTERS
from .builders.partitions import Partition
from .checkpoint import ids_to_blob
from .records import PromptRecord, Rejection, SourcePrompt, SourceRowError
from .schema import PROMPT_SCHEMA
from .sources import SourceRow
from .tokenizer import render_prompt
from .workdir import Workdir, atomic_path, write_json


def sample_id(config: str, source: str, source_id: str, prompt_rule: str) -> str:
    """Stable id: same source row + same settings -> same id, on any machine."""
    key = "\x1f".join((config, source, source_id, prompt_rule))
    return f"{config}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


@dataclass
class PrepareReport:
    config: str
    source: str
    selected: int = 0
    prepared: int = 0
    rejected: Counter = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rejected"] = dict(sorted(self.rejected.items()))
        d["rejected_total"] = sum(self.rejected.values())
        return d


def prepare_rows(partition: Partition, rows: Iterable[SourceRow], tokenizer, *, gen_prompt_ids: list[int],
                 max_new_tokens: int, max_seq_len: int, source_desc: str
                 ) -> tuple[list[PromptRecord], list[Rejection], PrepareReport]:
    adapter = ADAPTERS[partition.adapter]
    report = PrepareReport(partition.config, source_desc)
    records: list[PromptRecord] = []
    rejections: list[Rejection] = []
    seen_ids: set[str] = set()
    seen_prompts: dict[bytes, str] = {}

    def reject(source_id: str, code: str, message: str, id_: str = "") -> None:
        report.rejected[code] += 1
        rejections.append(Rejection(partition.config, "prepare", source_id, code, message, id_))

    for n, row in rows:
        report.selected += 1
        where = f"{partition.config} row {n}"
        if isinstance(row, SourceRowError):
            reject(f"row:{n}", row.code, row.message)
            continue
        try:
            sp: SourcePrompt = adapter(row)
        except SourceRowError as e:
            reject(f"row:{n}", e.code, f"{where}: {e.message}")
            continue
        id_ = sample_id(partition.config, partition.upstream, sp.source_id, partition.prompt_rule)
        if id_ in seen_ids:
            reject(sp.source_id, "duplicate_source_row", f"{where}: source id {sp.source_id!r} seen before", id_)
            continue
        seen_ids.add(id_)
        try:
            prompt_ids = render_prompt(tokenizer, sp.messages, sp.tools)
        except Exception as e:  # jinja raises many types; the message is what matters
            reject(sp.source_id, "template_error", f"{where}: chat template failed: {e}", id_)
            continue
        if prompt_ids[-len(gen_prompt_ids):] != gen_prompt_ids:
            reject(sp.source_id, "no_generation_prompt",
                   f"{where}: rendered prompt does not end with the profile's generation prompt", id_)
            continue
        if len(prompt_ids) + max_new_tokens > max_seq_len:
            reject(sp.source_id, "prompt_too_long",
                   f"{where}: prompt_len {len(prompt_ids)} + max_new_tokens {max_new_tokens} > max_seq_len "
                   f"{max_seq_len}", id_)
            continue
        key = hashlib.blake2b(ids_to_blob(prompt_ids)).digest()
        if key in seen_prompts:
            reject(sp.source_id, "duplicate_prompt", f"{where}: same prompt as {seen_prompts[key]}", id_)
            continue
        seen_prompts[key] = id_
        records.append(PromptRecord(id_, partition.config, partition.upstream, sp.source_id,
                                    sp.messages, sp.tools, prompt_ids))
        report.prepared += 1
    return records, rejections, report


def write_prepared(workdir: Workdir, config: str, records: list[PromptRecord], rejections: list[Rejection],
                   report: PrepareReport) -> None:
    table = pa.Table.from_pydict({
        "id": [r.id for r in records],
        "config": [r.config for r in records],
        "source": [r.source for r in records],
        "source_id": [r.source_id for r in records],
        "messages": [orjson.dumps(r.messages).decode() for r in records],
        "tools": [orjson.dumps(r.tools).decode() if r.tools else "" for r in records],
        "prompt_ids": [r.prompt_ids for r in records],
    }, schema=PROMPT_SCHEMA)
    with atomic_path(workdir.prepared(config)) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    with atomic_path(workdir.prepare_rejects(config)) as tmp:
        with open(tmp, "wb") as f:
            for r in rejections:
                f.write(orjson.dumps(asdict(r)) + b"\n")
    write_json(workdir.prepare_report(config), report.to_json())


def read_prepared(workdir: Workdir, config: str) -> list[PromptRecord]:
    path = workdir.prepared(config)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; run `kimi-data prepare {config} --workdir {workdir.root}` first")
    t = pq.read_table(path).to_pydict()
    return [
        PromptRecord(id_, cfg, src, sid, orjson.loads(msgs), orjson.loads(tools) if tools else None, ids)
        for id_, cfg, src, sid, msgs, tools, ids in zip(
            t["id"], t["config"], t["source"], t["source_id"], t["messages"], t["tools"], t["prompt_ids"])
    ]
