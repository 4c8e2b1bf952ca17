"""How far a run on Slurm is (`kimi-data slurm status`): per shard its state (queued, running on a node, requeued k
times, done, failed and why), its completions done of those known so far, its output tokens/s; for the whole run
the same counts and an ETA; and the prepare and finalize jobs.

Counts come from the workdir's checkpoint files (always there); states from Slurm (`scontrol`, and `sacct` for the
tasks slurmctld forgot, where accounting is on), else from the tasks' markers and, where accounting is off, their
own event lines (task.py). Reading takes no lock: it works while the jobs run.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from kimi_eagle_data.emit.stale import stale_line
from kimi_eagle_data.errors import KimiDataError, MissingInputError
from kimi_eagle_data.executors.slurm import scheduler
from kimi_eagle_data.executors.slurm.layout import SlurmLayout
from kimi_eagle_data.executors.slurm.task import events, marker_valid, prepare_fingerprints
from kimi_eagle_data.store.checkpoint import Checkpoint
from kimi_eagle_data.store.checkpoint_set import CheckpointSet
from kimi_eagle_data.store.prompt_view import read_views
from kimi_eagle_data.store.shard_split import deal
from kimi_eagle_data.store.workdir import Workdir, read_json

# Output tokens/s is measured over the completions committed in this last stretch of time.
RATE_WINDOW_S = 600.0
# Slurm states of a task that ended and will not run again by itself.
ENDED_BADLY = frozenset({"FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
                         "PREEMPTED", "REVOKED"})


class PendingError(KimiDataError, RuntimeError):
    """Finalize found completions not made yet (one line: how many, where, what to do)."""


@dataclass
class ShardStatus:
    shard: int
    state: str                  # queued, running, done, failed, stopped, not started
    detail: str = ""            # where it runs, why it waits or failed
    node: str = ""
    restarts: int = 0           # times Slurm requeued it
    total: int = 0              # completions this shard makes, as known so far (its prompts and later turns)
    done: int = 0
    failed: int = 0             # samples recorded as failed (after all retries)
    tokens_per_s: float = 0.0   # output tokens/s: over the last RATE_WINDOW_S while it runs, else over all it made
    log: str = ""


@dataclass
class JobStatus:
    job: str                    # prepare or finalize
    job_id: str
    state: str                  # Slurm's state, or "unknown" when Slurm cannot be asked
    detail: str = ""


@dataclass
class RunStatus:
    workdir: str
    shards: list[ShardStatus]
    jobs: list[JobStatus]
    scheduler: bool             # Slurm answered
    total: int = 0
    done: int = 0
    failed: int = 0
    tokens_per_s: float = 0.0   # of the shards running now
    completions_per_s: float = 0.0
    eta_s: float | None = None  # None: nothing measured yet, or nothing left
    dataset: str | None = None  # the emitted dataset, once finalize made it
    stale_dataset: str | None = None    # the line saying dataset/ was made from an earlier selection (a pilot's)
    problems: list[str] = field(default_factory=list)   # one line per shard or job that failed for good

    def progress_line(self) -> str:
        """The completions done and, while a shard runs, its speed and the ETA; once every shard is done, that
        generate is done (a speed of 0 and an unknown ETA would say that it stalled)."""
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        if self.shards and all(s.state == "done" for s in self.shards):
            return f"completions: {self.done:,} of {self.total:,}{share}, {self.failed:,} failed; generate is done"
        line = f"completions: {self.done:,} of {self.total:,} known so far{share}, {self.failed:,} failed; "
        if not any(s.state == "running" for s in self.shards):
            return line + "no shard is running now"
        if self.eta_s is not None:
            eta = _duration(self.eta_s)
        elif self.total - self.done - self.failed <= 0:
            eta = "none: every completion known so far is made"
        else:
            eta = "unknown (nothing committed in the last 10 minutes)"
        return line + f"{self.tokens_per_s:,.0f} output tok/s; ETA {eta}"


def _duration(seconds: float) -> str:
    m = int(seconds // 60)
    return f"{m // 1440}d {m // 60 % 24}h {m % 60}m" if m >= 1440 else f"{m // 60}h {m % 60}m" if m >= 60 \
        else f"{m}m {int(seconds % 60)}s"


def last_error_line(log: Path) -> str:
    """The last `error…` line of a job's log (the one line a kimi-data command prints, or bash's and slurmstepd's);
    "" when it has none (its other lines say what went well, not why it ended)."""
    if not log.exists():
        return ""
    with log.open("rb") as f:
        f.seek(max(0, log.stat().st_size - 65536))
        lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith(("error", "slurmstepd")) or "error:" in line
              or "command not found" in line]
    return (errors or [""])[-1][:300]


def _views(workdir: Workdir, configs: list[str]) -> dict:
    """The prepared configs' prompts (store/prompt_view.py), the checkpoints read once for them."""
    checkpoints = CheckpointSet(workdir.checkpoint_paths(), readonly=True)
    try:
        return read_views(workdir, [c for c in configs if workdir.prepared(c).exists()], checkpoints)
    finally:
        checkpoints.close()


