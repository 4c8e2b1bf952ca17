"""What `kimi-data plan` measures in a pilot workdir: its rows summed per finished conversation, the bytes the
emitted Parquet costs per token, the throughput its generation reached, and the hardware it ran on (reports/plan.py
projects the full run from these)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kimi_eagle_data.conversation.shape import (TURN_COLUMNS, conversation_shape, has_conversations,
                                                lengths_by_turn, turn_arrays)
from kimi_eagle_data.reports.stats import read_checkpoint_info, read_columns
from kimi_eagle_data.store.workdir import Workdir, dataset_shards, read_json
from kimi_eagle_data.emit.writer import PARQUET_OPTIONS

NAIVE_CHARS_PER_TOKEN = 3.5
PLAN_COLUMNS = ["id", "split", "prompt_len", "completion_len", "prompt_chars", "completion_chars"]


@dataclass
class Conversations:
    """A config's pilot rows summed per finished conversation (one value per conversation in each array)."""

    rows: np.ndarray             # turns generated (train + rejected rows)
    train: np.ndarray            # train rows
    tokens: np.ndarray           # prompt + completion tokens of every turn
    prompt: np.ndarray
    completion: np.ndarray
    train_tokens: np.ndarray
    prompt_chars: np.ndarray
    completion_chars: np.ndarray
    incomplete: int              # conversations left out: not ended yet (or a turn failed)
    all_tokens: int              # tokens of every row, finished conversations or not (what emit wrote)
    shape: dict[str, Any] | None  # turns per conversation, end reasons, lengths per turn; None: single-turn

    @property
    def naive(self) -> np.ndarray:
        return (self.prompt_chars + self.completion_chars) / NAIVE_CHARS_PER_TOKEN


def conversation_configs(wd: Workdir) -> set[str]:
    """The configs whose conversations go on (run.json `conversation_plan`: policy own_history)."""
    path = wd.settings_path
    plan = read_json(path).get("conversation_plan") if path.is_file() else None
    return set(plan or ())


def read_plan_columns(wd: Workdir, config: str) -> pa.Table:
    """PLAN_COLUMNS + the turn columns of validated/<CFG>.parquet; a file written before turns: each row a
    conversation of its own."""
    path = wd.validated(config)
    if set(TURN_COLUMNS) <= set(pq.read_schema(path).names):
        return read_columns(path, PLAN_COLUMNS + TURN_COLUMNS)
    t = read_columns(path, PLAN_COLUMNS)
    return (t.append_column("conversation_id", t["id"]).append_column("turn", pa.array([1] * t.num_rows, pa.int32()))
            .append_column("end_reason", pa.nulls(t.num_rows, pa.string())))


def per_conversation(t: pa.Table, continues: bool) -> Conversations:
    """Sum a config's rows per conversation. `continues`: an own_history config, whose conversation is finished
    only once a row names its end reason (a single-turn prompt is finished with its one row)."""
    conv, turn, end = turn_arrays(t)
    keys, inverse = np.unique(conv.astype(str), return_inverse=True)
    talk = continues or has_conversations(turn, end)
    finished = np.ones(keys.size, dtype=bool)
    if talk:
        finished[:] = False
        finished[inverse[np.array([r is not None for r in end], dtype=bool)]] = True

    def col(name: str) -> np.ndarray:
        return t[name].to_numpy().astype(np.float64)

    def summed(values: np.ndarray) -> np.ndarray:
        return np.bincount(inverse, weights=values, minlength=keys.size)[finished]

    prompt, completion = col("prompt_len"), col("completion_len")
    train = pc.equal(t["split"], "train").to_numpy(zero_copy_only=False).astype(bool)
    shape = None
    if talk:
        shape = {**conversation_shape(conv, turn, end), "by_turn": lengths_by_turn(turn, prompt, completion)}
    return Conversations(
        rows=summed(np.ones(t.num_rows)), train=summed(train.astype(np.float64)),
        tokens=summed(prompt + completion), prompt=summed(prompt), completion=summed(completion),
        train_tokens=summed(np.where(train, prompt + completion, 0.0)),
        prompt_chars=summed(col("prompt_chars")), completion_chars=summed(col("completion_chars")),
        incomplete=int((~finished).sum()), all_tokens=int((prompt + completion).sum()), shape=shape)


@dataclass
class DiskCost:
    """What the emitted Parquet costs: `per_token` bytes for each token's row share (ids, mask, messages), plus
    `fixed` bytes the pilot's row groups take whatever they hold (page and dictionary headers of every column
    chunk: a few kB each, which dominate a small pilot's files and would inflate a per-token ratio)."""

    per_token: float
    fixed: float

    def bytes(self, tokens: float | None) -> float | None:
        return None if tokens is None else tokens * self.per_token + self.fixed


def chunk_bytes(md: pq.FileMetaData) -> int:
    """Compressed column-chunk bytes of a Parquet file (its footer left out)."""
    return sum(md.row_group(i).column(j).total_compressed_size
               for i in range(md.num_row_groups) for j in range(md.num_columns))


# Rows of a shard written again to measure the slope: a pilot's shards whole, a finished run's (plan on the run
# itself) their first row groups only: writing every shard again 2.5 times took 20 of plan's 27 s at 393M tokens.
MEASURED_ROWS = 1024


