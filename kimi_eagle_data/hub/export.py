"""`kimi-data export`: an emitted dataset's token rows in another trainer's format.

`--format specforge`: JSONL rows `{"id", "input_ids", "loss_mask"}` (SpecForge's pre-tokenized
`data.prompts_path` format), and with `--draft-vocab-size N` SpecForge's `d2t`/`t2d` vocabulary mapping beside
it; `--format speculators`: a torch-format Arrow dataset (`save_to_disk`) with `input_ids`, `loss_mask`,
`seq_len`, and the `token_freq.pt` speculators' trainer reads from the same directory. Both stream record
batches from the Parquet shards (flat memory) and appear atomically (temp + rename); `shuffle` mixes the
configs' rows in one seeded order.
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

from kimi_eagle_data.diskfull import writing
from kimi_eagle_data.emit.token_freq import TokenCounts, token_freq_path
from kimi_eagle_data.emit.dataset import LocalDataset, load_local
from kimi_eagle_data.emit.stale import marked_stale
from kimi_eagle_data.hub.publish import PublishError
from kimi_eagle_data.store.workdir import (atomic_path, atomic_write_bytes, dataset_config_dir, dataset_configs,
                                           dataset_shards)

EXPORT_FORMATS = ("specforge", "speculators")
# SpecForge's data.max_length default (specforge/config/schema.py `max_length: int = Field(default=2048, gt=0)`);
# specforge/data/prompt_builder.py `_prompt_from_record` cuts pre-tokenized rows to it (`input_ids[:max_length]`)
# without a word (checked at SPECFORGE_CHECKED).
SPECFORGE_MAX_LENGTH = 2048


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
    longest: tuple[int, str, str] = (0, "", "")    # (tokens, config, id) of the longest row
    over_specforge_max: int = 0                   # rows longer than SPECFORGE_MAX_LENGTH
    token_counts: TokenCounts = field(default_factory=TokenCounts)
    written: list[Path] = field(default_factory=list)    # files beside the rows (token_freq.pt, vocab_mapping.pt)
    stale: str | None = None       # emit/stale.marked_stale: the dataset is an earlier selection's (a pilot's)

    def count(self, config: str, ids: list[str], offsets: np.ndarray, values: np.ndarray, mask: np.ndarray) -> None:
        """A batch of exported rows: its tokens, loss tokens per id, and its longest row."""
        lens = np.diff(offsets)
        self.tokens += int(offsets[-1] - offsets[0])
        self.loss_tokens += int(mask.sum(dtype="int64"))
        self.token_counts.add_ids(values[mask == 1])
        self.over_specforge_max += int((lens > SPECFORGE_MAX_LENGTH).sum())
        if len(lens) and int(lens.max()) > self.longest[0]:
            i = int(lens.argmax())
            self.longest = (int(lens[i]), config, ids[i])


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
                   configs: list[str] | None = None, draft_vocab_size: int | None = None,
                   shuffle_seed: int | None = None) -> ExportReport:
    """`draft_vocab_size` (specforge only): also write SpecForge's vocab_mapping.pt beside the rows;
    `shuffle_seed`: rows in one seeded random order across configs (None: config by config, in id order)."""
    if fmt not in EXPORT_FORMATS:
        raise PublishError(f"--format {fmt!r}: expected one of {', '.join(EXPORT_FORMATS)}")
    ds = load_local(path, verify=False)
    chosen = _pick_configs(ds, configs)
    target_vocab = None
    if draft_vocab_size is not None:
        target_vocab = _target_vocab_size(ds, chosen)
        if draft_vocab_size > target_vocab:
            raise PublishError(f"--draft-vocab-size {draft_vocab_size:,} is larger than the model's vocabulary "
                               f"({target_vocab:,} ids); pass at most {target_vocab:,}")
    report = ExportReport(out=Path(out), format=fmt, split=split, stale=marked_stale(ds.root, ds.manifest))
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
        first_rows = FirstLossRows() if draft_vocab_size is not None else None
        _export_specforge(plan, report, shuffle_seed, first_rows)
        if draft_vocab_size is not None:
            path = report.out.parent / SPECFORGE_VOCAB_MAPPING
            write_specforge_vocab_mapping(path, report.token_counts.counts, first_rows.lines, draft_vocab_size,
                                          target_vocab)
            report.written.append(path)
    else:
        _export_speculators(plan, report, shuffle_seed)
    return report


def _target_vocab_size(ds: LocalDataset, configs: list[str]) -> int:
    """The model's vocabulary size, as emit recorded it: the length of the token_freq files."""
    sizes = set()
    for c in configs:
        path = token_freq_path(ds.root, c)
        if not path.is_file():
            raise PublishError(f"{path} is missing (emitted by an older kimi-data); re-run `kimi-data emit` "
                               f"to count the draft vocabulary")
        sizes.add(pq.ParquetFile(path).metadata.num_rows)
    if len(sizes) != 1:
        raise PublishError(f"the token_freq files of {', '.join(configs)} in {ds.root} disagree on the vocabulary "
                           f"size ({sorted(sizes)}); re-run `kimi-data emit`")
    return sizes.pop()


