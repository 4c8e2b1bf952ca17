"""Stage 3, validate: join prompts with their completions, judge each with the Validator (in worker processes,
verdicts.py), and write one light row per sample (LIGHT_SCHEMA: id, split, lengths, finish reason, issues)
to `validated/<CFG>.parquet`. With a sink (`emit`: emit/rows.py), the same pass hands each judged chunk on, and
the sink streams its full rows (docs/data-format.md) into the dataset's shards: token ids are written once, there.

Rows go out in id order (the checkpoint's), in chunks of CHUNK_ROWS samples; chunk boundaries depend on the
checkpoint's rows only, never on the number of workers.

A conversation's later turns (policy own_history) have their prompts in the checkpoint, not in prepared/: the
config's view (store/prompt_view.py) says which belong to the selection and which completions answer today's
prompts; the later turns' prompts are read from the checkpoint for the chunk's ids the prepared file does not
hold. Every row names its conversation and turn (a prompt of another policy is turn 1 of its own), and the last
turn of a conversation why it ended.

Accounting per config (docs/reliability.md): selected + later_turns = rejected_at_prepare + valid + rejected +
failed + pending.
"""

from __future__ import annotations

import bisect
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterator, Protocol

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kimi_eagle_data.errors import MissingInputError
from kimi_eagle_data.records import ConversationEnd
from kimi_eagle_data.store.checkpoint import CompletionBatch
from kimi_eagle_data.store.checkpoint_set import CheckpointSet
from kimi_eagle_data.store.prompt_view import ConfigPrompts
from kimi_eagle_data.schema import LIGHT_SCHEMA
from kimi_eagle_data.validate.verdicts import Chunk, Judged, VerdictPool
from kimi_eagle_data.store.workdir import Workdir, atomic_path, read_json, write_json

CHUNK_ROWS = 256     # samples per worker task


@dataclass
class ValidateReport:
    config: str
    selected: int = 0
    rejected_at_prepare: int = 0
    prepared: int = 0
    later_turns: int = 0           # conversations' turns after the first (own_history), made while generating
    # later turns stored for conversations this selection does not hold (a pilot's): kept in the checkpoint,
    # never generated further nor emitted; outside the accounting identity
    kept_not_selected: int = 0
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
    modes: dict = field(default_factory=dict)      # mode -> {"valid": n, "rejected": n}
    # thinking effort -> {"valid": n, "rejected": n}: the thinking rows of a profile with efforts (Kimi-K3)
    efforts: dict = field(default_factory=dict)
    # (mode, temperature, top_p) each row was generated with -> {"valid": n, "rejected": n}; None: the run's
    # sampling (a prompt prepared before modes)
    sampling: dict = field(default_factory=dict)
    conversation_ends: Counter = field(default_factory=Counter)   # own_history: why conversations ended
    # prompts prepare kept with special-token text, encoded as served (partition special_text = "as_served")
    special_text_kept: int = 0

    @property
    def balanced(self) -> bool:
        return (self.selected + self.later_turns
                == self.rejected_at_prepare + self.valid + self.rejected + self.failed + self.pending)

    def to_json(self) -> dict[str, Any]:
        d = {k: (dict(sorted(v.items())) if isinstance(v, (Counter, dict)) else v) for k, v in self.__dict__.items()
             if k != "sampling" and not (k == "efforts" and not v)}     # a profile without efforts: no key
        d["sampling"] = [{"mode": m, "temperature": t, "top_p": p, **n}
                         for (m, t, p), n in sorted(self.sampling.items(), key=_sampling_order)]
        d["balanced"] = self.balanced
        return d


def _sampling_order(item) -> tuple:
    (mode, temperature, top_p), _ = item
    return mode or "", -1 if temperature is None else temperature, -1 if top_p is None else top_p


class ChunkSink(Protocol):
    """Where a judged chunk goes besides the light rows (emit/rows.py's RowBlocks: the dataset's full rows). A
    context manager: everything it was given is written when the block ends."""

    def add(self, chunk: "ChunkRows", light: pa.Table, messages: pa.Array, tools: pa.Array) -> None: ...

    def __enter__(self) -> "ChunkSink": ...

    def __exit__(self, *exc) -> None: ...