def _measured_rows(pf: pq.ParquetFile) -> pa.Table:
    """The shard's first row groups holding MEASURED_ROWS rows (all of a smaller shard)."""
    groups, rows = [], 0
    for i in range(pf.metadata.num_row_groups):
        if rows >= MEASURED_ROWS:
            break
        groups.append(i)
        rows += pf.metadata.row_group(i).num_rows
    return pf.read_row_groups(groups).slice(0, MEASURED_ROWS)


def _shard_tokens(path: Path) -> float:
    """Tokens of a whole shard from its length columns (input_ids = prompt + completion), not its token lists."""
    t = pq.read_table(path, columns=["prompt_len", "completion_len"])
    return float(pc.sum(t["prompt_len"]).as_py() or 0) + float(pc.sum(t["completion_len"]).as_py() or 0)


def disk_cost(wd: Workdir, config: str) -> tuple[DiskCost | None, str]:
    """Measured from the emitted shards of a config: each shard's rows are written again, a growing prefix at a
    time, the way emit writes them (emit/writer.PARQUET_OPTIONS); the bytes' common slope over the tokens
    (within each shard) is the per-token cost, the rest of the shards' bytes the fixed part. None when the workdir
    was not emitted (validate writes no token rows)."""
    import io

    files = dataset_shards(wd.dataset, config)
    where = f"dataset/data/{config}/*.parquet"
    if not files:
        return None, f"not emitted (run `kimi-data emit --workdir {wd.root}`)"
    shards = []          # (tokens of each prefix, bytes of each prefix, the shard's tokens, its bytes)
    for f in files:
        table = _measured_rows(pq.ParquetFile(f))
        lengths = pc.list_value_length(table["input_ids"]).to_numpy(zero_copy_only=False).astype(np.float64)
        n = table.num_rows
        xs, ys = [], []
        for k in sorted({max(1, n * q // 4) for q in range(1, 5)}) if n > 1 else ():
            buf = io.BytesIO()
            pq.write_table(table.slice(0, k), buf, **PARQUET_OPTIONS)
            xs.append(float(lengths[:k].sum()))
            ys.append(float(chunk_bytes(pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata)))
        shards.append((np.array(xs), np.array(ys), _shard_tokens(f), float(chunk_bytes(pq.read_metadata(f)))))
    tokens, total = sum(s[2] for s in shards), sum(s[3] for s in shards)
    if not tokens:
        return None, where
    spread = sum(float(((x - x.mean()) ** 2).sum()) for x, _, _, _ in shards if x.size > 1)
    if spread > 0:
        slope = sum(float(((x - x.mean()) * (y - y.mean())).sum()) for x, y, _, _ in shards if x.size > 1) / spread
        if 0 < slope < total / tokens:
            return DiskCost(slope, total - slope * tokens), where
    return DiskCost(total / tokens, 0.0), where   # one row per shard: no slope to measure, all of it per token


def busy_seconds(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of the intervals [start, end]."""
    order = np.argsort(starts, kind="stable")
    total, cur_start, cur_end = 0.0, None, None
    for a, b in zip(starts[order], ends[order]):
        if cur_end is None or a > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = a, b
        else:
            cur_end = max(cur_end, b)
    if cur_end is not None:
        total += cur_end - cur_start
    return float(total)


def measure_throughput(wd: Workdir, ids: list[str]) -> dict[str, Any] | None:
    """Aggregate output tokens/s over the pilot's generation span, and the per-request decode speed."""
    ckpt = read_checkpoint_info(wd)
    if ckpt is None:
        return None
    idx = ckpt.select(ids)
    if idx.size < 2:
        return None
    created, lat, comp = ckpt.created_at[idx], ckpt.latency_s[idx], ckpt.completion_tokens[idx]
    comp = np.where(np.isnan(comp), 0.0, comp)
    starts = np.where(np.isnan(lat), created, created - lat)
    # Time with at least one request in flight: a pilot resumed across sessions must not count the
    # idle gaps between them.
    span = busy_seconds(starts, created)
    if span <= 0:
        return None
    ok = ~np.isnan(lat) & (lat > 0)
    engine = ckpt.engine or {}
    device, gpus = pilot_hardware(engine)
    return {
        "tokens_per_s": round(float(comp.sum()) / span, 3),
        "output_tokens": int(comp.sum()),
        "span_s": round(span, 3),
        "requests": int(idx.size),
        "per_request_tokens_per_s_median": round(float(np.median(comp[ok] / lat[ok])), 3) if ok.any() else None,
        "engine": engine.get("engine", "?"),
        "engine_version": engine.get("version", "?"),
        "device": device,
        "gpus": gpus,
    }


def pilot_hardware(engine: dict[str, Any]) -> tuple[str | None, int | None]:
    """(device, GPUs) the pilot generated on, from the engine provenance its checkpoint records: the local
    engine's `device` (cpu: 0 GPUs, one accelerator otherwise); one SGLang server's tp_size x dp_size. A server
    on `device` cpu (SGLang runs there too, its tp_size counting CPU workers) used no GPU. GPUs None when the
    record does not tell (a router, several servers, no sizes)."""
    args = engine.get("server_args") or {}
    device = args.get("device") if isinstance(args.get("device"), str) else None
    if device == "cpu":
        return device, 0
    if engine.get("engine") == "local":
        return device, (None if device is None else 0 if device == "cpu" else 1)
    tp, dp = args.get("tp_size"), args.get("dp_size") or 1
    if engine.get("engine") == "sglang" and isinstance(tp, int) and isinstance(dp, int) \
            and len(args.get("urls") or []) == 1 and not args.get("router"):
        return device, tp * dp
    return device, None

