"""`kimi-data`: the command line. Thin: options -> RunSettings (cli/options.py) -> a run (runs.py),
whose reports it prints.

Errors the user can fix print one line (what, where, what to do) and exit 1; usage errors exit 2;
`generate`/`build`/`demo` exit 3 when samples failed in this run (after all retries; the rest is kept); samples
that failed earlier and were not retried are the last line's warning.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import click
from rich.table import Table

from kimi_eagle_data.cli.common import REWRITES, console, friendly_errors, out, resumes
from kimi_eagle_data.cli.options import DemoProfileChoice, options_for, run_for, settings_from
from kimi_eagle_data.cli.help import SectionedCommand
from kimi_eagle_data.cli.progress import RichProgress, show_log_records
from kimi_eagle_data.profile import demo_profiles, profiles_described
from kimi_eagle_data.wording import counted
from kimi_eagle_data.run_checks import REPO_ID
from kimi_eagle_data.hub.publish import tree_summary

# Exit status of generate/build/demo when samples failed in this run (everything else was kept).
EXIT_FAILED = 3

# -- output ---------------------------------------------------------------------------------------
def print_prepare(reports) -> None:
    t = Table(title="prepare")
    for col in ("config", "source", "selected", "prompts", "rejected", "reasons"):
        t.add_column(col, justify="right" if col in ("selected", "prompts", "rejected") else "left")
    for cfg, r in reports.items():
        t.add_row(cfg, r.source, str(r.selected), str(r.prepared), str(sum(r.rejected.values())),
                  ", ".join(f"{k} {v}" for k, v in r.rejected.most_common(3)))
    out.print(t)
    for cfg, r in reports.items():
        if r.special_text_kept:
            out.print(f"{cfg}: {counted(r.special_text_kept, 'prompt')} keep special-token text, tokenized as served "
                      "(the special tokens' ids; partition special_text = \"as_served\")", highlight=False,
                      soft_wrap=True)


def funnel_table(run, title: str = "prepare --dry-run: prompts left after each stage"):
    """The per-config funnel as a rich renderable: a table of counts, then every rejection reason."""
    from rich.console import Group
    from rich.text import Text

    # lazy: keeps prepare's pyarrow, rensa and source readers out of every CLI start
    from kimi_eagle_data.prompts.prepare import STAGES

    t = Table(title=title)
    cols = ["config", "scanned", "repeats", "selected", *STAGES[:-1], "prepared", "n"]
    for c in cols:
        t.add_column(c.replace("_", "-"), justify="left" if c == "config" else "right", no_wrap=True)
    lines = []
    for cfg, r in run.reports.items():
        funnel = dict(r.funnel())
        n = "all" if r.n is None else f"{r.n:,}"
        t.add_row(cfg, f"{r.scanned:,}", f"{r.repeated_rows:,}",
                  *(f"{funnel[s]:,}" for s in ["selected", *STAGES[:-1]]), f"{r.prepared:,}", n)
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(r.rejected.items(), key=lambda kv: (-kv[1], kv[0])))
        line = f"{cfg} ({r.source}): " + (f"rejected {reasons}" if reasons else "nothing rejected")
        if r.scan_errors:
            line += "; row errors among all scanned rows: " + ", ".join(f"{k} {v}" for k, v in r.scan_errors.items())
        if r.exhausted:
            line += f"; only {r.prepared:,} of n={r.n:,}: the selection ran out, raise `oversample`"
        lines.append(Text(line))
    for cfg, err in run.errors.items():
        if cfg not in run.reports:
            t.add_row(cfg, *["-"] * (len(cols) - 1))
        lines.append(Text(f"{cfg}: error: {err}"))
    for name, st in run.decontam.items():
        lines.append(Text(f"eval set {name}: {st['texts']:,} texts, {st['ngrams']:,} n-grams"
                          + (f", {st['ignored_short']} too short to match" if st["ignored_short"] else "")))
    return Group(t, *lines)


def print_generate(rep) -> None:
    out.print(f"generate: {rep.completed} completed, {rep.failed} failed, {rep.skipped_done} already done"
              + (f", {rep.skipped_failed} failed earlier (rerun with --retry-failed)" if rep.skipped_failed else "")
              + (f"; {counted(rep.output_tokens, 'token')} in {rep.seconds:.1f}s ({rep.tokens_per_s:,.0f} tok/s)"
                 if rep.completed else ""))


def _with_later_turns(keys: tuple[str, ...], later: bool) -> tuple[str, ...]:
    """`keys` with later_turns after selected when a conversation has later turns (policy own_history)."""
    return (keys[0], "later_turns", *keys[1:]) if later else keys


def _selected(later: bool) -> str:
    """The left side of the accounting identity: later turns are counted once a conversation has any."""
    return "selected + later turns" if later else "selected"


def print_accounting(table: dict[str, dict[str, int]]) -> None:
    later = any(row.get("later_turns") for row in table.values())
    t = Table(title=f"accounting ({_selected(later)} = rejected at prepare + generated + failed + pending)")
    keys = _with_later_turns(("selected", "rejected_at_prepare", "generated", "failed", "pending"), later)
    t.add_column("config")
    for k in keys:
        t.add_column(k.replace("_", " "), justify="right")
    for cfg, row in table.items():
        t.add_row(cfg, *(str(row[k]) for k in keys))
    out.print(t)


def top_reasons(report) -> str:
    """A config's most frequent reasons, prepare's rejects apart from generation's (its failures and the rejects of
    its samples): `prepare: empty_prompt 3; generation: truncated 2, timeout 1`."""
    groups = (("prepare", Counter(report.prepare_reasons)), ("generation", report.reasons + report.failure_reasons))
    return "; ".join(f"{stage}: " + ", ".join(f"{k} {v}" for k, v in counts.most_common(3))
                     for stage, counts in groups if counts)


def print_summary(reports) -> None:
    later = any(r.later_turns for r in reports.values())
    keys = _with_later_turns(("selected", "rejected_at_prepare", "generated", "failed", "pending", "valid",
                              "rejected", "train_tokens"), later)
    t = Table(title="dataset summary")
    for col in ("config", *_with_later_turns(("selected", "prep-rej", "generated", "failed", "pending", "train",
                                              "rejected", "train tokens"), later), "top reasons"):
        t.add_column(col.replace("_", " "), justify="left" if col in ("config", "top reasons") else "right",
                     overflow="fold", no_wrap=col != "top reasons")
    tot = dict.fromkeys(keys, 0)
    for cfg, r in reports.items():
        for k in keys:
            tot[k] += getattr(r, k)
        t.add_row(cfg, *(f"{getattr(r, k):,}" for k in keys), top_reasons(r))
    t.add_row("all", *(f"{tot[k]:,}" for k in keys), "", style="bold")
    out.print(t)


def print_balanced(reports) -> None:
    later = any(r.later_turns for r in reports.values())
    out.print(f"accounting: {_selected(later)} = rejected at prepare + train + rejected + failed + pending  "
              "[green]✓[/]")


PRINTERS = {"prepare": print_prepare, "generate": print_generate, "accounting": print_accounting,
            "validate": print_summary, "balanced": print_balanced}


def show(stage: str, report) -> None:
    """Print a stage's report as the run makes it (runs.Show)."""
    PRINTERS[stage](report)


