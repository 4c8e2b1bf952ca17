"""`kimi-data score` (registered at the end of cli/main.py)."""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from kimi_eagle_data.cli.common import console, friendly_errors, out

from kimi_eagle_data.score.scoring import DEFAULT_LIMIT
from kimi_eagle_data.score.report import REGENERATE_GAP
from kimi_eagle_data.wording import counted

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
    segments {reasoning|answer: {upstream: S, own: S, gap}} | null}}
S = {samples, tokens, nats_per_token (mean log-prob per token, token-
    weighted), top1 (share of tokens that are the target's top-1)}"""

# RunSettings fields a workdir's run.json remembers (settings.INHERITED); score reuses them as they are.
SAVED = ("profile", "model", "model_label", "tokenizer", "samples", "sources", "revision", "limit", "max_new_tokens",
         "temperature", "top_p", "max_seq_len", "keep_truncated", "batch_size", "version", "configs", "engine",
         "servers", "config_file", "repo")


@click.command(epilog=SCORE_JSON_HELP)
@click.argument("configs", nargs=-1, metavar="[CONFIG]...")
@click.option("--workdir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="A workdir after prepare (and generate, for the comparison with the target's own completions).")
@click.option("--limit", default=DEFAULT_LIMIT, show_default=True, type=click.IntRange(min=1),
              help="Prompts sampled per config (seeded; those with an own completion first).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the sample and the bootstrap.")
@click.option("--threshold", default=REGENERATE_GAP, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="nats/token: verdict `either` only when the gap's whole interval lies within ±this.")
@click.option("--engine", type=click.Choice(["local", "sglang", "vllm"]), help="Default: the workdir's engine.")
@click.option("--server", "servers", multiple=True, metavar="URL", help="SGLang server or router URL (repeatable).")
@click.option("--concurrency", default=64, show_default=True, type=click.IntRange(min=1),
              help="SGLang requests kept in flight.")
@click.option("--max-attempts", default=5, show_default=True, type=click.IntRange(min=1),
              help="Tries per request on 5xx/timeouts/connection errors before it is recorded as failed.")
@click.option("--retry-backoff", default=1.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds before the first retry; doubles each attempt.")
@click.option("--request-timeout", default=600.0, show_default=True, help="Seconds per SGLang request.")
@click.option("--health-timeout", default=600.0, show_default=True, help="Seconds to wait for healthy servers.")
@click.option("--allow-old-server", is_flag=True, help="Run against SGLang < 0.5.5 (not recommended).")
@click.option("--batch-size", type=click.IntRange(min=1), help="Local engine batch size (default: the workdir's).")
@click.option("--retry-failed", is_flag=True, help="Score again the items recorded as failed.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (keys below).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def score(configs, workdir: Path, limit: int, seed: int, threshold: float, engine, servers, concurrency: int,
          max_attempts: int, retry_backoff: float, request_timeout: float, health_timeout: float,
          allow_old_server: bool, batch_size, retry_failed: bool, as_json: bool, no_progress: bool):
    """Where regeneration pays: the target's log-prob of each partition's upstream answers vs its own.

    For a seeded sample of prepared prompts per config, renders each upstream answer (glaive's next
    assistant turn, OpenCode* `output`, the assistant message of Mixture-of-Thoughts / OpenThoughts /
    ultrachat / ShareGPT / SWE-agent) as the assistant turn the model would write and scores it prefill
    only (SGLang /generate with max_new_tokens 0 and input log-probs). Compares the mean nats/token with
    the target's own completions (log-probs recorded by generate) and gives a verdict per config:
    `regenerate` or `either`. Resumable (WORKDIR/score.sqlite), kill -9 safe.

    \b
    Example:
      kimi-data score --workdir demo-work
      kimi-data score B1 B5 --workdir pilot --engine sglang --server http://node1:30000 --json
    """
    friendly_errors(_score)(configs, workdir, limit, seed, threshold, engine, servers, concurrency, max_attempts,
                                retry_backoff, request_timeout, health_timeout, allow_old_server, batch_size,
                                retry_failed, as_json, no_progress)


def _score(configs, workdir: Path, limit, seed, threshold, engine, servers, concurrency, max_attempts, retry_backoff,
           request_timeout, health_timeout, allow_old_server, batch_size, retry_failed, as_json, no_progress):
    from kimi_eagle_data.pipeline import Pipeline, RunSettings
    from kimi_eagle_data.score.report import rich_table, score_workdir, threshold_note
    from kimi_eagle_data.store.workdir import Workdir, read_json

    wd = Workdir(Path(workdir).resolve())
    if not wd.settings_path.exists():
        raise FileNotFoundError(f"{wd.root} has no run.json; run `kimi-data build` (or `prepare` and `generate`) "
                                "there first")
    saved = read_json(wd.settings_path).get("options", {})
    # The workdir's own settings, unchanged, so run.json stays as it is; only the engine may differ.
    settings = RunSettings(workdir=str(wd.root), progress=not no_progress,
                           **{k: saved[k] for k in SAVED if k in saved and saved[k] is not None})
    p = Pipeline(settings, console=console)
    unknown = [c for c in configs if not wd.prepared(c).exists()]
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r} has no prepared/{unknown[0]}.parquet in {wd.root}; prepared: "
                                 f"{', '.join(wd.prepared_configs()) or 'none'}", param_hint="CONFIG")
    names = list(configs) or [c for c in p.s.configs if wd.prepared(c).exists()]
    p.s.engine = engine or p.s.engine
    p.s.servers = list(servers) or p.s.servers
    p.s.concurrency, p.s.max_attempts, p.s.retry_backoff = concurrency, max_attempts, retry_backoff
    p.s.request_timeout, p.s.health_timeout, p.s.allow_old_server = request_timeout, health_timeout, allow_old_server
    p.s.batch_size = batch_size or p.s.batch_size
    report = score_workdir(p, names, limit=limit, seed=seed, retry_failed=retry_failed, threshold=threshold)
    if as_json:
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    out.print(rich_table(report))
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
    if wd.dataset.exists():
        out.print(f"the dataset card shows this table after the next `kimi-data emit --workdir {wd.root}`",
                  highlight=False, soft_wrap=True)
