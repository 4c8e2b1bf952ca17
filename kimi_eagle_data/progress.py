"""How the library reports the progress of a long step (generate, score): it calls a `Progress` with snapshots, and
whoever runs it decides what they become. The CLI draws rich bars (cli/progress.py); a library caller gets log
records (`LogProgress`, logger `kimi_eagle_data.progress`, INFO) or nothing (`NoProgress`)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """Where one step stands."""

    label: str                     # the step: "generate", "score"
    done: int                      # requests answered (kept or failed)
    total: int                     # requests known so far (a kept result may add follow-ups)
    tokens_per_s: float = 0.0      # in the kept results, since the step started
    in_flight: int | None = None   # requests the engine holds (None: it does not say)
    outcomes: dict[str, int] = field(default_factory=dict)   # finish reasons of kept results, failures' reasons


class Progress(Protocol):
    def start(self, label: str, total: int) -> None:
        """A step begins, with `total` requests known."""

    def update(self, snapshot: Snapshot) -> None:
        """After each answered request."""

    def stop(self) -> None:
        """The step ended (however: done, an error, Ctrl-C)."""


class NoProgress:
    def start(self, label: str, total: int) -> None:
        pass

    def update(self, snapshot: Snapshot) -> None:
        pass

    def stop(self) -> None:
        pass


class LogProgress:
    """Each step's progress as INFO records: at most one every `every_s` seconds, and the last snapshot when the
    step stops."""

    def __init__(self, every_s: float = 30.0, logger: logging.Logger = log):
        self.every_s, self.log = every_s, logger
        self._last: Snapshot | None = None
        self._logged_at = 0.0

    def start(self, label: str, total: int) -> None:
        self._last, self._logged_at = None, time.monotonic()
        self.log.info("%s: %d requests", label, total)

    def update(self, snapshot: Snapshot) -> None:
        self._last = snapshot
        if time.monotonic() - self._logged_at >= self.every_s:
            self._emit(snapshot)

    def stop(self) -> None:
        if self._last is not None:
            self._emit(self._last)
            self._last = None

    def _emit(self, s: Snapshot) -> None:
        self._logged_at = time.monotonic()
        outcomes = outcomes_text(s)
        self.log.info("%s: %d/%d, %.0f tok/s%s%s", s.label, s.done, s.total, s.tokens_per_s,
                      "" if s.in_flight is None else f", in flight {s.in_flight}", f", {outcomes}" if outcomes else "")


def outcomes_text(snapshot: Snapshot) -> str:
    """A snapshot's outcomes as one short string: `length=2 stop=40`."""
    return " ".join(f"{k}={v}" for k, v in sorted(snapshot.outcomes.items()))
