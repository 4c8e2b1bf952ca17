"""Stage 4, emit: validated rows -> the Hub-layout tree (SPEC §6).

    dataset/README.md                               card: YAML (configs, dataset_info, license) + body
    dataset/data/<CFG>/<split>-0000i-of-0000N.parquet
    dataset/assets/*.png                            plots referenced by the card
    dataset/manifest.json                           version, content hashes, provenance, counts

Everything written is a function of the workdir's contents only (dates come from the
checkpoint, not the clock), so emitting twice gives byte-identical files.
"""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from . import __version__
from .builders.kimi_eagle import iter_split_tables
from .schema import ROW_SCHEMA, SPLITS
from .workdir import Workdir, atomic_path, file_sha256, read_json, write_json

SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")
SHARD_TARGET_BYTES = 512 << 20     # uncompressed token bytes per shard (~150-250 MB of Parquet)


class EmitError(RuntimeError):
    pass


class NothingToEmit(EmitError):
    """No config has a generated sample yet (e.g. every request failed)."""


@dataclass
class SplitInfo:
    rows: int
    tokens: int
    files: list[str] = field(default_factory=list)
    num_bytes: int = 0


def _split_sizes(validated: Path) -> dict[str, tuple[int, int]]:
    t = pq.read_table(validated, columns=["split", "prompt_len", "completion_len"]).to_pydict()
    sizes = {s: [0, 0] for s in SPLITS}
    for s, p, c in zip(t["split"], t["prompt_len"], t["completion_len"]):
        sizes[s][0] += 1
        sizes[s][1] += p + c
    return {s: (n, tok) for s, (n, tok) in sizes.items()}


def write_split(validated: Path, out_dir: Path, split: str, rows: int, tokens: int) -> SplitInfo:
    """Stream one split into N Parquet shards of roughly SHARD_TARGET_BYTES token bytes."""
    n_shards = max(1, math.ceil(tokens * 5 / SHARD_TARGET_BYTES))   # 4 bytes id + 1 byte mask per token
    rows_per_shard = math.ceil(rows / n_shards)
    info = SplitInfo(rows=rows, tokens=tokens)
    tables = iter_split_tables(validated, split)
    pending = None
    for shard in range(n_shards):
        name = f"{split}-{shard:05d}-of-{n_shards:05d}.parquet"
        path = out_dir / name
        written = 0
        with atomic_path(path) as tmp:
            with pq.ParquetWriter(tmp, ROW_SCHEMA, compression="zstd", use_dictionary=["source", "finish_reason"],
                                  write_page_index=False) as writer:
                while written < rows_per_shard:
                    if pending is None:
                        pending = next(tables, None)
                        if pending is None:
                            break
                    take = min(rows_per_shard - written, pending.num_rows)
                    writer.write_table(pending.slice(0, take))
                    written += take
                    pending = pending.slice(take) if take < pending.num_rows else None
        info.files.append(name)
        info.num_bytes += path.stat().st_size
    return info


def emit_dataset(workdir: Workdir, configs: list[str], *, version: str, provenance: dict[str, Any],
                 repo_id: str | None = None) -> dict[str, Any]:
    if not SEMVER.match(version):
        raise EmitError(f"version {version!r} is not semver (MAJOR.MINOR.PATCH); pass e.g. --version 1.0.0")
    from .card import render_card
    from .plots import plot_length_histograms, plot_lengths

    out = workdir.dataset
    data_dir = out / "data"
    if data_dir.exists():  # configs may have shrunk or been re-sharded: rebuild the data tree whole
        shutil.rmtree(data_dir)
    summary: dict[str, Any] = {}
    for config in configs:
        validated = workdir.validated(config)
        if not validated.exists():
            raise EmitError(f"{validated} is missing; run `kimi-data validate {config} --workdir {workdir.root}`")
        report = read_json(workdir.validate_report(config))
        sizes = _split_sizes(validated)
        splits = {}
        for split in SPLITS:
            rows, tokens = sizes[split]
            if rows == 0:
                continue   # `datasets` cannot load an empty split: a split exists only where it has rows
            splits[split] = write_split(validated, data_dir / config, split, rows, tokens)
        if splits:
            partition = read_json(workdir.prepare_report(config)).get("partition", {})
            summary[config] = {"report": report, "splits": splits, "partition": partition}
    if not summary:
        raise NothingToEmit(f"nothing to emit from {workdir.root}: no config has a generated sample yet; "
                            "run generate (with --retry-failed if samples failed)")

    plots = {**plot_lengths(workdir, list(summary), out / "assets"),
             **plot_length_histograms(workdir, list(summary), out / "assets")}
    from .score_report import load_report

    card = render_card(summary, version=version, provenance=provenance, plots=plots, repo_id=repo_id,
                       score=load_report(workdir))
    with atomic_path(out / "README.md") as tmp:
        tmp.write_text(card, encoding="utf-8")

    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"
                   and not p.name.startswith("."))
    manifest = {
        "version": version,
        "project": {"name": "kimi-eagle-data", "version": __version__},
        "provenance": provenance,
        "configs": {
            cfg: {"counts": {k: v for k, v in s["report"].items() if isinstance(v, int)},
                  "splits": {sp: {"rows": i.rows, "tokens": i.tokens, "files": i.files} for sp, i in s["splits"].items()}}
            for cfg, s in summary.items()
        },
        "files": {str(p.relative_to(out)): file_sha256(p) for p in files},
    }
    if repo_id:   # the Hub repo the card's load line names (`emit --repo`); `push` notes a mismatch
        manifest["repo_id"] = repo_id
    write_json(out / "manifest.json", manifest)
    return manifest
