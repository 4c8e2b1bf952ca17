"""Chat formats: what a stage asks a profile's format for (renderer, generation prompts, tokens and stop id,
validator, special-token text; the `ChatFormat` base class, chat_format.py). A profile names its format
(`ModelProfile.chat_format`); `format_of(profile)` is the unbound object, from the registry (registry.py:
`register_format` adds one, `unregister_format` takes it out; tests/formats/toy_format.py defines a third format that
way). This package sits above the stages it serves (it renders with prompts/, validates with validate/):
`runs.open_run` binds the run's format to its profile and tokenizer and puts it in its context (`RunContext.format`),
and the CLI hands the unbound one to `check`, so no stage imports it and no stage compares profile names.

One folder per format holds everything about it: Kimi-K2.5's `kimi_k2/` (its profiles, K2.6's among them, grammar,
rules, validator, format object, assistant messages, answers, segments), Kimi-K3's `kimi_k3/` (its facts, profiles,
renderer, grammar, format object, validator, segments, checkpoint check). Each folder's `__init__` declares its
format and profiles (`DECLARATION`); the registry finds the folders by their place in this package and imports a
format object on its first use, so nothing here names a format. An installed plug-in declares a format the same way
through an entry point (docs/architecture.md, "Adding a model").
`inspect` resolves a run's profile itself, so the CLI hands it `format_of`.
"""

from __future__ import annotations

from kimi_eagle_data.chat_format import ChatFormat
from kimi_eagle_data.registry import format_named, register_format, unregister_format

__all__ = ["format_named", "format_of", "register_format", "unregister_format"]


def format_of(profile) -> ChatFormat:
    """The chat format of a profile (`ModelProfile.chat_format` names it)."""
    return format_named(profile.chat_format)
