"""`kimi-data`: the command line. Thin: options -> RunSettings -> Pipeline.

Errors the user can fix print one line (what, where, what to do) and exit 1; usage errors exit 2;
`generate`/`build`/`demo` exit 3 when samples failed in this run (after all retries; the rest is kept).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import click
from rich.table import Table

from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.cli.common import UserError, console, friendly_errors, out
from kimi_eagle_data.settings import BY_NAME, INHERITED, check_servers, option_for, run_options
from kimi_eagle_data.wording import counted

# Exit status of generate/build/demo when samples failed in this run (everything else was kept).
EXIT_FAILED = 3

CONFIG_HELP = f"Dataset configs to process (default: all of {', '.join(PARTITIONS)})."


def parse_sources(values: tuple[str, ...], known=PARTITIONS) -> dict[str, str]:
    sources = {}
    for v in values:
        config, sep, path = v.partition("=")
        if not sep or config not in known:
            raise click.BadParameter(f"{v!r}: expected CONFIG=PATH with CONFIG one of {', '.join(known)}",
                                     param_hint="--source")
        sources[config] = path
    return sources


def settings_from(kw: dict):
    from kimi_eagle_data.workdir import Workdir, read_json

    run_json = Workdir(Path(kw["workdir"]).resolve()).settings_path
    saved = read_json(run_json).get("options", {}) if run_json.exists() else {}
    ctx = click.get_current_context()
    # A new --config brings its own default configs: do not inherit the old run's list then.
    new_config = kw.get("config_file") and kw["config_file"] != saved.get("config_file")
    inherited = {}
    for key in INHERITED:
        if key == "model_label" and kw["model"] != saved.get("model"):   # a label names one model only
            continue
        if key == "configs" and new_config:
            continue
        if key in saved and ctx.get_parameter_source(key) in (None, click.core.ParameterSource.DEFAULT):
            value = saved[key]
            inherited[key] = value
            if key == "sources":
                value = tuple(f"{k}={v}" for k, v in value.items())
            kw[key] = tuple(value) if isinstance(value, list) else value
    from kimi_eagle_data.run_checks import SettingError, check_config_name, check_settings

    try:   # run.json is a file a user can edit: its values pass the same checks as the options
        check_settings(inherited, f"{run_json}: options.")
        for c in inherited.get("configs") or ():
            check_config_name(c)
    except SettingError as e:
        raise UserError(str(e) if str(e).startswith(str(run_json)) else f"{run_json}: options.configs: {e}") from None
    check_servers(None, None, kw["servers"])   # inherited URLs get the option's check too
    from kimi_eagle_data.sources.config import ConfigError, load_config

    try:
        known = load_config(kw["config_file"]).partitions
    except ConfigError as e:
        raise UserError(str(e)) from e
    for c in kw["configs"]:
        if c not in known:
            raise click.BadParameter(f"{c!r} is not a config; known: {', '.join(known)}"
                                     + ("" if kw["config_file"] else " (add more with --config FILE)"),
                                     param_hint="CONFIG")

    try:
        return make_settings(kw, known)
    except SettingError as e:   # values together out of range (max_new_tokens >= max_seq_len)
        raise UserError(str(e)) from None


def make_settings(kw: dict, known):
    from kimi_eagle_data.pipeline import RunSettings

    # Options whose command-line form differs from the setting's value.
    given = {k: v for k, v in kw.items() if k in BY_NAME}
    given.update(workdir=str(kw["workdir"]), configs=list(kw["configs"]), sources=parse_sources(kw["sources"], known),
                 servers=list(kw["servers"]), merge=list(kw["merge"]), shard=parse_shard(kw["shard"]),
                 progress=not kw["no_progress"])
    return RunSettings(**given)


def parse_shard(value: str | None) -> tuple[int, int] | None:
    if not value:
        return None
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected i/N, e.g. 0/4", param_hint="--shard") from None
    if not (n >= 1 and 0 <= i < n):
        raise click.BadParameter(f"{value!r}: need 0 <= i < N", param_hint="--shard")
    return i, n


def pipeline_for(settings, **kw):
    from kimi_eagle_data.pipeline import Pipeline

    return Pipeline(settings, console=console, **kw)


# -- output ---------------------------------------------------------------------------------------
def print_prepare(reports) -> None:
    t = Table(title="prepare")
    for col in ("config", "source", "selected", "prompts", "rejected", "reasons"):
        t.add_column(col, justify="right" if col in ("selected", "prompts", "rejected") else "left")
    for cfg, r in reports.items():
        t.add_row(cfg, r.source, str(r.selected), str(r.prepared), str(sum(r.rejected.values())),
                  ", ".join(f"{k} {v}" for k, v in r.rejected.most_common(3)))
    out.print(t)


def print_generate(rep) -> None:
    out.print(f"generate: {rep.completed} completed, {rep.failed} failed, {rep.skipped_done} already done"
              + (f", {rep.skipped_failed} failed earlier (rerun with --retry-failed)" if rep.skipped_failed else "")
              + (f"; {counted(rep.output_tokens, 'token')} in {rep.seconds:.1f}s ({rep.tokens_per_s:,.0f} tok/s)"
                 if rep.completed else ""))


def print_accounting(table: dict[str, dict[str, int]]) -> None:
    t = Table(title="accounting (selected = rejected at prepare + generated + failed + pending)")
    keys = ("selected", "rejected_at_prepare", "generated", "failed", "pending")
    t.add_column("config")
    for k in keys:
        t.add_column(k.replace("_", " "), justify="right")
    for cfg, row in table.items():
        t.add_row(cfg, *(str(row[k]) for k in keys))
    out.print(t)
    bad = [c for c, r in table.items() if r["selected"] != sum(r[k] for k in keys[1:])]
    if bad:
        raise UserError(f"accounting does not balance for {', '.join(bad)}; this is a bug, please report it")


def print_summary(reports) -> None:
    keys = ("selected", "rejected_at_prepare", "generated", "failed", "pending", "valid", "rejected", "train_tokens")
    t = Table(title="dataset summary")
    for col in ("config", "selected", "prep-rej", "generated", "failed", "pending", "train", "rejected",
                "train tokens", "top reasons"):
        t.add_column(col, justify="left" if col in ("config", "top reasons") else "right",
                     overflow="fold", no_wrap=col != "top reasons")
    tot = dict.fromkeys(keys, 0)
    for cfg, r in reports.items():
        for k in keys:
            tot[k] += getattr(r, k)
        reasons = r.reasons + r.failure_reasons + Counter(r.prepare_reasons)
        t.add_row(cfg, *(f"{getattr(r, k):,}" for k in keys), ", ".join(f"{k} {v}" for k, v in reasons.most_common(3)))
    t.add_row("all", *(f"{tot[k]:,}" for k in keys), "", style="bold")
    out.print(t)
    unbalanced = [c for c, r in reports.items() if not r.balanced]
    if unbalanced:
        raise UserError(f"accounting does not balance for {', '.join(unbalanced)}; this is a bug, please report it")
    out.print("accounting: selected = rejected at prepare + train + rejected + failed + pending  [green]✓[/]")


def emit_or_warn(p) -> bool:
    """Emit after a build; a build whose every sample failed reports that instead of failing."""
    from kimi_eagle_data.emit.writer import NothingToEmit

    try:
        p.emit()
        return True
    except NothingToEmit as e:
        console.print(f"[yellow]warning:[/] {e}", highlight=False)
        return False


def exit_if_failed(rep) -> None:
    """Samples that failed in this run: say how to retry them and exit EXIT_FAILED (the rest is kept)."""
    if rep.failed:
        console.print(f"[bold red]error:[/] {rep.failed} of {rep.requested} samples failed in this run (reasons in "
                      "the table); rerun with --retry-failed once the server is healthy", highlight=False,
                      soft_wrap=True)
        sys.exit(EXIT_FAILED)


def run_all_stages(p) -> None:
    """prepare -> generate -> validate -> emit, printing each stage's summary (build and demo)."""
    print_prepare(p.prepare(reuse=True))
    gen = p.generate()
    print_generate(gen)
    emitted = emit_or_warn(p)   # emit validates every completion while it writes the rows
    print_summary(p.reports)
    if emitted:
        print_load_hint(p.workdir.dataset, p.s.configs)
    exit_if_failed(gen)


