"""A run over one workdir: its context made once (`open_run`: options + workdir + partition config file ->
run_context.RunContext, run.json bound, the workdir locked), and the runs made of stages: `build`, a stage
command's run with its accounting check. The CLI only turns options into `RunSettings` and prints the reports.

It prints nothing: warnings and notes are `logging` records, progress goes to the context's `Progress`
(progress.py; default: INFO records of `kimi_eagle_data.progress`, none with `progress=False` in the settings), so
a library caller routes or silences both.

    settings = RunSettings(workdir="runs/b4", configs=["B4"], engine="sglang", servers=["http://node1:30000"])
    ctx = open_run(settings)      # reads the partition config, the tokenizer, binds run.json
    report = build(ctx)           # or prepare(ctx); generate(ctx); emit_dataset(ctx)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from kimi_eagle_data.emit.stage import emit
from kimi_eagle_data.emit.stale import mark_stale
from kimi_eagle_data.emit.writer import NothingToEmit, check_version
from kimi_eagle_data.engines.base import SamplingParams
from kimi_eagle_data.engines.factory import check_local_model, make_engine
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.generate.records import GenerateReport
from kimi_eagle_data.generate.stage import generate
from kimi_eagle_data.profile import PROFILES, UnknownProfileError, demo_profiles, get_profile
from kimi_eagle_data.registry import plugin_packages
from kimi_eagle_data.model_profile import model_vocab_size
from kimi_eagle_data.progress import LogProgress, NoProgress, Progress
from kimi_eagle_data.prompts.prepare import PrepareReport, PrepareRun, dry_run
from kimi_eagle_data.prompts.stage import Prepared, prepare
from kimi_eagle_data.prompts.tokenizer import load_tokenizer, tokenizer_fingerprint, tokenizer_modules_sha256
from kimi_eagle_data.run_context import EngineHandoff, RunContext, merged_checkpoint_paths
from kimi_eagle_data.probe.report import card_section as probe_section, load_report as load_probe
from kimi_eagle_data.score.report import card_section, load_report
from kimi_eagle_data.settings import BOUND, RunSettings
from kimi_eagle_data.sources.config import PrepareConfig, load_config
from kimi_eagle_data.sources.partitions import DEMO_CONFIG, DEMO_EFFORTS_CONFIG
from kimi_eagle_data.store.lock import WorkdirLock
from kimi_eagle_data.store.progress import generation_progress
from kimi_eagle_data.store.workdir import Workdir
from kimi_eagle_data.validate.assemble import ValidateReport
from kimi_eagle_data.validate.stage import validate
from kimi_eagle_data.formats import format_of
from kimi_eagle_data.chat_format import ChatFormat

__all__ = ["AccountingError", "BuildReport", "RunContext", "RunSettings", "accounting", "build", "demo_settings",
           "emit_dataset", "generate_and_account", "load_partitions", "open_run", "prepare_dry_run", "prepare_prompts",
           "validate_and_account"]

log = logging.getLogger(__name__)

# What the run is bound to: a workdir started with one value refuses another (settings.py marks the
# bound settings; sampling is bound as the request it makes, the tokenizer by its fingerprints).
_SAMPLING = ("max_new_tokens", "temperature", "top_p")
BINDING_KEYS = (*(k for k in BOUND if k not in _SAMPLING), "sampling", "tokenizer_sha256", "chat_template_sha256",
                "tokenizer_code_sha256", "tokenizer_modules_sha256", "encoder_sha256", "tool_encoder_version",
                "template_options", "template_plan", "sampling_plan", "conversation_plan")

# A stage's report as it is made: (stage, report) with stage one of "prepare" (config -> PrepareReport), "generate"
# (GenerateReport), "accounting" (config -> counts before validation), "validate" (config -> ValidateReport) and
# "balanced" (the same, once the accounting identity holds). The CLI prints them; a library caller may ignore them.
Show = Callable[[str, Any], None]


def _ignore(stage: str, report: Any) -> None:
    pass


class AccountingError(KimiDataError, RuntimeError):
    """selected != rejected at prepare + generated/validated + failed + pending: every item must be counted."""


def load_partitions(settings: RunSettings, partitions: PrepareConfig | None = None
                    ) -> tuple[RunSettings, PrepareConfig]:
    """The settings resolved against the partition config (read from `settings.config_file` unless given): unset
    configs become every partition of the file, unset sampling takes the file's `[sampling]` (options win). An
    unknown config is a ConfigError."""
    partitions = partitions or load_config(settings.config_file)
    configs = list(settings.configs) or list(partitions.configs)
    for c in configs:
        partitions.partition(c)
    chat_format = format_of(settings.model_profile)
    partitions.check_efforts(chat_format.efforts, settings.model_profile.name, chat_format.refused_efforts)
    partitions.check_template_options(settings.model_profile, {
        k: [p.name for p in PROFILES.values() if k in p.template_options]
        for c in partitions.partitions.values() for k in c.template_options})
    from_file = {k: v for k, v in partitions.sampling.items() if getattr(settings, k) is None}
    return replace(settings, configs=configs, **from_file), partitions


def run_format(settings: RunSettings) -> ChatFormat:
    """The profile's chat format, passing the chat template the arguments the run's settings give
    (`RunSettings.template_options`: the profile's defaults, then `--preserve-thinking`). A format whose profiles
    name template arguments binds them with `with_template_options`."""
    chat_format = format_of(settings.model_profile)
    options = settings.template_options()
    return chat_format.with_template_options(options) if options else chat_format


def demo_settings(workdir: str | Path, *, limit: int | None = None, progress: bool = True,
                  workers: int | None = None, profile: str | None = None) -> RunSettings:
    """`kimi-data demo`: the bundled sample prompts through an embedded tiny model (`profile`: any registered test
    model, `demo_profiles()`, the first one by default), with the demo's partition config (a share of instant-mode
    prompts in every config; for a profile with thinking efforts, every effort and thinking off)."""
    profile = profile or demo_profiles()[0]
    if profile not in demo_profiles():
        raise UnknownProfileError(f"the demo runs an embedded tiny model: profile {profile!r} is not one; use one "
                                  f"of {', '.join(demo_profiles())}")
    return RunSettings(workdir=str(workdir), profile=profile, model=get_profile(profile).model_path,
                       model_label=f"{profile} (embedded test model)", samples=True, limit=limit, progress=progress,
                       workers=workers,
                       config_file=str(DEMO_EFFORTS_CONFIG if format_of(get_profile(profile)).efforts else DEMO_CONFIG))


def prepare_dry_run(settings: RunSettings, partitions: PrepareConfig | None = None) -> PrepareRun:
    """Everything prepare does except writing (no workdir is made): per-config counts after each stage."""
    settings, partitions = load_partitions(settings, partitions)
    return dry_run(settings, partitions, run_format(settings))


def open_run(settings: RunSettings, *, progress: Progress | None = None, partitions: PrepareConfig | None = None,
             generate_only: bool = False, create: bool = True, remember_options: bool = True,
             server_first: bool = False) -> RunContext:
    """The run's context: reads the partition config (unless `partitions` is given), the tokenizer, and binds the
    workdir's run.json; holds the workdir's lock (store/lock.py) while the context lives: one writer at a time.
    The workdir is made (with `create`) or touched only once all of that succeeded: a command that fails on its
    settings leaves nothing behind. Without `create` the workdir must have a run.json already (every stage but
    prepare works on what an earlier one left). `generate_only` with `--shard i/N`: shares the workdir with the
    other shards' generates. Without `remember_options`, run.json keeps the options it has (score: another engine
    for scoring is not the run's engine). With `server_first` (build), a first run connects to its servers before
    anything is bound (make_engine's checks): a setting the server refutes, such as a max_seq_len beyond its
    context, fails before the workdir is bound to it; that engine is the run's (`ctx.connected`). `progress` gets
    the progress of generate and score (default: log records, progress.LogProgress); with `settings.progress`
    false, none is reported."""
    workdir = Workdir(Path(settings.workdir).resolve())
    if not create:
        workdir.settings()    # MissingInputError naming the workdir: no run there, before any tokenizer is looked for
    settings, partitions = load_partitions(settings, partitions)
    check_version(settings.version)
    merged_checkpoint_paths(settings.merge)
    profile = settings.model_profile
    chat_format = run_format(settings)
    tokenizer = load_tokenizer(settings.tokenizer_path, chat_format)
    chat_format = chat_format.bind(profile, tokenizer)
    tokens = chat_format.tokens
    resolved = settings.resolved_sampling()
    sampling = SamplingParams(max_new_tokens=resolved.max_new_tokens, temperature=resolved.temperature,
                              top_p=resolved.top_p, stop_token_ids=(tokens.end_of_turn,))
    options = settings.options() if remember_options else workdir.settings().get("options", {})
    engine = None
    if server_first and not workdir.settings_path.exists():
        check_local_model(settings, resolved.max_seq_len)
    if server_first and settings.engine in ("sglang", "vllm") and not workdir.settings_path.exists():
        engine = make_engine(settings, tokens, vocab_size=model_vocab_size(profile, tokenizer),
                             max_seq_len=resolved.max_seq_len)
    # Everything is valid: only now is the workdir made and locked.
    workdir = Workdir.at(workdir.root)
    lock = WorkdirLock(workdir.root, settings.shard if generate_only else None)
    if not (generate_only and settings.shard):   # the only writer: what a killed run left half-written goes
        workdir.remove_stale_temp_files()
    run = workdir.bind_settings({
        "profile": profile.name,
        # What was loaded, bound; the card names it by published_names (a label never binds the run).
        "model": settings.model_path,
        "tokenizer": settings.tokenizer_path,
        **tokenizer_fingerprint(tokenizer),
        **chat_format.fingerprint(),
        # The modules of this package (or a plug-in's) that the tokenizer's code renders with: a tiny model's.
        **({"tokenizer_modules_sha256": mods} if (mods := tokenizer_modules_sha256(
            tokenizer, ("kimi_eagle_data", *plugin_packages()))) else {}),
        "tool_encoder_version": chat_format.tool_encoder_version,
        # The chat template's own arguments (K2.6's preserve_thinking); absent for a template that takes none.
        **({"template_options": opts} if (opts := settings.template_options()) else {}),
        # The template arguments partitions set over the run's; absent when none sets one.
        **({"template_plan": plan} if (plan := partitions.template_plan()) else {}),
        "sampling": sampling.to_sglang(),
        # The partitions' mode and sampling mixes (sources/modes.py); absent when all are the default.
        **({"sampling_plan": plan} if (plan := partitions.sampling_plan()) else {}),
        # The own_history partitions' max_turns; absent when no partition continues conversations.
        **({"conversation_plan": turns} if (turns := partitions.conversation_plan()) else {}),
        "max_seq_len": resolved.max_seq_len,
        "keep_truncated": settings.keep_truncated,
        "options": options,
    }, binding_keys=BINDING_KEYS, code_keys=("tokenizer_modules_sha256",))
    return RunContext(settings=settings, partitions=partitions, workdir=workdir, profile=profile,
                      tokenizer=tokenizer, sampling=sampling, max_seq_len=resolved.max_seq_len,
                      run=run, lock=lock, progress=(progress or LogProgress()) if settings.progress else NoProgress(),
                      connected=EngineHandoff(engine), format=chat_format)


# -- runs made of stages -------------------------------------------------------------------------

@dataclass
class BuildReport:
    prepare: dict[str, PrepareReport]
    generate: GenerateReport
    validate: dict[str, ValidateReport]
    manifest: dict[str, Any] | None      # None: nothing to emit (every sample failed; a warning says so)


def prepare_prompts(ctx: RunContext, reuse: bool = False) -> Prepared:
    """`prepare` (prompts/stage.py); then a dataset emitted from another selection than the one prepared now is
    marked stale in its manifest and card (emit/stale.py: a pilot's, once the full run's prompts are prepared)."""
    prepared = prepare(ctx, reuse=reuse)
    mark_stale(ctx.workdir)
    return prepared


def build(ctx: RunContext, show: Show = _ignore) -> BuildReport:
    """prepare (reusing prompts prepared with the same inputs) -> generate -> emit, which validates every
    completion while it writes the rows; then the accounting identity. A build whose every sample failed warns
    that there is nothing to emit instead of failing (its report says which failed, and why)."""
    prepared = prepare_prompts(ctx, reuse=True)
    show("prepare", prepared.reports)
    generated = generate(ctx, pilot_limit=prepared.pilot_limit)
    show("generate", generated)
    try:
        manifest, reports = emit_dataset(ctx)
    except NothingToEmit as e:
        log.warning("%s", e)
        manifest, reports = None, e.reports
    check_validated(reports, show)
    return BuildReport(prepared.reports, generated, reports, manifest)


def emit_dataset(ctx: RunContext) -> tuple[dict[str, Any], dict[str, ValidateReport]]:
    """emit (emit/stage.py) with the card's score section from score.json, where `score` has run, and its measured
    value from probe.json, where `probe` has run."""
    return emit(ctx, score=card_section(load_report(ctx.workdir)), probe=probe_section(load_probe(ctx.workdir)))


def generate_and_account(ctx: RunContext, show: Show = _ignore) -> GenerateReport:
    """`generate`, then the accounting identity over what is prepared and generated."""
    report = generate(ctx)
    show("generate", report)
    table = accounting(ctx)
    show("accounting", table)
    _check_balance([c for c, row in table.items() if row["selected"] + row["later_turns"]
                    != row["rejected_at_prepare"] + row["generated"] + row["failed"] + row["pending"]])
    return report


def validate_and_account(ctx: RunContext, show: Show = _ignore) -> dict[str, ValidateReport]:
    """`validate`, then the accounting identity over its verdicts."""
    reports = validate(ctx)
    check_validated(reports, show)
    return reports


def check_validated(reports: dict[str, ValidateReport], show: Show = _ignore) -> None:
    """The accounting identity over a validation: selected = rejected at prepare + train + rejected + failed +
    pending, for every config (AccountingError otherwise)."""
    show("validate", reports)
    _check_balance([c for c, r in reports.items() if not r.balanced])
    show("balanced", reports)


def _check_balance(unbalanced: list[str]) -> None:
    if unbalanced:
        raise AccountingError(f"accounting does not balance for {', '.join(unbalanced)}; this is a bug, please "
                              "report it")


def accounting(ctx: RunContext) -> dict[str, dict[str, int]]:
    """The accounting identity (docs/reliability.md) before validation:
    selected + later turns = rejected at prepare + generated + failed + pending (later turns: those of
    conversations continued on the model's own turns)."""
    ckpt = ctx.checkpoints()
    try:
        return generation_progress(ctx.workdir, ctx.configs, ckpt)
    finally:
        ckpt.close()
