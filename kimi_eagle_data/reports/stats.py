"""`kimi-data stats`: what a run produced, measured, not guessed.

Per config and overall: counts per stage (from the validate reports), prompt / completion / reasoning length
distributions, the share of short (< 300 tokens) and truncated completions, finish reasons, tool-call rate and
arguments-valid rate, the engine's prefix-cache hit share, and token totals; for conversations (policy own_history),
turns per conversation, lengths per turn index and why the conversations ended (conversation/shape.py).

Everything is computed column-wise (pyarrow / numpy) over the light columns of `validated/<CFG>.parquet`;
`input_ids` and `loss_mask` are never read. The draft vocabulary's coverage comes from the loss-token counts
per id that emit wrote (dataset/token_freq/, emit/token_freq.py). Lengths are *reported*, never judged: a short completion is often
a valid one (docs/token-rules.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kimi_eagle_data.emit.stale import stale_line
from kimi_eagle_data.records import SpecDecodeCounts
from kimi_eagle_data.reports.prefill import drafter_acceptance
from kimi_eagle_data.conversation.shape import (TURN_COLUMNS, conversation_shape, has_conversations,
                                              lengths_by_turn, turn_arrays)
from kimi_eagle_data.store.cache_hits import cache_share
from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.store.checkpoint import CorruptCheckpointError
from kimi_eagle_data.store.checkpoint_set import CheckpointSet, open_workdir_checkpoints
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.store.lock import workdir_writer
from kimi_eagle_data.store.progress import PROGRESS_KEYS, generation_progress
from kimi_eagle_data.store.workdir import Workdir, read_json
from kimi_eagle_data.wording import counted
from kimi_eagle_data.emit.token_freq import DRAFT_VOCAB_SIZE, add_counts, coverage, read_counts, token_freq_path

SHORT_COMPLETION = 300          # tokens; "short" is reported, never a reason to reject
DIST_KEYS = ("min", "p10", "median", "mean", "p90", "p99", "max")
COUNT_KEYS = ("selected", "rejected_at_prepare", "prepared", "later_turns", "generated", "failed", "pending", "valid",
              "rejected")
SPLIT_CHOICES = ("all", "train", "rejected")
# The light columns stats reads (never input_ids / loss_mask).
STAT_COLUMNS = ["id", "split", "prompt_len", "completion_len", "reasoning_len", "num_tool_calls", "finish_reason",
                "issues"]


class QualityError(KimiDataError, RuntimeError):
    """A problem the user can fix (missing files, unknown config or id); printed as one line."""


# -- reading a workdir ----------------------------------------------------------------------------

class NothingValidatedYet(QualityError):
    """A workdir prepared (and perhaps generating: a first `generate` under way) with nothing validated yet. It
    carries the generation progress the checkpoints hold, which the reports show instead."""

    def __init__(self, wd: Workdir, progress: dict[str, dict[str, int]], writer: str | None):
        self.workdir, self.progress, self.writer = wd, progress, writer
        total = {k: sum(row[k] for row in progress.values()) for k in PROGRESS_KEYS}
        prompts = total["selected"] + total["later_turns"] - total["rejected_at_prepare"]
        doing = f"{writer} is writing it" if writer else "no command is writing it now"
        super().__init__(
            f"{wd.root} has nothing validated yet ({doing}); the checkpoint holds {total['generated']:,} of "
            f"{counted(prompts, 'prompt')} generated, {total['failed']:,} failed, {total['pending']:,} pending; "
            f"run `kimi-data validate --workdir {wd.root}` (build and emit validate too) once generate has stopped")


def generation_so_far(wd: Workdir) -> NothingValidatedYet | None:
    """For a workdir with run.json and prepared configs but nothing validated: its progress (None otherwise)."""
    configs = order_configs(c for c in wd.prepared_configs() if wd.prepare_report(c).exists())
    if wd.has_validated or not configs or not wd.settings_path.exists():
        return None
    try:
        ckpt = open_workdir_checkpoints(wd) or CheckpointSet([])
    except CorruptCheckpointError as e:
        raise QualityError(f"{e}; is it a kimi-data checkpoint?") from e
    try:
        progress = generation_progress(wd, configs, ckpt)
    finally:
        ckpt.close()
    return NothingValidatedYet(wd, progress, workdir_writer(wd.root))


def open_workdir(path: str | Path) -> Workdir:
    """A workdir with validated results. One prepared with nothing validated yet (a first generate under way) is
    NothingValidatedYet, carrying its generation progress."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise QualityError(f"{path} is not a directory; pass a workdir made by `kimi-data build` or `demo`")
    wd = Workdir(root)
    if not wd.has_validated:
        so_far = generation_so_far(wd)
        if so_far is not None:
            raise so_far
        raise QualityError(f"{root} has no validated/ results; run `kimi-data build --workdir {path}` "
                           f"(or `validate`) there first")
    return wd


