"""Workdirs of the protocol tests: the arguments that make one, and what its checkpoint holds."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from tests.helpers.cli import popen_cli, run_cli
from tests.helpers.servers import TINY, Server, wait_for

# Protocol tests need many requests, not long ones: one config, short completions.
CONFIGS = ("B6",)


def prepare_args(workdir):
    """`prepare`'s arguments of a protocol workdir (the tiny model, the bundled samples, short completions)."""
    return [*CONFIGS, "--workdir", str(workdir), "--profile", "tiny-kimi", "--model", TINY, "--samples",
            "--max-new-tokens", "64"]


def engine_args(*urls):
    """The engine options of a protocol run against these stand-in servers (generate, build)."""
    return ["--engine", "sglang", *(a for u in urls for a in ("--server", u)), "--retry-backoff", "0.05",
            "--no-progress"]


def sglang_args(workdir, *urls, extra=()):
    """`build`'s arguments: prepare's and the engine's."""
    return [*prepare_args(workdir), *engine_args(*urls), *extra]


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

    shutil.copytree(previous, dst)
    run_cli(command, "--workdir", str(dst))
    return dst


@dataclass
class InFlight:
    """A `kimi-data generate` running in the background on a prepared workdir (generate_in_flight)."""

    server: Server
    workdir: Path
    prepared: int              # prompts prepared
    proc: Any                  # the running generate (helpers.cli.popen_cli)
    pipes: dict

    def again(self) -> None:
        """Start another generate on the same workdir; return once it has committed a completion of its own."""
        before = len(completions(self.workdir))
        self.proc = popen_cli("generate", "--workdir", str(self.workdir), *engine_args(self.server.url),
                              "--concurrency", "2", **self.pipes)
        try:
            wait_for(lambda: len(completions(self.workdir)) > before, 300, "no completion committed", proc=self.proc)
        except AssertionError as e:   # ended first, or never committed: what it printed says why
            if self.proc.poll() is None:
                self.proc.kill()
            out, err = self.proc.communicate(timeout=60)
            raise AssertionError(f"{e}\nstdout: {out}\nstderr: {err}") from None


@contextmanager
def generate_in_flight(tmp_path: Path, *, delay: float = 1.0, output: bool = False) -> Iterator[InFlight]:
    """A generate caught mid-run: a slow stand-in server (`delay` s a request, 2 at a time), the protocol workdir
    (`tmp_path / "w"`) prepared against it, `kimi-data generate --concurrency 2` started in the background, and
    its first commit waited for. `output`: the process's stdout and stderr as pipes (for communicate()). On exit
    the generate, if still running, and the server are killed."""
    server = Server("--delay", str(delay), "--max-batch", "2").start()
    w = tmp_path / "w"
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} if output else {}
    run = None
    try:
        run_cli("prepare", *prepare_args(w))
        run = InFlight(server, w, prepared_count(w), None, pipes)
        run.again()
        yield run
    finally:
        if run is not None and run.proc is not None and run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
        server.kill()