_PROMPT_COLUMNS = ["id", "source", "source_id", "messages", "tools", "prompt_ids"]
# Each prompt's own sampling and thinking effort (sources/modes.py); a file prepared before modes (efforts) lacks
# them: the rows hold nulls.
_SAMPLING_COLUMNS = {"temperature": pa.float64(), "top_p": pa.float64(), "effort": pa.string()}


class _PreparedPrompts:
    """A config's prepared prompts, read alongside its completions, both in id order: prepare writes them
    sorted by id, so only a window of a chunk or two is held, whatever the run's size. A file prepared
    before that (not sorted) is sorted here, whole, in memory."""

    def __init__(self, path, wanted: Collection[str] = ()):
        """`wanted`: ids to look for (failed requests), found in `found` if prepared. Nothing here is held
        per prepared row: the ids are read a batch at a time."""
        f = pq.ParquetFile(path)
        self.count = f.metadata.num_rows
        columns = _PROMPT_COLUMNS + [c for c in _SAMPLING_COLUMNS if c in f.schema_arrow.names]
        self.found: set[str] = set()
        in_order, last = True, None
        for batch in f.iter_batches(batch_size=1 << 16, columns=["id"]):
            ids = batch.column(0).to_pylist()
            self.found.update(i for i in ids if i in wanted)
            if ids and in_order:
                in_order = (last is None or last < ids[0]) and all(a < b for a, b in zip(ids, ids[1:]))
                last = ids[-1]
        # Read a chunk's worth at a time: the first chunk goes to the workers without decoding a whole row
        # group first (the reader decodes pages as it goes).
        if in_order:
            self._batches = f.iter_batches(batch_size=CHUNK_ROWS, columns=columns)
        else:
            self._batches = iter(f.read(columns=columns).sort_by("id").to_batches(CHUNK_ROWS))
        self.schema = pa.schema([f.schema_arrow.field(c) for c in columns])
        self._window = pa.Table.from_batches([], self.schema)
        self._window_ids: list[str] = []

    def take(self, ids: list[str]) -> tuple[list[int], pa.Table]:
        """For completion ids in increasing order, following the previous call's: which of them have a
        prepared prompt (positions in `ids`) and those prompts' rows, in the same order."""
        while (not self._window_ids or self._window_ids[-1] < ids[-1]) and \
                (batch := next(self._batches, None)) is not None:
            self._window = pa.concat_tables([self._window, pa.Table.from_batches([batch])])
            self._window_ids += batch.column(0).to_pylist()
        at = {id_: i for i, id_ in enumerate(self._window_ids)}
        keep = [i for i, id_ in enumerate(ids) if id_ in at]
        rows = self._window.take(pa.array([at[ids[i]] for i in keep], pa.int64())).combine_chunks()
        done = bisect.bisect_right(self._window_ids, ids[-1])       # later calls ask for larger ids only
        self._window, self._window_ids = self._window.slice(done), self._window_ids[done:]
        return keep, rows


