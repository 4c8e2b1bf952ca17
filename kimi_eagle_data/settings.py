"""Every run setting, declared once, as a field of `RunSettings`: its type and default in the class body, and in
its metadata (`setting(...)`) its range rule, its CLI option, its key in the partition TOML, whether a later
command on the workdir inherits it from run.json's `options` and whether the workdir is bound to it.

Building a RunSettings reads nothing and writes nothing; it checks each value's range. Reading the partition
TOML (`pipeline.load_partitions`) and a workdir's run.json (`saved_options`, `inherit`) are separate, explicit
steps. The CLI builds its options from these declarations (cli/options.py `options_for`: the settings each command
reads, COMMAND_SETTINGS, shown under the headings of SECTIONS), so every command that takes a setting takes it with
the same option, default and check, and no command takes one it never reads. Nothing here knows click.

Run settings arrive from CLI options, from `[sampling]` in the partition TOML and from a workdir's run.json.
Each source checks its values with the same rules (run_checks.py), so `temperature = -1` in a TOML file,
`--temperature -1` and an edited run.json are refused with the same words (`must be in [0, 2], got -1.0`), each
prefixed with where the value came from. max_new_tokens must leave room for a prompt in max_seq_len, the profile's
where unset (`sampling_room`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Collection

from kimi_eagle_data.profile import PROFILES, get_profile, plugin_hint, profile_defaults, profiles_described
from kimi_eagle_data.model_profile import ModelProfile
from kimi_eagle_data.run_checks import (AT_LEAST_1, AT_LEAST_2, NON_NEGATIVE, POSITIVE, TEMPERATURE, TOP_P, WORKERS,
                                        Rule, SettingError, config_name_problem, room_problem, url_problem)
from kimi_eagle_data.store.workdir import Workdir

ENGINES = ("local", "sglang", "vllm")
DEFAULT_SERVER_ENGINE = "sglang"     # what --server means without --engine


# The profile a run takes without --profile: the mission's model.
DEFAULT_PROFILE = "kimi-k2.5"
# An unknown profile, as every command and run.json say it.
UNKNOWN_PROFILE = "unknown model profile {value!r}; known: {known}"
PROFILE_HELP = f"Model profile: {profiles_described()}."


class SettingUsageError(SettingError):
    """A setting given where it cannot apply (the CLI shows it as a usage error of `param_hint`, exit 2)."""

    def __init__(self, message: str, param_hint: str):
        super().__init__(message)
        self.param_hint = param_hint


def _servers(values) -> list[str]:
    """--server values are http(s) URLs with a host: a typo fails now, not after --health-timeout."""
    problem = servers_problem(values)
    if problem:
        raise SettingError(problem)
    return list(values or ())


def servers_problem(values) -> str | None:
    for v in values or ():
        problem = url_problem(v)
        if problem:
            return f"{v!r}: {problem}"
    return None


def _shard(value: str | None) -> tuple[int, int] | None:
    """--shard i/N: 0 <= i < N."""
    if not value:
        return None
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise SettingError(f"{value!r}: expected i/N, e.g. 0/4") from None
    if not (n >= 1 and 0 <= i < n):
        raise SettingError(f"{value!r}: need 0 <= i < N")
    return i, n


@dataclass(frozen=True)
class Setting:
    """How one RunSettings field is set from outside the program (its field metadata), as plain data: the CLI builds
    its option from it (cli/options.py)."""
    flag: str | None = None            # the CLI option; None: set by the program or an argument
    help: str = ""
    rule: Rule | None = None           # the range rule (run_checks.py), for options, TOML and run.json alike
    toml: str | None = None            # its key in the partition config file, e.g. "sampling.top_p"
    inherited: bool = False            # a later stage command on the workdir takes run.json's value
    bound: bool = False                # the workdir refuses to resume with another value (it changes the data)
    kind: type | None = None           # the option's value type (int, float); None: text
    # The values it takes (the option's help lists them): a live collection is read when the option is checked.
    choices: Collection[str] = ()
    unknown_choice: str | None = None  # how a value outside `choices` is refused ({value!r}, {known})
    path: dict[str, Any] | None = None  # a path option: file_okay, dir_okay, exists, resolve_path, path_type
    is_flag: bool = False
    multiple: bool = False
    metavar: str | None = None
    show_default: bool = False
    negated: bool = False              # the flag turns the setting off (--no-progress)
    parse: Callable[[Any], Any] | None = None   # the option's text -> the setting's value; SettingError: refused


def setting(default: Any = MISSING, *, factory: Any = MISSING, **how) -> Any:
    """A RunSettings field: its default (or default factory) and how it is set (Setting)."""
    return field(default=default, default_factory=factory, metadata={"setting": Setting(**how)})


@dataclass(frozen=True)
class Sampling:
    """The sampling a run makes its requests with: the settings, or the profile's where a setting is unset."""
    max_new_tokens: int
    temperature: float
    top_p: float
    max_seq_len: int