def order_configs(names) -> list[str]:
    """Built-in partitions in their B1…B8 order, then user-defined ones sorted."""
    names = set(names)
    return [c for c in PARTITIONS if c in names] + sorted(names - set(PARTITIONS))


def validated_configs(wd: Workdir, wanted: list[str] | tuple[str, ...] = ()) -> list[str]:
    have = order_configs(wd.validated_configs())
    if not wanted:
        if not have:
            raise QualityError(f"{wd.root}/validated holds no <CONFIG>.parquet; run `kimi-data validate "
                               f"--workdir {wd.root}` first")
        return have
    missing = [c for c in wanted if c not in have]
    if missing:
        raise QualityError(f"no validated/{missing[0]}.parquet in {wd.root} (have: {', '.join(have) or 'none'}); "
                           f"run `kimi-data validate {missing[0]} --workdir {wd.root}`")
    return list(dict.fromkeys(wanted))


def read_columns(path: Path, columns: list[str]) -> pa.Table:
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowInvalid, OSError) as e:
        raise QualityError(f"cannot read {path}: {e}; rerun `kimi-data validate` to rewrite it") from e


def read_report(wd: Workdir, config: str) -> dict[str, Any]:
    path = wd.validate_report(config)
    if not path.exists():
        raise QualityError(f"{path} is missing; rerun `kimi-data validate {config} --workdir {wd.root}`")
    return read_json(path)


@dataclass
class CheckpointInfo:
    """The per-completion engine figures of every checkpoint file in a workdir (no token blobs)."""

    ids: list[str]
    configs: np.ndarray          # object (str)
    prompt_tokens: np.ndarray    # float, NaN where the engine did not report it
    completion_tokens: np.ndarray
    cached_tokens: np.ndarray
    spec_verify_ct: np.ndarray   # target verify steps with a drafter (NaN: none, or not reported)
    latency_s: np.ndarray
    created_at: np.ndarray
    engine: dict[str, Any]       # the engine info the generate stage recorded (meta "engine")
    # vLLM's drafter counters over the generate runs, summed over the files (meta "spec_decode"); None: not counted
    spec_decode: SpecDecodeCounts | None = None

    def select(self, ids) -> np.ndarray:
        """Indices of the given ids (those present)."""
        pos = self._positions()
        return np.array([pos[i] for i in ids if i in pos], dtype=np.int64)

    def column(self, ids, field: str) -> np.ndarray:
        """`field` (prompt_tokens, cached_tokens, ...) for each of `ids`, NaN where the checkpoint has no such id."""
        pos = self._positions()
        values = getattr(self, field)
        return np.array([values[pos[i]] if i in pos else np.nan for i in ids], dtype=np.float64)

    def _positions(self) -> dict[str, int]:
        if not hasattr(self, "_pos"):
            self._pos = {id_: i for i, id_ in enumerate(self.ids)}
        return self._pos


def read_checkpoint_info(wd: Workdir) -> CheckpointInfo | None:
    try:
        ckpt = open_workdir_checkpoints(wd)
    except CorruptCheckpointError as e:
        raise QualityError(f"{e}; is it a kimi-data checkpoint?") from e
    if ckpt is None:
        return None
    try:
        recs = ckpt.request_stats()
        engine = ckpt.get_meta("engine") or {}
        counted = [c for c in map(SpecDecodeCounts.from_json, ckpt.meta_values("spec_decode")) if c is not None]
    finally:
        ckpt.close()

    def col(field: str) -> np.ndarray:
        return np.array([np.nan if (v := getattr(r, field)) is None else float(v) for r in recs], dtype=np.float64)

    return CheckpointInfo(ids=[r.id for r in recs], configs=np.array([r.config for r in recs], dtype=object),
                          prompt_tokens=col("prompt_tokens"), completion_tokens=col("completion_tokens"),
                          cached_tokens=col("cached_tokens"), spec_verify_ct=col("spec_verify_ct"),
                          latency_s=col("latency_s"),
                          created_at=col("created_at"), engine=engine,
                          spec_decode=sum(counted, SpecDecodeCounts()) if counted else None)


# -- numbers --------------------------------------------------------------------------------------