def _prompt_buffers(rows: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """The prompt ids of `rows`, concatenated: (offsets from 0, int32 values)."""
    col = rows.column("prompt_ids")
    col = col.chunk(0) if col.num_chunks else pa.array([], pa.list_(pa.int32()))
    offsets = col.offsets.to_numpy().astype(np.int64)
    return offsets - offsets[0], col.flatten().to_numpy().astype(np.int32, copy=False)


@dataclass
class ChunkRows:
    """What the main process keeps of a chunk while a worker judges it (and what a ChunkSink gets of it)."""

    ids: list[str]
    prompts: pa.Table              # the chunk's prepared rows (_PROMPT_COLUMNS), in the same order
    prompt_offsets: np.ndarray
    prompt_values: np.ndarray
    output_offsets: np.ndarray
    output_values: np.ndarray


class _TurnPrompts:
    """The prompts of a config's later turns (those of the view, store/prompt_view.py), read from the checkpoint
    a chunk at a time, and how each of its conversations ended."""

    def __init__(self, checkpoint: CheckpointSet, view: ConfigPrompts):
        self.checkpoint, self.view = checkpoint, view
        self.ids = view.later.keys()
        self.ends: dict[str, ConversationEnd] = view.ends

    def take(self, ids: list[str], prepared: pa.Schema) -> tuple[list[int], pa.Table]:
        """Like _PreparedPrompts.take, for the ids that are later turns; the rows in the `prepared` columns."""
        keep = [i for i, id_ in enumerate(ids) if id_ in self.ids]
        records = self.checkpoint.turn_records(ids=[ids[i] for i in keep], origins=self.view.origins) if keep else []
        cols = {"id": [r.id for r in records], "source": [r.source for r in records],
                "source_id": [r.source_id for r in records],
                "messages": [orjson.dumps(r.messages).decode() for r in records],
                "tools": [orjson.dumps(r.tools).decode() if r.tools else "" for r in records],
                "prompt_ids": [r.prompt_ids for r in records], "temperature": [r.temperature for r in records],
                "effort": [r.effort for r in records],
                "top_p": [r.top_p for r in records], "conversation_id": [r.conversation for r in records],
                "turn": [r.turn for r in records]}
        schema = prepared.append(pa.field("conversation_id", pa.string())).append(pa.field("turn", pa.int32()))
        return keep, pa.Table.from_pydict({f.name: cols[f.name] for f in schema}, schema=schema)

    def end_reasons(self, conversations: list[str], turns: list[int]) -> pa.Array:
        """The end reason of each row that is its conversation's last turn (null on the others)."""
        out = []
        for conv, turn in zip(conversations, turns):
            end = self.ends.get(conv)
            out.append(end.reason if end is not None and end.turn == turn else None)
        return pa.array(out, pa.string())


def _with_turns(ids: list[str], prompts: _PreparedPrompts, turns: _TurnPrompts) -> tuple[list[int], pa.Table]:
    """The chunk's prompts, from prepared/ (first turns) and the checkpoint (later turns), in `ids`' order, with
    their conversation, turn and end reason."""
    keep, rows = prompts.take(ids)
    rows = rows.append_column("conversation_id", rows.column("id")).append_column(
        "turn", pa.array(np.ones(rows.num_rows, np.int32)))
    if turns.ids:
        later, more = turns.take(ids, prompts.schema)
        if later:
            order = np.argsort(np.array(keep + later))
            keep = sorted(keep + later)
            rows = pa.concat_tables([rows, more]).take(pa.array(order)).combine_chunks()
    rows = rows.append_column("end_reason", turns.end_reasons(rows.column("conversation_id").to_pylist(),
                                                                rows.column("turn").to_pylist()))
    return keep, rows


def _chunks(batches: Iterator[CompletionBatch], prompts: _PreparedPrompts, turns: _TurnPrompts
            ) -> Iterator[tuple[ChunkRows, Chunk]]:
    for b in batches:
        if not len(b):
            continue
        keep, rows = _with_turns(b.ids, prompts, turns)
        if len(keep) < len(b):   # completions of prompts no longer prepared (prepare re-run with fewer rows)
            b = b.take(keep)
        if not len(b):
            continue
        p_off, p_val = _prompt_buffers(rows)
        ctx = ChunkRows(b.ids, rows, p_off, p_val, b.offsets, b.values)
        yield ctx, Chunk(p_off, p_val, b,
                         rows.column("messages").to_pylist(), rows.column("tools").to_pylist())


def _light_rows(ctx: ChunkRows, j: Judged) -> pa.Table:
    cols = {
        "id": pa.array(ctx.ids, pa.string()),
        "source": ctx.prompts.column("source"), "source_id": ctx.prompts.column("source_id"),
        "split": pa.array(np.where(j.valid, "train", "rejected").tolist(), pa.string()),
        "prompt_len": pa.array(np.diff(ctx.prompt_offsets).astype(np.int32)),
        "completion_len": pa.array(np.diff(ctx.output_offsets).astype(np.int32)),
        "reasoning_len": pa.array(j.reasoning_len), "num_tool_calls": pa.array(j.num_tool_calls),
        "finish_reason": pa.array(j.finish_reason, pa.string()), "issues": pa.array(j.issues, pa.list_(pa.string())),
        "mode": pa.array(j.mode, pa.string()), **_sampling_columns(ctx.prompts),
        "conversation_id": ctx.prompts.column("conversation_id"), "turn": ctx.prompts.column("turn"),
        "end_reason": ctx.prompts.column("end_reason"),
        "prompt_chars": pa.array(j.prompt_chars), "completion_chars": pa.array(j.completion_chars),
    }
    return pa.Table.from_arrays([cols[k] for k in LIGHT_SCHEMA.names], schema=LIGHT_SCHEMA)


def _sampling_columns(prompts: pa.Table) -> dict[str, pa.Array]:
    """Each row's temperature, top_p and effort as prepared (nulls for a file prepared before modes, efforts)."""
    n = prompts.num_rows
    return {c: (prompts.column(c).combine_chunks() if c in prompts.column_names else pa.nulls(n, kind))
            for c, kind in _SAMPLING_COLUMNS.items()}


def validate_config(workdir: Workdir, config: str, checkpoint: CheckpointSet, pool: VerdictPool,
                    sink: ChunkSink | None = None, light_done: Callable[[int], None] | None = None) -> ValidateReport:
    """`light_done(rows)` runs as soon as validated/<config> is in place, while the last blocks of full rows
    may still be being written (emit draws its plots from the light columns meanwhile)."""
    path = workdir.prepared(config)
    if not path.exists():
        raise MissingInputError(f"{path} is missing; run `kimi-data prepare {config} --workdir {workdir.root}` first")
    # Failed requests (few) are what needs ids kept: a failure counts when its prompt is prepared and no
    # checkpoint file completed it (shards and merged workdirs may hold both).
    failures = checkpoint.failures(config)
    view = ConfigPrompts.read(workdir, config, checkpoint)
    prompts = _PreparedPrompts(path, wanted=failures)
    turns = _TurnPrompts(checkpoint, view)
    prep = read_json(workdir.prepare_report(config))
    rep = ValidateReport(config, selected=prep["selected"], rejected_at_prepare=prep["rejected_total"],
                         prepared=prompts.count, later_turns=len(turns.ids), prepare_reasons=prep["rejected"],
                         special_text_kept=prep.get("special_text_kept", 0),
                         kept_not_selected=view.kept_not_selected,
                         conversation_ends=Counter(e.reason for e in turns.ends.values()))
    completed_failures: set[str] = set()
    with (sink if sink is not None else nullcontext()) as blocks:
        with atomic_path(workdir.validated(config)) as tmp, \
                pq.ParquetWriter(tmp, LIGHT_SCHEMA, compression="zstd") as light:
            batches = checkpoint.batches(config, CHUNK_ROWS, keep=view.answers)
            for ctx, j in pool.map(_chunks(batches, prompts, turns)):
                completed_failures.update(i for i in ctx.ids if i in failures)
                rows = _light_rows(ctx, j)
                _account(rep, rows)
                light.write_table(rows)
                if blocks is not None:
                    blocks.add(ctx, rows, j.messages, ctx.prompts.column("tools").combine_chunks())
        if light_done is not None:
            light_done(rep.generated)
    for id_, failure in failures.items():
        if (id_ in prompts.found or id_ in turns.ids) and id_ not in completed_failures:
            rep.failed += 1
            rep.failure_reasons[failure.reason] += 1
    rep.pending = rep.prepared + rep.later_turns - rep.generated - rep.failed
    write_json(workdir.validate_report(config), rep.to_json())
    return rep


def _account(rep: ValidateReport, light: pa.Table) -> None:
    """Count a judged chunk from its light rows."""
    train = pc.equal(light["split"], "train").to_numpy(zero_copy_only=False)
    plen = light["prompt_len"].to_numpy().astype(np.int64)
    clen = light["completion_len"].to_numpy().astype(np.int64)
    n_valid = int(train.sum())
    rep.generated += len(train)
    rep.valid += n_valid
    rep.rejected += len(train) - n_valid
    rep.finish.update(light["finish_reason"].to_pylist())
    for mode, temperature, top_p, ok in zip(light["mode"].to_pylist(), light["temperature"].to_pylist(),
                                            light["top_p"].to_pylist(), train.tolist()):
        for counts in (rep.modes.setdefault(mode, {"valid": 0, "rejected": 0}),
                       rep.sampling.setdefault((mode, temperature, top_p), {"valid": 0, "rejected": 0})):
            counts["valid" if ok else "rejected"] += 1
    if "effort" in light.column_names and light["effort"].null_count < light.num_rows:
        for effort, ok in zip(light["effort"].to_pylist(), train.tolist()):
            if effort is not None:
                rep.efforts.setdefault(effort, {"valid": 0, "rejected": 0})["valid" if ok else "rejected"] += 1
    rep.reasons.update(pc.list_flatten(light["issues"]).to_pylist())
    rep.prompt_tokens += int(plen.sum())
    rep.completion_tokens += int(clen.sum())
    rep.train_tokens += int((plen + clen)[train].sum())
