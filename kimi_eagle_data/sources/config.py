"""The partition config file (TOML): counts, seeds, policies, filters, dedup, decontamination,
run-wide sampling overrides, and user-defined partitions.

    seed = 0                         # selection seed of every partition (default 0)
    configs = ["B4", "B6", "C1"]     # configs a run processes by default (default: the [partitions.X] this
                                     # file defines; every built-in one when it defines none)

    [sampling]                       # run-wide; a CLI option given explicitly wins
    max_new_tokens = 8192            # also temperature, top_p, max_seq_len

    [filters]                        # defaults for every partition
    validate_tools = true
    scripts = ["latin"]              # language filter (see filters.py); [] = off (default)
    min_script_share = 0.5
    max_chars = 400000

    [dedup]
    exact = true                     # normalized exact dedup (default on)
    across_configs = true
    near = false                     # MinHash near-duplicates (default off)
    near_threshold = 0.85
    shingle_words = 5
    num_perm = 128

    [decontam]
    ngram = 13
    min_words = 8
    [[decontam.sets]]
    name = "gsm8k"
    path = "evals/gsm8k-test.jsonl"  # relative paths are relative to this file
    fields = ["question"]

    [partitions.B4]                  # override any field of a built-in partition
    n = 500
    seed = 7
    revision = "<commit sha>"
    policy = "first_user"            # first_user | every_user_prefix | after_tool_result (glaive) | own_history
    special_text = "reject"          # a row whose text holds special-token strings: reject | as_served
    preserve_thinking = true         # Kimi-K2.6's template argument for this partition (default: the run's)
    max_turns = 4                    # own_history: turns per conversation at most (default 4)
    source = "mot-math.parquet"      # read a local file in the upstream schema instead of the Hub
    scan_limit = 200000              # read at most this many rows
    oversample = 2.0
    near_dedup = true
    filters = { scripts = [] }
    instant_share = 0.25             # share of prompts in instant mode (default 0: all thinking)
    # or, for a profile with thinking efforts (Kimi-K3), the share of each effort; `off` is instant mode:
    # efforts = { max = 0.6, high = 0.2, low = 0.1, off = 0.1 }

    [partitions.B4.sampling]         # this partition's sampling (sources/modes.py: the order they apply in)
    thinking = { temperature = 1.0 } # per mode: temperature and/or top_p over the profile's defaults
    instant = { top_p = 0.9 }
    mix = [{ share = 0.5, temperature = 0.7 }, { share = 0.5 }]   # optional; shares sum to 1

    [partitions.C1]                  # a user-defined partition: any file with messages/conversations
    source = "my-chats.jsonl"        # or upstream = "org/name" (+ upstream_config, split) for the Hub
    n = 1000
    license = "cc-by-4.0"
    id_field = "conversation_id"

Unknown keys and wrong types are errors (`ConfigError`, one line naming the file and the key),
so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.sources.partitions import PARTITIONS, POLICIES, SPECIAL_TEXT, Filters, Partition
from kimi_eagle_data.sources.decontam import DecontamSettings, EvalSet
from kimi_eagle_data.sources.dedup import DedupSettings
from kimi_eagle_data.sources.modes import EFFORT_OFF, SAMPLING_FIELDS, MixEntry, ModePlan, SamplingOverride, dead_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from kimi_eagle_data.run_checks import CONFIG_NAME, CONFIG_NAME_RULE, INT64, SettingError, int64_problem
from kimi_eagle_data.settings import SAMPLING_KEYS, SETTING_RULES, check_settings, setting_problem
from kimi_eagle_data.sources.filters import expand_scripts
from kimi_eagle_data.sources.adapters import ADAPTERS


log = logging.getLogger(__name__)


class ConfigError(KimiDataError, ValueError):
    pass


@dataclass(frozen=True)
class PrepareConfig:
    partitions: dict[str, Partition]
    configs: tuple[str, ...]
    dedup: DedupSettings = DedupSettings()
    decontam: DecontamSettings = DecontamSettings()
    sampling: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    sha256: str | None = None

    def sampling_plan(self) -> dict[str, Any] | None:
        """Every partition's mode mix and sampling mix that is not the default (sources/modes.py), for run.json:
        a workdir started with one plan refuses another, as it refuses another temperature. None when every
        partition has the default (run.json then holds no `sampling_plan`, as before modes)."""
        plans = {c: p.modes.to_json() for c, p in self.partitions.items() if not p.modes.is_default}
        return plans or None

    def conversation_plan(self) -> dict[str, Any] | None:
        """The own_history partitions' max_turns, for run.json: a conversation that ended at max_turns under one
        value would not go on under another, so a workdir started with one refuses another. None when no
        partition continues conversations (run.json then holds no `conversation_plan`)."""
        plans = {c: {"max_turns": p.max_turns} for c, p in self.partitions.items() if p.conversations}
        return plans or None

    def template_plan(self) -> dict[str, Any] | None:
        """The chat-template arguments partitions set over the run's (`preserve_thinking`), for run.json: a
        workdir started with one plan refuses another. None when no partition sets one."""
        plans = {c: p.template_options for c, p in self.partitions.items() if p.template_options}
        return plans or None

    def check_template_options(self, profile, takers: Mapping[str, list[str]]) -> None:
        """ConfigError (one line) when a partition sets a template argument the profile's chat template does not
        take (`profile.template_options` names those it takes; `takers`: argument -> the profiles that take it)."""
        for config, p in self.partitions.items():
            unknown = sorted(set(p.template_options) - set(profile.template_options))
            if unknown:
                who = takers.get(unknown[0])
                raise ConfigError(f"{self.path}: partitions.{config}.{unknown[0]}: profile {profile.name}'s chat "
                                  "template takes no such argument"
                                  + (f"; profiles whose template does: {', '.join(who)}" if who else ""))

    def check_efforts(self, efforts: tuple[str, ...], profile: str, refused: Mapping[str, str] | None = None) -> None:
        """ConfigError (one line) when a partition's `efforts` table names an effort the profile does not have
        (`efforts`: its chat format's; K2.5 has none). `refused`: why the format refuses an effort by that name."""
        refused = refused or {}
        for config, p in self.partitions.items():
            unknown = [name for name, _ in p.modes.efforts if name not in efforts]
            if not unknown:
                continue
            where = f"partitions.{config}.efforts"
            if not efforts:
                raise ConfigError(f"{where}: profile {profile} has no thinking effort (the table names "
                                  f"{', '.join(unknown)}); give its thinking-off share as "
                                  f"partitions.{config}.instant_share")
            why = "".join(f" ({refused[name]})" for name in unknown if name in refused)
            raise ConfigError(f"{where}: profile {profile} has no effort {', '.join(map(repr, unknown))}{why}; its "
                              f"efforts are {', '.join(efforts)}, and {EFFORT_OFF} for thinking off")

    def partition(self, config: str) -> Partition:
        try:
            return self.partitions[config]
        except KeyError:
            raise ValueError(f"unknown config {config!r}; known: {', '.join(self.partitions)}") from None


DEFAULT = PrepareConfig(partitions=dict(PARTITIONS), configs=tuple(PARTITIONS))


# -- typed access --------------------------------------------------------------------------------

class _Table:
    def __init__(self, data: dict, where: str, file: str):
        self.data, self.where, self.file = data, where, file
        self.used: set[str] = set()

    def err(self, key: str, msg: str) -> ConfigError:
        return ConfigError(f"{self.file}: {self.where}{key}: {msg}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None, *, check=None) -> Any:
        self.used.add(key)
        if key not in self.data:
            return default
        v = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise self.err(key, f"expected {names}, got {type(v).__name__} {v!r}")
        if isinstance(v, int) and not isinstance(v, bool) and not INT64[0] <= v <= INT64[1]:
            raise self.err(key, int64_problem(v))
        if check is not None:
            problem = check(v)
            if problem:
                raise self.err(key, problem)
        return v

    def table(self, key: str) -> "_Table":
        v = self.get(key, dict, {})
        return _Table(v, f"{self.where}{key}.", self.file)

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            near = difflib.get_close_matches(unknown[0], sorted(self.used), n=1)
            raise self.err(unknown[0], "unknown key" + (f" (did you mean {near[0]}?)" if near else "")
                           + (f" (also {', '.join(unknown[1:])})" if unknown[1:] else ""))


def _positive(v) -> str | None:
    return None if v >= 1 else "must be at least 1"


def _share(v) -> str | None:
    return None if 0 <= v <= 1 else "must be between 0 and 1"


def _filters(t: _Table, base: Filters) -> Filters:
    scripts = t.get("scripts", list, None)
    if scripts is not None:
        if not all(isinstance(s, str) for s in scripts):
            raise t.err("scripts", "expected a list of script names")
        try:
            expand_scripts(scripts)
        except ValueError as e:
            raise t.err("scripts", str(e)) from None
    f = Filters(
        validate_tools=t.get("validate_tools", bool, base.validate_tools),
        scripts=tuple(scripts) if scripts is not None else base.scripts,
        min_script_share=t.get("min_script_share", float, base.min_script_share, check=_share),
        max_chars=t.get("max_chars", int, base.max_chars, check=_positive),
    )
    t.done()
    return f


def _path(base_dir: Path, value: str) -> str:
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (base_dir / p).resolve())


def _override(t: _Table) -> SamplingOverride:
    """temperature and/or top_p, in the ranges of the run-wide settings (run_checks)."""
    values = {k: t.get(k, float, check=lambda v, k=k: setting_problem(k, v)) for k in SAMPLING_FIELDS}
    t.done()
    return SamplingOverride(**values)


def _mode_plan(t: _Table, base: ModePlan) -> ModePlan:
    """`instant_share` and the `sampling` table of one partition (sources/modes.py)."""
    share = t.get("instant_share", float, base.instant_share, check=_share)
    efforts = base.efforts
    if "efforts" in t.data:
        if "instant_share" in t.data:
            raise t.err("efforts", f"instant_share is set too, and both give the thinking-off share: give "
                                   f"it once, as efforts.{EFFORT_OFF}")
        share, efforts = _efforts(t)
    st = t.table("sampling")
    thinking = _override(st.table("thinking")) if "thinking" in st.data else base.thinking
    instant = _override(st.table("instant")) if "instant" in st.data else base.instant
    mix = base.mix
    if "mix" in st.data:
        entries = st.get("mix", list)
        mix = []
        for i, e in enumerate(entries):
            if not isinstance(e, dict):
                raise st.err(f"mix[{i}]", "expected a table with share and temperature and/or top_p")
            et = _Table(e, f"{st.where}mix[{i}].", st.file)
            entry_share = et.get("share", float, check=lambda v: None if 0 < v <= 1 else "must be in (0, 1]")
            if entry_share is None:
                raise et.err("share", "is required")
            mix.append(MixEntry(entry_share, _override(et)))
        total = sum(e.share for e in mix)
        if mix and abs(total - 1) > 1e-9:
            raise st.err("mix", f"the shares sum to {total:g}, not 1")
        mix = tuple(mix)
    st.done()
    return ModePlan(instant_share=share, thinking=thinking, instant=instant, mix=mix, efforts=efforts)


def _efforts(partition: _Table) -> tuple[float, tuple[tuple[str, float], ...]]:
    """A partition's `efforts` table ({max = 0.6, high = 0.2, low = 0.1, off = 0.1}): the thinking-off share and
    the thinking efforts' shares; the shares sum to 1. Whether the profile has those efforts is checked once the
    profile is known (PrepareConfig.check_efforts)."""
    t = partition.table("efforts")
    shares = {name: t.get(name, float, check=_share) for name in list(t.data)}
    t.done()
    total = sum(shares.values())
    if abs(total - 1) > 1e-9:
        raise partition.err("efforts", f"the shares sum to {total:g}, not 1")
    off = shares.pop(EFFORT_OFF, 0.0)
    thinking = tuple((name, share) for name, share in shares.items() if share > 0)
    return off, thinking


def _partition(config: str, t: _Table, base: Partition | None, *, seed: int, filters: Filters,
               base_dir: Path) -> Partition:
    user = base is None
    n_raw = t.get("n", (int, str))
    if isinstance(n_raw, str) and n_raw != "all":
        raise t.err("n", "expected a count or \"all\"")
    if isinstance(n_raw, int) and n_raw < 1:
        raise t.err("n", "must be at least 1 (or \"all\")")
    adapter = t.get("adapter", str, "chat" if user else base.adapter)
    if adapter not in ADAPTERS:
        raise t.err("adapter", f"unknown adapter {adapter!r}; known: {', '.join(ADAPTERS)}")
    policy = t.get("policy", str, "first_user" if user else base.policy)
    if policy not in POLICIES:
        raise t.err("policy", f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    if policy == "after_tool_result" and adapter != "glaive":
        raise t.err("policy", "after_tool_result applies to the glaive adapter only")
    source = t.get("source", str)
    upstream = t.get("upstream", str)
    if user and source is None and upstream is None:
        raise t.err("source", f"user-defined partition {config} needs `source` (a local JSONL/Parquet file) or "
                              "`upstream` (a Hub dataset id)")
    sub = t.table("filters")
    kw: dict[str, Any] = dict(
        policy=policy, adapter=adapter,
        revision=t.get("revision", str, None if user else base.revision),
        source=_path(base_dir, source) if source else (None if user else base.source),
        seed=t.get("seed", int, seed),
        scan_limit=t.get("scan_limit", int, None if user else base.scan_limit, check=_positive),
        oversample=t.get("oversample", float, 2.0 if user else base.oversample,
                         check=lambda v: None if v >= 1 else "must be at least 1"),
        filters=_filters(sub, filters),
        id_field=t.get("id_field", str, None if user else base.id_field),
        near_dedup=t.get("near_dedup", bool, None if user else base.near_dedup),
        modes=_mode_plan(t, ModePlan() if user else base.modes),
        max_turns=t.get("max_turns", int, 4 if user else base.max_turns, check=_positive),
        special_text=t.get("special_text", str, "reject" if user else base.special_text,
                           check=lambda v: None if v in SPECIAL_TEXT else f"must be one of {', '.join(SPECIAL_TEXT)}"),
        preserve_thinking=t.get("preserve_thinking", bool, None if user else base.preserve_thinking),
        upstream_config=t.get("upstream_config", str, None if user else base.upstream_config),
        upstream_split=t.get("split", str, "train" if user else base.upstream_split),
        license=t.get("license", str, "other" if user else base.license),
        name=t.get("name", str, config.lower() if user else base.name),
    )
    if "n" in t.data:
        kw["default_n"] = None if n_raw == "all" else n_raw
    rule = t.get("prompt_rule", str)
    t.done()
    if user:
        label = upstream or Path(source).name
        default_rule = {"first_user": "first user turn", "every_user_prefix": "every user-turn prefix",
                        "after_tool_result": "up to the first tool result",
                        "own_history": "each user turn after the model's own earlier turns"}[policy]
        return Partition(config, kw.pop("name"), label, kw.pop("upstream_config"), kw.pop("upstream_split"),
                         kw.pop("adapter"), kw.pop("default_n", None), kw.pop("license"), rule or default_rule,
                         builtin=False, **kw)
    if upstream is not None:
        kw["upstream"] = upstream
    if rule is not None:
        kw["prompt_rule"] = rule
    return dataclasses.replace(base, **kw)


def load_config(path: str | Path | None) -> PrepareConfig:
    """The built-in defaults (path None) or the defaults overridden by a TOML file."""
    if path is None:
        return DEFAULT
    path = Path(path).expanduser().resolve()
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config file ({e.strerror or e})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    file, base_dir = str(path), path.parent
    top = _Table(data, "", file)
    seed = top.get("seed", int, 0)
    sampling_t = top.table("sampling")
    sampling = {}
    for key in SAMPLING_KEYS:   # ranges: settings.py, the same rules as the CLI options
        v = sampling_t.get(key, SETTING_RULES[key].kind, check=lambda v, key=key: setting_problem(key, v))
        if v is not None:
            sampling[key] = v
    sampling_t.done()
    try:
        check_settings(sampling, f"{file}: sampling.")
    except SettingError as e:
        raise ConfigError(str(e)) from None
    filters = _filters(top.table("filters"), Filters())

    dt = top.table("dedup")
    d = DedupSettings()
    dedup = DedupSettings(
        exact=dt.get("exact", bool, d.exact), across_configs=dt.get("across_configs", bool, d.across_configs),
        near=dt.get("near", bool, d.near),
        near_threshold=dt.get("near_threshold", float, d.near_threshold,
                              check=lambda v: None if 0 < v <= 1 else "must be in (0, 1]"),
        shingle_words=dt.get("shingle_words", int, d.shingle_words, check=_positive),
        num_perm=dt.get("num_perm", int, d.num_perm, check=lambda v: None if 8 <= v <= 1024 else "must be 8..1024"),
    )
    dt.done()

    ct = top.table("decontam")
    sets = []
    names: set[str] = set()
    for i, s in enumerate(ct.get("sets", list, [])):
        if not isinstance(s, dict):
            raise ct.err(f"sets[{i}]", "expected a table with name, path, fields")
        st = _Table(s, f"decontam.sets[{i}].", file)
        name = st.get("name", str)
        p = st.get("path", str)
        if not name or not p:
            raise st.err("name" if not name else "path", "is required")
        if name in names:
            raise st.err("name", f"eval set {name!r} is listed twice")
        names.add(name)
        fields = st.get("fields", list, None)
        single = st.get("field", str, None)
        if fields is not None and not all(isinstance(f, str) for f in fields):
            raise st.err("fields", "expected a list of column names")
        st.done()
        sets.append(EvalSet(name, _path(base_dir, p), tuple(fields or ([single] if single else []))))
    decontam = DecontamSettings(sets=tuple(sets), ngram=ct.get("ngram", int, 13, check=_positive),
                                min_words=ct.get("min_words", int, 8, check=_positive))
    ct.done()

    parts = dict(PARTITIONS)
    pt = top.table("partitions")
    for config in list(pt.data):
        if not CONFIG_NAME.match(config):
            raise pt.err(config, CONFIG_NAME_RULE)
        body = pt.get(config, dict)
        parts[config] = _partition(config, _Table(body, f"partitions.{config}.", file), PARTITIONS.get(config),
                                   seed=seed, filters=filters, base_dir=base_dir)
    pt.done()
    for config in pt.data:
        for line in dead_settings(parts[config].modes, f"partitions.{config}."):
            log.warning("%s: %s", file, line)
    # seed and filters at the top level apply to the built-ins not mentioned too
    for config, p in parts.items():
        if config not in pt.data:
            parts[config] = dataclasses.replace(p, seed=seed, filters=filters)

    configs = top.get("configs", list, None)
    top.done()     # a misspelt table (`[partition.C2]`) is named before the configs it would have defined
    if configs is None:
        # A file's own partitions are what its user means to run; the built-ins beside them would each be read
        # from the Hub. A file that defines none tunes the built-ins (filters, dedup, sampling): it runs them all.
        configs = list(pt.data) or list(parts)
    for c in configs:
        if c not in parts:
            raise top.err("configs", f"{c!r} is neither a built-in config nor defined by a [partitions.{c}] table; "
                                     f"the configs are {', '.join(parts)}")
    return PrepareConfig(partitions=parts, configs=tuple(configs), dedup=dedup, decontam=decontam,
                         sampling=sampling, path=file, sha256=hashlib.sha256(raw).hexdigest())
