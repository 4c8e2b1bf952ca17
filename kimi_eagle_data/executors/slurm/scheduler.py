"""Slurm's commands as the executor uses them: `sbatch` to submit a script, `scontrol show job` (and `sacct`, where
accounting is configured) to read the state of a job and of each task of a job array. Nothing here knows the
pipeline."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kimi_eagle_data.errors import KimiDataError

# A job in one of these states may still run: a new submit on the same workdir waits for it.
ACTIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                    "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "SPECIAL_EXIT", "RESV_DEL_HOLD"})
_TIMEOUT_S = 60


class SchedulerError(KimiDataError, RuntimeError):
    """A Slurm command failed (sbatch refused a script, the controller did not answer)."""


@dataclass(frozen=True)
class TaskState:
    """One job, or one task of a job array, as the scheduler reports it."""
    job: str              # the id to name it by: "12_3" for task 3 of array 12, else "12"
    state: str            # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED, ...
    reason: str = ""      # why it pends or ended (scontrol's Reason: Dependency, BeginTime, NonZeroExitCode, ...)
    node: str = ""        # where it runs or ran
    restarts: int = 0     # times it was requeued (scontrol only)
    exit_code: str = ""   # "code:signal"

    @property
    def active(self) -> bool:
        return self.state in ACTIVE


def missing_command() -> str | None:
    """The first Slurm command this machine lacks (None when sbatch and scontrol are there)."""
    return next((c for c in ("sbatch", "scontrol") if shutil.which(c) is None), None)


@functools.lru_cache(maxsize=1)
def accounting_on() -> bool:
    """Whether Slurm keeps accounting here (`sacct` answers for jobs slurmctld forgot); False where Slurm cannot be
    asked."""
    if shutil.which("scontrol") is None:
        return False
    try:
        proc = _run(["scontrol", "show", "config"])
    except SchedulerError:
        return False
    found = re.search(r"^AccountingStorageType\s*=\s*(\S+)", proc.stdout, re.M)
    return proc.returncode == 0 and found is not None and found.group(1) != "accounting_storage/none"


def _run(args: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except FileNotFoundError:
        raise SchedulerError(f"`{args[0]}` is not on PATH; run this where Slurm's commands are (a login node)") \
            from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"`{' '.join(args[:3])}` did not answer in {_TIMEOUT_S} s; is slurmctld up?") from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def sbatch(script: Path, *options: str) -> str:
    """Submit `script`; its job id."""
    proc = _run(["sbatch", "--parsable", *options, str(script)])
    if proc.returncode != 0:
        raise SchedulerError(f"sbatch refused {script}: {_last_line(proc.stderr)}")
    return proc.stdout.strip().split(";")[0]


def scancel(job_ids: list[str]) -> None:
    """Cancel jobs (best effort: a job that already ended is no error)."""
    if job_ids:
        try:
            _run(["scancel", *job_ids])
        except SchedulerError:
            pass


def _task_ids(spec: str) -> list[int]:
    """An array's ArrayTaskId field: "3", or the pending tasks "0-2", "1,3-5", "0-15%4"."""
    ids: list[int] = []
    for part in spec.split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            ids.extend(range(int(lo), int(hi or lo) + 1) if (hi or lo).isdigit() else [int(lo)])
    return ids


def _scontrol_states(job_id: str) -> dict[int | None, TaskState] | None:
    """Every task of job `job_id` that slurmctld still knows ({} when it knows none; None when it cannot be
    asked). Finished jobs stay known for MinJobAge (300 s by default)."""
    proc = _run(["scontrol", "show", "job", "-o", job_id])
    if proc.returncode != 0:
        return {} if "Invalid job id" in proc.stderr else None
    states: dict[int | None, TaskState] = {}
    for line in proc.stdout.splitlines():
        f = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobState" not in f:
            continue
        node = f.get("BatchHost") or f.get("NodeList", "")
        common = dict(state=f["JobState"], reason="" if f.get("Reason") in (None, "None", "(null)") else f["Reason"],
                      node="" if node == "(null)" else node, restarts=int(f.get("Restarts", "0") or 0),
                      exit_code=f.get("ExitCode", ""))
        if "ArrayTaskId" not in f:
            states[None] = TaskState(job=f.get("JobId", job_id), **common)
            continue
        for i in _task_ids(f["ArrayTaskId"]):
            states[i] = TaskState(job=f"{f.get('ArrayJobId', job_id)}_{i}", **common)
    return states


def _sacct_states(job_id: str) -> dict[int | None, TaskState]:
    """The tasks of job `job_id` in Slurm's accounting ({} where accounting is not configured)."""
    if shutil.which("sacct") is None:
        return {}
    proc = _run(["sacct", "-n", "-P", "-X", "-j", job_id, "--format=JobID,State,ExitCode,NodeList"])
    if proc.returncode != 0:
        return {}
    states: dict[int | None, TaskState] = {}
    for line in proc.stdout.splitlines():
        fields = line.split("|")
        if len(fields) < 4:
            continue
        job, state, exit_code, node = fields[:4]
        state = state.split()[0] if state else ""     # "CANCELLED by 0"
        node = "" if node.startswith("None") else node
        array, _, task = job.partition("_")
        if not task:
            states[None] = TaskState(job=job, state=state, node=node, exit_code=exit_code)
            continue
        for i in _task_ids(task.strip("[]")):
            states[i] = TaskState(job=f"{array}_{i}", state=state, node=node, exit_code=exit_code)
    return states


def job_states(job_id: str) -> dict[int | None, TaskState] | None:
    """Job `job_id`'s tasks by array index (None: a job that is not an array) as slurmctld knows them, completed by
    accounting for tasks it has forgotten; None when Slurm cannot be asked from here."""
    if missing_command():
        return None
    try:
        live = _scontrol_states(job_id)
    except SchedulerError:
        return None
    if live is None:
        return None
    return {**_sacct_states(job_id), **live}
