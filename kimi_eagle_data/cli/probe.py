"""`kimi-data probe` (registered at the end of cli/main.py)."""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from kimi_eagle_data.cli.common import PROBES, friendly_errors, out
from kimi_eagle_data.cli.help import SectionedCommand
from kimi_eagle_data.cli.options import options_for, run_for
from kimi_eagle_data.probe.split import HELD_OUT
from kimi_eagle_data.profile import get_profile
from kimi_eagle_data.store.workdir import Workdir

PROBE_JSON_HELP = """\b
--json prints one object (also written to --out: WORKDIR/probe.json, which the
card reads, or WORKDIR/probe-NAME.json for --data NAME):
  setup {target, model, trainer (cpu-loop | speculators), drafter {...}, budget_loss_tokens,
    budget_policy, passes {ARM: budget / its loss tokens}, seq_len, seeds,
    drafts_per_step, max_new_tokens, held_out_per_config, data, data_name,
    data_check {rows, matched_rows, other_tokenizer_rows, invalid_rows} | null,
    measured_by (in-process | engine), engine {name, version, device} | null, ...},
  interval (the method), confidence, held_out {CONFIG: [prompt ids]},
  arms {ARM: {rows, prompts, loss_tokens_available, seed_spread, seeds {SEED:
    {steps, loss_tokens, train_seconds, decode_seconds, last_loss, acceptance}}}},
  configs {CONFIG|all: {held_out, seed_df, exploratory, arms {ARM: {acceptance,
    low, high, df, exploratory, prompts, steps, per_seed {SEED: acceptance},
    seed_spread}}, gain_over_upstream {estimate, low, high, df, exploratory} | null}},
  learning_curve [{share, acceptance, low, high, ...}],
  history (own_history configs) {held_out, arms, configs {CONFIG|all: {held_out,
    arms {own history|source history: {...}}, gain_over_source_history}}}"""


def probe_table(report, title: str = "probe: acceptance length of EAGLE-3 drafters on held-out prompts [95%]",
                rows_of=None):
    from rich.table import Table

    # lazy: probe/report.py pulls scipy: kept out of every CLI start
    from kimi_eagle_data.probe.report import table

    head, rows = (rows_of or table)(report)
    t = Table(title=title)
    for i, h in enumerate(head):
        t.add_column(h, justify="left" if i == 0 else "right")
    for r in rows:
        t.add_row(*r)
    return t


@click.command(cls=SectionedCommand, epilog=PROBE_JSON_HELP)
@options_for("probe")
@click.option("--data", type=click.Path(exists=True, path_type=Path), multiple=True,
              help="The data to probe: a dataset folder, a SpecForge JSONL or a speculators save_to_disk export "
                   "(default: WORKDIR/dataset). Its rows are matched to the workdir's prompts, tokenizer and "
                   "format; refused when fewer than half belong. Its report: --out. Twice (--data A --data B): "
                   "A against B, each an arm on the training prompts both hold, with a paired gain A − B.")
@click.option("--seeds", default=2, show_default=True, type=click.IntRange(min=1), help="Drafters per arm.")
@click.option("--budget", default=None, type=click.IntRange(min=1000),
              help="Loss tokens each drafter trains on (default 20,000).")
@click.option("--held-out", "held_out", default=None, type=click.IntRange(min=1),
              help="Held-out prompts per config (default 6; at most half of a config's prompts).")
@click.option("--no-curve", is_flag=True, help="Leave out the learning curve (the ¼ and ½ arms).")
@click.option("--no-upstream", is_flag=True,
              help="Leave out the upstream answers' arm (--data A --data B compares two datasets without it).")
@click.option("--no-history", is_flag=True, help="Leave out the history arms of own_history configs (their later "
                                                 "turns on the model's own history vs the source's).")
@click.option("--dry-run", is_flag=True,
              help="Project a probe of the target on a GPU node (arms, loss tokens, training steps, hidden-state "
                   "bytes, wall time) and print the commands for every arm: extraction, training, serving and "
                   "measuring; train nothing.")
@click.option("--model", "plan_model", default=None, metavar="HUB_ID|DIR",
              help="With --dry-run: the target to project (its config.json: layers, hidden size), instead of the "
                   "workdir's model; the token counts stay the workdir's dataset's (or --tokens).")
@click.option("--profile", "plan_profile", default=None, metavar="NAME",
              help="With --dry-run: the target of a model profile (e.g. kimi-k2.5, kimi-k3), as --model.")
@click.option("--tokens", "plan_tokens", type=click.IntRange(min=1), default=None,
              help="With --dry-run: the own data's tokens to project (its loss-token share: the workdir's dataset's).")
@click.option("--prefill-rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --dry-run: prefill tokens/s of the GPU node (e.g. the pilot's, from `kimi-data plan`), to "
                   "project the time of hidden-state extraction.")
