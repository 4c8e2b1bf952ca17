"""What every `kimi-data` command shares: the two consoles and the one-line error handling.

Errors the user can fix print one line (what, where, what to do) and exit 1. SIGTERM (a cluster scheduler,
`docker stop`) stops a command the way Ctrl-C does, with exit status 143 (128 + SIGTERM).
"""

from __future__ import annotations

import functools
import os
import signal
import sqlite3
import sys
from typing import Callable

import click
from rich.console import Console
from rich.markup import escape

from kimi_eagle_data.diskfull import disk_full_line, file_size_limit_line, is_disk_full, is_file_size_limit
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.stopping import Terminated, restore_sigterm, stop_on_sigterm

console = Console(stderr=True)
# Tables stay readable when stdout is a pipe or a log file (rich would assume 80 columns).
out = Console(width=None if sys.stdout.isatty() else 160)


class UserError(click.ClickException):
    """Printed as one line `error: …`, exit 1."""

    def show(self, file=None):
        # escaped: a message quoting a TOML table (`[partitions.C2]`) must not be read as console markup
        console.print(f"[bold red]error:[/] {escape(self.message)}", highlight=False, soft_wrap=True)


# What is true after Ctrl-C or SIGTERM, by what the command writes (its line: "interrupted[ by SIGTERM]: …").
RESUMES = "completed samples are in the checkpoint; rerun the same command to resume"
REWRITES = "no file is left half-written (each is replaced whole or not at all); rerun the same command"
READS_ONLY = "it writes nothing; rerun the same command"
SCORES = "scored answers are in the score checkpoint; rerun the same command to resume"
PUSHES = ("nothing counts as published until the version's tag is on the Hub; rerun the same command to finish (it "
          "checks the tag first)")
SERVES = "the server stopped"
PROBES = ("probe.json is written once every drafter is measured, whole or not at all: the last report stays as it was; "
          "rerun the same command (it starts over)")
# The generate task of `kimi-data slurm submit` exports its task's id here: Slurm, not the user, runs it again.
SLURM_TASK_ENV = "KIMI_DATA_SLURM_TASK"


def resumes() -> str:
    """RESUMES, or in a generate task of `kimi-data slurm submit` what resumes it."""
    task = os.environ.get(SLURM_TASK_ENV)
    if not task:
        return RESUMES
    return (f"completed samples are in the checkpoint; Slurm task {task} resumes where it stopped by itself if Slurm "
            "requeued it (preemption, `scontrol requeue`, its time limit near); if it was cancelled (scancel), the "
            "same `kimi-data slurm submit` resumes it")


def friendly_errors(fn=None, *, interrupted: str | Callable[[], str] = RESUMES):
    """Turn the project's expected failures into one clear line instead of a traceback. `interrupted`: what to
    say when Ctrl-C or SIGTERM stops the command (what stays, and what to do), or what says it then."""
    if fn is None:
        return functools.partial(friendly_errors, interrupted=interrupted)
    # FileNotFoundError: a path the user gave that the OS could not open (ours raise MissingInputError).
    expected = (KimiDataError, FileNotFoundError)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        previous = stop_on_sigterm()
        try:
            return fn(*args, **kwargs)
        except expected as e:
            raise UserError(str(e)) from None   # `from None`: no chained message can carry a token
        except (OSError, sqlite3.Error) as e:
            # A write no `writing(path)` wraps: the file when the OS named it.
            if is_file_size_limit(e):
                raise UserError(file_size_limit_line(getattr(e, "filename", None))) from None
            if not is_disk_full(e):
                raise
            raise UserError(disk_full_line(getattr(e, "filename", None))) from None
        except KeyboardInterrupt as e:
            by = " by SIGTERM" if isinstance(e, Terminated) else ""
            said = interrupted() if callable(interrupted) else interrupted
            console.print(f"[yellow]interrupted{by}[/]: {said}", highlight=False, soft_wrap=True)
            sys.exit(128 + signal.SIGTERM if by else 130)
        finally:
            restore_sigterm(previous)

    return wrapper
