"""A run command's options -> RunSettings (inheriting from the workdir's run.json) -> its run context."""

from __future__ import annotations

import click

from kimi_eagle_data.cli.common import console
from kimi_eagle_data.cli.progress import RichProgress
from kimi_eagle_data.settings import DECLARED, check_sampling_room, inherit, saved_options
from kimi_eagle_data.sources.partitions import PARTITIONS


def parse_sources(values, known=PARTITIONS) -> dict[str, str]:
    """--source CONFIG=PATH values (or run.json's {CONFIG: PATH}) -> {CONFIG: PATH}, each CONFIG a known one."""
    sources = {}
    for v in (f"{k}={p}" for k, p in values.items()) if isinstance(values, dict) else values:
        config, sep, path = v.partition("=")
        if not sep or config not in known:
            raise click.BadParameter(f"{v!r}: expected CONFIG=PATH with CONFIG one of {', '.join(known)}",
                                     param_hint="--source")
        sources[config] = path
    return sources


def settings_from(kw: dict):
    """The command's options -> (RunSettings, the partition config it names): what the command line does not give
    is inherited from the workdir's run.json (settings.inherit); the partition config is read once, here. A value
    out of range, from run.json or the config file, is a SettingError / ConfigError: one line (friendly_errors)."""
    from kimi_eagle_data.settings import RunSettings
    from kimi_eagle_data.sources.config import load_config

    ctx = click.get_current_context()
    given = {k for k in kw if ctx.get_parameter_source(k) not in (None, click.core.ParameterSource.DEFAULT)}
    values = {k: v for k, v in kw.items() if k in DECLARED}
    values["configs"] = list(values.get("configs") or ())
    run_json, saved = saved_options(values["workdir"])
    values = inherit(values, given, saved, run_json)   # run.json's values pass the same checks as the options
    partitions = load_config(values.get("config_file"))
    check_sampling_room(values, given, run_json, partitions.sampling, partitions.path)
    known = partitions.partitions
    for c in values["configs"]:
        if c not in known:
            raise click.BadParameter(f"{c!r} is not a config; known: {', '.join(known)}"
                                     + ("" if values.get("config_file") else " (add more with --config FILE)"),
                                     param_hint="CONFIG")
    if "sources" in values:
        values["sources"] = parse_sources(values["sources"], known)
    return RunSettings(**values), partitions


def run_for(kw: dict, **how):
    """The run context of a command's options (runs.open_run's keywords in `how`)."""
    from kimi_eagle_data.runs import open_run

    settings, partitions = settings_from(kw)
    return open_run(settings, progress=RichProgress(console), partitions=partitions, **how)