@dataclass(frozen=True)
class RunSettings:
    """What one run of the pipeline does. `RunSettings(workdir=..., configs=[...], engine=..., ...)` reads
    nothing; an unset `configs` means every partition of the config file (`pipeline.load_partitions` fills it)."""

    workdir: str = setting(flag="--workdir", path={"file_okay": False, "path_type": Path}, parse=str,
                           help="Run directory: checkpoint, stage outputs and dataset/ live here.")
    configs: list[str] = setting(factory=list, inherited=True)   # the CONFIG arguments
    profile: str = setting(DEFAULT_PROFILE, flag="--profile", show_default=True, inherited=True, bound=True,
                           choices=PROFILES, unknown_choice=UNKNOWN_PROFILE,
                           help=f"{PROFILE_HELP} Its tokens, generation prompt and sampling defaults.")
    model: str | None = setting(None, flag="--model", inherited=True, bound=True,
                                help="Model path or Hub id (default: the profile's model).")
    tokenizer: str | None = setting(None, flag="--tokenizer", inherited=True, bound=True,
                                    help="Tokenizer path (default: --model). Its chat template renders the prompts.")
    preserve_thinking: bool | None = setting(
        # Bound as the template arguments it gives (runs.py, `template_options` in run.json).
        None, flag="--preserve-thinking/--no-preserve-thinking", is_flag=True, inherited=True,
        help="Kimi-K2.6's chat-template argument: every earlier assistant turn of a prompt keeps its reasoning "
             "(<think>REASONING</think> before its content). Default: the model's template's (off). Only for a "
             "profile whose template takes it (kimi-k2.6, tiny-kimi-k2.6).")
    model_label: str | None = setting(
        None, flag="--model-label", metavar="HUB_ID", inherited=True,
        help="What the card and manifest name as the model (its Hub id), e.g. when --model is a local path "
             "(a local path is never published). Default: --model when it is a Hub id.")
    engine: str = setting("local", flag="--engine", choices=ENGINES, show_default=True, inherited=True,
                          help="local: transformers in-process (CPU or one GPU); sglang: SGLang servers via --server "
                               "(what --server alone means); vllm: vLLM servers (launched with --enable-scale-out) "
                               "via --server.")
    servers: list[str] = setting(factory=list, flag="--server", multiple=True, metavar="URL", inherited=True,
                                 parse=_servers,
                                 help="SGLang / vLLM server or sglang-router URL (repeatable; requests go to the "
                                      "least loaded).")
    concurrency: int = setting(256, flag="--concurrency", kind=int, show_default=True, rule=AT_LEAST_1,
                               help="Server requests kept in flight (sglang, vllm).")
    max_attempts: int = setting(5, flag="--max-attempts", kind=int, show_default=True, rule=AT_LEAST_1,
                                help="Tries per sample on 5xx/timeouts/connection errors before it is recorded as "
                                     "failed.")
    retry_backoff: float = setting(1.0, flag="--retry-backoff", kind=float, show_default=True, rule=NON_NEGATIVE,
                                   help="Seconds before the first retry; doubles each attempt (with jitter, at most "
                                        "60 s).")
    request_timeout: float = setting(3600.0, flag="--request-timeout", kind=float, show_default=True, rule=POSITIVE,
                                     help="Seconds per server request (sglang, vllm).")
    health_timeout: float = setting(600.0, flag="--health-timeout", kind=float, show_default=True, rule=POSITIVE,
                                    help="Seconds to wait for the servers to become healthy.")
    allow_old_server: bool = setting(False, flag="--allow-old-server", is_flag=True,
                                     help="Run against SGLang < 0.5.5 or vLLM < 0.32.0 (not recommended).")
    shard: tuple[int, int] | None = setting(
        None, flag="--shard", metavar="i/N", parse=_shard,
        help="Generate only shard i of N (0-based) of the prompts; nodes sharing a workdir write separate "
             "checkpoint files.")
    merge: list[str] = setting(factory=list, flag="--merge", multiple=True, path={"file_okay": False, "exists": True},
                               metavar="DIR", parse=list,
                               help="Also read the checkpoints of these workdirs (shards generated elsewhere).")
    samples: bool = setting(False, flag="--samples", is_flag=True, inherited=True,
                            help="Use the bundled sample rows instead of the upstream datasets.")
    sources: dict[str, str] = setting(factory=dict, flag="--source", multiple=True, metavar="CONFIG=PATH",
                                      inherited=True,
                                      help="Read a config's rows from a local JSONL/Parquet file in the upstream "
                                           "schema (repeatable).")
    config_file: str | None = setting(None, flag="--config",
                                      path={"exists": True, "dir_okay": False, "resolve_path": True},
                                      inherited=True,
                                      help="Partition config (TOML): counts, seeds, policies, filters, dedup, "
                                           "decontamination, sampling, user-defined partitions (see README).")
    revision: str | None = setting(None, flag="--revision", inherited=True,
                                   help="Upstream dataset revision to load from the Hub.")
    limit: int | None = setting(None, flag="--limit", kind=int, rule=AT_LEAST_1,
                                help="Read at most this many source rows per config (a pilot). Not inherited: a "
                                     "later build or prepare without it reads the full sources and reuses the "
                                     "pilot's completed samples.")
    max_new_tokens: int | None = setting(None, flag="--max-new-tokens", kind=int, rule=AT_LEAST_1,
                                         toml="sampling.max_new_tokens", inherited=True, bound=True,
                                         help="Default: the profile's "
                                              f"({profile_defaults(lambda p: p.sampling.max_new_tokens)}); below "
                                              "--max-seq-len (a prompt needs room).")
    temperature: float | None = setting(None, flag="--temperature", kind=float, rule=TEMPERATURE,
                                        toml="sampling.temperature", inherited=True, bound=True,
                                        help="Default: the profile's (1.0); in [0, 2] (vLLM refuses more).")
    top_p: float | None = setting(None, flag="--top-p", kind=float, rule=TOP_P, toml="sampling.top_p",
                                  inherited=True, bound=True, help="Default: the profile's (0.95); in (0, 1].")
    max_seq_len: int | None = setting(None, flag="--max-seq-len", kind=int, rule=AT_LEAST_2,
                                      toml="sampling.max_seq_len", inherited=True, bound=True,
                                      help="Reject prompts with prompt_len + max_new_tokens above this (default: the "
                                           f"profile's: {profile_defaults(lambda p: p.max_seq_len)}).")
    keep_truncated: bool = setting(False, flag="--keep-truncated", is_flag=True, inherited=True,
                                   help="Keep length-truncated completions in train.")
    retry_failed: bool = setting(False, flag="--retry-failed", is_flag=True,
                                 help="Send again what is recorded as failed (samples to generate, answers to score).")
    batch_size: int = setting(16, flag="--batch-size", kind=int, show_default=True, rule=AT_LEAST_1, inherited=True,
                              help="Local engine batch size.")
    version: str = setting("0.1.0", flag="--dataset-version", show_default=True, inherited=True,
                           help="The dataset's version (semver; the Hub tag v<version>). `kimi-data --version` is "
                                "the tool's.")
    repo: str | None = setting(None, flag="--repo", metavar="ORG/NAME", inherited=True,
                               help="Hub repo the card's load line names (the one you will `kimi-data push` to).")
    workers: int | None = setting(None, flag="--workers", kind=int, rule=WORKERS, metavar="N",
                                  help="Processes that validate and decode completions (default: the machine's "
                                       "cores). The output does not depend on it.")
    progress: bool = setting(True, flag="--no-progress", is_flag=True, negated=True, help="No progress bars.")

    def __post_init__(self):
        # Callers other than the CLI (which checked each option already) get the same one-line errors.
        check_settings({k: getattr(self, k) for k in SETTING_RULES}, "")
        if self.engine == "local" and self.servers:
            raise SettingError("engine 'local' runs the model in this process and talks to no server: drop the "
                               "servers, or use engine 'sglang' (or 'vllm') to generate on them")
        get_profile(self.profile)    # UnknownProfileError: one line, before anything is read or written
        unknown = sorted(set(self.set_template_options()) - set(self.model_profile.template_options))
        if unknown:
            takers = [p.name for p in PROFILES.values() if unknown[0] in p.template_options]
            raise SettingError(f"{unknown[0]}: profile {self.profile}'s chat template takes no such argument"
                               + (f"; profiles whose template does: {', '.join(takers)}" if takers else ""))
        room = sampling_room(self.max_new_tokens, self.max_seq_len, self.model_profile)
        if room:
            raise SettingError(f"{room[0]}: {room[1]}")

    def options(self) -> dict[str, Any]:
        """What later stage commands on this workdir inherit (settings marked `inherited`)."""
        return {k: getattr(self, k) for k in INHERITED}

    # -- what an unset setting means: the profile's value (the one place these fallbacks live) -------------------
    @property
    def model_profile(self) -> ModelProfile:
        return get_profile(self.profile)

    def set_template_options(self) -> dict[str, Any]:
        """The chat-template arguments these settings give (an unset one is not given)."""
        return {} if self.preserve_thinking is None else {"preserve_thinking": self.preserve_thinking}

    def template_options(self) -> dict[str, Any]:
        """The chat-template arguments the run's prompts are rendered with: the profile's defaults, then the set
        ones."""
        return {**self.model_profile.template_options, **self.set_template_options()}

    @property
    def model_path(self) -> str:
        return self.model or self.model_profile.model_path

    @property
    def tokenizer_path(self) -> str:
        return self.tokenizer or self.model_path

    def resolved_sampling(self) -> Sampling:
        d, profile = self.model_profile.sampling, self.model_profile
        return Sampling(max_new_tokens=self.max_new_tokens or d.max_new_tokens,
                        temperature=d.temperature if self.temperature is None else self.temperature,
                        top_p=d.top_p if self.top_p is None else self.top_p,
                        max_seq_len=self.max_seq_len or profile.max_seq_len)


