"""Stage 4, emit: every completion validated again and its row streamed straight into the Hub-layout tree
(docs/data-format.md), so each token is written once:

    dataset/README.md                               card: YAML (configs, dataset_info, license) + body
    dataset/data/<CFG>/<split>-0000i-of-0000N.parquet
    dataset/assets/*.png                            plots referenced by the card (from validated/'s light columns)
    dataset/token_freq/<CFG>.parquet                loss-token count per id of the train split (emit/token_freq.py)
    dataset/manifest.json                           version, content hashes, provenance, counts

The rows come from validate's pass (validate/assemble.py) through emit/rows.py, with `ConfigShards` as its
sink. Everything written is a function of the workdir's contents only (dates come from the checkpoint, not the
clock; rows in id order, row groups and shard boundaries fixed by row and token counts), so emitting twice, or
with any number of workers, gives byte-identical files.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from kimi_eagle_data.chat_format import ChatFormat
from kimi_eagle_data.diskfull import writing
from kimi_eagle_data.emit.token_freq import TokenCounts, coverage_by_config, write_counts
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data import __version__
from kimi_eagle_data.schema import ROW_SCHEMA, SPLITS
from kimi_eagle_data.stopping import DeferredStop, check_stop
from kimi_eagle_data.store.swap import STAGING, remove_tree, replace_dir
from kimi_eagle_data.store.workdir import Workdir, atomic_path, file_sha256, move_into_place, write_json
from kimi_eagle_data.conversation.shape import config_shape
from kimi_eagle_data.cards.card import render_card
from kimi_eagle_data.emit.manifest import CARD, manifest_sha256
from kimi_eagle_data.emit.plots import VOCAB_PLOT, card_plots
from kimi_eagle_data.store.cache_hits import workdir_cache

SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")
SHARD_TARGET_BYTES = 512 << 20     # token bytes (4 id + 1 mask) after which a new shard starts (~150-250 MB)
# How the dataset's shards are written (plan rewrites a pilot's rows with them to measure bytes per token).
PARQUET_OPTIONS: dict = {"compression": "zstd", "use_dictionary": ["source", "finish_reason"],
                         "write_page_index": False}


class EmitError(KimiDataError, RuntimeError):
    pass


class NothingToEmit(EmitError):
    """No config has a generated sample yet (e.g. every request failed)."""


@dataclass
class SplitInfo:
    rows: int
    tokens: int
    files: list[str] = field(default_factory=list)
    num_bytes: int = 0


class SplitShards:
    """One config's split streamed into Parquet shards: a shard closes once it holds SHARD_TARGET_BYTES of
    tokens; file names get their `-of-N` when the split is done (hidden temp names until then)."""

    def __init__(self, out_dir: Path, split: str, schema: pa.Schema = ROW_SCHEMA):
        self.out_dir, self.split, self.schema = out_dir, split, schema
        self.info = SplitInfo(rows=0, tokens=0)
        self._done: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._path: Path | None = None
        self._bytes = 0

    def write(self, table: pa.Table) -> None:
        if self._writer is None:
            self._path = self.out_dir / f".{self.split}-{len(self._done):05d}.parquet.tmp"
            with writing(self._path):
                self.out_dir.mkdir(parents=True, exist_ok=True)
                self._writer = pq.ParquetWriter(self._path, self.schema, **PARQUET_OPTIONS)
            self._bytes = 0
        with writing(self._path):
            self._writer.write_table(table)
        tokens = sum(int(c.offsets[-1].as_py() - c.offsets[0].as_py()) for c in table["input_ids"].chunks)
        self.info.rows += table.num_rows
        self.info.tokens += tokens
        self._bytes += tokens * 5
        if self._bytes >= SHARD_TARGET_BYTES:
            self._close_shard()

    def _close_shard(self) -> None:
        writer, self._writer = self._writer, None
        self._done.append(self._path)   # abort() removes it whatever happens next
        with writing(self._path):
            writer.close()

    def finish(self) -> SplitInfo:
        if self._writer is not None:
            self._close_shard()
        n = len(self._done)
        for i, tmp in enumerate(self._done):
            name = f"{self.split}-{i:05d}-of-{n:05d}.parquet"
            move_into_place(tmp, self.out_dir / name)
            self.info.files.append(name)
            self.info.num_bytes += (self.out_dir / name).stat().st_size
        return self.info

    def abort(self) -> None:
        """Remove every temp shard of this split, whatever state the stop left the writer in."""
        writer, self._writer = self._writer, None
        if self._path is not None and self._path not in self._done:   # stopped while its writer was opening
            self._done.append(self._path)
        try:
            if writer is not None:
                writer.close()
        except Exception:   # a write cut short (Ctrl-C mid-write_table, a full disk): the file goes anyway
            pass
        finally:
            for tmp in self._done:
                tmp.unlink(missing_ok=True)


class ConfigShards:
    """The sink validate streams one config's rows into: a split exists only where it has rows
    (`datasets` cannot load an empty split). The train rows' loss tokens are counted per id on the way
    (`freq_path`: where finish() writes the counts; `vocab_size`: the model's, the file's length). `schema`: the
    rows' (schema.row_schema)."""

    def __init__(self, out_dir: Path, freq_path: Path | None = None, vocab_size: int = 0,
                 schema: pa.Schema = ROW_SCHEMA):
        self.out_dir, self.freq_path, self.schema = out_dir, freq_path, schema
        self.splits: dict[str, SplitShards] = {}
        self.token_counts = TokenCounts(vocab_size)

    def write(self, split: str, table: pa.Table) -> None:
        if split not in self.splits:
            self.splits[split] = SplitShards(self.out_dir, split, self.schema)
        self.splits[split].write(table)
        if split == "train":
            self.token_counts.add_rows(table)

    def finish(self) -> dict[str, SplitInfo]:
        if self.splits and self.freq_path is not None:
            write_counts(self.freq_path, self.token_counts.counts)
        return {s: self.splits[s].finish() for s in SPLITS if s in self.splits}

    def abort(self) -> None:
        for s in self.splits.values():
            s.abort()