def print_load_hint(dataset_dir: Path, configs) -> None:
    config = "B4" if "B4" in configs else next(iter(configs))
    out.print("\nLoad it with:")
    out.print(f'  python -c \'from datasets import load_dataset; print(load_dataset("{dataset_dir}", "{config}"))\'',
              highlight=False, soft_wrap=True)


# -- commands -------------------------------------------------------------------------------------
@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="kimi-eagle-data")
def main():
    """Build EAGLE-3 drafter training data for Kimi-K2.5.

    Pipeline: prepare (render prompts with the model's chat template) -> generate (the model's own
    completions, token ids in and out) -> validate (token structure) -> emit (Hub-layout dataset with
    card). `build` runs all four and resumes where it stopped; `demo` runs them on CPU with the embedded
    tiny model.
    """


@main.command()
@click.option("--workdir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where to put the run (dataset in WORKDIR/dataset).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many sample rows per config.")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
@option_for("workers")
@friendly_errors
def demo(workdir: Path, limit: int | None, no_progress: bool, workers: int | None):
    """The whole pipeline on the bundled sample prompts with the embedded tiny model (CPU, no network).

    The tiny model speaks Kimi-K2.5's token format but its text is meaningless: the demo shows the
    pipeline, not data to train on.
    """
    from kimi_eagle_data.pipeline import Pipeline, RunSettings
    from kimi_eagle_data.profile import TINY_MODEL_DIR
    from kimi_eagle_data.sources.partitions import DEMO_CONFIG

    settings = RunSettings(workdir=str(workdir), profile="tiny-kimi", model=str(TINY_MODEL_DIR),
                           model_label="tiny-kimi (embedded test model)", samples=True, limit=limit,
                           progress=not no_progress, workers=workers, config_file=str(DEMO_CONFIG))
    p = Pipeline(settings, console=console)
    run_all_stages(p)