def shuffled_order(rows: int, seed: int) -> np.ndarray:
    """The export's row order under --shuffle --seed (the same for both formats)."""
    return np.random.default_rng(seed).permutation(rows)


def _export_specforge(plan: list[tuple[str, list[Path]]], report: ExportReport, shuffle_seed: int | None,
                      first_rows: FirstLossRows | None = None) -> None:
    """Rows as JSONL lines; shuffled, they are written in order to a temp file first (keeping each line's
    offset) and copied from it in the seeded order: memory holds offsets, not rows. `first_rows`, when given,
    records for each id the first line (in the written order) that has it as a loss token."""
    opt = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE
    line_of_row = None
    if first_rows is not None and shuffle_seed is not None:     # row r (read order) is written as line_of_row[r]
        total = sum(pq.ParquetFile(p).metadata.num_rows for _, shards in plan for p in shards)
        line_of_row = np.argsort(shuffled_order(total, shuffle_seed))
    with atomic_path(report.out) as tmp:
        staged = tmp.with_name(tmp.name + ".rows") if shuffle_seed is not None else tmp
        starts = [0]
        try:
            with open(staged, "wb", buffering=1 << 22) as f:
                for config, shards in plan:
                    n = 0
                    for ids, offs, values, mask in iter_token_batches(shards):
                        for i, rid in enumerate(ids):
                            a, b = offs[i], offs[i + 1]
                            line = orjson.dumps({"id": rid, "input_ids": values[a:b], "loss_mask": mask[a:b]},
                                                option=opt)
                            f.write(line)
                            starts.append(starts[-1] + len(line))
                        if first_rows is not None:
                            rows = np.arange(report.rows + n, report.rows + n + len(ids))
                            first_rows.add(offs, values, mask, rows if line_of_row is None else line_of_row[rows])
                        n += len(ids)
                        report.count(config, ids, offs, values, mask)
                    report.configs[config] = n
                    report.rows += n
            if shuffle_seed is not None:
                _copy_lines_in_order(staged, tmp, np.asarray(starts, dtype=np.int64),
                                     shuffled_order(report.rows, shuffle_seed))
        finally:
            if staged != tmp:
                staged.unlink(missing_ok=True)


def _copy_lines_in_order(src: Path, dst: Path, starts: np.ndarray, order: np.ndarray) -> None:
    import mmap

    with open(src, "rb") as f, open(dst, "wb", buffering=1 << 22) as out:
        if starts[-1] == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            for i in order:
                out.write(m[starts[i]:starts[i + 1]])


