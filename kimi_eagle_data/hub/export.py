"""`kimi-data export`: an emitted dataset's token rows in another trainer's format.

`--format specforge`: JSONL rows `{"id", "input_ids", "loss_mask"}` (SpecForge's pre-tokenized
`data.prompts_path` format); `--format speculators`: a torch-format Arrow dataset (`save_to_disk`) with
`input_ids`, `loss_mask`, `seq_len`. Both stream record batches from the Parquet shards (flat memory)
and appear atomically (temp + rename).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kimi_eagle_data.hub.publish import LocalDataset, PublishError, load_local
from kimi_eagle_data.workdir import atomic_path, dataset_config_dir, dataset_configs, dataset_shards

EXPORT_FORMATS = ("specforge", "speculators")


@dataclass
class ExportReport:
    out: Path
    format: str
    split: str
    rows: int = 0
    tokens: int = 0
    loss_tokens: int = 0
    configs: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def _shards(ds: LocalDataset, config: str, split: str) -> list[Path]:
    info = ds.manifest.get("configs", {}).get(config, {}).get("splits", {}).get(split)
    if info and info.get("files"):
        return [dataset_config_dir(ds.root, config) / f for f in info["files"]]
    return dataset_shards(ds.root, config, split)


def _pick_configs(ds: LocalDataset, configs: list[str] | None) -> list[str]:
    known = ds.configs or dataset_configs(ds.root)
    if not configs:
        return known
    unknown = [c for c in configs if c not in known]
    if unknown:
        raise PublishError(f"config {', '.join(unknown)} is not in {ds.root}; it has {', '.join(known)}")
    return configs


def iter_token_batches(paths: list[Path], batch_rows: int = 1024) -> Iterator[tuple[list[str], Any, Any, Any]]:
    """(ids, offsets, input_ids values, loss_mask values) per record batch: numpy views, flat memory."""
    for path in paths:
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=batch_rows, columns=["id", "input_ids", "loss_mask"]):
            ids = batch.column(0).to_pylist()
            ii, lm = batch.column(1), batch.column(2)
            lens = pc.list_value_length(ii).to_numpy(zero_copy_only=False)
            if not (pc.list_value_length(lm).to_numpy(zero_copy_only=False) == lens).all():
                raise PublishError(f"{path}: a row has len(loss_mask) != len(input_ids); re-run `kimi-data emit`")
            offsets = np.zeros(len(lens) + 1, dtype=np.int64)
            np.cumsum(lens, out=offsets[1:])
            yield ids, offsets, ii.flatten().to_numpy(zero_copy_only=False), lm.flatten().to_numpy(zero_copy_only=False)


def export_dataset(path: str | os.PathLike, out: str | os.PathLike, *, fmt: str = "specforge", split: str = "train",
                   configs: list[str] | None = None) -> ExportReport:
    if fmt not in EXPORT_FORMATS:
        raise PublishError(f"--format {fmt!r}: expected one of {', '.join(EXPORT_FORMATS)}")
    ds = load_local(path, verify=False)
    chosen = _pick_configs(ds, configs)
    report = ExportReport(out=Path(out), format=fmt, split=split)
    plan: list[tuple[str, list[Path]]] = []
    for c in chosen:
        shards = _shards(ds, c, split)
        missing = [p for p in shards if not p.is_file()]
        if missing:
            raise PublishError(f"{missing[0]} is missing; re-run `kimi-data emit`")
        if shards:
            plan.append((c, shards))
        else:
            report.skipped.append(c)
    if not plan:
        raise PublishError(f"no {split!r} rows in {', '.join(chosen)} of {ds.root}")
    if fmt == "specforge":
        _export_specforge(plan, report)
    else:
        _export_speculators(plan, report)
    return report


def _export_specforge(plan: list[tuple[str, list[Path]]], report: ExportReport) -> None:
    opt = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE
    with atomic_path(report.out) as tmp, open(tmp, "wb", buffering=1 << 22) as f:
        for config, shards in plan:
            n = 0
            for ids, offs, values, mask in iter_token_batches(shards):
                for i, rid in enumerate(ids):
                    a, b = offs[i], offs[i + 1]
                    f.write(orjson.dumps({"id": rid, "input_ids": values[a:b], "loss_mask": mask[a:b]}, option=opt))
                n += len(ids)
                report.tokens += int(offs[-1])
                report.loss_tokens += int(mask.sum(dtype="int64"))
            report.configs[config] = n
            report.rows += n


# What speculators' own prepare_data writes (vllm-project/speculators, checked at commit c05b95b3:
# src/speculators/data_generation/preprocessing.py `_append_row` + `build_speculator_training_dataset`):
# input_ids and loss_mask as torch.long tensors (Arrow int64 lists), seq_len a Python int (int64), and
# `set_format("torch")` before scripts/prepare_data.py's `save_to_disk`. Its trainer (train/data.py,
# ArrowDataset) compares rows with `torch.equal`, which a list-formatted dataset fails.
SPECULATORS_SCHEMA = pa.schema([("input_ids", pa.list_(pa.int64())), ("loss_mask", pa.list_(pa.int64())),
                                ("seq_len", pa.int64())])
SPECULATORS_CHECKED = "vllm-project/speculators@c05b95b303f7d4f21e8d7624e0ffa1c2d9b4d73b"


def _export_speculators(plan: list[tuple[str, list[Path]]], report: ExportReport) -> None:
    """An Arrow dataset directory (`Dataset.save_to_disk` layout): streamed into one Arrow file with
    `datasets`' ArrowWriter, then `save_to_disk` from the memory-mapped file into a temp dir renamed into place."""
    from datasets import Dataset, Features
    from datasets.arrow_writer import ArrowWriter

    out = report.out
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        arrow = work / "rows.arrow"
        with ArrowWriter(features=Features.from_arrow_schema(SPECULATORS_SCHEMA), path=str(arrow)) as writer:
            for config, shards in plan:
                n = 0
                for batch in _speculators_batches(shards):
                    writer.write_table(batch)
                    n += batch.num_rows
                    report.tokens += int(pc.sum(batch.column("seq_len")).as_py() or 0)
                    report.loss_tokens += int(pc.sum(pc.list_flatten(batch.column("loss_mask"))).as_py() or 0)
                report.configs[config] = n
                report.rows += n
            writer.finalize()
        staged = work / "dataset"
        ds = Dataset.from_file(str(arrow))
        ds.set_format("torch")   # recorded in state.json: load_from_disk yields tensors, as speculators expects
        ds.save_to_disk(str(staged))
        old = None
        if out.exists():
            old = work / "previous"
            os.replace(out, old)
        os.replace(staged, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _speculators_batches(shards: list[Path]) -> Iterator[pa.Table]:
    for path in shards:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024, columns=["input_ids", "loss_mask"]):
            seq_len = pc.cast(pc.list_value_length(batch.column(0)), pa.int64())
            ids, mask = (pc.cast(batch.column(i), pa.list_(pa.int64())) for i in (0, 1))
            yield pa.Table.from_arrays([ids, mask, seq_len], schema=SPECULATORS_SCHEMA)
