"""`prepared/<CFG>.parquet`: the prompts prepare keeps, and beside it the rejections and the config's report. Written
by prepare (prompts/prepare.py), read by generate, score and probe.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from kimi_eagle_data.errors import MissingInputError
from kimi_eagle_data.model_profile import THINKING
from kimi_eagle_data.records import PromptRecord, Rejection
from kimi_eagle_data.schema import PROMPT_SCHEMA
from kimi_eagle_data.store.workdir import Workdir, atomic_path, write_json


PREPARED_ROW_GROUP = 4096   # rows per row group (validate streams the file a chunk of rows at a time)


def write_prepared(workdir: Workdir, config: str, records: list[PromptRecord], rejections: list[Rejection],
                   report: Any) -> None:
    """`report`: prepare's `PrepareReport` for the config (written as its `to_json()`).

    The prompts sorted by id (the order validate reads completions in, so it can stream both side by side
    with flat memory), in row groups of PREPARED_ROW_GROUP rows."""
    records = sorted(records, key=lambda r: r.id)
    columns = {
        "id": [r.id for r in records],
        "config": [r.config for r in records],
        "source": [r.source for r in records],
        "source_id": [r.source_id for r in records],
        "messages": [orjson.dumps(r.messages).decode() for r in records],
        "tools": [orjson.dumps(r.tools).decode() if r.tools else "" for r in records],
        "prompt_ids": [r.prompt_ids for r in records],
        "answer": [orjson.dumps(r.answer).decode() if r.answer else "" for r in records],
        "mode": [r.mode for r in records],
        "effort": [r.effort for r in records],
        "temperature": [r.temperature for r in records],
        "top_p": [r.top_p for r in records],
        "script": [orjson.dumps(r.script).decode() if r.script is not None else "" for r in records],
    }
    table = pa.Table.from_pydict(columns, schema=PROMPT_SCHEMA)
    with atomic_path(workdir.prepared(config)) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=PREPARED_ROW_GROUP)
    with atomic_path(workdir.prepare_rejects(config)) as tmp:
        with open(tmp, "wb") as f:
            for r in rejections:
                f.write(orjson.dumps(asdict(r)) + b"\n")
    write_json(workdir.prepare_report(config),
               {**report.to_json(), "selection_sha256": selection_sha256(columns, rejections)})


def selection_sha256(columns: dict[str, list], rejections: list[Rejection]) -> str:
    """What this config's selection is, by content: its prompts (every column of the prepared file) and its
    rejections. Two prepares that selected the same rows agree on it whatever else they prepared beside the
    config (emit/stale.py compares it), and unlike the file's bytes it does not depend on the Parquet writer."""
    digest = hashlib.sha256()
    names = sorted(columns)
    digest.update(orjson.dumps(names))
    for row in zip(*(columns[name] for name in names)):    # a row at a time: a column of ids can be gigabytes
        digest.update(orjson.dumps(row))
    for r in rejections:
        digest.update(orjson.dumps(asdict(r)))
    return digest.hexdigest()


def read_prepared(workdir: Workdir, config: str) -> list[PromptRecord]:
    """A config's prepared prompts, in id order; a file written by an earlier version reads with the defaults of
    what it lacks."""
    path = workdir.prepared(config)
    if not path.exists():
        raise MissingInputError(f"{path} is missing; run `kimi-data prepare {config} --workdir {workdir.root}` first")
    t = pq.read_table(path).to_pydict()
    n = len(t["id"])
    answers = t.get("answer") or [""] * n    # prepared before answers were kept: none
    # Prepared before modes: every prompt in thinking mode at the run's sampling (None: the run's).
    modes, temps, top_ps = t.get("mode") or [THINKING] * n, t.get("temperature") or [None] * n, \
        t.get("top_p") or [None] * n
    scripts = t.get("script") or [""] * n    # prepared before own_history: no conversation continues
    efforts = t.get("effort") or [None] * n  # prepared before efforts: the profile's default
    return [
        PromptRecord(id_, cfg, src, sid, orjson.loads(msgs), orjson.loads(tools) if tools else None, ids,
                     orjson.loads(ans) if ans else None, mode=mode, effort=effort, temperature=temp, top_p=top_p,
                     script=orjson.loads(script) if script else None)
        for id_, cfg, src, sid, msgs, tools, ids, ans, mode, effort, temp, top_p, script in zip(
            t["id"], t["config"], t["source"], t["source_id"], t["messages"], t["tools"], t["prompt_ids"], answers,
            modes, efforts, temps, top_ps, scripts)
    ]
