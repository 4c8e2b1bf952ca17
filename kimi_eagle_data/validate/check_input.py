"""The inputs `kimi-data check` reads, streamed one row at a time so memory stays flat whatever their size:

- JSONL, line by line (a pipe works too: nothing is read ahead of the row being checked);
- Parquet, one record batch at a time, its pages read through a small buffer (a row group's column
  chunk is never loaded whole);
- Arrow IPC: a `.arrow` file as `datasets` writes it (the IPC stream format) or an IPC file, one record
  batch at a time;
- a `Dataset.save_to_disk` directory (speculators' `prepare_data` output): its Arrow files in the order
  state.json lists them;
- a shard of a dataset `kimi-data emit` wrote, with each row's recorded `issues` (`emitted_rows`; the shards
  are those its manifest lists, emit/dataset.py's LocalDataset.shards).

Each yields (row dict, an `Unreadable`, or None for a blank JSONL line; progress advance). A columnar
file's schema is checked before its first row: a column check reads with another type, or no column of
any form check reads, is one error naming the columns found and the types expected.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.json_text import JsonTextError, bounded_lines, parse_json

BATCH_ROWS = 1024
PARQUET_READ_BUFFER = 1 << 20      # bytes: Parquet pages are read through this buffer, not a column chunk at once
ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
ARROW_FILE_MAGIC = b"ARROW1"

RowItem = tuple[Any, int]


class CheckInputError(KimiDataError, ValueError):
    """The input as a whole cannot be read (one line: what, where, what to do)."""


class Unreadable(ValueError):
    """One row cannot be read (the run goes on; the row is counted under `code`)."""

    code = "unreadable_row"


class RowTooLarge(Unreadable):
    """A row longer than any row within max_seq_len needs: a JSONL line skipped unparsed (memory stays flat), a
    Parquet/Arrow row never turned into Python objects nor tokenized (its Arrow bytes are read once, as the file's
    reader reads its page)."""

    code = "row_too_large"


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _int_list(t: pa.DataType) -> bool:
    return _is_list(t) and pa.types.is_integer(t.value_type)


def _mask_list(t: pa.DataType) -> bool:      # some pipelines store the mask as booleans
    return _int_list(t) or (_is_list(t) and pa.types.is_boolean(t.value_type))


# Every column check reads: the type it must have, and how to tell.
COLUMN_TYPES: dict[str, tuple[str, Callable[[pa.DataType], bool]]] = {
    "input_ids": ("list<int>", _int_list),
    "loss_mask": ("list<int> or list<bool>", _mask_list),
    "prompt_len": ("int", pa.types.is_integer),
    "messages": ("list<struct<role, content, …>>", _is_list),
    "completion": ("string", _is_string),
    "conversations": ("list<struct<role, content, …>>", _is_list),
    "tools": ("string (JSON) or list", lambda t: _is_string(t) or _is_list(t)),
    "finish_reason": ("string", _is_string),
    "finish_detail": ("string (JSON) or struct", lambda t: _is_string(t) or pa.types.is_struct(t)),
    "id": ("any scalar", lambda t: not (_is_list(t) or pa.types.is_struct(t) or pa.types.is_map(t))),
}
# The row forms, as the columns that make each (the first present wins, as in `Checker`), and the
# optional columns each reads.
FORMS = (
    (("input_ids",), ("loss_mask", "prompt_len", "tools", "finish_reason", "finish_detail", "id")),
    (("messages", "completion"), ("tools", "finish_reason", "finish_detail", "id")),
    (("conversations",), ("tools", "id")),
)
FORMS_EXPECTED = ("input_ids (list<int>) + loss_mask (list<int>) or prompt_len (int); messages + completion "
                  "(string); or SpecForge's conversations (list of {role, content})")
_LIST_COLUMNS = ("input_ids", "loss_mask")     # read as numpy slices, not Python lists
# Read beside a form's columns when present with this type, left out otherwise: a token-id row's messages (ours
# have them) are looked at for special-token text (special_token_in_text).
EXTRA_COLUMNS = {"input_ids": ("messages",)}


def emitted_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of one shard of an emitted dataset: the columns check reads, and `issues` (the recorded verdict)."""
    rows, _ = _parquet(path, also=("issues",))
    for row, _ in rows:
        yield row