def distribution(values: np.ndarray) -> dict[str, float | int | None]:
    """min, p10, median, mean, p90, p99, max (numpy's default linear-interpolated percentiles)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return dict.fromkeys(DIST_KEYS)
    p10, med, p90, p99 = np.percentile(v, [10, 50, 90, 99])
    return {"min": int(v.min()), "p10": _num(p10), "median": _num(med), "mean": round(float(v.mean()), 3),
            "p90": _num(p90), "p99": _num(p99), "max": int(v.max())}


def _num(x: float) -> float | int:
    x = float(x)
    return int(x) if x.is_integer() else round(x, 3)


def _share(k: int | float, n: int | float) -> float | None:
    return round(float(k) / float(n), 6) if n else None


def _rows_with_issue(issues: pa.ChunkedArray | pa.Array, code: str) -> np.ndarray:
    """Boolean per row: `code` is among the row's issues (vectorised over the list column)."""
    arr = issues.combine_chunks() if isinstance(issues, pa.ChunkedArray) else issues
    hit = np.zeros(len(arr), dtype=bool)
    flat = pc.list_flatten(arr)
    if len(flat):
        parents = pc.list_parent_indices(arr).to_numpy()
        hit[parents[pc.equal(flat, code).to_numpy(zero_copy_only=False).astype(bool)]] = True
    return hit


@dataclass
class _Columns:
    """One config's light columns as numpy arrays, after the split filter."""

    ids: list[str]
    split: np.ndarray
    prompt: np.ndarray
    completion: np.ndarray
    reasoning: np.ndarray
    calls: np.ndarray
    finish: np.ndarray
    args_bad: np.ndarray
    mode: np.ndarray               # thinking / instant
    turn: np.ndarray               # 1-based turn index in its conversation
    turns: pa.Table | None         # conversation_id, turn, end_reason of every row (any split); None before turns

    @classmethod
    def read(cls, wd: Workdir, config: str, split: str) -> "_Columns":
        path = wd.validated(config)
        # validated before modes: no `mode` column, every row thinking
        names = pq.read_schema(path).names if path.exists() else []
        has_mode = "mode" in names
        # validated before conversations: no turn columns, every row turn 1 of its own
        has_turns = set(TURN_COLUMNS) <= set(names)
        t = read_columns(path, STAT_COLUMNS + (["mode"] if has_mode else []) + (TURN_COLUMNS if has_turns else []))
        turns = t.select(TURN_COLUMNS) if has_turns else None
        if split != "all":
            t = t.filter(pc.equal(t["split"], split))

        def np_col(name: str) -> np.ndarray:
            return t[name].to_numpy().astype(np.int64) if t.num_rows else np.zeros(0, dtype=np.int64)

        return cls(
            ids=t["id"].to_pylist(), split=np.array(t["split"].to_pylist(), dtype=object),
            prompt=np_col("prompt_len"), completion=np_col("completion_len"), reasoning=np_col("reasoning_len"),
            calls=np_col("num_tool_calls"), finish=np.array(t["finish_reason"].to_pylist(), dtype=object),
            args_bad=_rows_with_issue(t["issues"], "args_not_json_object") if t.num_rows else np.zeros(0, bool),
            mode=np.array(t["mode"].to_pylist() if has_mode else ["thinking"] * t.num_rows, dtype=object),
            turn=np_col("turn") if has_turns else np.ones(t.num_rows, dtype=np.int64), turns=turns,
        )

    @classmethod
    def concat(cls, parts: list["_Columns"]) -> "_Columns":
        def cat(name):
            arrs = [getattr(p, name) for p in parts]
            return np.concatenate(arrs) if arrs else np.zeros(0)
        return cls(ids=[i for p in parts for i in p.ids], split=cat("split"), prompt=cat("prompt"),
                   completion=cat("completion"), reasoning=cat("reasoning"), calls=cat("calls"),
                   finish=cat("finish"), args_bad=cat("args_bad"), mode=cat("mode"), turn=cat("turn"),
                   turns=pa.concat_tables(ts) if (ts := [p.turns for p in parts if p.turns is not None]) else None)


def _summarize(cols: _Columns, counts: dict[str, int], reasons: dict[str, int],
               ckpt: CheckpointInfo | None) -> dict[str, Any]:
    n = len(cols.ids)
    with_calls = cols.calls > 0
    n_calls = int(with_calls.sum())
    args_ok = int((with_calls & ~cols.args_bad.astype(bool)).sum())
    finish: dict[str, int] = {}
    for f in cols.finish:
        finish[f] = finish.get(f, 0) + 1
    train = cols.split == "train"
    cache = None
    if ckpt is not None:    # the engine's prefix-cache hits, overall and per turn (store/cache_hits.py)
        cache = cache_share(ckpt.column(cols.ids, "cached_tokens"), ckpt.column(cols.ids, "prompt_tokens"), cols.turn)
    return {
        "counts": {k: int(counts.get(k, 0)) for k in COUNT_KEYS},
        "rows": n,
        "lengths": {"prompt": distribution(cols.prompt), "completion": distribution(cols.completion),
                    "reasoning": distribution(cols.reasoning)},
        "short_share": _share(int((cols.completion < SHORT_COMPLETION).sum()), n),
        "truncated_share": _share(int((cols.finish == "length").sum()), n),
        "finish_reasons": dict(sorted(finish.items())),
        "tool_calls": {"rows": n_calls, "rate": _share(n_calls, n), "calls": int(cols.calls.sum()),
                       "args_valid_rows": args_ok, "args_valid_rate": _share(args_ok, n_calls)},
        "cache": cache,
        "tokens": {"prompt": int(cols.prompt.sum()), "completion": int(cols.completion.sum()),
                   "total": int(cols.prompt.sum() + cols.completion.sum()),
                   "train": int(cols.prompt[train].sum() + cols.completion[train].sum())},
        "rejection_reasons": dict(sorted(reasons.items())),
        "modes": _by_mode(cols),
        "conversations": _conversations(cols, counts),
    }


