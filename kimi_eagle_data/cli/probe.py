"""`kimi-data probe` (registered at the end of cli/main.py)."""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from kimi_eagle_data.cli.common import PROBES, friendly_errors, out
from kimi_eagle_data.cli.help import SectionedCommand
from kimi_eagle_data.cli.options import options_for

PROBE_JSON_HELP = """\b
--json prints one object (also written to --out: WORKDIR/probe.json, which the
card reads, or WORKDIR/probe-NAME.json for --data NAME):
  setup {target, model, trainer (cpu-loop), drafter {...}, budget_loss_tokens,
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
@click.option("--dry-run", is_flag=True, help="Print the commands for a real target on a GPU node and the projected "
                                              "cost (hidden-state bytes, hours); train nothing.")
@click.option("--prefill-rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --dry-run: prefill tokens/s of the GPU node (e.g. the pilot's, from `kimi-data plan`), to "
                   "project the hours of hidden-state extraction.")
@click.option("--engine", type=click.Choice(["in-process", "vllm"]), default="in-process", show_default=True,
              help="Who measures acceptance: greedy speculative decoding in this process, or vLLM serving the target "
                   "with each trained drafter (saved as speculators saves one, under WORKDIR/probe-drafters/), as a "
                   "user's server would: on a machine without a GPU, vLLM's CPU recipe (`kimi-data serve --engine vllm "
                   "--device cpu`'s venv; greedy-exact with EAGLE-3); on a GPU node, the vLLM installed here.")
@click.option("--tp", type=click.IntRange(min=1), default=8, show_default=True,
              help="With --engine vllm on a GPU node: the target's tensor-parallel GPUs.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where the report goes (default: WORKDIR/probe.json for the workdir's dataset, which the card "
                   "reads; WORKDIR/probe-NAME.json for --data NAME, which never reaches the card).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (keys below).")
@friendly_errors(interrupted=PROBES)
def probe(data, seeds: int, budget, held_out, no_curve: bool, no_upstream: bool, no_history: bool, dry_run: bool,
          prefill_rate, engine: str, tp: int, out_path, as_json: bool, **kw):
    """Train small EAGLE-3 drafters on a dataset and measure their acceptance on held-out prompts.

    speculators' EAGLE-3 model and loss (the [probe] extra), trained on CPU by a short loop on the target's
    hidden states computed in-process, one drafter per arm and seed: the dataset's own completions, the
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
    """
    from kimi_eagle_data.cli.options import run_for
    from kimi_eagle_data.probe.stage import BUDGET, ProbeOptions, probe_run
    from kimi_eagle_data.probe.split import HELD_OUT
    from kimi_eagle_data.store.workdir import Workdir

    wd = Workdir(Path(kw["workdir"]).resolve())
    if len(data) > 2:
        raise click.BadParameter(f"{len(data)} datasets given; --data compares at most two (A against B)",
                                 param_hint="--data")
    data, compare = (data[0] if data else None), (data[1] if len(data) == 2 else None)
    if prefill_rate is not None and not dry_run:
        raise click.UsageError("--prefill-rate projects a GPU node's extraction time and needs --dry-run; "
                               "add --dry-run, or leave --prefill-rate out to measure here")
    from kimi_eagle_data.probe.report import report_path

    try:
        report_file = report_path(wd, data, out_path, compare)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--out") from None
    wd.settings()
    if dry_run:
        from kimi_eagle_data.probe.gpu_plan import gpu_plan

        out.print(gpu_plan(wd, budget or BUDGET, prefill_rate), highlight=False, soft_wrap=True, markup=False)
        return
    import torch

    from kimi_eagle_data.probe.drafter import require_speculators

    device = "gpu" if torch.cuda.is_available() else "cpu"
    if engine == "vllm" and device == "cpu":
        from kimi_eagle_data.engines.serve import cpu_venv

        cpu_venv("vllm")      # before any training: the line saying how to install vLLM's CPU recipe
    require_speculators()
    ctx = run_for(kw, create=False, remember_options=False)
    opts = ProbeOptions(data=data, configs=list(kw["configs"]), seeds=tuple(range(seeds)), budget=budget or BUDGET,
                        held_out=held_out or HELD_OUT, curve=not no_curve, upstream=not no_upstream, history=not no_history,
                        out=report_file, compare=compare, engine=engine, device=device, tp=tp)
    report = probe_run(ctx, opts)
    if as_json:
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    from kimi_eagle_data.probe.report import setup_line

    out.print(probe_table(report))
    from kimi_eagle_data.probe.report import history_table

    if history_table(report) is not None:
        out.print(probe_table(report, "probe: own_history conversations' later turns, own vs source history [95%]",
                              history_table))
    out.print(setup_line(report), highlight=False, soft_wrap=True)
    out.print(f"trainer: {report['setup']['trainer']} (speculators' Trainer needs a GPU); report in "
              f"{report_file} ({report['seconds']:.0f}s)", highlight=False, soft_wrap=True)
