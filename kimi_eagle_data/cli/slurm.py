"""`kimi-data slurm submit` and `kimi-data slurm status` (registered at the end of cli/main.py): options in, the
Slurm executor (executors/slurm/) does the work, its reports printed here."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from kimi_eagle_data.cli.common import READS_ONLY, REWRITES, friendly_errors, out
from kimi_eagle_data.cli.help import SectionedCommand
from kimi_eagle_data.cli.options import options_for, settings_from
from kimi_eagle_data.settings import COMMAND_SETTINGS, DECLARED
from kimi_eagle_data.run_checks import REPO_ID
from kimi_eagle_data.executors.slurm.jobs import Server, SlurmJobs, submit as submit_jobs
from kimi_eagle_data.executors.slurm.task import ShardTask
from kimi_eagle_data.store.workdir import Workdir


@click.group()
def slurm():
    """Run the pipeline on a Slurm cluster (docs/production.md): prepare once, generate as a job array (one shard
    per node, requeued on preemption and resumed where it stopped), then validate, emit and card once every shard
    succeeded."""


# What is true after Ctrl-C during a submit (the three sbatch calls and their record are one step: see jobs.submit).
SUBMITS = ("the jobs are submitted and recorded together or not at all; `kimi-data slurm status --workdir DIR` says "
           "whether they are queued")


def _typed(ctx: click.Context, command: str) -> list[str]:
    """The options of the settings `command` reads (settings.py COMMAND_SETTINGS) the command line gave, as they
    would be typed again."""
    args: list[str] = []
    reads = COMMAND_SETTINGS[command]
    for p in ctx.command.params:
        if p.name not in reads or p.name == "progress" or (p.name not in DECLARED and p.name != "configs"):
            continue
        if ctx.get_parameter_source(p.name) in (None, click.core.ParameterSource.DEFAULT):
            continue
        value = ctx.params[p.name]
        if isinstance(p, click.Argument):
            args += list(value)
        elif p.is_flag:
            args.append(p.opts[0])
        else:
            for v in (value if p.multiple else [value]):
                args += [p.opts[0], str(v)]
    return args


def _repo_id(ctx, param, value):
    if value is not None and not REPO_ID.match(value):
        raise click.BadParameter(f"{value!r}: expected ORG/NAME")
    return value


def _server(settings, serve_engine: str | None, port: int, serve_args: tuple[str, ...]):
    """The engine each generate task starts (None: in-process, or --server names running servers)."""
    # lazy: keeps asyncio and ssl (the engine clients) out of every CLI start
    from kimi_eagle_data.engines.sglang import SGLangEngine
    from kimi_eagle_data.engines.vllm import VLLMEngine

    if settings.servers:
        if serve_engine:
            raise click.BadParameter("--server names running servers: the tasks start none", param_hint="--serve-engine")
        return None
    if serve_engine is None and settings.engine == "local":
        return None
    serve_engine = serve_engine or settings.engine
    speaks = "vllm" if serve_engine == "vllm" else "sglang"      # the local stand-in speaks SGLang's protocol
    if settings.engine != speaks:
        raise click.BadParameter(f"a {serve_engine} server needs --engine {speaks} (the client that talks to it)",
                                 param_hint="--serve-engine")
    margin = (VLLMEngine if speaks == "vllm" else SGLangEngine).context_margin
    return Server(engine=serve_engine, profile=settings.profile, model=settings.model_path,
                  context_length=settings.resolved_sampling().max_seq_len + margin, port=port, extra=serve_args)


@slurm.command(cls=SectionedCommand)
@options_for("build")
@click.option("--nodes", type=click.IntRange(min=1), required=True,
              help="Generate tasks: one node and one shard each.")
@click.option("--partition", help="Slurm partition of every job.")
@click.option("--account", help="Slurm account of every job.")
@click.option("--qos", help="Slurm QOS of every job.")
@click.option("--time", "time_limit", metavar="LIMIT",
              help="Time limit of each job (sbatch --time, e.g. 24:00:00). A generate task near it requeues itself "
                   "and resumes.")
@click.option("--gpus-per-node", type=click.IntRange(min=0),
              help="GPUs of each generate task, the engine's tensor parallelism (default: 8 when the task starts "
                   "sglang or vllm, else 0).")
@click.option("--setup", metavar="LINES",
              help="Shell lines that give every job its environment, e.g. 'module load cuda/12.4; source "
                   "/shared/venv/bin/activate' (default: this kimi-data's environment on PATH).")
@click.option("--sbatch-arg", "sbatch_args", multiple=True, metavar="ARG",
              help="An #SBATCH option for every job, e.g. --sbatch-arg=--mem=0 (repeatable).")
@click.option("--push-repo", metavar="ORG/NAME", callback=_repo_id,
              help="After emit, the finalize job pushes the dataset to this Hub repo (the card names it).")
@click.option("--port", default=30000, show_default=True, type=click.IntRange(1, 65535),
              help="Port of the engine task i starts on its node: PORT + i.")
@click.option("--requeue-margin", default=120, show_default=True, type=click.IntRange(min=1), metavar="SECONDS",
              help="With --time: a generate task this long before its time limit (Slurm's USR1) requeues itself and "
                   "resumes.")
@click.option("--serve-engine", type=click.Choice(["sglang", "vllm", "local"]),
              help="The server each task starts (default: --engine's, when sglang or vllm and no --server); local: "
                   "the CPU stand-in serving --model over SGLang's protocol (tests).")
@click.option("--serve-arg", "serve_args", multiple=True, metavar="ARG",
              help="An option of `kimi-data serve` for the engine each task starts (repeatable), e.g. "
                   "--serve-arg=--mem-fraction-static=0.8 or --serve-arg=--extra=--enable-dp-attention.")
@click.option("--dry-run", is_flag=True, help="Write the job scripts into WORKDIR/slurm/ and print them; submit "
                                              "nothing.")
@friendly_errors(interrupted=SUBMITS)
def submit(nodes, partition, account, qos, time_limit, gpus_per_node, setup, sbatch_args, push_repo, port,
           requeue_margin, serve_engine, serve_args, dry_run, **kw):
    """Submit the whole run to Slurm: prepare, then NODES generate tasks (shard i of NODES each), then finalize.

    \b
    The job scripts go to WORKDIR/slurm/ (readable text); the jobs share WORKDIR, so it must be on a filesystem
    every node sees. Each task starts the engine on its node with the profile's launch flags (kimi-data serve),
    unless --engine local (in-process) or --server URL (servers that already run). Submitting again after a
    failure reruns what is not done: finished shards do nothing, the others resume.
    Watch it with: kimi-data slurm status --workdir WORKDIR
    """
    from pathlib import Path

    # lazy: runs.py imports every stage (pyarrow, rensa, asyncio, scipy): kept out of every CLI start
    from kimi_eagle_data.runs import load_partitions

    ctx = click.get_current_context()
    if kw.get("shard"):
        raise click.BadParameter("submit makes the shards itself (one per node)", param_hint="--shard")
    settings, partitions = load_partitions(*settings_from(kw))
    server = _server(settings, serve_engine, port, serve_args)
    if gpus_per_node is None:
        gpus_per_node = 8 if server is not None and server.engine != "local" else 0
    workdir = str(Path(settings.workdir).resolve())
    args = {}
    for command in ("prepare", "generate", "emit"):
        typed = _typed(ctx, command)
        typed[typed.index("--workdir") + 1] = workdir
        args[command] = tuple(typed)
    jobs = SlurmJobs(workdir=Path(workdir), shards=nodes, configs=tuple(settings.configs),
                     prepare_args=args["prepare"], generate_args=args["generate"], emit_args=args["emit"],
                     server=server, gpus_per_node=gpus_per_node,
                     partition=partition, account=account, qos=qos, time=time_limit, setup=setup,
                     sbatch_args=tuple(sbatch_args), push_repo=push_repo, requeue_margin=requeue_margin)
    if dry_run:
        paths = jobs.write()
        for job, path in paths.items():
            out.print(f"# ---- {path}", highlight=False, soft_wrap=True)
            out.print(path.read_text(), highlight=False, soft_wrap=True, markup=False)
        out.print("# ---- submitted with (not run: --dry-run):", highlight=False)
        for cmd, var in zip(jobs.sbatch_commands(), ("PREPARE", "GENERATE", "FINALIZE")):
            out.print(f"{var}=$({' '.join(cmd)})", highlight=False, soft_wrap=True, markup=False)
        return
    ids = submit_jobs(jobs)
    out.print(f"submitted to Slurm: prepare {ids['prepare']}, generate {ids['generate']} ({nodes} tasks), finalize "
              f"{ids['finalize']}; scripts and logs in {jobs.layout.root}", highlight=False, soft_wrap=True)
    out.print(f"watch it with:\n  kimi-data slurm status --workdir {workdir}", highlight=False, soft_wrap=True)


@slurm.command()
@click.option("--workdir", required=True, type=click.Path(file_okay=False), help="The workdir of the submitted run.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
@friendly_errors(interrupted=READS_ONLY)
def status(workdir: str, as_json: bool):
    """Where a run submitted with `kimi-data slurm submit` stands: each shard's state (queued, running on NODE,
    requeued k times, done, failed and why), completions done of those known so far, output tokens/s, an ETA;
    the prepare and finalize jobs. Works while the jobs run.

    Exit status: 0, or 1 when a shard or job failed for good (the line says which and why)."""
    import dataclasses

    import orjson

    # lazy: keeps pyarrow (the checkpoints' progress) out of every CLI start
    from kimi_eagle_data.executors.slurm.status import run_status

    st = run_status(workdir)
    if as_json:
        sys.stdout.write(orjson.dumps({**dataclasses.asdict(st), "problems": st.problems},
                                      option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        t = Table(title=f"{st.workdir}: generate, shard by shard")
        for col in ("shard", "state", "detail", "done", "failed", "of", "tok/s"):
            t.add_column(col, justify="right" if col in ("shard", "done", "failed", "of", "tok/s") else "left",
                         overflow="fold")
        for s in st.shards:
            t.add_row(str(s.shard), s.state, s.detail, f"{s.done:,}", f"{s.failed:,}", f"{s.total:,}",
                      f"{s.tokens_per_s:,.0f}")
        out.print(t)
        for j in st.jobs:
            out.print(f"{j.job} (job {j.job_id}): {j.state.lower()}" + (f", {j.detail}" if j.detail else ""),
                      highlight=False, soft_wrap=True)
        out.print(st.progress_line(), highlight=False, soft_wrap=True)
        if not st.scheduler:
            out.print("Slurm could not be asked from here: states come from the tasks' own records", highlight=False)
        if st.dataset:
            out.print(f"dataset: {st.dataset}", highlight=False, soft_wrap=True)
        elif st.stale_dataset:
            out.print(f"dataset: {st.stale_dataset}", highlight=False, soft_wrap=True)
    if st.problems:
        for line in st.problems:
            click.echo(f"error: {line}", err=True)
        sys.exit(1)


@slurm.command(hidden=True)
@click.argument("step", type=click.Choice(["begin", "end", "check"]))
@click.argument("configs", nargs=-1, required=True)
@click.option("--workdir", required=True, type=click.Path(file_okay=False))
@click.option("--shard", metavar="I/N", help="begin, end: the task's shard.")
@click.option("--shards", type=click.IntRange(min=1), help="check: the run's shards.")
@click.option("--rc", type=int, default=0, help="end: the exit status of the task's generate.")
@friendly_errors(interrupted=REWRITES)
def task(step, configs, workdir, shard, shards, rc):
    """What the job scripts of `slurm submit` run in Python (executors/slurm/task.py). begin: exit 3 when the
    shard is done for the prompts prepared now (nothing to do), else 0; end: with --rc 0 the shard's marker;
    check: exit 1 in one line when a completion is pending (finalize generates nothing)."""
    from pathlib import Path

    # lazy: keeps pyarrow (the checkpoints' progress) out of every CLI start
    from kimi_eagle_data.executors.slurm.status import check_nothing_pending

    wd = Workdir(Path(workdir).resolve())
    if step == "check":
        if shards is None:
            raise click.BadParameter("check needs the run's shard count", param_hint="--shards")
        check_nothing_pending(wd, shards, configs)
        return
    i, sep, n = (shard or "").partition("/")
    if not (sep and i.isdigit() and n.isdigit() and int(i) < int(n)):
        raise click.BadParameter(f"{shard!r}: expected I/N with 0 <= I < N", param_hint="--shard")
    t = ShardTask(wd, int(i), int(n), tuple(configs))
    if step == "begin":
        if t.done():
            out.print(f"shard {shard} is done ({t.marker}): nothing to do", highlight=False, soft_wrap=True)
            sys.exit(3)
        t.begin()
    else:
        t.end(rc)