def check_version(version: str) -> None:
    if not SEMVER.match(version):
        raise EmitError(f"version {version!r} is not semver (MAJOR.MINOR.PATCH); pass e.g. --dataset-version 1.0.0")


@contextmanager
def replacing_dataset(workdir: Workdir) -> Iterator[Workdir]:
    """`workdir` as emit writes it: its dataset an empty folder beside `dataset/` (store/swap.py's STAGING), which
    replaces `dataset/` whole once the block ends without an exception (a SIGTERM meanwhile is taken once the swap is
    done), the old one then removed. On any exception `dataset/` stays as it was and the new folder goes."""
    target, staged = workdir.root / "dataset", workdir.root / STAGING
    remove_tree(staged)
    staged.mkdir(parents=True)
    try:
        yield Workdir(workdir.root, staged)
        stop = DeferredStop().start()
        try:
            replace_dir(staged, target)
        finally:
            stop.end()
    finally:
        if staged.exists():       # the old dataset after a swap, or the unfinished new one
            remove_tree(staged)


def pending_note(reports: dict[str, Any], root: Path) -> str | None:
    """The warning an emit with pending samples gives (None when none is): per config how many of its samples have
    neither a completion nor a failure yet (a generate stopped, a shard still generating or not merged). The dataset
    is emitted without them, and the manifest and card count them as pending; the exit status stays 0."""
    pending = {c: r for c, r in reports.items() if r.pending}
    if not pending:
        return None
    counts = ", ".join(f"{c} {r.pending:,} of {r.prepared + r.later_turns:,}" for c, r in pending.items())
    return (f"{sum(r.pending for r in pending.values()):,} samples are pending ({counts}): neither generated nor "
            "failed yet, so this dataset lacks them (the manifest and card count them as pending); finish their "
            f"generate (`kimi-data generate --workdir {root}`, or every shard's, merged with --merge) and emit "
            "again")


