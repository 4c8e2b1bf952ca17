"""A partition's mode mix and sampling mix (docs/data-format.md, "Modes and sampling"), and the per-prompt draw.

Each prepared prompt is called in one mode, thinking or instant (model_profile.MODES), and with one sampling setting.
Both are drawn per prompt from the partition's seed and the prompt's id, so a prompt keeps its mode and its
sampling whatever else is selected, on any machine:

    mode      instant with probability `instant_share` (default 0: every prompt in thinking mode, as before); an
              `efforts` table's `off` share is that share
    effort    for a profile whose thinking has efforts (Kimi-K3): one of the `efforts` table's other entries, drawn
              by their shares among the thinking prompts (a draw of its own: the mode a prompt is drawn in does not
              depend on how the thinking shares are split); without a table, the profile's default effort
    sampling  the profile's defaults for the mode (profile.mode_sampling), then the run-wide settings
              ([sampling] / --temperature / --top-p), then the partition's per-mode override, then, with a
              `mix`, one entry drawn by its share (an entry sets temperature and/or top_p)

A thinking prompt keeps the id it always had; an instant prompt's id adds the mode to the id's key
(prompts/prepare.sample_id), so the two never share a checkpoint row. A prompt's effort is in its prompt ids (the
effort announcement): a completion is reused only for the same ids, so another effort is generated again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from kimi_eagle_data.model_profile import INSTANT, THINKING, ModelProfile

SAMPLING_FIELDS = ("temperature", "top_p")
# The `efforts` table's name for thinking off (instant mode).
EFFORT_OFF = "off"


@dataclass(frozen=True)
class SamplingOverride:
    """Sampling values that replace the defaults (None: keep the default)."""

    temperature: float | None = None
    top_p: float | None = None

    def to_json(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in SAMPLING_FIELDS if getattr(self, k) is not None}

    def apply(self, values: dict[str, float]) -> dict[str, float]:
        return {**values, **self.to_json()}


@dataclass(frozen=True)
class MixEntry:
    """One sampling setting of a mix, taken by `share` of the partition's prompts."""

    share: float
    override: SamplingOverride


@dataclass(frozen=True)
class ModePlan:
    """A partition's modes and sampling; the default is every prompt in thinking mode at the run's sampling."""

    instant_share: float = 0.0
    thinking: SamplingOverride = field(default_factory=SamplingOverride)
    instant: SamplingOverride = field(default_factory=SamplingOverride)
    mix: tuple[MixEntry, ...] = ()
    # The thinking efforts of an `efforts` table, (name, share of all prompts), in the table's order; () without one.
    # Their shares and `instant_share` sum to 1.
    efforts: tuple[tuple[str, float], ...] = ()

    @property
    def is_default(self) -> bool:
        return self == ModePlan()

    def to_json(self) -> dict[str, Any]:
        """What binds a run (run.json `sampling_plan`) and enters the prepare fingerprint."""
        return {"instant_share": self.instant_share, "thinking": self.thinking.to_json(),
                "instant": self.instant.to_json(),
                "mix": [{"share": e.share, **e.override.to_json()} for e in self.mix],
                # absent without an efforts table: a workdir bound before efforts existed reads the same plan
                **({"efforts": dict(self.efforts)} if self.efforts else {})}

    def efforts_table(self) -> dict[str, float]:
        """The shares as the `efforts` table writes them (thinking efforts, then `off`)."""
        return {**dict(self.efforts), **({EFFORT_OFF: self.instant_share} if self.instant_share else {})}

    def override(self, mode: str) -> SamplingOverride:
        return self.instant if mode == INSTANT else self.thinking

    def overrides(self) -> tuple[SamplingOverride, ...]:
        """Every sampling setting this plan names: each mode's and each mix entry's."""
        return (self.thinking, self.instant, *(e.override for e in self.mix))