def _conversations(cols: _Columns, counts: dict[str, int]) -> dict[str, Any] | None:
    """Conversations (policy own_history; None when every row is a single turn): their shape over every row of
    the config, later turns from the report, and lengths per turn index over the split's rows."""
    t = cols.turns
    if t is None:
        return None
    conv, turn, end = turn_arrays(t)
    if not has_conversations(turn, end):
        return None
    return {**conversation_shape(conv, turn, end),
            "later_turns": int(counts.get("later_turns", 0)),
            "by_turn": lengths_by_turn(cols.turn, cols.prompt, cols.completion)}


def _by_mode(cols: _Columns) -> dict[str, dict[str, Any]]:
    """Per mode (thinking / instant): rows, train rows, the valid share, completion and reasoning medians."""
    out = {}
    for mode in sorted(set(cols.mode.tolist())):
        sel = cols.mode == mode
        n, n_train = int(sel.sum()), int((sel & (cols.split == "train")).sum())
        out[mode] = {"rows": n, "train": n_train, "valid_share": _share(n_train, n),
                     "completion_median": distribution(cols.completion[sel])["median"],
                     "reasoning_median": distribution(cols.reasoning[sel])["median"],
                     "tokens": int(cols.prompt[sel].sum() + cols.completion[sel].sum())}
    return out


def collect_stats(workdir: str | Path, configs: list[str] | tuple[str, ...] = (), *,
                  split: str = "all") -> dict[str, Any]:
    """The numbers `kimi-data stats --json` prints (keys documented in cli/stats.py, STATS_JSON_HELP)."""
    if split not in SPLIT_CHOICES:
        raise QualityError(f"split {split!r}: use one of {', '.join(SPLIT_CHOICES)}")
    wd = open_workdir(workdir)
    names = validated_configs(wd, configs)
    ckpt = read_checkpoint_info(wd)
    result: dict[str, Any] = {"workdir": str(wd.root), "split": split, "short_threshold": SHORT_COMPLETION,
                              "configs": {}}
    parts, total_counts, total_reasons = [], dict.fromkeys(COUNT_KEYS, 0), {}
    for config in names:
        report = read_report(wd, config)
        cols = _Columns.read(wd, config, split)
        parts.append(cols)
        for k in COUNT_KEYS:
            total_counts[k] += int(report.get(k, 0))
        for k, v in (report.get("reasons") or {}).items():
            total_reasons[k] = total_reasons.get(k, 0) + v
        result["configs"][config] = _summarize(cols, report, report.get("reasons") or {}, ckpt)
    result["overall"] = _summarize(_Columns.concat(parts), total_counts, total_reasons, ckpt)
    # Overall conversations: those of the configs that have any (another config's prompts are no conversations).
    talk = [p for p, c in zip(parts, names) if result["configs"][c]["conversations"]]
    result["overall"]["conversations"] = _conversations(_Columns.concat(talk), total_counts) if talk else None
    # the drafter the engine generated with and the acceptance it measured, as `plan` reports it
    result["drafter"] = drafter_acceptance((ckpt.engine or {}).get("server_args") or {},
                                           ckpt.completion_tokens, ckpt.spec_verify_ct, ckpt.spec_decode) \
        if ckpt is not None else None
    result["draft_vocab"] = draft_vocab_coverage(wd, names)
    # dataset/ (and the draft vocabulary counted from it) made from an earlier selection: a pilot's (emit/stale.py)
    result["stale_dataset"] = stale_line(wd)
    return result


def draft_vocab_coverage(wd: Workdir, configs: list[str]) -> dict[str, Any] | None:
    """How much of the train split's loss tokens the DRAFT_VOCAB_SIZE most frequent ids cover, per config and
    overall, from the counts the last emit wrote (dataset/token_freq/; None when it wrote none)."""
    paths = {c: token_freq_path(wd.dataset, c) for c in configs}
    counts = {c: read_counts(p) for c, p in paths.items() if p.is_file()}
    if not counts:
        return None
    return {"top_k": DRAFT_VOCAB_SIZE, "from": str(wd.dataset / "token_freq"),
            "configs": {c: coverage(counts[c]) if c in counts else None for c in configs},
            "overall": coverage(add_counts(list(counts.values())))}

