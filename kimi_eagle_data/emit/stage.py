"""`emit` as a stage of a run: validate every completion again, streaming its row into dataset/data (each token
written once, rows.py), then plots, card and manifest (writer.py). Plots are drawn by the verdict pool's workers
from the light columns as soon as those are in place, while the last rows are still being written; the card, which
records the manifest's hash, comes last."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from kimi_eagle_data import __version__
from kimi_eagle_data.emit.model_name import published_names
from kimi_eagle_data.records import SpecDecodeCounts
from kimi_eagle_data.emit.rows import RowBlocks
from kimi_eagle_data.emit.stale import selection
from kimi_eagle_data.emit.token_freq import token_freq_path
from kimi_eagle_data.emit.writer import ConfigShards, NothingToEmit, finish_dataset, pending_note, replacing_dataset
from kimi_eagle_data.run_context import RunContext
from kimi_eagle_data.schema import row_schema
from kimi_eagle_data.store.workdir import Workdir, dataset_config_dir, read_json
from kimi_eagle_data.validate.assemble import ValidateReport
from kimi_eagle_data.validate.stage import validate, verdict_pool
from kimi_eagle_data.emit.plots import plot_length_histograms, plot_lengths, plot_vocab_coverage

log = logging.getLogger(__name__)


def emit(ctx: RunContext, *, score: dict[str, Any] | None = None, probe: dict[str, Any] | None = None
         ) -> tuple[dict[str, Any], dict[str, ValidateReport]]:
    """(the manifest, the validation counts). `score`: the card's score section (score/report.card_section);
    `probe`: its measured-value section (probe/report.card_section).
    Nothing to emit (every sample failed) is NothingToEmit, which carries the counts (`reports`)."""
    warning = names(ctx).warning
    if warning:
        log.warning("%s", warning)
    vocab = ctx.vocab_size()
    # Written beside dataset/, which it replaces whole at the end: the old dataset or the new one, never a mix.
    with replacing_dataset(ctx.workdir) as staged, verdict_pool(ctx) as pool:
        schema = row_schema(bool(ctx.format.efforts))
        shards = {c: ConfigShards(dataset_config_dir(staged.dataset, c), token_freq_path(staged.dataset, c), vocab,
                                  schema) for c in ctx.configs}
        plots = CardPlots(pool, staged, ctx.configs)
        try:   # whatever stops it (a full disk, SIGTERM), no hidden temp shard stays behind
            reports = validate(ctx, {c: RowBlocks(sink) for c, sink in shards.items()}, pool,
                               light_done=plots.config_validated)
            prepared = {c: read_json(ctx.workdir.prepare_report(c)) for c in shards}
            summary = {c: {"report": read_json(ctx.workdir.validate_report(c)), "splits": sink.finish(),
                           "partition": prepared[c].get("partition", {}), "source": prepared[c].get("source"),
                           "token_counts": sink.token_counts.counts}
                       for c, sink in shards.items()}
            plots.counts_written()
        except BaseException:
            for sink in shards.values():
                sink.abort()
            raise
        if (note := pending_note(reports, ctx.workdir.root)):
            log.warning("%s", note)
        try:
            manifest = finish_dataset(staged, summary, chat_format=ctx.format, version=ctx.settings.version,
                                      provenance=provenance(ctx),
                                      plots_drawn=plots.drawn, repo_id=ctx.settings.repo, score=score, probe=probe,
                                      schema=schema, selection=selection(ctx.workdir, ctx.configs))
        except NothingToEmit as e:
            e.reports = reports
            raise
        return manifest, reports


def names(ctx: RunContext):
    """The model and tokenizer as the card and manifest name them (never a local path)."""
    return published_names(ctx.run["model"], ctx.settings.tokenizer, ctx.settings.model_label,
                           ctx.settings.model_profile.model_path)


def provenance(ctx: RunContext) -> dict[str, Any]:
    ckpt = ctx.checkpoints()
    try:
        engine = ckpt.get_meta("engine") or {}
        counted = [c for c in map(SpecDecodeCounts.from_json, ckpt.meta_values("spec_decode")) if c is not None]
        span = ckpt.time_range()
    finally:
        ckpt.close()
    iso = (lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    published, run = names(ctx), ctx.run
    return {
        "profile": run["profile"],
        "model_path": published.model,
        "model_revision": ctx.settings.revision,
        "tokenizer_path": published.tokenizer,
        "tokenizer_sha256": run["tokenizer_sha256"],
        "chat_template_sha256": run["chat_template_sha256"],
        "tokenizer_code_sha256": run.get("tokenizer_code_sha256", ""),
        "tool_encoder_version": run.get("tool_encoder_version", ""),
        "vocab_size": run["vocab_size"],
        "engine": engine.get("engine", "?"),
        "engine_version": engine.get("version", "?"),
        "server_args": engine.get("server_args", {}),
        # vLLM's drafter counters over the generate runs (engines/drafter.py; SGLang's are per completion): only
        # when it ran one
        **({"spec_decode": sum(counted, SpecDecodeCounts()).to_json()} if counted else {}),
        "sampling": run["sampling"],
        "sampling_plan": run.get("sampling_plan"),
        "conversation_plan": run.get("conversation_plan"),
        "max_seq_len": run["max_seq_len"],
        "keep_truncated": ctx.settings.keep_truncated,
        "project_version": __version__,
        "generated_from": iso(span[0]) if span else None,
        "generated_to": iso(span[1]) if span else None,
        "tiny_model": ctx.profile.is_test_model,
    }


class CardPlots:
    """The card's plots, drawn on the verdict pool's worker processes (the one executor of an emit, which owns
    it) while the rows are still being written: each config's length histograms once its light rows are in place,
    the length overview after the last config, the draft-vocabulary plot once the token counts are written."""

    def __init__(self, pool, workdir: Workdir, configs: list[str]):
        self.pool, self.workdir, self.configs = pool, workdir, configs
        self.assets = workdir.dataset / "assets"
        self.with_rows: list[str] = []     # a config without rows has no plot (nor data files)
        self.futures: list = []

    def config_validated(self, config: str, rows: int) -> None:
        if rows:
            self.with_rows.append(config)
            self.futures.append(self.pool.submit(plot_length_histograms, self.workdir, [config], self.assets))
        if config == self.configs[-1] and self.with_rows:
            self.futures.append(self.pool.submit(plot_lengths, self.workdir, self.with_rows, self.assets))

    def counts_written(self) -> None:
        if self.with_rows:
            self.futures.append(self.pool.submit(plot_vocab_coverage, self.workdir.dataset, self.with_rows,
                                                 self.assets))

    def drawn(self) -> dict[str, str]:
        """Every plot's card path -> file, once all are drawn."""
        drawn: dict[str, str] = {}
        for f in self.futures:
            drawn.update(f.result())
        return drawn
