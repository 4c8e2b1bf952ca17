"""Chat formats: what a stage asks a profile's format for (renderer, generation prompts, tokens and stop id,
validator, special-token text). A profile names its format (`ModelProfile.chat_format`); `format_of(profile)` is
the object. This package sits above the stages it serves (it renders with prompts/, validates with validate/):
`runs.open_run` puts the run's format in its context (`RunContext.format`) and the CLI hands it to `check`, so
no stage imports it and no stage compares profile names.

Kimi-K2.5's format: `kimi_k2.py`; Kimi-K3's: `kimi_k3.py`, its validator `k3_validator.py`, its split of a
sequence into `inspect`'s segments `k3_segments.py`, the check of a checkpoint's own chat code `k3_checkpoint.py`.
`inspect` resolves a run's profile itself, so the CLI hands it `format_of`.
"""

from __future__ import annotations

from kimi_eagle_data.formats.kimi_k2 import KIMI_K2_FORMAT, KimiK2Format


def format_of(profile):
    """The chat format of a profile (`ModelProfile.chat_format` names it)."""
    return format_named(profile.chat_format)


def format_named(name: str):
    """The chat format of that name."""
    if name == KimiK2Format.name:
        return KIMI_K2_FORMAT
    from kimi_eagle_data.formats.kimi_k3 import KIMI_K3_FORMAT

    if name == KIMI_K3_FORMAT.name:
        return KIMI_K3_FORMAT
    raise ValueError(f"unknown chat format {name!r}")
