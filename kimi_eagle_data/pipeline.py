"""The stages wired together over one workdir. The CLI only parses options into `RunSettings`."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from . import __version__
from .assemble import ValidateReport, validate_config
from .checkpoint import Checkpoint, CheckpointSet, in_shard, shard_checkpoint_name
from .engines.base import Engine, EngineError, SamplingParams
from .generate import GenerateReport, generate_records
from .prepare import PrepareReport, read_prepared
from .profile import ModelProfile, ProfileTokens, get_profile
from .tokenizer import load_tokenizer, tokenizer_fingerprint
from .tool_declaration import ENCODER_VERSION as TOOL_ENCODER_VERSION
from .validate import Validator
from .workdir import Workdir

# Settings that change the data: a workdir started with one value refuses another.
BINDING_KEYS = ("profile", "model", "tokenizer", "tokenizer_sha256", "chat_template_sha256",
                "tokenizer_code_sha256", "tool_encoder_version", "sampling", "max_seq_len")


@dataclass
class RunSettings:
    workdir: str
    configs: list[str] = field(default_factory=list)   # empty: the config file's `configs` (default B1-B8)
    profile: str = "kimi-k2.5"
    model: str | None = None               # default: the profile's model path
    tokenizer: str | None = None           # default: the model path
    model_label: str | None = None         # how the card names the model (default: model)
    engine: str = "local"
    samples: bool = False                  # read the bundled sample rows instead of the upstream
    sources: dict[str, str] = field(default_factory=dict)   # config -> local JSONL/Parquet
    revision: str | None = None
    limit: int | None = None
    config_file: str | None = None         # partition config (TOML): counts, seeds, filters, user partitions
    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_seq_len: int | None = None
    keep_truncated: bool = False
    retry_failed: bool = False
    batch_size: int = 16
    servers: list[str] = field(default_factory=list)   # --engine sglang: server or router URLs
    concurrency: int = 256
    max_attempts: int = 5
    retry_backoff: float = 1.0
    request_timeout: float = 3600.0
    health_timeout: float = 600.0
    allow_old_server: bool = False
    shard: tuple[int, int] | None = None   # (i, N): generate only this shard's prompts
    merge: list[str] = field(default_factory=list)      # other workdirs whose checkpoints validate reads
    version: str = "0.1.0"
    repo: str | None = None                # Hub repo the card names (emit --repo; remembered)
    progress: bool = True

    def options(self) -> dict[str, Any]:
        """What later stage commands on this workdir inherit (see cli.INHERITED)."""
        keys = ("profile", "model", "model_label", "tokenizer", "samples", "sources", "revision", "limit",
                "max_new_tokens", "temperature", "top_p", "max_seq_len", "keep_truncated", "batch_size",
                "version", "configs", "engine", "servers", "config_file", "repo")
        return {k: getattr(self, k) for k in keys}

    def __post_init__(self):
        from .partition_config import load_config

        # The partition registry: B1-B8, overridden and extended by the config file.
        self.prepare_config = load_config(self.config_file)
        if not self.configs:
            self.configs = list(self.prepare_config.configs)
        for c in self.configs:
            self.prepare_config.partition(c)
        for key, value in self.prepare_config.sampling.items():   # [sampling] in the file; options win
            if getattr(self, key) is None:
                setattr(self, key, value)

    @property
    def model_profile(self) -> ModelProfile:
        return get_profile(self.profile)

    @property
    def model_path(self) -> str:
        return self.model or self.model_profile.model_path

    @property
    def tokenizer_path(self) -> str:
        return self.tokenizer or self.model_path

    def resolved_max_seq_len(self) -> int:
        return self.max_seq_len or self.model_profile.max_seq_len

    def sampling(self, stop_id: int) -> SamplingParams:
        d = self.model_profile.sampling
        return SamplingParams(
            max_new_tokens=self.max_new_tokens or d.max_new_tokens,
            temperature=d.temperature if self.temperature is None else self.temperature,
            top_p=d.top_p if self.top_p is None else self.top_p,
            stop_token_ids=(stop_id,),
        )


class Pipeline:
    def __init__(self, settings: RunSettings, console: Console | None = None):
        self.s = settings
        self.console = console or Console(stderr=True)
        self.workdir = Workdir.at(settings.workdir)
        self.profile = settings.model_profile
        self.tokenizer = load_tokenizer(settings.tokenizer_path)
        self.tokens = ProfileTokens.from_tokenizer(self.profile, self.tokenizer)
        self.sampling = settings.sampling(self.tokens.end_of_turn)
        self.max_seq_len = settings.resolved_max_seq_len()
        fp = tokenizer_fingerprint(self.tokenizer)
        self.run = self.workdir.bind_settings({
            "profile": self.profile.name,
            "model": settings.model_label or settings.model_path,
            "tokenizer": settings.model_label or settings.tokenizer_path,
            **fp,
            "tool_encoder_version": TOOL_ENCODER_VERSION,
            "sampling": self.sampling.to_sglang(),
            "max_seq_len": self.max_seq_len,
            "keep_truncated": settings.keep_truncated,
            "options": settings.options(),
        }, binding_keys=BINDING_KEYS)

    # -- stages -------------------------------------------------------------------------------
    def prepare(self, reuse: bool = False) -> dict[str, PrepareReport]:
        """Selection, adapters, filters, decontamination, rendering and dedup for every config
        (prepare.py). A config whose source cannot be read at all is skipped while the others are
        prepared, then reported as one error line (SourceFileError).

        With `reuse` (build, demo), prepared prompts made with the same inputs and settings are kept:
        resuming a run must not re-stream its upstream datasets, nor re-select its prompts."""
        from .prepare import prepare_configs, source_error_line
        from .sources import SourceFileError
        from .workdir import read_json, write_json

        fingerprint = self.prepare_fingerprint()
        reports = {c: self.workdir.prepare_report(c) for c in self.s.configs}
        if reuse and all(p.exists() and self.workdir.prepared(c).exists()
                         and read_json(p).get("fingerprint") == fingerprint for c, p in reports.items()):
            return {c: PrepareReport.from_json(read_json(p)) for c, p in reports.items()}
        gen_prompt = self.tokenizer.encode(self.profile.generation_prompt, add_special_tokens=False)
        run = prepare_configs(self.s, self.tokenizer, gen_prompt_ids=gen_prompt,
                              max_new_tokens=self.sampling.max_new_tokens, max_seq_len=self.max_seq_len,
                              workdir=self.workdir)
        if run.errors:
            raise SourceFileError(source_error_line(run.errors))
        for c in run.reports:
            write_json(reports[c], {**read_json(reports[c]), "fingerprint": fingerprint})
        return run.reports

    def prepare_fingerprint(self) -> str:
        """Everything prepare's output depends on: partitions, sources (local files by size and
        mtime), selection, tokenizer and template, lengths, and this project's version."""
        import hashlib
        import os

        from .prepare import partition_info

        def source_stamp(config: str):
            path = self.s.sources.get(config) or self.s.prepare_config.partition(config).source
            if path and os.path.exists(path):
                st = os.stat(path)
                return [str(path), st.st_size, st.st_mtime_ns]
            return path

        key = {
            "configs": self.s.configs,
            "partitions": {c: partition_info(self.s.prepare_config.partition(c)) for c in self.s.configs},
            "sources": {c: source_stamp(c) for c in self.s.configs},
            "samples": self.s.samples, "revision": self.s.revision, "limit": self.s.limit,
            "config_file_sha256": self.s.prepare_config.sha256,
            "tokenizer": self.run["tokenizer_sha256"], "template": self.run["chat_template_sha256"],
            "tokenizer_code": self.run.get("tokenizer_code_sha256"), "tool_encoder": TOOL_ENCODER_VERSION,
            "max_new_tokens": self.sampling.max_new_tokens, "max_seq_len": self.max_seq_len,
            "project_version": __version__,
        }
        return hashlib.sha256(orjson.dumps(key, default=str, option=orjson.OPT_SORT_KEYS)).hexdigest()

    def make_engine(self) -> Engine:
        if self.s.engine == "local":
            from .engines.local import LocalEngine

            return LocalEngine(self.s.model_path, batch_size=self.s.batch_size)
        if self.s.engine == "sglang":
            from .engines.sglang import RetryPolicy, SGLangEngine

            engine = SGLangEngine(
                self.s.servers, concurrency=self.s.concurrency, health_timeout_s=self.s.health_timeout,
                retry=RetryPolicy(max_attempts=self.s.max_attempts, backoff_s=self.s.retry_backoff,
                                  request_timeout_s=self.s.request_timeout),
                allow_old_server=self.s.allow_old_server)
            engine.check_served_model(self.s.model_path, self.tokens)
            ctx = engine.info().context_length
            # SGLang refuses input + max_new_tokens >= context length (HTTP 400) and clips to
            # context - input - 2: a prompt prepare accepted must fit.
            if ctx and ctx < self.max_seq_len + 2:
                raise EngineError(f"the server's context length {ctx} is below max_seq_len {self.max_seq_len} + 2; "
                                  f"relaunch with --context-length {self.max_seq_len + 2} or more, or lower --max-seq-len")
            return engine
        raise EngineError(f"unknown engine {self.s.engine!r}; use local or sglang")

    def checkpoint_paths(self) -> list:
        """Every checkpoint file validate reads: this workdir's shards and those of --merge workdirs."""
        paths = sorted(self.workdir.root.glob("generations*.sqlite"))
        for other in self.s.merge:
            found = sorted(Workdir(Path(other).resolve()).root.glob("generations*.sqlite"))
            if not found:
                raise FileNotFoundError(f"--merge {other}: no generations*.sqlite there; is it a kimi-data workdir?")
            paths += found
        return paths or [self.workdir.checkpoint]

    def generate(self, engine: Engine | None = None) -> GenerateReport:
        records = [r for c in self.s.configs for r in read_prepared(self.workdir, c) if in_shard(r.id, self.s.shard)]
        # What is done anywhere (other shards' files, merged workdirs) is not generated again.
        seen = CheckpointSet(self.checkpoint_paths())
        try:
            done, failed = seen.done_ids(), seen.failures()
        finally:
            seen.close()
        if not any(r.id not in done and (self.s.retry_failed or r.id not in failed) for r in records):
            return GenerateReport(skipped_done=sum(r.id in done for r in records),
                                  skipped_failed=sum(r.id in failed and r.id not in done for r in records))
        ckpt = Checkpoint(self.workdir.root / shard_checkpoint_name(self.s.shard))
        own = engine is None
        try:
            engine = engine or self.make_engine()
            ckpt.set_meta("engine", asdict(engine.info()))
            return generate_records(records, engine, ckpt, self.sampling, done=done, failed=failed,
                                    retry_failed=self.s.retry_failed, console=self.console,
                                    show_progress=self.s.progress, think_close=self.tokens.think_close)
        finally:
            if own and engine is not None:
                engine.close()
            ckpt.close()

    def accounting(self) -> dict[str, dict[str, int]]:
        """SPEC §8 before validation: selected = rejected at prepare + generated + failed + pending."""
        from .workdir import read_json

        ckpt = CheckpointSet(self.checkpoint_paths())
        try:
            done, failed = ckpt.done_ids(), ckpt.failures()
        finally:
            ckpt.close()
        table = {}
        for c in self.s.configs:
            prep = read_json(self.workdir.prepare_report(c))
            ids = [r.id for r in read_prepared(self.workdir, c)]
            generated = sum(i in done for i in ids)
            n_failed = sum(i in failed and i not in done for i in ids)
            table[c] = {"selected": prep["selected"], "rejected_at_prepare": prep["rejected_total"],
                        "generated": generated, "failed": n_failed, "pending": len(ids) - generated - n_failed}
        return table

    def validate(self) -> dict[str, ValidateReport]:
        validator = Validator(self.tokens, self.tokenizer, self.max_seq_len, keep_truncated=self.s.keep_truncated)
        ckpt = CheckpointSet(self.checkpoint_paths())
        try:
            return {c: validate_config(self.workdir, c, ckpt, validator) for c in self.s.configs}
        finally:
            ckpt.close()

    def provenance(self) -> dict[str, Any]:
        ckpt = CheckpointSet(self.checkpoint_paths())
        try:
            engine = ckpt.get_meta("engine") or {}
            span = ckpt.time_range()
        finally:
            ckpt.close()
        iso = (lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        return {
            "profile": self.run["profile"],
            "model_path": self.run["model"],
            "model_revision": self.s.revision,
            "tokenizer_path": self.run["tokenizer"],
            "tokenizer_sha256": self.run["tokenizer_sha256"],
            "chat_template_sha256": self.run["chat_template_sha256"],
            "tokenizer_code_sha256": self.run.get("tokenizer_code_sha256", ""),
            "tool_encoder_version": self.run.get("tool_encoder_version", ""),
            "vocab_size": self.run["vocab_size"],
            "engine": engine.get("engine", "?"),
            "engine_version": engine.get("version", "?"),
            "server_args": engine.get("server_args", {}),
            "sampling": self.run["sampling"],
            "max_seq_len": self.run["max_seq_len"],
            "keep_truncated": self.s.keep_truncated,
            "project_version": __version__,
            "generated_from": iso(span[0]) if span else None,
            "generated_to": iso(span[1]) if span else None,
            "tiny_model": self.profile.name == "tiny-kimi",
        }

    def emit(self) -> dict[str, Any]:
        from .emit import emit_dataset

        return emit_dataset(self.workdir, self.s.configs, version=self.s.version,
                            provenance=self.provenance(), repo_id=self.s.repo)
