"""The one place run settings and config names are checked, wherever they come from.

Run settings arrive from CLI options, from `[sampling]` in the partition TOML and from a
workdir's `run.json` (options a later command inherits). Each source checks its values here, so
`temperature = -1` in a TOML file, `--temperature -1` and an edited run.json are refused with the
same words (`must be >= 0, got -1.0`), each prefixed with where the value came from.

A config name (B4, C1, a `[partitions.NAME]` table) becomes part of file paths
(`prepared/<CONFIG>.parquet`, `data/<CONFIG>/`): it is a letter then letters, digits, `_` or
`-`, so `../../x` can never name a path outside the workdir.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

from kimi_eagle_data.errors import KimiDataError

CONFIG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
CONFIG_NAME_RULE = "a config name is a letter then letters, digits, _ or - (at most 64)"


def _at_least(lo: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"must be at least {lo:g}, got {v!r}"


def _positive(v) -> str | None:
    return None if v > 0 and math.isfinite(v) else f"must be > 0, got {v!r}"


# key -> (type, check). Sampling keys are also what `[sampling]` in the TOML may set.
SETTING_RULES: dict[str, tuple[type, Callable[[Any], str | None]]] = {
    "max_new_tokens": (int, _at_least(1)),
    "temperature": (float, lambda v: None if v >= 0 and math.isfinite(v) else f"must be >= 0, got {v!r}"),
    "top_p": (float, lambda v: None if 0 < v <= 1 else f"must be in (0, 1], got {v!r}"),
    "max_seq_len": (int, _at_least(2)),
    "limit": (int, _at_least(1)),
    "batch_size": (int, _at_least(1)),
    "concurrency": (int, _at_least(1)),
    "max_attempts": (int, _at_least(1)),
    "retry_backoff": (float, lambda v: None if v >= 0 and math.isfinite(v) else f"must be >= 0, got {v!r}"),
    "request_timeout": (float, _positive),
    "health_timeout": (float, _positive),
}
SAMPLING_KEYS = ("max_new_tokens", "temperature", "top_p", "max_seq_len")


class SettingError(KimiDataError, ValueError):
    """A run setting out of range (one line: where, which key, why)."""


def setting_problem(key: str, value: Any) -> str | None:
    """Why `value` cannot be run setting `key` (None when it can, or when None: unset)."""
    if value is None or key not in SETTING_RULES:
        return None
    kind, check = SETTING_RULES[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        return f"expected {kind.__name__}, got {type(value).__name__} {value!r}"
    return check(float(value) if kind is float else value)


def check_settings(values: dict[str, Any], where: str) -> None:
    """Raise SettingError for the first value out of range; `where` names the source (a file)."""
    for key, value in values.items():
        problem = setting_problem(key, value)
        if problem:
            raise SettingError(f"{where}{key}: {problem}")
    new, seq = values.get("max_new_tokens"), values.get("max_seq_len")
    if isinstance(new, int) and isinstance(seq, int) and new >= seq:
        raise SettingError(f"{where}max_new_tokens: {new} leaves no room for a prompt in max_seq_len {seq}; "
                           "lower it or raise max_seq_len")


def click_setting(key: str):
    """A click callback checking option `key` with SETTING_RULES (usage error, exit 2)."""
    def callback(ctx, param, value):
        import click

        problem = setting_problem(key, value)
        if problem:
            raise click.BadParameter(problem)
        return value

    return callback


def config_name_problem(name: Any) -> str | None:
    if not isinstance(name, str) or not CONFIG_NAME.match(name):
        return f"{name!r}: {CONFIG_NAME_RULE}"
    return None


def check_config_name(name: str) -> str:
    """`name` when it is a safe config name; ValueError otherwise (before any path is built from it)."""
    problem = config_name_problem(name)
    if problem:
        raise SettingError(problem)
    return name


def click_config_names(ctx, param, value):
    """A click callback for CONFIG arguments/options (one name or several): usage error, exit 2."""
    import click

    names = [value] if isinstance(value, str) else list(value or ())
    for v in names:
        for name in (v.split(",") if param.name == "configs" and "," in v else [v]):
            if name.strip() and config_name_problem(name.strip()):
                raise click.BadParameter(config_name_problem(name.strip()))
    return value


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a server URL (None when it can): http or https, with a host."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port   # noqa: B018 - raises ValueError on a non-numeric or out-of-range port
    except ValueError as e:
        return f"not a URL ({e}); expected e.g. http://127.0.0.1:30000"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected an http:// or https:// URL with a host, e.g. http://127.0.0.1:30000"
    return None
