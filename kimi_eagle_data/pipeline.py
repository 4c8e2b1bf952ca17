"""The whole pipeline over one workdir: the stages (prepare, generate, validate, emit, score), the runs made of them
(`build`, a stage command's run with its accounting check) and the reports they return. The CLI only turns options
into `RunSettings` and prints the reports.

It prints nothing: warnings and notes are `logging` records (logger `kimi_eagle_data.pipeline`), progress goes to
the `Progress` it is given (progress.py; default: INFO records of `kimi_eagle_data.progress`, none with
`progress=False` in the settings), so a library caller routes or silences both.

    settings = RunSettings(workdir="runs/b4", configs=["B4"], engine="sglang", servers=["http://node1:30000"])
    p = Pipeline(settings)          # reads the partition config, the tokenizer, binds run.json
    p.prepare(); p.generate(); p.validate()          # or p.build()
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable

import orjson

from kimi_eagle_data import __version__
from kimi_eagle_data.errors import KimiDataError, MissingInputError
from kimi_eagle_data.validate.assemble import ValidateReport, validate_config
from kimi_eagle_data.records import PromptRecord
from kimi_eagle_data.store.checkpoint import Checkpoint, CheckpointSet, in_shard
from kimi_eagle_data.store.prompt_hash import conversation_origin, prompt_hash
from kimi_eagle_data.store.prompt_view import read_views
from kimi_eagle_data.store.progress import generation_progress
from kimi_eagle_data.engines.base import Engine, EngineError, SamplingParams
from kimi_eagle_data.engines.generate import GenerateReport, generate_records
from kimi_eagle_data.grammar import reasoning_length
from kimi_eagle_data.prompts.prepare import PrepareReport, PrepareRun, read_prepared
from kimi_eagle_data.profile import TINY_MODEL_DIR, ProfileTokens
from kimi_eagle_data.progress import LogProgress, NoProgress, Progress
from kimi_eagle_data.settings import BOUND, RunSettings
from kimi_eagle_data.sources.config import PrepareConfig, load_config
from kimi_eagle_data.sources.partitions import DEMO_CONFIG
from kimi_eagle_data.prompts.tokenizer import load_tokenizer, tokenizer_fingerprint
from kimi_eagle_data.prompts.tool_declaration import ENCODER_VERSION as TOOL_ENCODER_VERSION
from kimi_eagle_data.validate.validator import Validator
from kimi_eagle_data.store.workdir import Workdir, dataset_config_dir

__all__ = ["AccountingError", "BuildReport", "Pipeline", "RunSettings", "demo_settings", "load_partitions",
           "prepare_dry_run"]

log = logging.getLogger(__name__)

# What the run is bound to: a workdir started with one value refuses another (settings.py marks the
# bound settings; sampling is bound as the request it makes, the tokenizer by its fingerprints).
_SAMPLING = ("max_new_tokens", "temperature", "top_p")
BINDING_KEYS = (*(k for k in BOUND if k not in _SAMPLING), "sampling", "tokenizer_sha256", "chat_template_sha256",
                "tokenizer_code_sha256", "tool_encoder_version", "sampling_plan", "conversation_plan")

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
    from_file = {k: v for k, v in partitions.sampling.items() if getattr(settings, k) is None}
    return replace(settings, configs=configs, **from_file), partitions


def demo_settings(workdir: str | Path, *, limit: int | None = None, progress: bool = True,
                  workers: int | None = None) -> RunSettings:
    """`kimi-data demo`: the bundled sample prompts through the embedded tiny model, with the demo's partition
    config (a share of instant-mode prompts in every config)."""
    return RunSettings(workdir=str(workdir), profile="tiny-kimi", model=str(TINY_MODEL_DIR),
                       model_label="tiny-kimi (embedded test model)", samples=True, limit=limit, progress=progress,
                       workers=workers, config_file=str(DEMO_CONFIG))


def prepare_dry_run(settings: RunSettings, partitions: PrepareConfig | None = None) -> PrepareRun:
    """Everything prepare does except writing (no workdir is made): per-config counts after each stage."""
    from kimi_eagle_data.prompts.prepare import dry_run

    settings, partitions = load_partitions(settings, partitions)
    return dry_run(settings, partitions)


@dataclass
class BuildReport:
    prepare: dict[str, PrepareReport]
    generate: GenerateReport
    validate: dict[str, ValidateReport]
    manifest: dict[str, Any] | None      # None: nothing to emit (every sample failed; a warning says so)


class Pipeline:
    def __init__(self, settings: RunSettings, *, progress: Progress | None = None,
                 partitions: PrepareConfig | None = None, generate_only: bool = False, create: bool = True,
                 remember_options: bool = True, server_first: bool = False):
        """Reads the partition config (unless `partitions` is given), the tokenizer, and binds the workdir's
        run.json; holds the workdir's lock (store/lock.py) from then until the Pipeline is dropped: one writer at
        a time. The workdir is made (with `create`) or touched only once all of that succeeded: a command that fails
        on its settings leaves nothing behind. Without `create` the workdir must have a run.json already (every
        stage but prepare works on what an earlier one left). `generate_only` with `--shard i/N`: shares the
        workdir with the other shards' generates. Without `remember_options`, run.json keeps the options it has
        (score: another engine for scoring is not the run's engine). With `server_first` (build), a first run
        connects to its servers before anything is bound (make_engine's checks): a setting the server refutes,
        such as a max_seq_len beyond its context, fails before the workdir is bound to it. `progress` gets the
        progress of generate and score (default: log records, progress.LogProgress); with `settings.progress`
        false, none is reported."""
        from kimi_eagle_data.emit.writer import check_version
        from kimi_eagle_data.store.lock import WorkdirLock

        self.workdir = Workdir(Path(settings.workdir).resolve())
        settings, self.partitions = load_partitions(settings, partitions)
        check_version(settings.version)
        self.s = settings
        self.progress = (progress or LogProgress()) if settings.progress else NoProgress()
        self.profile = settings.model_profile
        self.tokenizer = load_tokenizer(settings.tokenizer_path)
        self.tokens = ProfileTokens.from_tokenizer(self.profile, self.tokenizer)
        resolved = settings.resolved_sampling()
        self.sampling = SamplingParams(max_new_tokens=resolved.max_new_tokens, temperature=resolved.temperature,
                                       top_p=resolved.top_p, stop_token_ids=(self.tokens.end_of_turn,))
        self.max_seq_len = resolved.max_seq_len
        self.reports: dict[str, ValidateReport] = {}   # the last validate pass's counts
        self.pilot_limit: int | None = None             # --limit of the prepare this run's prepare replaced
        fp = tokenizer_fingerprint(self.tokenizer)
        if not create:
            self.workdir.settings()    # MissingInputError naming the workdir: there is nothing to resume
        options = settings.options() if remember_options else self.workdir.settings().get("options", {})
        self._engine: Engine | None = None       # made before the binding (server_first): generate's engine
        if server_first and settings.engine in ("sglang", "vllm") and not self.workdir.settings_path.exists():
            self._engine = self.make_engine()
        # Everything is valid: only now is the workdir made and locked.
        self.workdir = Workdir.at(self.workdir.root)
        self.lock = WorkdirLock(self.workdir.root, settings.shard if generate_only else None)
        if not (generate_only and settings.shard):   # the only writer: what a killed run left half-written goes
            self.workdir.remove_stale_temp_files()
        self.run = self.workdir.bind_settings({
            "profile": self.profile.name,
            # What was loaded, bound; the card names it by published_names (a label never binds the run).
            "model": settings.model_path,
            "tokenizer": settings.tokenizer_path,
            **fp,
            "tool_encoder_version": TOOL_ENCODER_VERSION,
            "sampling": self.sampling.to_sglang(),
            # The partitions' mode and sampling mixes (sources/modes.py); absent when all are the default.
            **({"sampling_plan": plan} if (plan := self.partitions.sampling_plan()) else {}),
            # The own_history partitions' max_turns; absent when no partition continues conversations.
            **({"conversation_plan": turns} if (turns := self.partitions.conversation_plan()) else {}),
            "max_seq_len": self.max_seq_len,
            "keep_truncated": settings.keep_truncated,
            "options": options,
        }, binding_keys=BINDING_KEYS)

    # -- runs made of stages -------------------------------------------------------------------
    def build(self, show: Show = _ignore) -> BuildReport:
        """prepare (reusing prompts prepared with the same inputs) -> generate -> emit, which validates every
        completion while it writes the rows; then the accounting identity. A build whose every sample failed warns
        that there is nothing to emit instead of failing (its report says which failed, and why)."""
        from kimi_eagle_data.emit.writer import NothingToEmit

        prepared = self.prepare(reuse=True)
        show("prepare", prepared)
        generated = self.generate()
        show("generate", generated)
        try:
            manifest = self.emit()
        except NothingToEmit as e:
            log.warning("%s", e)
            manifest = None
        self.check_validated(show)
        return BuildReport(prepared, generated, self.reports, manifest)

    def generate_and_account(self, show: Show = _ignore) -> GenerateReport:
        """`generate`, then the accounting identity over what is prepared and generated."""
        report = self.generate()
        show("generate", report)
        table = self.accounting()
        show("accounting", table)
        unbalanced = [c for c, row in table.items() if row["selected"] + row["later_turns"]
                      != row["rejected_at_prepare"] + row["generated"] + row["failed"] + row["pending"]]
        self._check_balance(unbalanced)
        return report

    def validate_and_account(self, show: Show = _ignore) -> dict[str, ValidateReport]:
        """`validate`, then the accounting identity over its verdicts."""
        self.validate()
        self.check_validated(show)
        return self.reports

    def check_validated(self, show: Show = _ignore) -> None:
        """The accounting identity over the last validation: selected = rejected at prepare + train + rejected +
        failed + pending, for every config (AccountingError otherwise)."""
        show("validate", self.reports)
        self._check_balance([c for c, r in self.reports.items() if not r.balanced])
        show("balanced", self.reports)

    @staticmethod
    def _check_balance(unbalanced: list[str]) -> None:
        if unbalanced:
            raise AccountingError(f"accounting does not balance for {', '.join(unbalanced)}; this is a bug, please "
                                  "report it")

    # -- stages -------------------------------------------------------------------------------
    def prepare(self, reuse: bool = False) -> dict[str, PrepareReport]:
        """Selection, adapters, filters, decontamination, rendering and dedup for every config
        (prompts/prepare.py). A config whose source cannot be read at all is skipped while the others are
        prepared, then reported as one error line (PrepareError); so is a config none of whose rows became a
        prompt.

        With `reuse` (build, demo), prepared prompts made with the same inputs and settings are kept:
        resuming a run must not re-stream its upstream datasets, nor re-select its prompts."""
        from kimi_eagle_data.prompts.prepare import PrepareError, prepare_configs
        from kimi_eagle_data.store.workdir import read_json, write_json

        fingerprint = self.prepare_fingerprint()
        reports = {c: self.workdir.prepare_report(c) for c in self.s.configs}
        if reuse and all(p.exists() and self.workdir.prepared(c).exists()
                         and read_json(p).get("fingerprint") == fingerprint for c, p in reports.items()):
            return {c: PrepareReport.from_json(read_json(p)) for c, p in reports.items()}
        self.note_earlier_limit([read_json(p).get("limit") for p in reports.values() if p.exists()])
        run = prepare_configs(self.s, self.partitions, self.tokenizer,
                              gen_prompt_ids=self.profile.generation_prompt_ids(self.tokenizer),
                              max_new_tokens=self.sampling.max_new_tokens, max_seq_len=self.max_seq_len,
                              workdir=self.workdir)
        for warning in run.warnings:
            log.warning("%s", warning)
        if run.errors:
            raise PrepareError(run.error_line())
        for c in run.reports:
            write_json(reports[c], {**read_json(reports[c]), "fingerprint": fingerprint})
        return run.reports

    def note_earlier_limit(self, earlier: list[int | None]) -> None:
        """--limit is a pilot's setting, not inherited: say so when this prepare reads more than the last one."""
        limits = [x for x in earlier if x is not None]
        if not limits or (self.s.limit is not None and self.s.limit <= max(limits)):
            return
        self.pilot_limit = max(limits)
        now = "the full sources" if self.s.limit is None else f"at most {self.s.limit} rows per config"
        log.info("note: the earlier prepare of this workdir read at most %d source rows per config (--limit %d, a "
                 "pilot); this one reads %s. Completed samples of prompts selected again are reused, not generated "
                 "twice.", self.pilot_limit, self.pilot_limit, now)

    def reuse_line(self, views) -> str | None:
        """'reusing N completed samples from an earlier run …' when this run's prompts (this shard's) have
        completions already; also what the checkpoint keeps outside this selection (a pilot's rows the full
        selection did not take, and its conversations' later turns: kept, never generated further nor emitted)."""
        reused = sum(1 for v in views.values() for i in v.done if in_shard(v.conversation(i), self.s.shard))
        unused = sum(v.completions_not_selected for v in views.values())
        turns = sum(v.kept_not_selected for v in views.values())
        if not reused and not unused and not turns:
            return None
        line = f"reusing {reused:,} completed samples from an earlier run"
        if self.pilot_limit is not None:
            line += f" (pilot limited to {self.pilot_limit} rows per config)"
        if unused:
            line += (f"; {unused:,} other completed samples of {', '.join(self.s.configs)} are not among this run's "
                     "prompts and stay out of the dataset")
        if turns:
            line += (f"; {turns:,} later turns of conversations not in this selection are kept in the checkpoint, "
                     "not generated further and not emitted")
        return line

    def prepare_fingerprint(self) -> str:
        """Everything prepare's output depends on: partitions, sources (local files by size and
        mtime), selection, tokenizer and template, lengths, and this project's version."""
        import hashlib
        import os

        from kimi_eagle_data.prompts.prepare import partition_info

        def source_stamp(config: str):
            path = self.s.sources.get(config) or self.partitions.partition(config).source
            if path and os.path.exists(path):
                st = os.stat(path)
                return [str(path), st.st_size, st.st_mtime_ns]
            return path

        key = {
            "configs": self.s.configs,
            "partitions": {c: partition_info(self.partitions.partition(c)) for c in self.s.configs},
            "sources": {c: source_stamp(c) for c in self.s.configs},
            "samples": self.s.samples, "revision": self.s.revision, "limit": self.s.limit,
            "config_file_sha256": self.partitions.sha256,
            "tokenizer": self.run["tokenizer_sha256"], "template": self.run["chat_template_sha256"],
            "tokenizer_code": self.run.get("tokenizer_code_sha256"), "tool_encoder": TOOL_ENCODER_VERSION,
            "max_new_tokens": self.sampling.max_new_tokens, "max_seq_len": self.max_seq_len,
            "project_version": __version__,
        }
        return hashlib.sha256(orjson.dumps(key, default=str, option=orjson.OPT_SORT_KEYS)).hexdigest()

    def make_engine(self) -> Engine:
        if self.s.engine == "local":
            from kimi_eagle_data.engines.local import LocalEngine

            return LocalEngine(self.s.model_path, batch_size=self.s.batch_size)
        if self.s.engine in ("sglang", "vllm"):
            from kimi_eagle_data.engines.http_client import RetryPolicy

            if self.s.engine == "sglang":
                from kimi_eagle_data.engines.sglang import SGLangEngine as ServerEngine
            else:
                from kimi_eagle_data.engines.vllm import VLLMEngine as ServerEngine
            engine = ServerEngine(
                self.s.servers, concurrency=self.s.concurrency, health_timeout_s=self.s.health_timeout,
                retry=RetryPolicy(max_attempts=self.s.max_attempts, backoff_s=self.s.retry_backoff,
                                  request_timeout_s=self.s.request_timeout),
                allow_old_server=self.s.allow_old_server, vocab_size=self.vocab_size())
            engine.check_served_model(self.s.model_path, self.tokens)
            ctx = engine.info().context_length
            need = self.max_seq_len + engine.context_margin     # a prompt prepare accepted must fit
            if ctx and ctx < need:
                raise EngineError(f"the server's context length {ctx} is below the {need} tokens max_seq_len "
                                  f"{self.max_seq_len} needs on {engine.name}; relaunch with {engine.context_flag} "
                                  f"{need} or more, or lower --max-seq-len")
            return engine
        raise EngineError(f"unknown engine {self.s.engine!r}; use local, sglang or vllm")

    def vocab_size(self) -> int:
        """Token ids a prompt or completion may hold are below this (profile.model_vocab_size)."""
        from kimi_eagle_data.profile import model_vocab_size

        return model_vocab_size(self.profile, self.tokenizer)

    def checkpoint_paths(self) -> list[Path]:
        """Every checkpoint file validate reads: this workdir's shards and those of --merge workdirs."""
        paths = self.workdir.checkpoint_paths()
        for other in self.s.merge:
            found = Workdir(Path(other).resolve()).checkpoint_paths()
            if not found:
                raise MissingInputError(f"--merge {other}: no generations*.sqlite there; is it a kimi-data workdir?")
            paths += found
        return paths

    def checkpoints(self) -> CheckpointSet:
        """Those files read as one, each opened read-only: what a stage only reads it never writes, locks or
        migrates (a --merge workdir's files are another run's, maybe on a read-only mount; another shard's file
        is its generate's). Only generate opens a file to write: its own shard's."""
        return CheckpointSet(self.checkpoint_paths(), readonly=True)

    def generate(self, engine: Engine | None = None) -> GenerateReport:
        """Generate every prompt of the view (store/prompt_view.py) that no stored completion answers: turn 1 of
        this shard's conversations and their stored later turns; a conversation whose source changed after a turn
        that still stands is continued from that turn."""
        prepared = [r for c in self.s.configs for r in read_prepared(self.workdir, c)]
        # What is done anywhere (other shards' files, merged workdirs) is not generated again. A conversation's
        # later turns are stored once the turn before is (the shard of a conversation is its first turn's).
        seen = self.checkpoints()
        try:
            views = read_views(self.workdir, self.s.configs, seen)
            stale = self._stale_line(views)
            continuing = {c: v.to_continue() for c, v in views.items()}
            resume = seen.completions_of(i for c in continuing.values() for _, i in c)
            wanted = [i for v in views.values() for i in v.later if i not in v.done
                      and in_shard(v.conversation(i), self.s.shard)]
            later = seen.turn_records(ids=wanted, origins={k: o for v in views.values() for k, o in v.origins.items()})
            done, failed = set().union(*(v.done for v in views.values())), seen.failures()
            reuse = self.reuse_line(views)
        finally:
            seen.close()
        for line in (stale, reuse):
            if line:
                log.info("%s", line)
        records = [r for r in prepared if in_shard(r.conversation, self.s.shard)] + later
        done_later = sum(len([i for i in v.later if i in v.done and in_shard(v.conversation(i), self.s.shard)])
                         for v in views.values())
        next_turn = self.next_turn(prepared)
        ckpt = Checkpoint(self.workdir.shard_checkpoint(self.s.shard))
        try:
            self._forget_stale(ckpt, views)
            records += self._continue(ckpt, views, continuing, resume, prepared, next_turn)
            if not any(r.id not in done and (self.s.retry_failed or r.id not in failed) for r in records):
                return GenerateReport(skipped_done=sum(r.id in done for r in records) + done_later,
                                      skipped_failed=sum(r.id in failed and r.id not in done for r in records))
            if next_turn is not None:  # the longest conversations first: short chains, not long ones, end the run
                records.sort(key=lambda r: -next_turn.turns_left(r))
            return self._generate(records, engine, ckpt, done, failed, next_turn, done_later, views)
        finally:
            ckpt.close()

    def _generate(self, records, engine, ckpt, done, failed, next_turn, done_later, views) -> GenerateReport:
        # Each conversation's origin (store/prompt_hash.py), stored with what follows each of its turns.
        origins = {k: o for v in views.values() for k, o in v.origins.items()}
        if next_turn is not None:
            origins.update((r.id, conversation_origin(prompt_hash(r.prompt_ids), r.script)) for r in records
                           if r.turn == 1 and r.id not in origins)
        own = engine is None
        try:
            engine, self._engine = engine or self._engine or self.make_engine(), None
            ckpt.set_meta("engine", asdict(engine.info()))
            report = generate_records(records, engine, ckpt, self.sampling, done=done, failed=failed,
                                      retry_failed=self.s.retry_failed, progress=self.progress,
                                      reasoning_length=partial(reasoning_length, tokens=self.tokens),
                                      next_turn=next_turn, origins=origins)
            report.skipped_done += done_later
            return report
        finally:
            if own and engine is not None:
                engine.close()

    def _stale_line(self, views) -> str | None:
        """How many stored completions answered an earlier version of their prompt (this shard's)."""
        mine = (lambda v, i: in_shard(v.conversation(i), self.s.shard))
        n = sum(1 for v in views.values() for i in v.stale_done if mine(v, i))
        m = sum(1 for v in views.values() for conv in v.stale_turns.values() if in_shard(conv, self.s.shard))
        if not n and not m:
            return None
        return (f"{n:,} completions answered an earlier version of their prompt and are generated again; {m:,} later "
                "turns of those conversations too (their source changed)")

    def _forget_stale(self, ckpt: Checkpoint, views) -> None:
        """Delete from this shard's own file what no longer answers the view (others' files are only read;
        readers skip what is stale there): generate stores the new version under the same id."""
        for c, v in views.items():
            hashes = ckpt.completion_hashes(c)
            turns = [t for t in ckpt.turn_index(c) if t.id in v.stale_turns and t.conversation in v.origins
                     and t.origin is not None and t.origin != v.origins[t.conversation]]
            stale = [i for i, h in hashes.items() if h is not None and v.prompt_hash(i) not in (None, h)]
            ends = [e.conversation_id for e, o in ckpt.end_rows(c) if e.conversation_id in v.origins
                    and o is not None and o != v.origins[e.conversation_id]]
            if stale or turns or ends:
                ckpt.forget(completions=stale + [t.id for t in turns if t.id in hashes],
                            turns=[t.id for t in turns], conversations=ends)

    def _continue(self, ckpt: Checkpoint, views, continuing, resume, prepared, next_turn) -> list:
        """What follows each turn whose completion stands while its conversation's source changed after it (the
        view's to_continue): computed now and stored; the next turns among it are this run's to generate."""
        if next_turn is None:
            return []
        by_id = {r.id: r for r in prepared}
        later = {}
        ids = [i for c in continuing.values() for conv, i in c if i != conv]
        if ids:
            seen = self.checkpoints()
            try:
                later = {r.id: r for r in seen.turn_records(ids=ids, origins={
                    k: o for v in views.values() for k, o in v.origins.items()})}
            finally:
                seen.close()
        out = []
        for c, pairs in continuing.items():
            for conv, tid in pairs:
                record = by_id.get(tid) or later.get(tid)
                if record is None or tid not in resume or not in_shard(conv, self.s.shard):
                    continue
                follow = next_turn(record, resume[tid])
                if follow is None:
                    continue
                ckpt.commit_follow(follow, views[c].origins[conv])
                if isinstance(follow, PromptRecord):
                    out.append(follow)
        return out

    def next_turn(self, prepared: list):
        """What follows each turn of the run's own_history conversations (conversation/next_turn.py's NextTurn);
        None when no config continues conversations."""
        from kimi_eagle_data.conversation.next_turn import NextTurn

        configs = [c for c in self.s.configs if self.partitions.partition(c).conversations]
        if not configs:
            return None
        validator = Validator(self.tokens, self.tokenizer, self.max_seq_len, keep_truncated=self.s.keep_truncated)
        return NextTurn(validator, self.tokenizer, self.profile, max_new_tokens=self.sampling.max_new_tokens,
                        max_seq_len=self.max_seq_len,
                        max_turns={c: self.partitions.partition(c).max_turns for c in configs},
                        scripts={r.id: r.script for r in prepared if r.config in configs})

    def accounting(self) -> dict[str, dict[str, int]]:
        """The accounting identity (docs/reliability.md) before validation:
        selected + later turns = rejected at prepare + generated + failed + pending (later turns: those of
        conversations continued on the model's own turns)."""
        ckpt = self.checkpoints()
        try:
            return generation_progress(self.workdir, self.s.configs, ckpt)
        finally:
            ckpt.close()

    def verdict_pool(self):
        """The Validator of this run in --workers processes (validate/verdicts.py)."""
        from kimi_eagle_data.validate.verdicts import VerdictPool

        validator = Validator(self.tokens, self.tokenizer, self.max_seq_len, keep_truncated=self.s.keep_truncated)
        return VerdictPool(validator, self.s.workers)

    def validate(self, sinks: dict[str, Any] | None = None, pool=None, light_done=None) -> dict[str, ValidateReport]:
        """Judge every completion; light rows to validated/. With `sinks` (config -> emit.ConfigShards), the
        same pass streams each config's full rows into its shards. `light_done(config, rows)` runs as soon as a
        config's light rows are in place (its full rows may still be being written)."""
        ckpt = self.checkpoints()
        own = pool is None
        pool = pool or self.verdict_pool()
        try:
            for c in self.s.configs:
                done = None if light_done is None else (lambda rows, c=c: light_done(c, rows))
                self.reports[c] = validate_config(self.workdir, c, ckpt, pool, (sinks or {}).get(c), done)
        finally:
            ckpt.close()
            if own:
                pool.close()
        return self.reports

    def provenance(self) -> dict[str, Any]:
        ckpt = self.checkpoints()
        try:
            engine = ckpt.get_meta("engine") or {}
            span = ckpt.time_range()
        finally:
            ckpt.close()
        iso = (lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        names = self.published_names()
        return {
            "profile": self.run["profile"],
            "model_path": names.model,
            "model_revision": self.s.revision,
            "tokenizer_path": names.tokenizer,
            "tokenizer_sha256": self.run["tokenizer_sha256"],
            "chat_template_sha256": self.run["chat_template_sha256"],
            "tokenizer_code_sha256": self.run.get("tokenizer_code_sha256", ""),
            "tool_encoder_version": self.run.get("tool_encoder_version", ""),
            "vocab_size": self.run["vocab_size"],
            "engine": engine.get("engine", "?"),
            "engine_version": engine.get("version", "?"),
            "server_args": engine.get("server_args", {}),
            "sampling": self.run["sampling"],
            "sampling_plan": self.run.get("sampling_plan"),
            "conversation_plan": self.run.get("conversation_plan"),
            "max_seq_len": self.run["max_seq_len"],
            "keep_truncated": self.s.keep_truncated,
            "project_version": __version__,
            "generated_from": iso(span[0]) if span else None,
            "generated_to": iso(span[1]) if span else None,
            "tiny_model": self.profile.is_test_model,
        }

    def published_names(self):
        """The model and tokenizer as the card and manifest name them (never a local path)."""
        from kimi_eagle_data.emit.model_name import published_names

        return published_names(self.run["model"], self.s.tokenizer, self.s.model_label)

    def emit(self) -> dict[str, Any]:
        """Validate every completion again, streaming its row into dataset/data (each token written once),
        then plots, card and manifest. `self.reports` holds the validation counts, also when there is nothing
        to emit (NothingToEmit). Plots are drawn by the verdict pool's workers from the light columns as soon as
        those are in place, while the last rows are still being written; the card, which records the manifest's
        hash, comes last."""
        from kimi_eagle_data.emit.writer import ConfigShards, clear_data, finish_dataset
        from kimi_eagle_data.emit.token_freq import token_freq_path
        from kimi_eagle_data.store.workdir import read_json

        warning = self.published_names().warning
        if warning:
            log.warning("%s", warning)
        clear_data(self.workdir)
        vocab = self.vocab_size()
        sinks = {c: ConfigShards(dataset_config_dir(self.workdir.dataset, c), token_freq_path(self.workdir.dataset, c),
                                 vocab) for c in self.s.configs}
        with self.verdict_pool() as pool:
            plots = CardPlots(pool, self.workdir, self.s.configs)
            try:   # whatever stops it (a full disk, SIGTERM), no hidden temp shard stays behind
                self.validate(sinks, pool, light_done=plots.config_validated)
                prepared = {c: read_json(self.workdir.prepare_report(c)) for c in sinks}
                summary = {c: {"report": read_json(self.workdir.validate_report(c)), "splits": sink.finish(),
                               "partition": prepared[c].get("partition", {}), "source": prepared[c].get("source"),
                               "token_counts": sink.token_counts.counts}
                           for c, sink in sinks.items()}
                plots.counts_written()
            except BaseException:
                for sink in sinks.values():
                    sink.abort()
                raise
            return finish_dataset(self.workdir, summary, version=self.s.version, provenance=self.provenance(),
                                  plots_drawn=plots.drawn, repo_id=self.s.repo)

    def score(self, configs: list[str] | None = None, *, limit: int | None = None, seed: int = 0,
              retry_failed: bool = False, threshold: float | None = None) -> dict[str, Any]:
        """`score`: the target's log-prob of the upstream answers vs its own completions for `configs` (default:
        the run's configs that are prepared), resumable in score.sqlite; writes score.json and returns it
        (score/report.py). `limit`, `threshold`: score's defaults when None."""
        from kimi_eagle_data.score.report import REGENERATE_GAP, score_workdir
        from kimi_eagle_data.score.scoring import DEFAULT_LIMIT

        names = list(configs or ()) or [c for c in self.s.configs if self.workdir.prepared(c).exists()]
        return score_workdir(self, names, limit=DEFAULT_LIMIT if limit is None else limit, seed=seed,
                             retry_failed=retry_failed, threshold=REGENERATE_GAP if threshold is None else threshold)


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
        from kimi_eagle_data.emit.plots import plot_length_histograms, plot_lengths

        if rows:
            self.with_rows.append(config)
            self.futures.append(self.pool.submit(plot_length_histograms, self.workdir, [config], self.assets))
        if config == self.configs[-1] and self.with_rows:
            self.futures.append(self.pool.submit(plot_lengths, self.workdir, self.with_rows, self.assets))

    def counts_written(self) -> None:
        from kimi_eagle_data.emit.plots import plot_vocab_coverage

        if self.with_rows:
            self.futures.append(self.pool.submit(plot_vocab_coverage, self.workdir.dataset, self.with_rows,
                                                 self.assets))

    def drawn(self) -> dict[str, str]:
        """Every plot's card path -> file, once all are drawn."""
        drawn: dict[str, str] = {}
        for f in self.futures:
            drawn.update(f.result())
        return drawn