def declarations() -> dict[str, tuple[dataclasses.Field, Setting]]:
    """RunSettings field name -> (its field, its Setting), in declaration order."""
    return {f.name: (f, f.metadata["setting"]) for f in fields(RunSettings)}


DECLARED = declarations()
INHERITED = tuple(n for n, (_, s) in DECLARED.items() if s.inherited)
BOUND = tuple(n for n, (_, s) in DECLARED.items() if s.bound)
# key -> (type, check): the settings with a range rule.
SETTING_RULES: dict[str, Rule] = {n: s.rule for n, (_, s) in DECLARED.items() if s.rule is not None}
# The keys `[sampling]` in the partition TOML may set.
SAMPLING_KEYS = tuple(n for n, (_, s) in DECLARED.items() if s.toml and s.toml.startswith("sampling."))


def setting_problem(key: str, value: Any) -> str | None:
    """Why `value` cannot be run setting `key` (None when it can, or when None: unset)."""
    if value is None or key not in SETTING_RULES:
        return None
    return SETTING_RULES[key].problem(value)


def check_settings(values: dict[str, Any], where: str) -> None:
    """Raise SettingError for the first value out of range; `where` names the source (a file)."""
    for key, value in values.items():
        problem = setting_problem(key, value)
        if problem:
            raise SettingError(f"{where}{key}: {problem}")
    new, seq = values.get("max_new_tokens"), values.get("max_seq_len")
    problem = room_problem(new, seq) if isinstance(new, int) and isinstance(seq, int) else None
    if problem:
        raise SettingError(f"{where}max_new_tokens: {problem}")


