"""Chat formats: what a stage asks a profile's format for (renderer, generation prompts, tokens and stop id,
validator, special-token text; the `ChatFormat` protocol, chat_format.py). A profile names its format
(`ModelProfile.chat_format`); `format_of(profile)` is the object, from the registry here (`register_format` adds
one: tests/formats/toy_format.py defines a third format that way). This package sits above the stages it serves
(it renders with prompts/, validates with validate/): `runs.open_run` puts the run's format in its context
(`RunContext.format`) and the CLI hands it to `check`, so no stage imports it and no stage compares profile names.

One folder per format holds everything about it: Kimi-K2.5's `kimi_k2/` (its profiles, grammar, rules, validator,
format object, assistant messages, answers, segments),
Kimi-K3's `kimi_k3/` (its facts, profiles, renderer, grammar, format object, validator, segments, checkpoint check).
Each folder's `__init__` exports its profiles only (`PROFILES`, which the registry, profile.py, imports): the
registry sits below the stages, the format objects above them.
`inspect` resolves a run's profile itself, so the CLI hands it `format_of`.
"""

from __future__ import annotations

from typing import Callable

from kimi_eagle_data.chat_format import ChatFormat
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT, KimiK2Format


def _kimi_k3() -> ChatFormat:
    from kimi_eagle_data.formats.kimi_k3.format import KIMI_K3_FORMAT   # on first use: K3's renderer and grammar load

    return KIMI_K3_FORMAT


# The registry: a format's name (what `ModelProfile.chat_format` holds) -> what gives the format.
_FORMATS: dict[str, Callable[[], ChatFormat]] = {KimiK2Format.name: lambda: KIMI_K2_FORMAT, "kimi-k3": _kimi_k3}


def register_format(chat_format: ChatFormat) -> ChatFormat:
    """Add a format to the registry under its `name` (a profile names it in `chat_format`; `profile.register_profile`
    adds the profile). A name already taken by another format is refused."""
    if not isinstance(chat_format, ChatFormat):
        raise TypeError(f"{type(chat_format).__name__} lacks members of the ChatFormat protocol (chat_format.py)")
    known = _FORMATS.get(chat_format.name)
    if known is not None and known() is not chat_format:
        raise ValueError(f"a chat format named {chat_format.name!r} is registered already")
    _FORMATS[chat_format.name] = lambda: chat_format
    return chat_format


def format_of(profile) -> ChatFormat:
    """The chat format of a profile (`ModelProfile.chat_format` names it)."""
    return format_named(profile.chat_format)


def format_named(name: str) -> ChatFormat:
    """The chat format of that name."""
    try:
        return _FORMATS[name]()
    except KeyError:
        raise ValueError(f"unknown chat format {name!r}; known: {', '.join(sorted(_FORMATS))}") from None
