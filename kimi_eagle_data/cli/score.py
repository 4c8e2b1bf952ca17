"""`kimi-data score` (registered at the end of cli/main.py)."""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from kimi_eagle_data.cli.common import SCORES, friendly_errors, out
from kimi_eagle_data.cli.help import SectionedCommand
from kimi_eagle_data.cli.options import run_for
from kimi_eagle_data.cli.options import options_for

from kimi_eagle_data.score.scoring import DEFAULT_LIMIT, REGENERATE_GAP
from kimi_eagle_data.wording import counted
from kimi_eagle_data.store.workdir import Workdir

SCORE_JSON_HELP = """\b
--json prints one object (also written to WORKDIR/score.json; plan and the card read it):
  workdir, model, engine {engine, version}, limit, seed, threshold_nats,
  confidence, own_source (recorded|rescored), interval (the method),
  run {scored, failed, skipped_done, skipped_failed, tokens, seconds}
    (absent when nothing was left to score),
  configs: {CONFIG: {prompts, with_answer, without_answer, sampled,
    own_completions, failed, clipped, own_rescored,
    upstream: S | null, own: S | null,
    gap {estimate, low, high} | null   (own − upstream, nats/token),
    verdict (regenerate|either|n/a),
    segments {reasoning|answer: {upstream: S, own: S, gap}} | null}},
  probe: null without WORKDIR/probe.json of this dataset, else {CONFIG:
    {verdict, probe_gain {estimate, low, high, ...}, probe (gain|loss|no
    difference shown), agrees, why | null}}   (not written to score.json)
S = {samples, tokens, nats_per_token (mean log-prob per token, token-
    weighted), top1 (share of tokens that are the target's top-1)}"""


def score_table(report: dict[str, Any], title: str = "score: the target's log-prob of the upstream answers"):
    from rich.table import Table

    # lazy: keeps pyarrow and asyncio (score's engine clients) out of every CLI start
    from kimi_eagle_data.score.report import COLUMNS, table_rows

    t = Table(title=title)
    for key, head in COLUMNS:
        t.add_column(head, justify="left" if key in ("config", "segment", "verdict", "gap") else "right")
    for r in table_rows(report):
        style = {"regenerate": "bold red", "either": "bold green"}.get(r["verdict"])
        t.add_row(*(r[k] for k, _ in COLUMNS[:-1]), f"[{style}]{r['verdict']}[/]" if style else r["verdict"])
    return t


@click.command(cls=SectionedCommand, epilog=SCORE_JSON_HELP)
@options_for("score")
@click.option("--limit", "sample_limit", default=DEFAULT_LIMIT, show_default=True, type=click.IntRange(min=1),
              help="Prompts sampled per config (seeded; those with an own completion first).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the sample and the bootstrap.")
@click.option("--threshold", default=REGENERATE_GAP, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="nats/token: verdict `either` only when the gap's whole interval lies within ±this.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (keys below).")
@friendly_errors(interrupted=SCORES)
def score(sample_limit: int, seed: int, threshold: float, as_json: bool, **kw):
    """Where regeneration pays: the target's log-prob of each partition's upstream answers vs its own.

    For a seeded sample of prepared prompts per config, renders each upstream answer (glaive's next
    assistant turn, OpenCode* `output`, the assistant message of Mixture-of-Thoughts / OpenThoughts /
    ultrachat / ShareGPT / SWE-agent) as the assistant turn the model would write and scores it prefill
    only (SGLang /generate with max_new_tokens 0 and input log-probs). Compares the mean nats/token with
    the target's own completions (log-probs recorded by generate) and gives a verdict per config:
    `regenerate` or `either`. Resumable (WORKDIR/score.sqlite), kill -9 safe. The run's settings (model,
    sampling, engine, servers, batch size) are the workdir's unless an option names another engine.

    \b
    Example:
      kimi-data score --workdir demo-work
      kimi-data score B1 B5 --workdir pilot --engine sglang --server http://node1:30000 --json
    """
    # lazy: keeps scipy (the probe's intervals), pyarrow and asyncio (score's engine clients) out of every CLI start
    from kimi_eagle_data.probe.report import load_report as load_probe
    from kimi_eagle_data.score.report import agreement_lines, probe_agreement, score_run, threshold_note

    wd = Workdir(Path(kw["workdir"]).resolve())
    wd.settings()    # score reads what prepare and generate left: nothing to do without a run
    unknown = [c for c in kw["configs"] if not wd.prepared(c).exists()]
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r} has no prepared/{unknown[0]}.parquet in {wd.root}; prepared: "
                                 f"{', '.join(wd.prepared_configs()) or 'none'}", param_hint="CONFIG")
    # The workdir's own options stay in run.json: another engine for scoring is not the run's engine.
    ctx = run_for(kw, create=False, remember_options=False)
    report = score_run(ctx, list(kw["configs"]), limit=sample_limit, seed=seed,
                       retry_failed=ctx.settings.retry_failed, threshold=threshold)
    # what the probe measured of the same choice, when it ran on this dataset (it is read, never stored here:
    # the probe may run again after the score)
    agreement = probe_agreement(report, load_probe(wd))
    if as_json:
        click.echo(orjson.dumps({**report, "probe": agreement}, option=orjson.OPT_INDENT_2).decode())
        return
    out.print(score_table(report))
    run = report.get("run")
    if run:
        out.print(f"scored {counted(run['scored'], 'answer')} ({counted(run['tokens'], 'token')}) in "
                  f"{run['seconds']:.1f}s; "
                  f"{run['failed']} failed, {run['skipped_done']} already scored"
                  + (f", {run['skipped_failed']} failed earlier (rerun with --retry-failed)" if run["skipped_failed"]
                     else ""), highlight=False)
    out.print(threshold_note(report), highlight=False, soft_wrap=True)
    unanswered = [c for c, r in report["configs"].items() if r["prompts"] and not r["with_answer"]]
    if unanswered:
        out.print(f"[yellow]note:[/] no upstream answers kept for {', '.join(unanswered)} (prepared before answers "
                  f"were kept, or the source has none); `kimi-data prepare --workdir {wd.root}` keeps them "
                  "(same prompts, same ids)", highlight=False, soft_wrap=True)
    missing = [c for c, r in report["configs"].items() if not r["own"]]
    if missing:
        out.print(f"[yellow]note:[/] no own completions to compare for {', '.join(missing)}; run "
                  f"`kimi-data generate --workdir {wd.root}` first", highlight=False, soft_wrap=True)
    if agreement:
        out.print("against the probe (drafters trained on either set; docs/score.md):", highlight=False)
        for line in agreement_lines(agreement):
            out.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)
    if wd.dataset.exists():
        out.print(f"the dataset card shows this table after the next `kimi-data emit --workdir {wd.root}`",
                  highlight=False, soft_wrap=True)
