"""Where the Slurm executor keeps its files: `<workdir>/slurm/` (store/workdir.py's `Workdir.slurm`).

    slurm/prepare.sbatch, generate.sbatch, finalize.sbatch   the job scripts, written from templates/
    slurm/submit.json                   what was submitted: shards, configs, job ids (earlier submits under "earlier")
    slurm/logs/prepare.log, finalize.log, generate-<i>.log, server-<i>.log   each job's output, kept across requeues
    slurm/done/shard-<i>-of-<N>         shard i's completion marker (JSON): {config: prepare fingerprint} it finished
    slurm/events/shard-<i>-of-<N>.jsonl where Slurm keeps no accounting: one JSON line per start and end of shard
                                        i's task (time, host, restarts, rc), for when slurmctld forgot it

A path may hold the placeholder SHARD (a shell variable in the generate script, `%a` in its #SBATCH lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SlurmLayout:
    root: Path      # <workdir>/slurm

    def script(self, job: str) -> Path:
        return self.root / f"{job}.sbatch"

    @property
    def submit_record(self) -> Path:
        return self.root / "submit.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def log(self, job: str) -> Path:
        """prepare's and finalize's output."""
        return self.logs / f"{job}.log"

    def generate_log(self, shard: int | str) -> Path:
        return self.logs / f"generate-{shard}.log"

    def server_log(self, shard: int | str) -> Path:
        return self.logs / f"server-{shard}.log"

    @property
    def done(self) -> Path:
        return self.root / "done"

    def marker(self, shard: int | str, shards: int) -> Path:
        return self.done / f"shard-{shard}-of-{shards}"

    @property
    def events(self) -> Path:
        return self.root / "events"

    def events_file(self, shard: int | str, shards: int) -> Path:
        return self.events / f"shard-{shard}-of-{shards}.jsonl"

    def make(self) -> None:
        """The folders the jobs write into (Slurm does not create a log's folder: a job would fail unseen)."""
        for d in (self.logs, self.done, self.events):
            d.mkdir(parents=True, exist_ok=True)
