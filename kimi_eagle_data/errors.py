"""The one base of every error a user can fix: the CLI prints its one-line message and exits with its code.

Subclasses also derive from the builtin they replaced (ValueError, RuntimeError, FileNotFoundError), so
library callers that catch those keep working."""

from __future__ import annotations


class KimiDataError(Exception):
    """One line: what went wrong, where, and what to do."""

    exit_code = 1

    def __init__(self, message: str = ""):
        super().__init__(" ".join(str(message).split()))   # one line, however the cause was worded


class MissingInputError(KimiDataError, FileNotFoundError):
    """A stage's input is missing (a workdir without run.json, prepare not run yet, …)."""
