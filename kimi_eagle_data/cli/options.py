"""A run command's options -> RunSettings (inheriting from the workdir's run.json) -> its run context; and the click
options themselves, built from the settings' plain declarations (settings.py): the one place settings meet click."""

from __future__ import annotations

from dataclasses import MISSING
from typing import Any

import click

from kimi_eagle_data.cli.common import console
from kimi_eagle_data.cli.progress import RichProgress
from kimi_eagle_data.profile import PROFILES, demo_profiles
from kimi_eagle_data.run_checks import SettingError, config_name_problem
from kimi_eagle_data.settings import (COMMAND_SETTINGS, DECLARED, SECTION_OF, UNKNOWN_PROFILE, Setting,
                                      SettingUsageError, check_sampling_room, inherit, saved_options)
from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.settings import RunSettings


class SettingChoice(click.Choice):
    """An option of a setting with `choices` (its help lists them); a value outside them is refused in the setting's
    own words (`unknown_choice`) where it has them, e.g. every command's `unknown model profile 'X'; known: …`.
    `choices` may be a live collection (the registry's profiles) or a function giving one: read each time the option
    is checked or shown, so a profile registered after the command was built is taken."""

    def __init__(self, choices, unknown: str | None = None):
        self._source = choices
        super().__init__(list(self._current()))
        self.unknown = unknown

    def _current(self):
        return self._source() if callable(self._source) else self._source

    @property
    def choices(self):
        return tuple(self._current())

    @choices.setter
    def choices(self, value):
        """click.Choice sets its choices once; ours are read from the source each time."""

    def convert(self, value, param, ctx):
        if self.unknown is not None and value not in self.choices:
            self.fail(self.unknown.format(value=value, known=", ".join(sorted(self.choices))), param, ctx)
        return super().convert(value, param, ctx)


def ProfileChoice() -> SettingChoice:   # noqa: N802 (a click type, named as one)
    """--profile on a command that takes it outside the run settings (serve, check, render)."""
    return SettingChoice(PROFILES, UNKNOWN_PROFILE)


def DemoProfileChoice() -> SettingChoice:   # noqa: N802 (a click type, named as one)
    """demo's --profile: every registered embedded test model."""
    return SettingChoice(demo_profiles, "profile {value!r} is no embedded test model; the demo runs one of: {known}")


def click_config_names(ctx, param, value):
    """A click callback for CONFIG arguments/options (one name or several): usage error, exit 2."""
    names = [value] if isinstance(value, str) else list(value or ())
    for v in names:
        for name in (v.split(",") if param.name == "configs" and "," in v else [v]):
            if name.strip() and config_name_problem(name.strip()):
                raise click.BadParameter(config_name_problem(name.strip()))
    return value


class SettingOption(click.Option):
    """A setting's CLI option; `section` is the heading it is shown under in a command's help (cli/help.py)."""

    def __init__(self, *args, section: str, **kw):
        super().__init__(*args, **kw)
        self.section = section


def _usage_error(parse):
    """A setting's parse (or range rule) as a click callback: a SettingError is a usage error (exit 2)."""
    def callback(ctx, param, value):
        try:
            return parse(value)
        except SettingError as e:
            raise click.BadParameter(str(e)) from None

    return callback


def _rule_callback(rule):
    def check(value):
        problem = None if value is None else rule.problem(value)
        if problem:
            raise SettingError(problem)
        return value

    return _usage_error(check)


def setting_option(name: str, setting: Setting, default: Any, section: str):
    """The click option of one declared setting."""
    kw: dict[str, Any] = {"help": setting.help, "required": default is MISSING, "cls": SettingOption,
                          "section": section}
    if setting.is_flag:
        kw["is_flag"] = True
        if default is None:     # an --x/--no-x pair left unset: the setting's own default (the profile's)
            kw["default"] = None
    elif default is not None and default is not MISSING:
        kw.update(default=default, show_default=setting.show_default)
    if setting.choices:
        kw["type"] = SettingChoice(setting.choices, setting.unknown_choice)
    elif setting.path is not None:
        kw["type"] = click.Path(**setting.path)
    elif setting.kind is not None:
        kw["type"] = setting.kind
    if setting.multiple:
        kw["multiple"] = True
    if setting.metavar:
        kw["metavar"] = setting.metavar
    if setting.negated:
        kw["callback"] = lambda ctx, param, value: not value
    elif setting.rule is not None:
        kw["callback"] = _rule_callback(setting.rule)
    elif setting.parse is not None:
        kw["callback"] = _usage_error(setting.parse)
    return click.option(setting.flag, name, **kw)


def _option(name: str):
    f, s = DECLARED[name]
    return setting_option(name, s, f.default if f.default_factory is MISSING else None, SECTION_OF[name])


def options_for(command: str):
    """A decorator adding the options (and CONFIG arguments) of the settings `command` reads (COMMAND_SETTINGS), in
    SECTIONS order: every command that takes a setting takes it with the same option, default and check."""
    names = COMMAND_SETTINGS[command]
    params = [_option(n) for n in SECTION_OF if n in names]
    if "configs" in names:
        params.insert(0, click.argument("configs", nargs=-1, metavar="[CONFIG]...", callback=click_config_names))

    def decorate(fn):
        for param in reversed(params):
            fn = param(fn)
        return fn

    return decorate


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
    # lazy: keeps rensa, tomllib and the source adapters (the partition config's reader) out of every CLI start
    from kimi_eagle_data.sources.config import load_config

    ctx = click.get_current_context()
    given = {k for k in kw if ctx.get_parameter_source(k) not in (None, click.core.ParameterSource.DEFAULT)}
    values = {k: v for k, v in kw.items() if k in DECLARED}
    values["configs"] = list(values.get("configs") or ())
    run_json, saved = saved_options(values["workdir"])
    try:
        values = inherit(values, given, saved, run_json)   # run.json's values pass the same checks as the options
        partitions = load_config(values.get("config_file"))
        check_sampling_room(values, given, run_json, partitions.sampling, partitions.path)
    except SettingUsageError as e:
        raise click.BadParameter(str(e), param_hint=e.param_hint) from None
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
    # lazy: runs.py imports every stage (pyarrow, rensa, asyncio, scipy): kept out of every CLI start
    from kimi_eagle_data.runs import open_run

    settings, partitions = settings_from(kw)
    return open_run(settings, progress=RichProgress(console), partitions=partitions, **how)