@click.option("--train-rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --dry-run: drafter training tokens/s of the GPU node, to project the time of training.")
@click.option("--write-arms", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write each arm's training rows (speculators' format: DIR/ARM, with token_freq.pt) and the "
                   "held-out prompts (DIR/held-out.json) for speculators' extraction and trainer on a GPU node; "
                   "train nothing (the commands: --dry-run).")
@click.option("--drafter", "drafters", multiple=True, metavar="ARM=DIR",
              help="Measure this saved drafter (speculators' format) as arm ARM instead of training one; again for "
                   "more seeds or arms (e.g. the drafters speculators' trainer wrote on a GPU node).")
@click.option("--engine", type=click.Choice(["in-process", "vllm"]), default="in-process", show_default=True,
              help="Who measures acceptance: greedy speculative decoding in this process, or vLLM serving the target "
                   "with each trained drafter (saved as speculators saves one, under WORKDIR/probe-drafters/), as a "
                   "user's server would: on a machine without a GPU, vLLM's CPU recipe (`kimi-data serve --engine vllm "
                   "--device cpu`'s venv; greedy-exact with EAGLE-3); on a GPU node, the vLLM installed here.")
@click.option("--trainer", type=click.Choice(["auto", "cpu-loop", "speculators"]), default="auto", show_default=True,
              help="Who trains each drafter: speculators' own Trainer, or a short CPU loop that does what one of its "
                   "steps does, on the same batches; auto: speculators' Trainer where torch sees a GPU, else the "
                   "CPU loop (speculators' Trainer also runs on CPU, slower: docs/probe.md).")
@click.option("--tp", type=click.IntRange(min=1), default=8, show_default=True,
              help="With --engine vllm on a GPU node: the target's tensor-parallel GPUs.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where the report goes (default: WORKDIR/probe.json for the workdir's dataset, which the card "
                   "reads; WORKDIR/probe-NAME.json for --data NAME, which never reaches the card).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (keys below).")
@friendly_errors(interrupted=PROBES)
def probe(data, seeds: int, budget, held_out, no_curve: bool, no_upstream: bool, no_history: bool, dry_run: bool,
          plan_model, plan_profile, plan_tokens, prefill_rate, train_rate, write_arms, drafters, engine: str,
          trainer: str, tp: int, out_path, as_json: bool, **kw):
    """Train small EAGLE-3 drafters on a dataset and measure their acceptance on held-out prompts.

    speculators' EAGLE-3 model and loss (the [probe] extra), trained by speculators' own Trainer where torch
    sees a GPU, else by a short CPU loop on the same batches (--trainer), on the target's hidden states
    computed in-process, one drafter per arm and seed: the dataset's own completions, the
    source's upstream answers on the same prompts, and ¼ and ½ of the own data (equal loss-token budgets);
    for own_history configs, their later turns on the model's own history against the same turns on the
    source's history, answered by the target in-process.
    Acceptance: greedy speculative decoding in-process (or, with --engine vllm, by vLLM serving each
    drafter) on a seeded held-out split per config, with 95% intervals over prompts and seeds (a row over
    too few prompts or seeds is marked exploratory). Writes
    WORKDIR/probe.json and WORKDIR/probe-learning-curve.png, and the next `emit` puts the table in the card;
    with --data, WORKDIR/probe-NAME.json instead (never the card), after checking that the data's rows belong
    to this workdir's prompts, tokenizer and format.

    \b
    Example:
      kimi-data probe --workdir demo-work
      kimi-data probe B4 --workdir demo-work --data export/specforge.jsonl
      kimi-data probe --workdir demo-work --engine vllm      # measured by vLLM serving each drafter
      kimi-data probe --workdir demo-work --data clean.jsonl --data fixed.jsonl
      kimi-data probe --workdir demo-work --dry-run --profile kimi-k2.5 --tokens 1000000000
    """
    # lazy: the probe's stage pulls torch, pyarrow and scipy: kept out of every CLI start
    from kimi_eagle_data.probe.stage import BUDGET, ProbeOptions, probe_run

    wd = Workdir(Path(kw["workdir"]).resolve())
    if len(data) > 2:
        raise click.BadParameter(f"{len(data)} datasets given; --data compares at most two (A against B)",
                                 param_hint="--data")
    data, compare = (data[0] if data else None), (data[1] if len(data) == 2 else None)
    for name, value in (("--prefill-rate", prefill_rate), ("--train-rate", train_rate), ("--model", plan_model),
                        ("--profile", plan_profile), ("--tokens", plan_tokens)):
        if value is not None and not dry_run:
            raise click.UsageError(f"{name} projects a GPU node's probe and needs --dry-run; add --dry-run, or leave "
                                   f"{name} out to measure here")
    if plan_model and plan_profile:
        raise click.UsageError("--model and --profile both name the target to project; give one")
    arm_drafters = _drafters(drafters)
    # lazy: probe/report.py pulls scipy: kept out of every CLI start
    from kimi_eagle_data.probe.report import report_path

    try:
        report_file = report_path(wd, data, out_path, compare)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--out") from None
    wd.settings()
    if dry_run:
        _dry_run(wd, kw, plan_model, plan_profile, plan_tokens, seeds, budget, tp, prefill_rate, train_rate,
                 upstream=not no_upstream, curve=not no_curve)
        return
    import torch

    # lazy: probe/drafter.py pulls torch: kept out of every CLI start
    from kimi_eagle_data.probe.drafter import require_speculators

    device = "gpu" if torch.cuda.is_available() else "cpu"
    if engine == "vllm" and device == "cpu":
        # lazy: keeps urllib.request, http.client and ssl (the launcher's health checks) out of every CLI start
        from kimi_eagle_data.engines.serve import cpu_venv

        cpu_venv("vllm")      # before any training: the line saying how to install vLLM's CPU recipe
    if write_arms is None:
        require_speculators()
    ctx = run_for(kw, create=False, remember_options=False)
    opts = ProbeOptions(data=data, configs=list(kw["configs"]), seeds=tuple(range(seeds)), budget=budget or BUDGET,
                        held_out=held_out or HELD_OUT, curve=not no_curve, upstream=not no_upstream, history=not no_history,
                        out=report_file, compare=compare, engine=engine, device=device, tp=tp,
                        write_arms=write_arms, drafters=arm_drafters, trainer=trainer)
    report = probe_run(ctx, opts)
    if write_arms is not None:
        for arm, entry in report["arms"].items():
            out.print(f"{arm}: {entry['rows']:,} rows, {entry['tokens']:,} tokens, {entry['loss_tokens']:,} loss "
                      f"tokens -> {entry['dir']}", highlight=False, soft_wrap=True)
        out.print(f"held-out prompts -> {report['held_out_file']}", highlight=False, soft_wrap=True)
        return
    if as_json:
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    # lazy: probe/report.py pulls scipy: kept out of every CLI start
    from kimi_eagle_data.probe.report import setup_line

    out.print(probe_table(report))
    # lazy: probe/report.py pulls scipy: kept out of every CLI start
    from kimi_eagle_data.probe.report import history_table

    if history_table(report) is not None:
        out.print(probe_table(report, "probe: own_history conversations' later turns, own vs source history [95%]",
                              history_table))
    out.print(setup_line(report), highlight=False, soft_wrap=True)
    out.print(f"trainer: {report['setup']['trainer']}; report in "
              f"{report_file} ({report['seconds']:.0f}s)", highlight=False, soft_wrap=True)