def shard_counts(workdir: Workdir, shards: int, configs: list[str], now: float) -> list[dict]:
    """Per shard: {total, done, failed}, its output tokens/s and completions/s over the last RATE_WINDOW_S, and its
    output tokens/s over all it generated (`tokens_per_s_all`: what a shard that stopped shows)."""
    files = {p: Checkpoint(p, readonly=True) for p in workdir.checkpoint_paths()}
    try:
        # Every prompt of the configs' views (store/prompt_view.py): turn 1 and the selection's later turns.
        views = _views(workdir, configs)
        prepared = [i for v in views.values() for i in v.ids()]
        conversation = {i: v.conversation(i) for v in views.values() for i in v.later}
        conversation_of = (lambda x: conversation.get(x, x))
        owner = deal((c for v in views.values() for c in v.first), shards)    # store/shard_split.py
        done = set().union(*(v.done for v in views.values()))
        # A conversation whose answered last turn has no follow yet (prompt_view's to_continue) has one thing left
        # to make on its shard: its next turn or its end.
        unfollowed = [conv for v in views.values() for conv, _ in v.to_continue()]
        failed: set[str] = set()
        for ck in files.values():
            failed |= set(ck.failures())
        out = []
        for i in range(shards):
            ck = files.get(workdir.shard_checkpoint((i, shards)))
            ids = {x for x in prepared if owner.get(conversation_of(x)) == i}
            stats = ck.request_stats() if ck else []
            window = [s for s in stats if s.created_at > now - RATE_WINDOW_S]
            span = now - min((s.created_at for s in window), default=now)
            left = sum(owner.get(conv) == i for conv in unfollowed)
            out.append({"total": len(ids) + left, "done": len(ids & done), "failed": len(ids & failed - done),
                        "tokens_per_s": sum(s.completion_tokens or 0 for s in window) / span if span > 0 else 0.0,
                        "completions_per_s": len(window) / span if span > 0 else 0.0,
                        "tokens_per_s_all": _overall_rate(stats)})
        return out
    finally:
        for ck in files.values():
            ck.close()


def _overall_rate(stats) -> float:
    """Output tokens/s over the stretch in which the shard's completions were made (first request sent to last
    completion committed; a requeue's wait in the queue included)."""
    if not stats:
        return 0.0
    start = min(s.created_at - (s.latency_s or 0.0) for s in stats)
    span = max(s.created_at for s in stats) - start
    return sum(s.completion_tokens or 0 for s in stats) / span if span > 0 else 0.0


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_status_words(status: int) -> str:
    """An exit status in words: "exit 3"; a status above 128 is what a shell reports for a process a signal ended
    (128 + N), said so: "exit 137: killed by SIGKILL (128 + 9)", "exit 143: stopped by SIGTERM (128 + 15)"."""
    if 128 < status < 128 + 65:
        number = status - 128
        how = "killed" if number == signal.SIGKILL else "stopped"
        return f"exit {status}: {how} by {_signal_name(number)} (128 + {number})"
    return f"exit {status}"