def sampling_room(max_new_tokens: int | None, max_seq_len: int | None, profile: ModelProfile
                  ) -> tuple[str, str] | None:
    """(the setting to name, why) when max_new_tokens leaves no room for a prompt in max_seq_len, either one the
    profile's where unset (None: room left). The one set is named: max_new_tokens when both are."""
    new = max_new_tokens or profile.sampling.max_new_tokens
    seq = max_seq_len or profile.max_seq_len
    whose = f" (profile {profile.name}'s)"
    if max_new_tokens is None and max_seq_len is not None:
        problem = room_problem(new, seq, new_note=whose, blame_seq=True)
        return ("max_seq_len", problem) if problem else None
    problem = room_problem(new, seq, seq_note="" if max_seq_len else whose)
    return ("max_new_tokens", problem) if problem else None


def check_sampling_room(values: dict[str, Any], given: set[str], run_json: Path, file_sampling: dict[str, Any],
                        config_file: str | None) -> None:
    """sampling_room over a command's settings as they came (`values`: options and run.json's, `file_sampling`: the
    config file's `[sampling]`, which fills what they leave unset), naming where the value to change came from: its
    option (SettingUsageError: a usage error, exit 2), the config file's key or run.json's (SettingError, one line)."""
    room = {k: values[k] if values.get(k) is not None else file_sampling.get(k)
            for k in ("max_new_tokens", "max_seq_len")}
    found = sampling_room(room["max_new_tokens"], room["max_seq_len"],
                          get_profile(values.get("profile") or DECLARED["profile"][0].default))
    if not found:
        return
    key, problem = found
    if key in given:
        raise SettingUsageError(problem, param_hint=f"'{DECLARED[key][1].flag}'")
    if values.get(key) is not None:
        raise SettingError(f"{run_json}: options.{key}: {problem}")
    raise SettingError(f"{config_file}: sampling.{key}: {problem}")


