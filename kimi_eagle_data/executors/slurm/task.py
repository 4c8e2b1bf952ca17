"""What a job writes and reads about itself, in Python (the job scripts call it through `kimi-data slurm task`):

    begin     a generate task starts: nothing to do when its shard's marker holds the prepare fingerprints of now
    end       it ended: with exit 0 its marker is written; where Slurm keeps no accounting, one event line
    check     finalize starts: status.py's check_nothing_pending (one line naming what is pending: finalize never
              generates)

A marker (`slurm/done/shard-i-of-N`, JSON) holds {config: prepare fingerprint}: prompts prepared anew (another
--limit, an edited source) make it stale. Slurm records a task's state, node, restarts and exit code; the task's
own event lines (`slurm/events/`) exist only where Slurm's accounting is off, so that `slurm status` can say how a
task ended once slurmctld forgot it (MinJobAge).
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from kimi_eagle_data.executors.slurm import scheduler
from kimi_eagle_data.executors.slurm.layout import SlurmLayout
from kimi_eagle_data.store.workdir import Workdir, read_json, write_json


@dataclass(frozen=True)
class ShardTask:
    workdir: Workdir
    shard: int
    shards: int
    configs: tuple[str, ...]

    @property
    def layout(self) -> SlurmLayout:
        return SlurmLayout(self.workdir.slurm)

    @property
    def marker(self) -> Path:
        return self.layout.marker(self.shard, self.shards)

    def done(self) -> bool:
        """Whether the shard's marker names the prompts prepared now."""
        return marker_valid(self.marker, prepare_fingerprints(self.workdir, self.configs))

    def begin(self) -> None:
        record_event(self.layout.events_file(self.shard, self.shards), "start")

    def end(self, rc: int) -> None:
        if rc == 0:
            write_json(self.marker, prepare_fingerprints(self.workdir, self.configs))
        record_event(self.layout.events_file(self.shard, self.shards), "end", rc=rc)


def prepare_fingerprints(workdir: Workdir, configs) -> dict[str, str]:
    """{config: the fingerprint its prepare report records} ({} when a config is not prepared)."""
    found = {}
    for c in configs:
        path = workdir.prepare_report(c)
        if not path.exists():
            return {}
        found[c] = read_json(path).get("fingerprint")
    return found


def marker_valid(marker: Path, fingerprints: dict[str, str]) -> bool:
    if not fingerprints or not marker.exists():
        return False
    try:
        return orjson.loads(marker.read_bytes()) == fingerprints
    except orjson.JSONDecodeError:     # a marker an older version wrote (fingerprint lines): run the shard again
        return False


def record_event(path: Path, event: str, **fields) -> None:
    """One JSON line for `slurm status`, only where Slurm keeps no accounting (else sacct says it all)."""
    if scheduler.accounting_on():
        return
    line = {"event": event, "time": time.time(), "host": socket.gethostname(),
            "restarts": int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0), **fields}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        f.write(orjson.dumps(line) + b"\n")


def events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:     # a line cut by a node that died while writing it
            continue
    return out