def _exit_words(exit_code: str) -> str:
    """Slurm's "code:signal" in words: "exit 3", "exit 137: killed by SIGKILL (128 + 9)" (a script that exited
    with the status of a process the signal ended), "killed by signal 9 (SIGKILL)" (the script itself), "" for
    0:0."""
    code, _, number = exit_code.partition(":")
    if number.isdigit() and number != "0":
        return f"killed by signal {number} ({_signal_name(int(number))})"
    return exit_status_words(int(code)) if code.isdigit() and code != "0" else ""


def _ended(task: scheduler.TaskState) -> str:
    """How a task Slurm reports as ended badly ended, in words: its state, and its exit code or the signal that
    killed it."""
    never = task.state == "CANCELLED" and task.reason == "DependencyNeverSatisfied"
    return ", ".join(x for x in ("never ran: prepare failed" if never else task.state.lower(),
                                 _exit_words(task.exit_code)) if x)


def _shard_state(i: int, shards: int, lay: SlurmLayout, task: scheduler.TaskState | None, marker_ok: bool,
                 asked: bool) -> ShardStatus:
    """A shard's state: Slurm's when it knows the task, else its marker and (accounting off) its own events."""
    log = lay.generate_log(i)
    s = ShardStatus(shard=i, state="not started", log=str(log))
    records = events(lay.events_file(i, shards))
    starts = [e for e in records if e.get("event") == "start"]
    if starts:
        s.node, s.restarts = starts[-1].get("host", ""), int(starts[-1].get("restarts", 0))
    if task is not None:
        s.restarts = max(s.restarts, task.restarts)
        s.node = task.node or s.node
    requeued = f"requeued {s.restarts} time{'s' if s.restarts != 1 else ''}" if s.restarts else ""
    if marker_ok:       # done for the prompts prepared now, whatever its task does (a rerun does nothing)
        s.state, s.detail = "done", requeued
    elif task is not None and task.state == "PENDING":
        why = {"Dependency": "waits for prepare", "BeginTime": "starts shortly"}.get(task.reason, task.reason)
        s.state, s.detail = "queued", ", ".join(x for x in (why, requeued) if x)
    elif task is not None and task.active:
        s.state, s.detail = "running", ", ".join(x for x in (f"on {task.node}" if task.node else "", requeued) if x)
    elif task is not None and task.state in ENDED_BADLY:
        s.state, s.detail = "failed", "; ".join(x for x in (_ended(task), last_error_line(log)) if x)
    elif task is not None and task.state == "COMPLETED":
        s.state, s.detail = "stopped", "ended without its marker: prompts prepared again since? submit again"
    elif records:       # Slurm forgot the task (or cannot be asked): its own record says how it ended
        last = records[-1]
        if last.get("event") == "end" and last.get("rc") not in (None, 0):
            s.state, s.detail = "failed", "; ".join(x for x in (exit_status_words(int(last["rc"])),
                                                                last_error_line(log)) if x)
        elif last.get("event") == "start" and asked:   # no end: killed with its node, or by SIGKILL
            s.state, s.detail = "failed", "; ".join(x for x in (f"its task on {s.node or 'its node'} ended without "
                                                                "a word (its node lost, or SIGKILL)",
                                                                last_error_line(log)) if x)
        elif last.get("event") == "start":
            s.state, s.detail = "running", f"on {s.node} (per its events; Slurm not reachable from here)"
    return s


def _job_state(job: str, job_id: str, task: scheduler.TaskState | None, lay: SlurmLayout, asked: bool) -> JobStatus:
    if task is None:
        return JobStatus(job, job_id, "unknown" if not asked else "gone", "" if not asked else
                         "Slurm no longer knows it (see its log)")
    detail = task.reason
    if task.state == "PENDING" and task.reason == "Dependency":
        detail = "waits for prepare" if job == "generate" else "waits for every shard"
    elif task.state == "CANCELLED" and task.reason == "DependencyNeverSatisfied":
        detail = "will not run: a job before it failed"
    elif task.state in ENDED_BADLY:
        detail = "; ".join(x for x in (_exit_words(task.exit_code), last_error_line(lay.log(job))) if x)
    return JobStatus(job, job_id, task.state, detail)


