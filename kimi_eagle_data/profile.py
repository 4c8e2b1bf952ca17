"""The registry of model profiles: every profile by name, as plain data.

Each format folder exports its profiles as plain data (`formats/kimi_k2/`: `kimi-k2.5`, `tiny-kimi`;
`formats/kimi_k3/`: `kimi-k3`, `tiny-kimi-k3`); this module imports them and registers them, and `register_profile`
adds one from outside (tests/formats/toy_format.py).
What a profile is (`ModelProfile`, the modes) is model_profile.py's: the formats build their
profiles from it without importing this registry.
"""

from __future__ import annotations

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.formats import kimi_k2, kimi_k3
from kimi_eagle_data.model_profile import ModelProfile

KIMI_K25, TINY_KIMI = kimi_k2.PROFILES
KIMI_K3, TINY_KIMI_K3 = kimi_k3.PROFILES
PROFILES: dict[str, ModelProfile] = {p.name: p for p in (*kimi_k2.PROFILES, *kimi_k3.PROFILES)}
# The profiles `kimi-data demo --profile` takes: the embedded tiny models' (CPU), the K2.5 one first (the default).
DEMO_PROFILES = (TINY_KIMI.name, TINY_KIMI_K3.name)


def profiles_described(names=None) -> str:
    """The profiles (`names`, default every one) in one line for help texts, from the registry: `kimi-k2.5
    (Kimi-K2.5), tiny-kimi (the embedded test model in Kimi-K2.5's format), …`."""
    def described(p: ModelProfile) -> str:
        if not p.is_test_model:
            return f"{p.name} ({p.display_name})"
        real = next(r for r in PROFILES.values() if r.chat_format == p.chat_format and not r.is_test_model)
        return f"{p.name} (the embedded test model in {real.display_name}'s format)"
    return ", ".join(described(PROFILES[n]) for n in (names or PROFILES))


def profile_defaults(value) -> str:
    """One default of every profile for help texts (`value(profile)`), from the registry: `kimi-k2.5 10240,
    tiny-kimi 192, …`."""
    return ", ".join(f"{p.name} {value(p)}" for p in PROFILES.values())


class UnknownProfileError(KimiDataError, ValueError):
    """A profile name no profile has (from --profile, run.json or a library caller): one line."""


def get_profile(name: str) -> ModelProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownProfileError(f"unknown model profile {name!r}; known: {', '.join(sorted(PROFILES))}") from None


def register_profile(profile: ModelProfile) -> ModelProfile:
    """Add a profile to the registry (its format, `profile.chat_format`, registered with
    `formats.register_format`). A name already taken by another profile is refused."""
    known = PROFILES.get(profile.name)
    if known is not None and known != profile:
        raise ValueError(f"a model profile named {profile.name!r} is registered already")
    PROFILES[profile.name] = profile
    return profile


