"""Reading source rows: the bundled samples, local JSONL/Parquet files, or the Hub.

Rows come out as `(row_number, row | SourceRowError)`: a malformed line becomes an error the
prepare stage records with its reason, and reading continues.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Any, Iterator

import orjson

from .builders.partitions import Partition
from .records import SourceRowError

SourceRow = tuple[int, "dict[str, Any] | SourceRowError"]


def iter_jsonl(path: Path) -> Iterator[SourceRow]:
    with open(path, "rb") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                yield n, SourceRowError("malformed_json", f"{path}:{n}: not valid JSON ({e}); fix or delete the line")
                continue
            if not isinstance(row, dict):
                yield n, SourceRowError("wrong_type", f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
                continue
            yield n, row


def iter_parquet(path: Path) -> Iterator[SourceRow]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for a non-Parquet file
        raise SourceRowError("unreadable_file", f"{path}: not a readable Parquet file ({e})") from e
    n = 0
    for batch in pf.iter_batches(batch_size=1024):
        for row in batch.to_pylist():
            n += 1
            yield n, row


def iter_hub(partition: Partition, revision: str | None) -> Iterator[SourceRow]:
    import datasets

    ds = datasets.load_dataset(partition.upstream, partition.upstream_config, split=partition.upstream_split,
                               revision=revision, streaming=True)
    for n, row in enumerate(ds, start=1):
        yield n, row


def iter_source(partition: Partition, source: str | None = None, *, samples: bool = False,
                revision: str | None = None, limit: int | None = None) -> tuple[str, Iterator[SourceRow]]:
    """Pick where a partition's rows come from; return (description, rows)."""
    if samples:
        path, rows = partition.sample_file, iter_jsonl(partition.sample_file)
        desc = f"bundled samples ({path.name})"
    elif source:
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"source file {path} for {partition.config} does not exist")
        rows = iter_parquet(path) if path.suffix == ".parquet" else iter_jsonl(path)
        desc = str(path)
    else:
        rows = iter_hub(partition, revision)
        desc = f"{partition.upstream}" + (f"@{revision}" if revision else "")
    return desc, (islice(rows, limit) if limit is not None else rows)