def open_input(path: Path, max_row_bytes: int | None = None) -> tuple[Iterator[RowItem], int]:
    """(rows, total): total is the progress bar's, in the unit the rows advance it by (bytes, or rows for
    Parquet). A row over `max_row_bytes` (sources/filters.max_row_bytes: what a row within max_seq_len can need at
    most; a columnar row's size is the bytes of the columns check reads) comes out as RowTooLarge, unparsed. Raises
    CheckInputError when the input cannot be opened or its schema has no form check reads."""
    if path.is_dir():
        files = dataset_dir_files(path)
        return _arrow_files_rows(files, max_row_bytes), sum(f.stat().st_size for f in files)
    try:
        f = open(path, "rb")        # noqa: SIM115 (closed by the generator that reads it)
        magic = f.peek(8)[:8]
    except OSError as e:
        raise CheckInputError(f"cannot read {path}: {e.strerror}") from None
    if magic.startswith(b"PAR1"):
        f.close()
        return _parquet(path, max_row_bytes=max_row_bytes)
    if magic.startswith(ARROW_STREAM_MAGIC) or magic.startswith(ARROW_FILE_MAGIC):
        f.close()
        return _arrow_files_rows([path], max_row_bytes), path.stat().st_size
    return _jsonl_rows(f, max_row_bytes), path.stat().st_size