def exit_if_failed(rep) -> None:
    """Samples that failed in this run: say how to retry them and exit EXIT_FAILED (the rest is kept). Samples
    that failed earlier and were not sent again (no --retry-failed) are still missing: the last line says so
    (exit 0: nothing failed in this run; a script retries until --retry-failed exits 0)."""
    if rep.failed:
        console.print(f"[bold red]error:[/] {rep.failed} of {rep.requested} samples failed in this run (reasons in "
                      "the table); rerun with --retry-failed once the server is healthy", highlight=False,
                      soft_wrap=True)
        sys.exit(EXIT_FAILED)
    if rep.skipped_failed:
        console.print(f"[yellow]warning:[/] {rep.skipped_failed:,} samples failed earlier and were not sent again, "
                      "so the dataset lacks them; rerun with --retry-failed (it exits 3 while any still fails)",
                      highlight=False, soft_wrap=True)


def build_and_print(ctx) -> None:
    """The run's `build` (runs.py), each stage's report printed as it comes (build and demo)."""
    # lazy: runs.py imports every stage (pyarrow, rensa, asyncio, scipy): kept out of every CLI start
    from kimi_eagle_data.runs import build

    report = build(ctx, show)
    if report.manifest is not None:
        print_load_hint(ctx.workdir.dataset, ctx.configs)
    exit_if_failed(report.generate)


def print_load_hint(dataset_dir: Path, configs) -> None:
    config = "B4" if "B4" in configs else next(iter(configs))
    out.print("\nLoad it with:")
    out.print(f'  python -c \'from datasets import load_dataset; print(load_dataset("{dataset_dir}", "{config}"))\'',
              highlight=False, soft_wrap=True)


