"""Every run setting, declared once: its name, type, default, CLI option, and whether a later stage command
inherits it from the workdir's run.json and whether the run is bound to it.

`RunSettings` (pipeline.py) takes its fields from this table; the CLI builds its options from it
(`click_options`); `INHERITED` and `BOUND` are read from it. Adding a setting is one line here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from kimi_eagle_data.run_checks import SETTING_RULES, click_config_names, click_setting, url_problem


def check_servers(ctx, param, values):
    """--server values are http(s) URLs with a host: a typo fails now, not after --health-timeout."""
    for v in values or ():
        problem = url_problem(v)
        if problem:
            raise click.BadParameter(f"{v!r}: {problem}", param_hint="--server")
    return values


@dataclass(frozen=True)
class Setting:
    name: str                          # RunSettings field (and the click parameter's name)
    annotation: str                    # its type, as written in a dataclass
    default: Any = None
    flag: str | None = None            # the CLI option; None: set by the program, not on the command line
    help: str = ""
    type: Any = None                   # click type of the option
    is_flag: bool = False
    multiple: bool = False
    metavar: str | None = None
    show_default: bool = False
    shared: bool = True                # one of the options every run command takes (else: option_for(name))
    inherited: bool = False            # a later stage command on the workdir takes run.json's value
    bound: bool = False                # the workdir refuses to resume with another value (it changes the data)
    factory: Any = None                # default factory (mutable defaults)
    required: bool = False

    def click_option(self):
        kw: dict[str, Any] = {"help": self.help, "required": self.required}
        if self.is_flag:
            kw["is_flag"] = True
        else:
            if self.default is not None:
                kw["default"] = self.default
                kw["show_default"] = self.show_default
            if self.type is not None:
                kw["type"] = self.type
        if self.multiple:
            kw["multiple"] = True
        if self.metavar:
            kw["metavar"] = self.metavar
        if self.name in SETTING_RULES:
            kw["callback"] = click_setting(self.name)
        if self.name == "servers":
            kw["callback"] = check_servers
        param = self.flag.lstrip("-").replace("-", "_")
        decls = (self.flag,) if param == self.name else (self.flag, self.name)
        return click.option(*decls, **kw)


SETTINGS: tuple[Setting, ...] = (
    Setting("workdir", "str", flag="--workdir", type=click.Path(file_okay=False, path_type=Path), required=True,
            help="Run directory: checkpoint, stage outputs and dataset/ live here."),
    Setting("configs", "list[str]", factory=list, inherited=True),   # the CONFIG arguments
    Setting("profile", "str", "kimi-k2.5", "--profile", show_default=True, inherited=True, bound=True,
            help="Model profile (token names, generation prompt, sampling defaults)."),
    Setting("model", "str | None", None, "--model", inherited=True, bound=True,
            help="Model path or Hub id (default: the profile's model)."),
    Setting("tokenizer", "str | None", None, "--tokenizer", inherited=True, bound=True,
            help="Tokenizer path (default: --model). Its chat template renders the prompts."),
    Setting("model_label", "str | None", None, "--model-label", metavar="HUB_ID", inherited=True,
            help="What the card and manifest name as the model (its Hub id), e.g. when --model is a local path "
                 "(a local path is never published). Default: --model when it is a Hub id."),
    Setting("engine", "str", "local", "--engine", type=click.Choice(["local", "sglang", "vllm"]), show_default=True,
            inherited=True,
            help="local: transformers in-process (CPU or one GPU); sglang: SGLang servers via --server; vllm: vLLM "
                 "servers (launched with --enable-scale-out) via --server."),
    Setting("servers", "list[str]", None, "--server", multiple=True, metavar="URL", factory=list, inherited=True,
            help="SGLang / vLLM server or sglang-router URL (repeatable; requests go to the least loaded)."),
    Setting("concurrency", "int", 256, "--concurrency", type=int, show_default=True,
            help="Server requests kept in flight (sglang, vllm)."),
    Setting("max_attempts", "int", 5, "--max-attempts", type=int, show_default=True,
            help="Tries per sample on 5xx/timeouts/connection errors before it is recorded as failed."),
    Setting("retry_backoff", "float", 1.0, "--retry-backoff", type=float, show_default=True,
            help="Seconds before the first retry; doubles each attempt (with jitter, at most 60 s)."),
    Setting("request_timeout", "float", 3600.0, "--request-timeout", type=float, show_default=True,
            help="Seconds per server request (sglang, vllm)."),
    Setting("health_timeout", "float", 600.0, "--health-timeout", type=float, show_default=True,
            help="Seconds to wait for the servers to become healthy."),
    Setting("allow_old_server", "bool", False, "--allow-old-server", is_flag=True,
            help="Run against SGLang < 0.5.5 or vLLM < 0.32.0 (not recommended)."),
    Setting("shard", "tuple[int, int] | None", None, "--shard", metavar="i/N",
            help="Generate only shard i of N (0-based) of the prompts; nodes sharing a workdir write separate "
                 "checkpoint files."),
    Setting("merge", "list[str]", None, "--merge", multiple=True, type=click.Path(file_okay=False), metavar="DIR",
            factory=list, help="Also read the checkpoints of these workdirs (shards generated elsewhere)."),
    Setting("samples", "bool", False, "--samples", is_flag=True, inherited=True,
            help="Use the bundled sample rows instead of the upstream datasets."),
    Setting("sources", "dict[str, str]", None, "--source", multiple=True, metavar="CONFIG=PATH", factory=dict,
            inherited=True,
            help="Read a config's rows from a local JSONL/Parquet file in the upstream schema (repeatable)."),
    Setting("config_file", "str | None", None, "--config",
            type=click.Path(exists=True, dir_okay=False, resolve_path=True), inherited=True,
            help="Partition config (TOML): counts, seeds, policies, filters, dedup, decontamination, sampling, "
                 "user-defined partitions (see README)."),
    Setting("revision", "str | None", None, "--revision", inherited=True,
            help="Upstream dataset revision to load from the Hub."),
    Setting("limit", "int | None", None, "--limit", type=int,
            help="Read at most this many source rows per config (a pilot). Not inherited: a later build or "
                 "prepare without it reads the full sources and reuses the pilot's completed samples."),
    Setting("max_new_tokens", "int | None", None, "--max-new-tokens", type=int, inherited=True, bound=True,
            help="Default: the profile's (10240 for Kimi-K2.5)."),
    Setting("temperature", "float | None", None, "--temperature", type=float, inherited=True, bound=True,
            help="Default: the profile's (1.0); >= 0."),
    Setting("top_p", "float | None", None, "--top-p", type=float, inherited=True, bound=True,
            help="Default: the profile's (0.95); in (0, 1]."),
    Setting("max_seq_len", "int | None", None, "--max-seq-len", type=int, inherited=True, bound=True,
            help="Reject prompts with prompt_len + max_new_tokens above this (default: the profile's)."),
    Setting("keep_truncated", "bool", False, "--keep-truncated", is_flag=True, inherited=True,
            help="Keep length-truncated completions in train."),
    Setting("retry_failed", "bool", False, "--retry-failed", is_flag=True,
            help="Generate again the samples recorded as failed."),
    Setting("batch_size", "int", 16, "--batch-size", type=int, show_default=True, inherited=True,
            help="Local engine batch size."),
    Setting("version", "str", "0.1.0", "--version", show_default=True, inherited=True,
            help="Dataset version (semver)."),
    Setting("repo", "str | None", None, "--repo", metavar="ORG/NAME", shared=False, inherited=True,
            help="Hub repo the card's load line names (the one you will `kimi-data push` to)."),
    Setting("workers", "int | None", None, "--workers", type=click.IntRange(min=1), metavar="N", shared=False,
            help="Processes that validate and decode completions (default: the machine's cores). "
                 "The output does not depend on it."),
    Setting("progress", "bool", True),                                # --no-progress
)
BY_NAME = {s.name: s for s in SETTINGS}
INHERITED = tuple(s.name for s in SETTINGS if s.inherited)
BOUND = tuple(s.name for s in SETTINGS if s.bound)


def dataclass_fields() -> list[tuple[str, str, Any]]:
    """(name, annotation, field) for RunSettings, in declaration order."""
    return [(s.name, s.annotation, field(default_factory=s.factory) if s.factory else field(default=s.default))
            for s in SETTINGS]


def run_options(fn):
    """The options every run command (build and the stage commands) takes."""
    opts = [click.argument("configs", nargs=-1, metavar="[CONFIG]...", callback=click_config_names)]
    opts += [s.click_option() for s in SETTINGS if s.flag and s.shared]
    opts.append(click.option("--no-progress", is_flag=True, help="No progress bars."))
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def option_for(name: str):
    """The CLI option of a setting only some commands take (--workers, --repo)."""
    return BY_NAME[name].click_option()