def dataset_dir_files(path: Path) -> list[Path]:
    """The Arrow files of a `Dataset.save_to_disk` directory, in its state.json's order."""
    if (path / "dataset_dict.json").is_file():
        splits = sorted(p.name for p in path.iterdir() if (p / "state.json").is_file())
        raise CheckInputError(f"{path} is a DatasetDict (splits: {', '.join(splits) or 'none'}); check one split, "
                              f"e.g. kimi-data check {path / (splits[0] if splits else 'train')}")
    state = path / "state.json"
    if not state.is_file():
        raise CheckInputError(f"{path} is a directory without state.json nor manifest.json: neither a "
                              "`Dataset.save_to_disk` dataset nor one `kimi-data emit` wrote; give a JSONL, Parquet "
                              "or Arrow file, a save_to_disk directory, or a kimi-data dataset (WORKDIR/dataset)")
    try:
        names = [d["filename"] for d in json.loads(state.read_text())["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckInputError(f"{state} cannot be read as a save_to_disk state ({type(e).__name__}: {e}); "
                              "save the dataset again with save_to_disk") from None
    files = [path / n for n in names]
    missing = [f.name for f in files if not f.is_file()]
    if missing or not files:
        raise CheckInputError(f"{path}: state.json lists {', '.join(missing) or 'no data file'}, "
                              "which the directory lacks; save the dataset again with save_to_disk")
    return files


def columns_to_read(schema: pa.Schema, where: Path) -> list[str]:
    """The columns of the first row form the schema has, each checked against its expected type."""
    found = {f.name: f.type for f in schema}
    for required, optional in FORMS:
        if all(c in found for c in required):
            names = [c for c in (*required, *optional) if c in found]
            wrong = [f"{c} is {found[c]} (expected {COLUMN_TYPES[c][0]})" for c in names
                     if not COLUMN_TYPES[c][1](found[c])]
            if wrong:
                raise CheckInputError(f"{where}: column " + "; column ".join(wrong) + "; convert those columns "
                                      "or drop them")
            extra = EXTRA_COLUMNS.get(required[0], ())
            return names + [c for c in extra if c in found and COLUMN_TYPES[c][1](found[c])]
    shown = ", ".join(f"{f.name} ({f.type})" for f in list(schema)[:12]) or "none"
    more = f" and {len(schema) - 12} more" if len(schema) > 12 else ""
    raise CheckInputError(f"{where} has none of the columns check reads (columns: {shown}{more}); expected "
                          f"{FORMS_EXPECTED}")


def batch_rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    """The rows of a record batch as dicts; token lists as numpy slices of one buffer (no per-token objects)."""
    cols: dict[str, Any] = {}
    for name in batch.schema.names:
        arr = batch.column(name)
        if name in _LIST_COLUMNS and arr.null_count == 0 and arr.values.null_count == 0:
            cols[name] = (arr.offsets.to_numpy(), arr.values.to_numpy(zero_copy_only=False))
        else:
            cols[name] = arr.to_pylist()
    for i in range(batch.num_rows):
        row = {}
        for name, col in cols.items():
            if isinstance(col, tuple):
                offsets, values = col
                row[name] = values[offsets[i]:offsets[i + 1]]
            else:
                row[name] = col[i]
        yield row


def value_bytes(arr: pa.Array) -> np.ndarray:
    """Each value's bytes in `arr` (strings and binaries by length, fixed-width values by width, lists and structs
    summed over what they hold), computed on Arrow's buffers: no value becomes a Python object."""
    t, n = arr.type, len(arr)
    if _is_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pc.binary_length(arr).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if _is_list(t):
        lengths = pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        if pa.types.is_primitive(t.value_type) and not pa.types.is_boolean(t.value_type):
            return lengths * (t.value_type.bit_width // 8)
        parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
        return np.bincount(parents, weights=value_bytes(arr.flatten()), minlength=n).astype(np.int64)
    if pa.types.is_struct(t):
        total = np.zeros(n, dtype=np.int64)
        for child in arr.flatten():
            total += value_bytes(child)
        return total
    if pa.types.is_primitive(t) and not pa.types.is_boolean(t):
        return np.full(n, t.bit_width // 8, dtype=np.int64)
    return np.zeros(n, dtype=np.int64)


def capped_rows(batch: pa.RecordBatch, max_row_bytes: int | None) -> Iterator[dict[str, Any] | RowTooLarge]:
    """The rows of a batch (batch_rows), a row over `max_row_bytes` as RowTooLarge, never converted."""
    if max_row_bytes is None:
        yield from batch_rows(batch)
        return
    sizes = sum((value_bytes(c) for c in batch.columns), np.zeros(batch.num_rows, dtype=np.int64))
    start = 0
    for i in np.flatnonzero(sizes > max_row_bytes).tolist() + [batch.num_rows]:
        if i > start:
            yield from batch_rows(batch.slice(start, i - start))
        if i < batch.num_rows:
            yield RowTooLarge(f"row of {int(sizes[i]):,} bytes > {max_row_bytes:,} in the columns check reads, more "
                              "than any row within max_seq_len needs; not read (raise --max-seq-len to read it)")
        start = i + 1


# -- the formats --------------------------------------------------------------------------------

def _jsonl_rows(f, max_row_bytes: int | None) -> Iterator[RowItem]:
    with f:
        for _n, line, size in bounded_lines(f, max_row_bytes):
            if line is None:
                yield RowTooLarge(f"row of {size:,} bytes > {max_row_bytes:,}, more than any row within "
                                  "max_seq_len needs; not parsed (raise --max-seq-len to read it)"), size
            elif not line.strip():
                yield None, size            # blank lines are not rows
            else:
                try:
                    yield parse_json(line), size
                except JsonTextError as e:
                    yield Unreadable(str(e)), size


def _parquet(path: Path, also: tuple[str, ...] = (), max_row_bytes: int | None = None
             ) -> tuple[Iterator[RowItem], int]:
    """The rows of a Parquet file: the columns check reads, and the columns `also` names (each must be there); a row
    over `max_row_bytes` as RowTooLarge."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path, buffer_size=PARQUET_READ_BUFFER, pre_buffer=False)
    except Exception as e:  # pyarrow raises ArrowInvalid, OSError, …
        raise CheckInputError(f"{path} is not a readable Parquet file: {' '.join(str(e).split())}") from None
    missing = [c for c in also if c not in pf.schema_arrow.names]
    if missing:
        raise CheckInputError(f"{path} has no {', '.join(missing)} column; re-run `kimi-data emit`")
    columns = columns_to_read(pf.schema_arrow, path) + list(also)

    def rows() -> Iterator[RowItem]:
        try:
            for group in range(pf.num_row_groups):    # one at a time: iter_batches fills a batch across groups
                for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=columns,
                                             use_threads=False):
                    for row in capped_rows(batch, max_row_bytes):
                        yield row, 1
        except (OSError, pa.ArrowInvalid) as e:   # a file cut short or corrupt past its footer
            raise CheckInputError(f"{path}: Parquet read failed: {' '.join(str(e).split())}") from None

    return rows(), pf.metadata.num_rows


def _arrow_files_rows(files: list[Path], max_row_bytes: int | None = None) -> Iterator[RowItem]:
    for path in files:
        yield from _arrow_rows(path, max_row_bytes)


def _arrow_rows(path: Path, max_row_bytes: int | None = None) -> Iterator[RowItem]:
    """One Arrow IPC file (stream or file format), record batch by record batch; the progress advance is
    the bytes read, given with each batch's last row."""
    try:
        source = pa.OSFile(str(path))
        if source.read(len(ARROW_FILE_MAGIC)) == ARROW_FILE_MAGIC:
            source.seek(0)
            reader = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            source.seek(0)
            reader = pa.ipc.open_stream(source)
            batches = iter(reader)
        schema = reader.schema
    except (OSError, pa.ArrowInvalid) as e:
        raise CheckInputError(f"{path} is not a readable Arrow IPC file: {' '.join(str(e).split())}") from None
    columns = columns_to_read(schema, path)
    done = 0
    try:
        with source:
            for batch in batches:
                batch = batch.select(columns)
                position = source.tell()
                for k, row in enumerate(capped_rows(batch, max_row_bytes)):
                    yield row, (position - done if k == batch.num_rows - 1 else 0)
                done = position
    except (OSError, pa.ArrowInvalid) as e:   # cut short or corrupt after its schema
        raise CheckInputError(f"{path}: Arrow read failed: {' '.join(str(e).split())}") from None
