"""Workdirs of the protocol tests: the arguments that make one, and what its checkpoint holds."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

from tests.helpers.servers import TINY

# Protocol tests need many requests, not long ones: one config, short completions.
CONFIGS = ("B6",)


def sglang_args(workdir, *urls, extra=()):
    return [*CONFIGS, "--workdir", str(workdir), "--profile", "tiny-kimi", "--model", TINY, "--samples",
            "--engine", "sglang", *(a for u in urls for a in ("--server", u)), "--retry-backoff", "0.05",
            "--max-new-tokens", "64", "--no-progress", *extra]


def completions(workdir) -> list[str]:
    ids = []
    for f in sorted(workdir.glob("generations*.sqlite")):
        try:
            ids += [r[0] for r in sqlite3.connect(f).execute("SELECT id FROM completions")]
        except sqlite3.OperationalError:   # a file created this instant, schema not written yet
            pass
    return ids


def completion_stamps(workdir) -> dict[str, float]:
    """{id: the time its completion was committed} over the workdir's checkpoint files."""
    stamps = {}
    for f in sorted(workdir.glob("generations*.sqlite")):
        try:
            with closing(sqlite3.connect(f)) as db:
                stamps.update(db.execute("SELECT id, created_at FROM completions").fetchall())
        except sqlite3.OperationalError:   # a file created this instant, schema not written yet
            pass
    return stamps


def failure_reasons(workdir) -> dict[str, int]:
    """{reason: failed samples} over the workdir's checkpoint files."""
    from collections import Counter

    reasons = Counter()
    for f in sorted(workdir.glob("generations*.sqlite")):
        with closing(sqlite3.connect(f)) as db:
            reasons.update(r for (r,) in db.execute("SELECT reason FROM failures"))
    return dict(reasons)


def prepared_count(workdir) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(workdir / "prepared" / f"{c}.parquet").num_rows for c in CONFIGS)


def report(workdir, config):
    return json.loads((workdir / "validated" / f"{config}.json").read_text())


def next_stage(previous, dst, command: str):
    """A copy of the previous stage's workdir at `dst` with `kimi-data command` run on it."""
    import shutil

    from tests.helpers.cli import run_cli

    shutil.copytree(previous, dst)
    run_cli(command, "--workdir", str(dst))
    return dst