@main.command()
@run_options
@option_for("workers")
@friendly_errors
def build(**kw):
    """prepare -> generate -> validate -> emit, resumable and idempotent.

    Rerunning the same command skips finished work: completed samples come from the checkpoint and
    the emitted dataset is byte-identical when nothing changed.

    Exit status: 0 when every sample completed; 3 when samples failed in this run (the dataset of
    the others is still emitted; rerun with --retry-failed); 1 on an error; 2 on a usage error.
    """
    run_all_stages(pipeline_for(settings_from(kw)))


@main.command()
@run_options
@click.option("--dry-run", is_flag=True,
              help="Print per-config counts after each stage (selected, adapted, filters, dedup, prepared); "
                   "write nothing.")
@friendly_errors
def prepare(dry_run: bool, **kw):
    """Select source rows, adapt, filter, decontaminate, dedup and render prompts with the chat template
    (prepared/<CONFIG>.parquet; rejected rows with reasons in prepared/<CONFIG>.rejects.jsonl)."""
    settings = settings_from(kw)
    if dry_run:
        from kimi_eagle_data.prompts.prepare import PrepareError, dry_run as prepare_dry_run, funnel_table

        run = prepare_dry_run(settings)
        out.print(funnel_table(run))
        for warning in run.warnings:
            console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
        if run.errors:
            raise PrepareError(run.error_line())
        return
    print_prepare(pipeline_for(settings).prepare())


@main.command()
@run_options
@friendly_errors
def generate(**kw):
    """Generate completions for prepared prompts into the checkpoint (resumable).

    Safe to stop at any moment (Ctrl-C, SIGTERM, kill -9): every finished sample is committed on its own;
    rerun the same command to continue. Samples that failed after all retries are skipped on
    reruns until --retry-failed.

    Exit status: 0 when every sample completed; 3 when samples failed in this run; 1 on an error;
    2 on a usage error.
    """
    p = pipeline_for(settings_from(kw), generate_only=True)
    rep = p.generate()
    print_generate(rep)
    print_accounting(p.accounting())
    exit_if_failed(rep)


@main.command()
@run_options
@option_for("workers")
@friendly_errors
def validate(**kw):
    """Check every completion's token structure (docs/token-rules.md): verdicts, lengths, finish reasons and
    reasons per sample in validated/<CONFIG>.parquet (light columns, what stats, plan and inspect read), counts in
    validated/<CONFIG>.json. Writes no token rows: `emit` runs the same validation while it streams the rows
    into the dataset, so each token is written once."""
    print_summary(pipeline_for(settings_from(kw)).validate())


@main.command()
@run_options
@option_for("repo")
@option_for("workers")
@friendly_errors
def emit(**kw):
    """Validate every completion and stream its row straight into WORKDIR/dataset (Parquet per config and
    split), then card, plots and manifest. Runs `validate`'s pass itself (and rewrites validated/), so it
    needs no `validate` first; `build` runs it once.

    The workdir remembers --repo: a later `build` re-emits the card naming the same repo."""
    from kimi_eagle_data.hub.publish import REPO_ID, tree_summary

    if kw["repo"] and not REPO_ID.match(kw["repo"]):
        raise click.BadParameter(f"{kw['repo']!r}: expected ORG/NAME", param_hint="--repo")
    p = pipeline_for(settings_from(kw))
    repo = p.s.repo
    manifest = p.emit()
    out.print(f"emitted {tree_summary(manifest['files'])} to {p.workdir.dataset} (version {manifest['version']})",
              highlight=False, soft_wrap=True)
    print_load_hint(p.workdir.dataset, p.s.configs)
    if repo:
        out.print(f"Publish it with:\n  kimi-data push {p.workdir.root} --repo {repo}", highlight=False, soft_wrap=True)


from kimi_eagle_data.cli.quality import inspect_cmd, plan, stats  # noqa: E402

main.add_command(stats)
main.add_command(plan)
main.add_command(inspect_cmd, name="inspect")

from kimi_eagle_data.cli.publish import export, push  # noqa: E402

main.add_command(push)
main.add_command(export)

from kimi_eagle_data.cli.check import check, render  # noqa: E402

main.add_command(render)
main.add_command(check)

from kimi_eagle_data.cli.score import score  # noqa: E402

main.add_command(score)

from kimi_eagle_data.cli.serve import serve  # noqa: E402

main.add_command(serve)


if __name__ == "__main__":  # pragma: no cover
    main()
