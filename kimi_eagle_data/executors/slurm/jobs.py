"""The three jobs of a run on Slurm, written from templates/ into `<workdir>/slurm/` and submitted with `sbatch`:

    prepare   `kimi-data prepare` once, on one node without a GPU
    generate  a job array of one task per shard: the engine started on its node with `kimi-data serve` (unless
              --server names running servers), then `kimi-data generate --shard $SLURM_ARRAY_TASK_ID/N`;
              --requeue, resumable; `kimi-data slurm task` says whether the shard is done and marks it so
    finalize  after every task succeeded (--dependency=afterok): `kimi-data slurm task check` (nothing pending, else
              one line and exit 1: finalize never prepares or generates), `kimi-data emit` (validates every
              completion while it writes the rows, card), then `kimi-data push` when asked

Every job runs the run options the submit was given, as typed (each command those it takes), so each command sees
the settings a one-process `build` would; a shard's own options (its server) are never written into run.json.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.registry import PLUGINS_VARIABLE
from kimi_eagle_data.executors.slurm import scheduler
from kimi_eagle_data.executors.slurm.layout import SlurmLayout
from kimi_eagle_data.store.workdir import Workdir, read_json, write_json

# How long a task's engine may take to become healthy (serve's --health-timeout, and generate's wait on it): loading
# Kimi-K2.5 (~600 GB of weights) from a shared filesystem can take tens of minutes.
SERVER_START_S = 3600
# Default seconds before the time limit at which a generate task is warned (USR1) and requeues itself.
REQUEUE_MARGIN_S = 120
SHARD = "$shard"        # the generate script's shell variable holding the task's shard index
_PLAIN_PATH = re.compile(r"^[A-Za-z0-9_./+@:,=-]+$")    # what an #SBATCH line can hold unquoted

class SubmitError(KimiDataError, ValueError):
    """A submit that cannot work as asked (one line: what, and what to do)."""

@dataclass(frozen=True)
class Server:
    """The engine each generate task starts on its node: `kimi-data serve` with the profile's launch flags."""
    engine: str                 # sglang, vllm, or local (the CPU stand-in speaking SGLang's protocol)
    profile: str
    model: str
    context_length: int         # the run's max_seq_len plus what the engine needs beside it
    port: int = 30000           # task i listens on port + i (tasks that share a node do not collide)
    extra: tuple[str, ...] = ()    # more options of `kimi-data serve` (--serve-arg)

    def command(self, gpus: int) -> str:
        args = ["kimi-data", "serve", "--engine", self.engine, "--profile", self.profile, "--model", self.model]
        if self.engine != "local":
            args += ["--tp", str(max(gpus, 1))]
        args += ["--context-length", str(self.context_length), "--health-timeout", str(SERVER_START_S), *self.extra]
        return shlex.join(args) + ' --port "$port"'

