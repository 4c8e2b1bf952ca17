"""Reading source rows: the bundled samples, local JSONL/Parquet files, or the Hub.

Rows come out as `(row_number, row | SourceRowError)`: a malformed line (broken JSON, not an
object) becomes an error the prepare stage records with its reason, and reading continues.

A source that cannot be read *at all* raises `SourceFileError` (one line: which config, which
file, what is wrong): a missing file or a directory, a `.parquet` that is not Parquet (or is
cut short), a JSONL file that is binary (NUL bytes, not UTF-8, compressed, Parquet bytes), a
file with no rows at all, a Hub dataset that does not load. `prepare` then skips that config,
prepares the others, and the CLI exits 1 with that line: a whole file of garbage is a wrong
path or a wrong format, not thousands of row rejections.

`max_row_bytes` (filters.max_row_bytes: no prompt within max_seq_len needs more) is enforced
while reading, before parsing: a longer JSONL line is skipped in 1 MiB chunks and a Parquet row's
string bytes are summed with pyarrow compute before it becomes Python objects, so one 50 MB row is
a `too_many_chars` rejection in milliseconds with flat memory (json_text.bounded_lines, which `check` reads
JSONL with too). (A `.json` array file and Hub rows
arrive parsed; the prompt's own `max_chars` check still applies to them.)
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Iterator

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.json_text import UTF8_BOM, JsonTextError, bounded_lines, parse_json
from kimi_eagle_data.sources.partitions import Partition
from kimi_eagle_data.records import SourceRowError

SourceRow = tuple[int, "dict[str, Any] | SourceRowError"]

SNIFF_BYTES = 1 << 16


class SourceFileError(KimiDataError, FileNotFoundError):
    """A whole source is unusable. (A FileNotFoundError so that every CLI command reports it as
    one `error:` line and exits 1.)"""


def _sniff_text(path: Path) -> bytes:
    """The first bytes of a JSONL file, refusing binary content with a clear reason."""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except IsADirectoryError:
        raise SourceFileError(f"{path} is a directory, not a JSONL/Parquet file") from None
    except OSError as e:
        raise SourceFileError(f"{path}: cannot read ({e.strerror or e})") from None
    if head.startswith(b"PAR1"):
        raise SourceFileError(f"{path} holds Parquet bytes; name it *.parquet")
    if head.startswith(b"\x1f\x8b") or head.startswith(b"\x28\xb5\x2f\xfd") or head.startswith(b"BZh"):
        raise SourceFileError(f"{path} is compressed; decompress it to JSONL first")
    if b"\x00" in head:
        raise SourceFileError(f"{path} is binary (NUL bytes), not JSONL text")
    # A bad line in a text file is that line's rejection (malformed_json); a file whose start is
    # mostly undecodable or control bytes is not JSONL at all.
    text = head.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") + sum(1 for ch in text if ch < " " and ch not in "\t\n\r")
    if text and bad > max(8, 0.1 * len(text)):
        raise SourceFileError(f"{path} is not UTF-8 text ({bad} undecodable or control bytes in the first "
                              f"{len(head):,}); not a JSONL file")
    return head


def _too_long(where: str, size: int, cap: int) -> SourceRowError:
    return SourceRowError("too_many_chars", f"{where}: row of {size:,} bytes > {cap:,}, more than any prompt within "
                                            "max_seq_len needs; not parsed (raise max_chars to keep such rows)")


def iter_jsonl(path: Path, max_row_bytes: int | None = None) -> Iterator[SourceRow]:
    path = Path(path)
    head = _sniff_text(path)
    if path.suffix == ".json" and head.removeprefix(UTF8_BOM).lstrip().startswith(b"["):
        yield from _iter_json_array(path)
        return
    with open(path, "rb") as f:
        for n, line, size in bounded_lines(f, max_row_bytes):
            if line is None:
                yield n, _too_long(f"{path}:{n}", size, max_row_bytes)
                continue
            if not line.strip():
                continue
            try:
                row = parse_json(line)
            except JsonTextError as e:
                yield n, SourceRowError("malformed_json", f"{path}:{n}: {e}; fix or delete the line")
                continue
            if not isinstance(row, dict):
                yield n, SourceRowError("wrong_type", f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
                continue
            yield n, row


def _iter_json_array(path: Path) -> Iterator[SourceRow]:
    """A `.json` file holding one array of row objects (ShareGPT dumps often are)."""
    data = path.read_bytes()
    try:
        rows = parse_json(data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data)
    except JsonTextError as e:
        raise SourceFileError(f"{path}: {e}; expected JSON lines or one array of objects") from None
    for n, row in enumerate(rows, start=1):
        if isinstance(row, dict):
            yield n, row
        else:
            yield n, SourceRowError("wrong_type", f"{path}[{n - 1}]: expected a JSON object, got {type(row).__name__}")


def _row_bytes(arr) -> "np.ndarray":
    """Bytes of string/binary data per row of an Arrow array, nested lists and structs included."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pc.fill_null(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        child = _row_bytes(arr.flatten())
        parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
        return np.bincount(parents, weights=child, minlength=len(arr)).astype(np.int64)
    if pa.types.is_struct(t):
        total = np.zeros(len(arr), dtype=np.int64)
        for child in arr.flatten():
            total += _row_bytes(child)
        return total
    return np.zeros(len(arr), dtype=np.int64)   # numbers, bools: a few bytes, never the problem


