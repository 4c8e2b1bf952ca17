"""The model profiles by name, as plain data, and what help texts say of them.

The registry (registry.py) holds them: each format folder declares its own (formats/*/`__init__`, `DECLARATION`)
and an installed plug-in declares more (the `kimi_eagle_data.formats` entry points); `register_profile` adds one
from a library caller (tests/formats/toy_format.py), `unregister_profile` takes it out again. No profile is named
here: a profile's constant lives in its format folder (`kimi_eagle_data.formats.kimi_k2.KIMI_K25`, …).
What a profile is (`ModelProfile`, the modes) is model_profile.py's.
"""

from __future__ import annotations

from kimi_eagle_data.model_profile import ModelProfile
from kimi_eagle_data.registry import (PROFILES, UnknownProfileError, get_profile, plugin_hint, register_profile,
                                      unregister_profile)

__all__ = ["PROFILES", "UnknownProfileError", "demo_profiles", "get_profile", "plugin_hint", "profile_defaults",
           "profiles_described", "register_profile", "unregister_profile"]


def demo_profiles() -> tuple[str, ...]:
    """The profiles `kimi-data demo --profile` takes: every embedded test model (CPU) registered, the first
    declared (the package's first format folder's) first: it is the default."""
    return tuple(p.name for p in PROFILES.values() if p.is_test_model)


def profiles_described(names=None) -> str:
    """The profiles (`names`, default every one) in one line for help texts, from the registry: `kimi-k2.5
    (Kimi-K2.5), tiny-kimi (the embedded test model in Kimi-K2.5's format), …`."""
    def described(p: ModelProfile) -> str:
        if not p.is_test_model:
            return f"{p.name} ({p.display_name})"
        real = next((r for r in PROFILES.values() if r.chat_format == p.chat_format and not r.is_test_model), None)
        return f"{p.name} (the embedded test model in {real.display_name if real else p.chat_format}'s format)"
    return ", ".join(described(PROFILES[n]) for n in (names or PROFILES))


def profile_defaults(value) -> str:
    """One default of every profile for help texts (`value(profile)`), from the registry: `kimi-k2.5 10240,
    tiny-kimi 192, …`."""
    return ", ".join(f"{p.name} {value(p)}" for p in PROFILES.values())