def check_repo(repo: str | None) -> None:
    """--repo names a Hub repo: ORG/NAME (a usage error otherwise)."""
    if repo and not REPO_ID.match(repo):
        raise click.BadParameter(f"{repo!r}: expected ORG/NAME", param_hint="--repo")


# -- commands -------------------------------------------------------------------------------------
@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="kimi-eagle-data", prog_name="kimi-data")
def main():
    """Build EAGLE-3 drafter training data for Kimi-K2.5 and Kimi-K3 (--profile kimi-k2.5, the default, or kimi-k3).

    Pipeline: prepare (render prompts with the model's chat template) -> generate (the model's own
    completions, token ids in and out) -> validate (token structure) -> emit (Hub-layout dataset with
    card). `build` runs all four and resumes where it stopped; `demo` runs them on CPU with the embedded
    tiny model.
    """
    show_log_records(console)


@main.command(cls=SectionedCommand)
@click.option("--profile", type=DemoProfileChoice(), default=demo_profiles()[0], show_default=True,
              help=f"The model to run: {profiles_described(demo_profiles())}.")
@options_for("demo")
@friendly_errors
def demo(profile: str, workdir: str, limit: int | None, progress: bool, workers: int | None):
    """The whole pipeline on the bundled sample prompts with an embedded tiny model (CPU, no network).

    The tiny model speaks Kimi-K2.5's token format (or Kimi-K3's, with --profile tiny-kimi-k3) but
    its text is meaningless: the demo shows the pipeline, not data to train on. With the [probe] extra
    it ends with the acceptance of the small EAGLE-3 drafter shipped for the tiny model on the data
    it built.
    """
    # lazy: runs.py imports every stage (pyarrow, rensa, asyncio, scipy): kept out of every CLI start
    from kimi_eagle_data.runs import demo_settings, open_run

    ctx = open_run(demo_settings(workdir, limit=limit, progress=progress, workers=workers, profile=profile),
                   progress=RichProgress(console))
    build_and_print(ctx)
    print_shipped_drafter(ctx)


