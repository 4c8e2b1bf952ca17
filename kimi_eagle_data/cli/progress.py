"""What the CLI shows of the library's reports: its progress snapshots as rich bars (`RichProgress`, a
progress.Progress) and its log records as lines on stderr (`show_log_records`)."""

from __future__ import annotations

import logging

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from kimi_eagle_data.progress import Snapshot, outcomes_text


class RichProgress:
    """A bar per step: done/total, tokens per second, requests in flight, outcomes, elapsed time and ETA."""

    def __init__(self, console: Console):
        self.console = console
        self._bar: Progress | None = None
        self._task = None

    def start(self, label: str, total: int) -> None:
        self._bar = Progress(
            TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[tps]:>7.0f} tok/s"), TextColumn("{task.fields[flight]}"),
            TextColumn("{task.fields[outcomes]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=self.console, transient=False)
        self._bar.start()
        self._task = self._bar.add_task(label, total=total, tps=0.0, outcomes="", flight="")

    def update(self, s: Snapshot) -> None:
        self._bar.update(self._task, completed=s.done, total=s.total, tps=s.tokens_per_s,
                         flight="" if s.in_flight is None else f"in flight {s.in_flight}", outcomes=outcomes_text(s))

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class RecordLines(logging.Handler):
    """A log record as one line on the console: `warning: …` (`error: …`) above INFO, the message alone at INFO."""

    def __init__(self, console: Console):
        super().__init__(logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:   # a record whose arguments do not fit its format: logging's own report
            self.handleError(record)
            return
        if record.levelno >= logging.ERROR:
            line = Text.assemble(("error: ", "bold red"), message)
        elif record.levelno >= logging.WARNING:
            line = Text.assemble(("warning: ", "yellow"), message)
        else:
            line = Text(message)
        self.console.print(line, soft_wrap=True)


def show_log_records(console: Console) -> None:
    """The library's records (logger `kimi_eagle_data`, INFO and above) as lines on `console`; once per process."""
    logger = logging.getLogger("kimi_eagle_data")
    logger.setLevel(logging.INFO)
    if not any(isinstance(h, RecordLines) for h in logger.handlers):
        logger.addHandler(RecordLines(console))