# -- a workdir's run.json: what a later command inherits ------------------------------------------------------
def saved_options(workdir: str | Path) -> tuple[Path, dict[str, Any]]:
    """run.json's path and its `options` ({} when the workdir has none yet): the explicit read of run.json."""
    wd = Workdir(Path(workdir).resolve())
    return wd.settings_path, (wd.settings().get("options", {}) if wd.settings_path.exists() else {})


def inherit(values: dict[str, Any], given: set[str], saved: dict[str, Any], run_json: Path) -> dict[str, Any]:
    """`values` with each inherited setting not in `given` (named on the command line) taken from `saved` (run.json's
    options), checked by the same rules as the options (SettingError naming run.json)."""
    new_config = values.get("config_file") and values["config_file"] != saved.get("config_file")
    taken: dict[str, Any] = {}
    for key in INHERITED:   # also those the command has no option for (score's model, build's repo)
        if key not in saved or key in given:
            continue
        model = taken["model"] if "model" in taken else values.get("model")
        if key == "model_label" and model != saved.get("model"):   # a label names one model only
            continue
        if key == "configs" and new_config:   # a new --config brings its own default configs
            continue
        taken[key] = saved[key]
    check_settings(taken, f"{run_json}: options.")
    for c in taken.get("configs") or ():
        problem = config_name_problem(c)
        if problem:
            raise SettingError(f"{run_json}: options.configs: {problem}")
    if "profile" in taken and taken["profile"] not in PROFILES:
        unknown = UNKNOWN_PROFILE.format(value=taken["profile"], known=", ".join(sorted(PROFILES)))
        raise SettingError(f"{run_json}: options.profile: {unknown}; the workdir was made with it: {plugin_hint()}")
    problem = servers_problem(taken.get("servers"))
    if problem:
        raise SettingError(f"{run_json}: options.servers: {problem}")
    return {**values, **taken, **engine_and_servers({**values, **taken}, given)}