# SpecForge's vocabulary mapping (sgl-project/SpecForge, checked at commit a6b6b023, August 2026, and in its
# 0.2.0 release): specforge/data/preprocessing.py `generate_vocab_mapping_file` saves
# `torch.save({"d2t": d2t, "t2d": t2d}, f"{cache_key}.pt")` (cache_key "vocab_mapping" by default) from
# `process_token_dict_to_mappings`: the draft_vocab_size most frequent loss-token ids, sorted; d2t =
# `torch.tensor([used[i] - i ...])` (int64, shape [draft_vocab_size]: target id = draft id + d2t[draft id]), t2d =
# `torch.tensor([i in used ...])` (bool, shape [target_vocab_size]). specforge/modeling/draft/base.py
# `load_vocab_mapping` reads it with `torch.load(path)` into the draft model's `t2d`/`d2t` buffers (config key
# model.vocab_mapping_path). Its order among equal counts is its Counter's: `token_dict.update(...)` row by row in
# the dataset's order, each row's ids ascending (`unique`), and `most_common` is a stable sort by count, so a tie
# goes to the id whose first loss-token row comes first, then to the lower id. Fewer seen ids than
# draft_vocab_size are padded from `set(range(draft_vocab_size)) - seen`, in that Python set's iteration order.
SPECFORGE_VOCAB_MAPPING = "vocab_mapping.pt"
SPECFORGE_CHECKED = "sgl-project/SpecForge@a6b6b0230009d15ec2a97a57384e6f53f0f96946"


class FirstLossRows:
    """For each token id, the first line of the export (in its written order) that has it as a loss token:
    SpecForge's tie-break among equal counts."""

    NEVER = np.iinfo(np.int64).max

    def __init__(self):
        self.lines = np.full(0, self.NEVER, dtype=np.int64)

    def add(self, offsets: np.ndarray, values: np.ndarray, mask: np.ndarray, lines: np.ndarray) -> None:
        """A batch of rows (offsets/values/mask as iter_token_batches yields them) written as `lines`."""
        loss = mask == 1
        ids = values[loss].astype(np.int64, copy=False)
        if not len(ids):
            return
        top = int(ids.max()) + 1
        if top > len(self.lines):
            self.lines = np.concatenate([self.lines, np.full(top - len(self.lines), self.NEVER, dtype=np.int64)])
        np.minimum.at(self.lines, ids, np.repeat(lines, np.diff(offsets))[loss])


def specforge_vocab_mapping(counts: np.ndarray, first_lines: np.ndarray, draft_vocab_size: int,
                            target_vocab_size: int):
    """(d2t, t2d) as SpecForge builds them from the export's rows (`first_lines`: FirstLossRows.lines)."""
    import torch

    seen = np.flatnonzero(counts[:target_vocab_size])     # every seen id has a first line (same batches)
    used = seen[np.lexsort((seen, first_lines[seen], -counts[seen]))][:draft_vocab_size].tolist()
    if len(used) < draft_vocab_size:
        for tid in set(range(draft_vocab_size)) - set(used):     # the set's own order, as SpecForge iterates it
            used.append(tid)
            if len(used) >= draft_vocab_size:
                break
    used = np.sort(np.asarray(used, dtype=np.int64))
    d2t = torch.from_numpy(used - np.arange(draft_vocab_size, dtype=np.int64))
    t2d = torch.zeros(target_vocab_size, dtype=torch.bool)
    t2d[torch.from_numpy(used)] = True
    return d2t, t2d


def torch_bytes(obj: Any) -> bytes:
    """`torch.save(obj)` into memory. The file is then written by Python's own write (atomic_write_bytes), whose
    failure is an OSError a full disk is recognised by: torch's file writer turns it into a RuntimeError
    ("unexpected pos …") chained to another. The objects saved here are small (one bit per vocabulary id)."""
    import io

    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def write_specforge_vocab_mapping(path: Path, counts: np.ndarray, first_lines: np.ndarray, draft_vocab_size: int,
                                  target_vocab_size: int) -> None:
    d2t, t2d = specforge_vocab_mapping(counts, first_lines, draft_vocab_size, target_vocab_size)
    atomic_write_bytes(path, torch_bytes({"d2t": d2t, "t2d": t2d}))