def unit_draw(seed: int, key: str, what: str) -> float:
    """A number in [0, 1) fixed by (seed, key, what): the per-prompt draw, the same on every machine."""
    digest = hashlib.sha256(f"{seed}\x1f{key}\x1f{what}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def choose_mode(plan: ModePlan, seed: int, key: str) -> str:
    """The prompt's mode; `key` is its thinking-mode id (stable whatever the mode turns out to be)."""
    if plan.instant_share <= 0:
        return THINKING
    return INSTANT if unit_draw(seed, key, "mode") < plan.instant_share else THINKING


def choose_effort(plan: ModePlan, seed: int, key: str, mode: str, default: str | None) -> str | None:
    """The prompt's thinking effort: None in instant mode; `default` (the profile's, None where it has no efforts)
    without an efforts table; else one of the table's thinking efforts, by share."""
    if mode == INSTANT:
        return None
    if not plan.efforts:
        return default
    total = sum(share for _, share in plan.efforts)
    x, acc = unit_draw(seed, key, "effort") * total, 0.0
    for name, share in plan.efforts:
        acc += share
        if x < acc:
            return name
    return plan.efforts[-1][0]       # float rounding of the shares


def choose_sampling(plan: ModePlan, seed: int, key: str, mode: str, profile: ModelProfile,
                    run_wide: dict[str, float | None]) -> dict[str, float]:
    """The prompt's {temperature, top_p} (the module docstring's order). `run_wide`: the run's explicit
    settings, None where not given."""
    defaults = profile.mode_sampling(mode)
    values = {k: float(run_wide[k]) if run_wide.get(k) is not None else float(getattr(defaults, k))
              for k in SAMPLING_FIELDS}
    values = plan.override(mode).apply(values)
    if plan.mix:
        x, acc = unit_draw(seed, key, "sampling"), 0.0
        for entry in plan.mix:
            acc += entry.share
            if x < acc:
                return entry.override.apply(values)
        return plan.mix[-1].override.apply(values)     # float rounding of shares summing to 1
    return values


# -- settings no prompt gets ----------------------------------------------------------------------------

def modes_drawn(plan: ModePlan) -> tuple[str, ...]:
    """The modes a partition's prompts can be drawn in."""
    if plan.instant_share <= 0:
        return (THINKING,)
    return (INSTANT,) if plan.instant_share >= 1 else (THINKING, INSTANT)


def _mix_sets(plan: ModePlan, key: str) -> str | None:
    """The values every entry of the mix gives `key` ("0.5, 1"), when each entry sets it; else None."""
    values = [getattr(e.override, key) for e in plan.mix]
    if not values or any(v is None for v in values):
        return None
    return ", ".join(f"{v:g}" for v in dict.fromkeys(values))


def dead_settings(plan: ModePlan, where: str) -> list[str]:
    """One line per per-mode sampling value of a partition that no prompt is sampled at, naming the setting that
    overrides it. `where`: the partition's key prefix in the config file (e.g. "partitions.B6.")."""
    lines = []
    for mode in (THINKING, INSTANT):
        for key, value in plan.override(mode).to_json().items():
            name = f"{where}sampling.{mode}.{key} = {value:g}"
            if mode not in modes_drawn(plan):
                lines.append(f"{name} is never used: {where}instant_share = {plan.instant_share:g} draws no prompt "
                             f"in {mode} mode")
            elif (mixed := _mix_sets(plan, key)) is not None:
                lines.append(f"{name} is never used: every entry of {where}sampling.mix sets {key} ({mixed}), "
                             f"which applies after it")
    return lines


def run_wide_overridden(plan: ModePlan, key: str) -> str | None:
    """What in a partition's plan replaces a run-wide `key` for every one of its prompts (None: some prompt
    keeps the run-wide value)."""
    if _mix_sets(plan, key) is not None:
        return "every entry of its sampling.mix sets it"
    drawn = modes_drawn(plan)
    if all(getattr(plan.override(m), key) is not None for m in drawn):
        return f"its sampling.{' and '.join(drawn)} set{'s' if len(drawn) == 1 else ''} it"
    return None