def print_shipped_drafter(ctx) -> None:
    """The demo's last line: the shipped drafter's acceptance on the prompts it built and the drafter never saw,
    measured in-process (probe/shipped.py); without speculators, one note saying how to get it."""
    # lazy: keeps torch (the probe) out of every CLI start
    from kimi_eagle_data.probe.drafter import INSTALL, ProbeSetupError
    from kimi_eagle_data.probe.shipped import ShippedDrafterMissing, shipped_acceptance

    try:
        got = shipped_acceptance(ctx)
    except ShippedDrafterMissing as e:
        from rich.markup import escape

        out.print(f"[yellow]note:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
        return
    except ProbeSetupError:
        out.print(f"[yellow]note:[/] the shipped tiny EAGLE-3 drafter's acceptance on this data needs speculators "
                  f"(the \\[probe] extra, docs/probe.md): {INSTALL}", highlight=False, soft_wrap=True)
        return
    if got is None:
        return
    if not got.prompts:
        out.print(f"[yellow]note:[/] no prompt of this dataset is one {Path(got.drafter).name} was not trained on: "
                  "no acceptance to report", highlight=False, soft_wrap=True)
        return
    out.print(f"drafter: {Path(got.drafter).name} (shipped, speculators' EAGLE-3) accepts {got.acceptance:.2f} "
              f"tokens per verify step on {counted(got.prompts, 'held-out prompt')} of this dataset ({got.tokens} "
              f"tokens in {got.steps} verify steps; in-process, greedy, 3 drafts per step; {got.seconds:.0f}s)",
              highlight=False, soft_wrap=True)


@main.command(cls=SectionedCommand)
@options_for("build")
@friendly_errors
def build(**kw):
    """prepare -> generate -> validate -> emit, resumable and idempotent.

    Rerunning the same command skips finished work: completed samples come from the checkpoint and
    the emitted dataset is byte-identical when nothing changed.

    Exit status: 0 when every sample completed; 3 when samples failed in this run (the dataset of
    the others is still emitted; rerun with --retry-failed); 1 on an error; 2 on a usage error.
    """
    check_repo(kw["repo"])
    build_and_print(run_for(kw, server_first=True))


@main.command(cls=SectionedCommand)
@options_for("prepare")
@click.option("--dry-run", is_flag=True,
              help="Print per-config counts after each stage (selected, adapted, filters, dedup, prepared); "
                   "write nothing.")
@friendly_errors(interrupted=REWRITES)
def prepare(dry_run: bool, **kw):
    """Select source rows, adapt, filter, decontaminate, dedup and render prompts with the chat template
    (prepared/<CONFIG>.parquet; rejected rows with reasons in prepared/<CONFIG>.rejects.jsonl)."""
    # lazy: runs.py and prepare import every stage (pyarrow, rensa, asyncio, scipy): kept out of every CLI start
    from kimi_eagle_data.prompts.prepare import PrepareError
    from kimi_eagle_data.runs import prepare_dry_run, prepare_prompts

    if dry_run:
        run = prepare_dry_run(*settings_from(kw))
        out.print(funnel_table(run))
        for warning in run.warnings:
            console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
        if run.errors:
            raise PrepareError(run.error_line())
        return
    print_prepare(prepare_prompts(run_for(kw)).reports)


@main.command(cls=SectionedCommand)
@options_for("generate")
@friendly_errors(interrupted=resumes)
def generate(**kw):
    """Generate completions for prepared prompts into the checkpoint (resumable).

    Safe to stop at any moment (Ctrl-C, SIGTERM, kill -9): every finished sample is committed on its own;
    rerun the same command to continue. Samples that failed after all retries are skipped on
    reruns until --retry-failed.

    Exit status: 0 when no sample failed in this run (samples that failed earlier and were not retried:
    the last line says so); 3 when samples failed in this run; 1 on an error; 2 on a usage error. Until
    nothing failed: repeat with --retry-failed while it exits 3.
    """
    # lazy: runs.py imports every stage (pyarrow, rensa, asyncio, scipy): kept out of every CLI start
    from kimi_eagle_data.runs import generate_and_account

    # A shard's options are its own (its server, on its node): run.json keeps the run's, so every shard and a
    # later submit see the same ones.
    exit_if_failed(generate_and_account(run_for(kw, generate_only=True, create=False,
                                                remember_options=not kw.get("shard")), show))


@main.command(cls=SectionedCommand)
@options_for("validate")
@friendly_errors(interrupted=REWRITES)
def validate(**kw):
    """Check every completion's token structure (docs/token-rules.md): verdicts, lengths, finish reasons and
    reasons per sample in validated/<CONFIG>.parquet (light columns, what stats, plan and inspect read), counts in
    validated/<CONFIG>.json. Writes no token rows: `emit` runs the same validation while it streams the rows
    into the dataset, so each token is written once."""
    # lazy: runs.py imports every stage (pyarrow, rensa, asyncio, scipy): kept out of every CLI start
    from kimi_eagle_data.runs import validate_and_account

    validate_and_account(run_for(kw, create=False), show)


@main.command(cls=SectionedCommand)
@options_for("emit")
@friendly_errors(interrupted=REWRITES)
def emit(**kw):
    """Validate every completion and stream its row straight into WORKDIR/dataset (Parquet per config and
    split), then card, plots and manifest. Runs `validate`'s pass itself (and rewrites validated/), so it
    needs no `validate` first; `build` runs it once.

    The workdir remembers --repo: a later `build` re-emits the card naming the same repo."""
    check_repo(kw["repo"])
    # lazy: runs.py imports every stage (pyarrow, rensa, asyncio, scipy): kept out of every CLI start
    from kimi_eagle_data.runs import emit_dataset

    ctx = run_for(kw, create=False)
    repo = ctx.settings.repo
    manifest, _ = emit_dataset(ctx)
    out.print(f"emitted {tree_summary(manifest['files'])} to {ctx.workdir.dataset} (version {manifest['version']})",
              highlight=False, soft_wrap=True)
    print_load_hint(ctx.workdir.dataset, ctx.configs)
    if repo:
        out.print(f"Publish it with:\n  kimi-data push {ctx.workdir.root} --repo {repo}", highlight=False,
                  soft_wrap=True)


from kimi_eagle_data.cli.inspect import inspect_cmd  # noqa: E402
from kimi_eagle_data.cli.plan import plan  # noqa: E402
from kimi_eagle_data.cli.stats import stats  # noqa: E402

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

from kimi_eagle_data.cli.probe import probe  # noqa: E402

main.add_command(probe)

from kimi_eagle_data.cli.serve import serve  # noqa: E402

main.add_command(serve)

from kimi_eagle_data.cli.slurm import slurm  # noqa: E402

main.add_command(slurm)


if __name__ == "__main__":  # pragma: no cover
    main()