# speculators' token frequencies (same commit as below): src/speculators/train/vocab_mapping.py
# `save_token_frequency_distribution` counts `input_ids[loss_mask.to(torch.bool)]` over the prepared dataset
# and `torch.save`s a plain dict {token id (int): count (int)} of the ids seen; scripts/train.py
# `parse_vocab_mappings` loads `<data-path>/token_freq.pt` with `torch.load(path, weights_only=True)` and,
# given --draft-vocab-size, builds d2t/t2d from it (`build_vocab_mappings_from_distribution`). Without the
# file it falls back to the full verifier vocabulary with only a log warning.
SPECULATORS_TOKEN_FREQ = "token_freq.pt"


def _token_freq_dict(counts: np.ndarray) -> dict[int, int]:
    seen = np.flatnonzero(counts)
    return dict(zip(seen.tolist(), counts[seen].tolist()))


# What speculators' own prepare_data writes (vllm-project/speculators, checked at commit c05b95b3:
# src/speculators/data_generation/preprocessing.py `_append_row` + `build_speculator_training_dataset`):
# input_ids and loss_mask as torch.long tensors (Arrow int64 lists), seq_len a Python int (int64), and
# `set_format("torch")` before scripts/prepare_data.py's `save_to_disk`. Its trainer (train/data.py,
# ArrowDataset) compares rows with `torch.equal`, which a list-formatted dataset fails.
SPECULATORS_SCHEMA = pa.schema([("input_ids", pa.list_(pa.int64())), ("loss_mask", pa.list_(pa.int64())),
                                ("seq_len", pa.int64())])


def _export_speculators(plan: list[tuple[str, list[Path]]], report: ExportReport, shuffle_seed: int | None) -> None:
    """An Arrow dataset directory (`Dataset.save_to_disk` layout) with token_freq.pt: streamed into one Arrow
    file with `datasets`' ArrowWriter, then `save_to_disk` from the memory-mapped file (in the seeded order when
    shuffled) into a temp dir renamed into place. A full disk anywhere on the way is one line naming the
    directory being written (or its token_freq.pt), whichever library's writer met it."""
    out = report.out
    with writing(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with writing(out):
            staged = _stage_speculators(plan, report, shuffle_seed, work)
        freq = out / SPECULATORS_TOKEN_FREQ
        with writing(freq):
            (staged / SPECULATORS_TOKEN_FREQ).write_bytes(torch_bytes(_token_freq_dict(report.token_counts.counts)))
        report.written.append(freq)
        if out.exists():
            os.replace(out, work / "previous")
        os.replace(staged, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _stage_speculators(plan: list[tuple[str, list[Path]]], report: ExportReport, shuffle_seed: int | None,
                       work: Path) -> Path:
    """The rows as a save_to_disk directory under `work` (returned)."""
    from datasets import Dataset, Features
    from datasets.arrow_writer import ArrowWriter

    arrow = work / "rows.arrow"
    with ArrowWriter(features=Features.from_arrow_schema(SPECULATORS_SCHEMA), path=str(arrow)) as writer:
        for config, shards in plan:
            n = 0
            for ids, offs, values, mask in iter_token_batches(shards):
                batch = _speculators_table(offs, values, mask)
                writer.write_table(batch)
                n += batch.num_rows
                report.count(config, ids, offs, values, mask)
            report.configs[config] = n
            report.rows += n
        writer.finalize()
    staged = work / "dataset"
    ds = Dataset.from_file(str(arrow))
    if shuffle_seed is not None:
        ds = ds.select(shuffled_order(len(ds), shuffle_seed))
    ds.set_format("torch")   # recorded in state.json: load_from_disk yields tensors, as speculators expects
    ds.save_to_disk(str(staged))
    return staged


def _speculators_table(offsets: np.ndarray, values: np.ndarray, mask: np.ndarray) -> pa.Table:
    off = pa.array(offsets - offsets[0], pa.int32())
    ids = pa.ListArray.from_arrays(off, pa.array(values.astype(np.int64)))
    loss = pa.ListArray.from_arrays(off, pa.array(mask.astype(np.int64)))
    return pa.Table.from_arrays([ids, loss, pa.array(np.diff(offsets).astype(np.int64))], schema=SPECULATORS_SCHEMA)
