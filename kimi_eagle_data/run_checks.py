"""The range rules run settings are checked with (settings.py names each setting's rule), config names and
server URLs.

A config name (B4, C1, a `[partitions.NAME]` table) becomes part of file paths
(`prepared/<CONFIG>.parquet`, `data/<CONFIG>/`): it is a letter then letters, digits, `_` or
`-`, so `../../x` can never name a path outside the workdir.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from kimi_eagle_data.errors import KimiDataError

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")     # a Hub repo id: ORG/NAME
CONFIG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
CONFIG_NAME_RULE = "a config name is a letter then letters, digits, _ or - (at most 64)"


# What a setting or a TOML integer may be: JSON (run.json, the fingerprints) and SQLite hold 64-bit integers only, and
# TOML's integers are 64-bit (Python's tomllib reads any size).
INT64 = (-(2 ** 63), 2 ** 63 - 1)


def int64_problem(value: int) -> str:
    return f"{value} is out of range: at most {INT64[1]:,} (a 64-bit integer)"


@dataclass(frozen=True)
class Rule:
    """A setting's range: its type and a check that says why a value is out of range (None when it is in)."""
    kind: type
    check: Callable[[Any], str | None]

    def problem(self, value: Any) -> str | None:
        kind = self.kind
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
            return f"expected {kind.__name__}, got {type(value).__name__} {value!r}"
        if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
            return int64_problem(value)
        return self.check(float(value) if kind is float else value)


def _at_least(lo: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"must be at least {lo:g}, got {v!r}"


# The rules settings.py gives its settings.
AT_LEAST_1 = Rule(int, _at_least(1))
AT_LEAST_2 = Rule(int, _at_least(2))
NON_NEGATIVE = Rule(float, lambda v: None if v >= 0 and math.isfinite(v) else f"must be >= 0, got {v!r}")
POSITIVE = Rule(float, lambda v: None if v > 0 and math.isfinite(v) else f"must be > 0, got {v!r}")
# Worker processes: each is a fork of the command; past this many none is faster, and a typo must not fork a million.
MAX_WORKERS = 1024
WORKERS = Rule(int, lambda v: None if 1 <= v <= MAX_WORKERS else f"must be 1..{MAX_WORKERS}, got {v!r}")
TOP_P = Rule(float, lambda v: None if 0 < v <= 1 else f"must be in (0, 1], got {v!r}")
# The highest temperature vLLM takes (its SamplingParams refuses more: vllm/sampling_params.py), the range OpenAI's API
# documents too. SGLang takes any finite one, but past 2 a model samples nearly uniformly: a typo, never data.
MAX_TEMPERATURE = 2.0
TEMPERATURE = Rule(float, lambda v: None if 0 <= v <= MAX_TEMPERATURE else
                   f"must be in [0, {MAX_TEMPERATURE:g}], got {v!r}")


def room_problem(max_new_tokens: int, max_seq_len: int, *, seq_note: str = "", new_note: str = "",
                 blame_seq: bool = False) -> str | None:
    """Why `max_new_tokens` leaves no room for a prompt (of one token at least) in `max_seq_len`, said of
    `max_new_tokens` (or, with `blame_seq`, of `max_seq_len`); None when it leaves some. A note says whose value the
    other one is (a profile's)."""
    if max_new_tokens < max_seq_len:
        return None
    if blame_seq:
        return (f"{max_seq_len:,} leaves no room for a prompt after max_new_tokens {max_new_tokens:,}{new_note}: at "
                f"least {max_new_tokens + 1:,}")
    return (f"{max_new_tokens:,} leaves no room for a prompt in max_seq_len {max_seq_len:,}{seq_note}: at most "
            f"{max_seq_len - 1:,}")


class SettingError(KimiDataError, ValueError):
    """A run setting out of range (one line: where, which key, why)."""


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