def _drafters(values) -> dict[str, list[Path]]:
    """--drafter ARM=DIR values -> {ARM: [DIR, ...]} (each DIR a seed, in the order given)."""
    got: dict[str, list[Path]] = {}
    for v in values:
        arm, sep, path = v.partition("=")
        if not sep or not arm.strip() or not path:
            raise click.BadParameter(f"{v!r}: expected ARM=DIR (e.g. own=probe-drafters/own-seed0/0)",
                                     param_hint="--drafter")
        if not (Path(path) / "config.json").is_file():
            raise click.BadParameter(f"{path} holds no drafter (no config.json); give the directory speculators "
                                     "saved it in", param_hint="--drafter")
        got.setdefault(arm.strip(), []).append(Path(path))
    return got


def _dry_run(wd, kw, plan_model, plan_profile, plan_tokens, seeds, budget, tp, prefill_rate, train_rate, *,
             upstream: bool, curve: bool) -> None:
    # lazy: probe/gpu_plan.py pulls torch and pyarrow: kept out of every CLI start
    from kimi_eagle_data.probe.gpu_plan import dataset_tokens, gpu_plan, model_shape, project

    if plan_profile is not None:
        try:
            plan_model = get_profile(plan_profile).model_path
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--profile") from None
    own_model = str(wd.settings()["model"])
    shape = model_shape(plan_model or own_model)
    configs = list(kw["configs"])
    dataset = wd.root / "dataset"
    tokens, loss = dataset_tokens(dataset, configs) if (dataset / "manifest.json").is_file() else (0, 0)
    if plan_tokens is not None:
        if not tokens:
            raise click.UsageError(f"--tokens keeps the data's share of loss tokens, and {wd.root} has no emitted "
                                   "dataset to take it from; emit one (`kimi-data emit`) or use a workdir that has")
        tokens, loss = plan_tokens, round(plan_tokens * loss / tokens)
    projection = project(shape, tokens, loss, seeds=seeds, budget=budget, gpus=tp, upstream=upstream, curve=curve)
    out.print(gpu_plan(projection, str(wd.root), prefill_rate, train_rate, configs,
                       workdir_is_model=plan_model is None or plan_model == own_model),
              highlight=False, soft_wrap=True, markup=False)