def iter_parquet(path: Path, max_row_bytes: int | None = None) -> Iterator[SourceRow]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if path.is_dir():
        raise SourceFileError(f"{path} is a directory, not a Parquet file")
    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for a non-Parquet file
        why = "no Parquet magic bytes" if "magic bytes" in str(e) else _one_line(e)[:160]
        raise SourceFileError(f"{path}: not a readable Parquet file ({why})") from None
    n = 0
    try:
        for batch in pf.iter_batches(batch_size=1024):
            if not max_row_bytes:
                for row in batch.to_pylist():
                    n += 1
                    yield n, row
                continue
            import numpy as np

            sizes = sum((_row_bytes(col) for col in batch.columns), start=np.zeros(batch.num_rows, dtype=np.int64))
            ok = sizes <= max_row_bytes
            good = iter(batch.filter(pa.array(ok)).to_pylist() if ok.any() else [])
            for i, fits in enumerate(ok):
                n += 1
                yield n, next(good) if fits else _too_long(f"{path} row {n}", int(sizes[i]), max_row_bytes)
    except (OSError, ValueError) as e:  # ArrowInvalid/ArrowIOError: a file cut short or corrupt
        raise SourceFileError(f"{path}: Parquet data is corrupt after row {n} ({_one_line(e)})") from None


def iter_hub(partition: Partition, revision: str | None) -> Iterator[SourceRow]:
    """Stream the upstream from the Hub (or any path `datasets.load_dataset` takes)."""
    import datasets

    try:
        ds = datasets.load_dataset(partition.upstream, partition.upstream_config, split=partition.upstream_split,
                                   revision=revision, streaming=True)
        for n, row in enumerate(ds, start=1):
            yield n, row
    except SourceFileError:
        raise
    except Exception as e:  # network, auth, missing config/split, bad revision: one line for the config
        where = partition.upstream + (f"@{revision}" if revision else "")
        raise SourceFileError(f"cannot load {where} (config {partition.upstream_config}, split "
                              f"{partition.upstream_split}) with datasets: {_one_line(e)}") from None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return (text[:300] + "…") if len(text) > 300 else text or type(e).__name__


def iter_file(path: Path, max_row_bytes: int | None = None) -> Iterator[SourceRow]:
    path = Path(path)
    if not path.exists():
        raise SourceFileError(f"source file {path} does not exist")
    return iter_parquet(path, max_row_bytes) if path.suffix == ".parquet" else iter_jsonl(path, max_row_bytes)


def _nonempty(rows: Iterator[SourceRow], desc: str) -> Iterator[SourceRow]:
    seen = False
    for item in rows:
        seen = True
        yield item
    if not seen:
        raise SourceFileError(f"{desc} has no rows")


def local_source(partition: Partition, source: str | None = None, *, samples: bool = False) -> Path | None:
    """The local file a partition's rows come from (`source`: the CLI's --source; else the partition's own
    `source` unless the bundled samples stand in for a built-in partition), or None: bundled samples or the Hub."""
    if source is not None:
        return Path(source)
    if partition.source and not (samples and partition.builtin):
        return Path(partition.source)
    return None


def record_columns(rows: Iterator[SourceRow], seen: dict[str, None]) -> Iterator[SourceRow]:
    """The rows, unchanged; every column name they have lands in `seen` (in the order first met)."""
    for item in rows:
        row = item[1]
        if isinstance(row, dict):
            for key in row:
                if key not in seen:
                    seen[key] = None
        yield item


def iter_source(partition: Partition, source: str | None = None, *, samples: bool = False,
                revision: str | None = None, limit: int | None = None,
                max_row_bytes: int | None = None) -> tuple[str, Iterator[SourceRow]]:
    """Pick where a partition's rows come from; return (description, rows).

    Precedence: `source` (the CLI's --source CONFIG=PATH) > the bundled samples (`samples`, for a
    built-in partition) > the partition's own `source` file (config file) > the Hub
    (`upstream`, `upstream_config`, `upstream_split`, at `revision` or the partition's revision).
    `limit` caps the rows read (the partition's `scan_limit` too; the smaller wins); a local row
    longer than `max_row_bytes` comes out as a `too_many_chars` error without being parsed."""
    local = local_source(partition, source, samples=samples)
    if local is not None:
        if not local.exists():
            raise SourceFileError(f"source file {local} for {partition.config} does not exist")
        rows, desc = iter_file(local, max_row_bytes), str(local)
    elif samples and partition.builtin:
        path = partition.sample_file
        rows, desc = iter_jsonl(path, max_row_bytes), f"bundled samples ({path.name})"
    else:
        rev = revision or partition.revision
        rows = iter_hub(partition, rev)
        desc = partition.upstream + (f"@{rev}" if rev else "")
    caps = [c for c in (limit, partition.scan_limit) if c is not None]
    rows = _nonempty(rows, desc)
    return desc, (islice(rows, min(caps)) if caps else rows)