@dataclass(frozen=True)
class SlurmJobs:
    """What `kimi-data slurm submit` was asked for, resolved: enough to write the three scripts."""
    workdir: Path
    shards: int
    configs: tuple[str, ...]
    # The run options as typed on submit, each command's share of them (--workdir included): every job's command
    # sees the settings the submit was given, and takes only the options it reads.
    prepare_args: tuple[str, ...]
    generate_args: tuple[str, ...]
    emit_args: tuple[str, ...]
    server: Server | None            # None: the engine is in-process (local) or --server names running ones
    gpus_per_node: int = 0
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    setup: str | None = None         # None: put the environment that ran the submit on PATH
    sbatch_args: tuple[str, ...] = ()
    push_repo: str | None = None
    requeue_margin: int = REQUEUE_MARGIN_S     # seconds before the time limit a generate task requeues itself
    cwd: Path = field(default_factory=Path.cwd)

    def __post_init__(self):
        for path in (self.workdir, self.cwd):
            if not _PLAIN_PATH.match(str(path)):
                raise SubmitError(f"{path}: Slurm's #SBATCH lines cannot hold this path (spaces, quotes); use a "
                                  "path of letters, digits and ./_-")

    @property
    def layout(self) -> SlurmLayout:
        return SlurmLayout(Workdir(self.workdir).slurm)

    def sbatch_lines(self) -> list[str]:
        lines = [f"--{k}={v}" for k, v in (("partition", self.partition), ("account", self.account),
                                          ("qos", self.qos), ("time", self.time)) if v]
        return lines + list(self.sbatch_args)

    def setup_lines(self) -> str:
        if self.setup is not None:
            lines = "# The task's environment (--setup):\n" + self.setup.strip()
        else:
            bin_dir = Path(sys.executable).parent
            lines = ("# The environment `kimi-data slurm submit` ran in (give --setup for another):\n"
                     f"export PATH={shlex.quote(str(bin_dir))}:\"$PATH\"")
        plugins = os.environ.get(PLUGINS_VARIABLE, "").strip()
        if plugins:     # a cluster may not export the submitting shell's variables: the tasks load what it loaded
            lines += (f"\n# The format plug-ins the submit loaded ({PLUGINS_VARIABLE}):\n"
                      f"export {PLUGINS_VARIABLE}={shlex.quote(plugins)}")
        return lines

    def scripts(self) -> dict[str, str]:
        """Each job's script text, by job name (prepare, generate, finalize)."""
        import jinja2

        env = jinja2.Environment(loader=jinja2.PackageLoader("kimi_eagle_data.executors.slurm", "templates"),
                                 undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                                 lstrip_blocks=True, autoescape=False)
        common = dict(workdir=str(self.workdir), shards=self.shards, cwd=str(self.cwd),
                      sbatch_lines=self.sbatch_lines(), setup=self.setup_lines())
        lay = self.layout
        configs = shlex.join(self.configs)
        task = f"kimi-data slurm task {{step}} --workdir {shlex.quote(str(self.workdir))}"
        generate_args = [*self.generate_args, "--no-progress"]
        if self.server and "--health-timeout" not in self.generate_args:
            generate_args += ["--health-timeout", str(SERVER_START_S)]     # the one wait for the task's server
        server_arg = ' --server "http://127.0.0.1:$port"' if self.server else ""
        emit_args = [*self.emit_args, *(("--repo", self.push_repo) if self.push_repo else ())]
        return {
            "prepare": env.get_template("prepare.sbatch").render(**common, log=lay.log("prepare"),
                                                                 prepare_args=shlex.join(self.prepare_args)),
            "generate": env.get_template("generate.sbatch").render(
                **common, log=lay.generate_log("%a"), gpus=self.gpus_per_node, margin=self.requeue_margin,
                task=task.format(step="\"$1\"") + f' --shard "$shard/{self.shards}" {configs}',
                server_log=_with_shard(lay.server_log(SHARD)),
                serve=self.server is not None, servers="--server" in self.generate_args,
                serve_command=self.server.command(self.gpus_per_node) if self.server else "",
                port=self.server.port if self.server else 0,
                generate_args=shlex.join(generate_args) + server_arg + f' --shard "$shard/{self.shards}"'),
            "finalize": env.get_template("finalize.sbatch").render(
                **common, log=lay.log("finalize"), emit_args=shlex.join(emit_args),
                check=task.format(step="check") + f" --shards {self.shards} {configs}",
                workdir_arg=shlex.quote(str(self.workdir)), push_repo=self.push_repo or ""),
        }

    def write(self) -> dict[str, Path]:
        """The scripts written into <workdir>/slurm/ (with the folders the jobs write into), by job name."""
        lay = self.layout
        lay.make()
        paths = {}
        for job, text in self.scripts().items():
            path = lay.script(job)
            path.write_text(text)
            path.chmod(0o755)
            paths[job] = path
        return paths

    def sbatch_commands(self) -> list[list[str]]:
        """How submit hands the scripts to Slurm, in order ($PREPARE, $GENERATE: the job ids sbatch printed)."""
        lay = self.layout
        after = "--kill-on-invalid-dep=yes"
        return [["sbatch", "--parsable", str(lay.script("prepare"))],
                ["sbatch", "--parsable", "--dependency=afterok:$PREPARE", after, str(lay.script("generate"))],
                ["sbatch", "--parsable", "--dependency=afterok:$GENERATE", after, str(lay.script("finalize"))]]

def _with_shard(path: Path) -> str:
    """`path` as one shell word with `$shard` left to expand."""
    head, _, tail = str(path).partition(SHARD)
    return shlex.quote(head) + '"$shard"' + (shlex.quote(tail) if tail else "")

def active_jobs(layout: SlurmLayout) -> list[str]:
    """The jobs of the workdir's last submit that are still queued or running (`job STATE` each)."""
    if not layout.submit_record.exists():
        return []
    found = []
    for job, job_id in read_json(layout.submit_record).get("jobs", {}).items():
        states = scheduler.job_states(job_id) or {}
        found += [f"{job} {s.job} {s.state}" for s in states.values() if s.active]
    return found

def submit(jobs: SlurmJobs) -> dict[str, str]:
    """Write the scripts and submit them, each waiting for the one before; the job ids by job name, also recorded
    in <workdir>/slurm/submit.json (an earlier submit's record moves under "earlier")."""
    lay = jobs.layout
    missing = scheduler.missing_command()
    if missing:
        raise SubmitError(f"`{missing}` is not on PATH: submit from a machine with Slurm's commands (a login node), "
                          "or use --dry-run to write the scripts only")
    running = active_jobs(lay)
    if running:
        raise SubmitError(f"jobs of the last submit on {jobs.workdir} are still queued or running ({', '.join(running)});"
                          " wait for them, or scancel them, before submitting again")
    paths = jobs.write()
    earlier = []
    if lay.submit_record.exists():
        old = read_json(lay.submit_record)
        earlier = [*old.pop("earlier", []), old]
    ids: dict[str, str] = {}
    after = "--kill-on-invalid-dep=yes"
    # The three jobs and their record are one step: Ctrl-C or SIGTERM waits until it is over, and a job sbatch
    # refused takes back those submitted before it (an unrecorded job would run beside the next submit's).
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        try:
            ids["prepare"] = scheduler.sbatch(paths["prepare"])
            ids["generate"] = scheduler.sbatch(paths["generate"], f"--dependency=afterok:{ids['prepare']}", after)
            ids["finalize"] = scheduler.sbatch(paths["finalize"], f"--dependency=afterok:{ids['generate']}", after)
        except BaseException:
            scheduler.scancel(list(ids.values()))
            raise
        write_json(lay.submit_record, {"submitted_at": time.time(), "shards": jobs.shards,
                                       "configs": list(jobs.configs), "jobs": ids,
                                       "prepare_args": list(jobs.prepare_args),
                                       "generate_args": list(jobs.generate_args), "emit_args": list(jobs.emit_args),
                                       "server": asdict(jobs.server) if jobs.server else None, "earlier": earlier})
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return ids