def run_status(workdir: str | Path, now: float | None = None) -> RunStatus:
    """The run's status as it stands (MissingInputError when nothing was submitted from this workdir)."""
    now = time.time() if now is None else now
    wd = Workdir(Path(workdir).resolve())
    lay = SlurmLayout(wd.slurm)
    if not lay.submit_record.exists():
        raise MissingInputError(f"{wd.root} has no Slurm submit ({lay.submit_record} is missing); submit with "
                                "`kimi-data slurm submit --workdir DIR --nodes N`")
    record = read_json(lay.submit_record)
    shards, configs, ids = int(record["shards"]), list(record["configs"]), record["jobs"]
    states = {job: scheduler.job_states(job_id) for job, job_id in ids.items()}
    asked = all(s is not None for s in states.values())
    fingerprints = prepare_fingerprints(wd, configs)
    counts = shard_counts(wd, shards, configs, now)
    tasks = states.get("generate") or {}
    result = RunStatus(workdir=str(wd.root), shards=[], jobs=[], scheduler=asked)
    for i in range(shards):
        s = _shard_state(i, shards, lay, tasks.get(i), marker_valid(lay.marker(i, shards), fingerprints), asked)
        c = counts[i]
        s.total, s.done, s.failed = c["total"], c["done"], c["failed"]
        if s.state == "running":      # the rates of a shard that stopped would only decay
            s.tokens_per_s = c["tokens_per_s"]
            result.completions_per_s += c["completions_per_s"]
        else:                         # what it made while it ran
            s.tokens_per_s = c["tokens_per_s_all"]
        result.shards.append(s)
        if s.state == "failed":
            result.problems.append(f"shard {i} failed: {s.detail}; log: {s.log}")
    for job in ("prepare", "finalize"):
        task = (states.get(job) or {}).get(None)
        j = _job_state(job, ids[job], task, lay, asked)
        result.jobs.append(j)
        if task is not None and task.state in ENDED_BADLY and task.reason != "DependencyNeverSatisfied":
            result.problems.append(f"{job} failed: {j.detail}; log: {lay.log(job)}")
    result.total = sum(s.total for s in result.shards)
    result.done = sum(s.done for s in result.shards)
    result.failed = sum(s.failed for s in result.shards)
    result.tokens_per_s = sum(s.tokens_per_s for s in result.shards if s.state == "running")
    left = result.total - result.done - result.failed
    rate = result.completions_per_s
    result.eta_s = left / rate if left > 0 and rate > 0 else None
    manifest = wd.dataset / "manifest.json"
    finalize = (states.get("finalize") or {}).get(None)
    result.stale_dataset = stale_line(wd)
    if (all(s.state == "done" for s in result.shards) and manifest.exists() and result.stale_dataset is None
            and manifest.stat().st_mtime >= record["submitted_at"] and not (finalize and finalize.active)):
        result.dataset = str(wd.dataset)
    return result


def check_nothing_pending(workdir: Workdir, shards: int, configs) -> None:
    """PendingError unless every completion of the prompts prepared now (and of the later turns known so far) is
    made or failed for good: what finalize checks before it emits."""
    counts = shard_counts(workdir, shards, list(configs), time.time())
    left = {i: c["total"] - c["done"] - c["failed"] for i, c in enumerate(counts)}
    left = {i: n for i, n in left.items() if n > 0}
    if left:
        where = ", ".join(f"shard {i}: {n:,}" for i, n in left.items())
        raise PendingError(f"{sum(left.values()):,} completions of {workdir.root} are not made yet ({where}); "
                           "finalize generates nothing: submit the same `kimi-data slurm submit` again to make them")