def engine_and_servers(values: dict[str, Any], given: set[str]) -> dict[str, Any]:
    """The engine and servers a run uses, as a command's options and run.json's together say. A server URL names a
    server engine: --server without --engine means the documented server engine, sglang (a vLLM server found there
    is refused with "use --engine vllm"), or the server engine run.json names; --engine local with --server is a
    usage error. An --engine local on a workdir whose run.json names servers drops them (they are another engine's)."""
    engine, servers = values.get("engine"), values.get("servers") or []
    if "engine" not in values or "servers" not in values:
        return {}
    if "servers" in given and servers and engine == "local":
        if "engine" in given:
            raise SettingUsageError("the local engine runs the model in this process and talks to no server: drop "
                                    "--server, or use --engine sglang (or vllm) to generate on it",
                                    param_hint="--engine local with --server")
        return {"engine": DEFAULT_SERVER_ENGINE}
    if engine == "local" and servers:     # inherited: the servers a server engine of an earlier run talked to
        return {"servers": []}
    return {}


# -- which options each command shows (cli/options.py builds them from the declarations) ------------------------
# Every setting with an option under one heading of a command's help, in this order.
SECTIONS: dict[str, tuple[str, ...]] = {
    "Run": ("workdir", "shard", "merge", "progress"),
    "Model": ("profile", "model", "tokenizer", "preserve_thinking"),
    "Sources": ("config_file", "samples", "sources", "revision", "limit"),
    "Sampling": ("max_new_tokens", "temperature", "top_p", "max_seq_len"),
    "Engine": ("engine", "servers", "concurrency", "batch_size", "max_attempts", "retry_backoff", "request_timeout",
               "health_timeout", "allow_old_server", "retry_failed"),
    "Validation": ("keep_truncated", "workers"),
    "Output": ("version", "model_label", "repo"),
}
SECTION_OF = {name: heading for heading, names in SECTIONS.items() for name in names}

_ENGINE = SECTIONS["Engine"]
# The settings each command reads, so the options it takes. A setting the workdir is bound to (model, sampling) is
# taken where the workdir is started (prepare, build); the later stages inherit it from run.json. "configs": the
# CONFIG arguments.
COMMAND_SETTINGS: dict[str, tuple[str, ...]] = {
    "demo": ("workdir", "progress", "limit", "workers"),
    "build": ("configs", *SECTION_OF),
    "prepare": ("configs", "workdir", "progress", *SECTIONS["Model"], *SECTIONS["Sources"], *SECTIONS["Sampling"]),
    "generate": ("configs", "workdir", "shard", "merge", "progress", *_ENGINE, "keep_truncated"),
    "validate": ("configs", "workdir", "merge", "progress", *SECTIONS["Validation"]),
    "emit": ("configs", "workdir", "merge", "progress", *SECTIONS["Validation"], *SECTIONS["Output"]),
    "score": ("configs", "workdir", "progress", *_ENGINE),
    "probe": ("configs", "workdir", "progress"),
}