def conversation_shapes(workdir: Workdir, summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Config -> the shape of its conversations (conversation/shape.py), for the configs of policy own_history,
    from the light rows validate wrote."""
    shapes = {c: config_shape(workdir.validated(c)) for c, s in summary.items()
              if (s.get("partition") or {}).get("policy") == "own_history"}
    return {c: v for c, v in shapes.items() if v is not None}


def finish_dataset(workdir: Workdir, summary: dict[str, Any], *, chat_format: ChatFormat, version: str,
                   provenance: dict[str, Any], plots_drawn: Callable[[], dict[str, str]], repo_id: str | None = None,
                   score: dict[str, Any] | None = None, probe: dict[str, Any] | None = None,
                   schema: pa.Schema = ROW_SCHEMA,
                   selection: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Card and manifest over the shards validate wrote and the plots being drawn. `summary`: config ->
    {"report": validate's counts, "splits": {split: SplitInfo}, "partition": what prepare recorded, "source":
    where prepare read the rows}; configs without rows are left out. `chat_format`: the run's, which the card asks
    what to say of the rules and generation prompts. `score`: the card's score section (the
    caller's, from score/report.card_section; None: none); `probe`: the probe's (probe/report.card_section).
    `selection`: {config: the digest of its prepared selection, its prepare fingerprint and
    --limit}, what emit/stale.py compares with the prompts prepared later. `plots_drawn()` returns once the card's
    plots (plots.card_plots of those configs) are in dataset/assets, with {title: relative path}: the shards
    are hashed before waiting for them. The card records the manifest's hash (emit/manifest.py), so it is
    rendered last, before the manifest gets the card's own hash."""
    out = workdir.dataset
    summary = {c: s for c, s in summary.items() if s["splits"]}
    if not summary:
        raise NothingToEmit(f"nothing to emit from {workdir.root}: no config has a generated sample yet; "
                            "run generate (with --retry-failed if samples failed)")

    plots = card_plots(list(summary))

    def listing() -> list[Path]:
        return sorted(p for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"
                      and not p.name.startswith(".") and p.relative_to(out).as_posix() != CARD)

    def hashed(p: Path) -> str:
        check_stop()    # hashing a large dataset takes a while: a SIGTERM stops it between files (stopping.py)
        return file_sha256(p)

    # Plots of an earlier emit (its configs) are not this dataset's: only the card's plots stay in assets/.
    for old in (out / "assets").glob("*.png"):
        if f"assets/{old.name}" not in plots.values():
            old.unlink()
    # The shards are final now; the plots are hashed once drawn (an earlier emit's file may still be there).
    hashes = {p: hashed(p) for p in listing() if p.relative_to(out).as_posix() not in plots.values()}
    drawn = plots_drawn()
    if drawn != plots:
        raise EmitError(f"the plots drawn ({sorted(drawn)}) are not the card's ({sorted(plots)})")
    manifest = {
        "version": version,
        "project": {"name": "kimi-eagle-data", "version": __version__},
        "provenance": provenance,
        "configs": {
            cfg: {"counts": {k: v for k, v in s["report"].items() if isinstance(v, int)},
                  "splits": {sp: {"rows": i.rows, "tokens": i.tokens, "files": i.files} for sp, i in s["splits"].items()}}
            for cfg, s in summary.items()
        },
        "files": {p.relative_to(out).as_posix(): hashes.get(p) or file_sha256(p) for p in listing()},
    }
    if selection:    # the prompts the rows answer: a later prepare of others makes the dataset stale
        manifest["selection"] = {cfg: selection[cfg] for cfg in summary if cfg in selection}
    if repo_id:   # the Hub repo the card's load line names (`emit --repo`); `push` notes a mismatch
        manifest["repo_id"] = repo_id
    card_plots_ = dict(plots)
    vocab_plot = (VOCAB_PLOT[0], card_plots_.pop(VOCAB_PLOT[0])) if VOCAB_PLOT[0] in card_plots_ else None
    card = render_card(summary, chat_format=chat_format, version=version, provenance=provenance, plots=card_plots_, repo_id=repo_id,
                       score=score, probe=probe, manifest_sha256=manifest_sha256(manifest),
                       vocab=coverage_by_config({c: s.get("token_counts") for c, s in summary.items()}),
                       vocab_plot=vocab_plot, conversations=conversation_shapes(workdir, summary),
                       cache=workdir_cache(workdir, list(summary)), schema=schema)
    with atomic_path(out / CARD) as tmp:
        tmp.write_text(card, encoding="utf-8")
    manifest["files"][CARD] = file_sha256(out / CARD)
    write_json(out / "manifest.json", manifest)
    return manifest
