"""How a command stops on SIGTERM (a cluster scheduler, `docker stop`): the way Ctrl-C does, through
`Terminated` (a KeyboardInterrupt), with exit status 143 (cli/common.py prints the line).

By default SIGTERM raises Terminated in the main thread wherever it is: right for generate, whose every finished
sample is its own transaction. Validate and emit run worker processes and a shard-writer thread; an exception
raised at an arbitrary bytecode there (inside a pool's bookkeeping, in a finalizer where Python ignores it,
while a temp shard is being opened) could leave a temp shard behind or be lost. While a `DeferredStop` is on,
SIGTERM only records the stop; `check_stop()`, called where stopping leaves everything consistent (between
chunks), raises Terminated there, and ending the DeferredStop raises a stop that no check took.
"""

from __future__ import annotations

import signal
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: it takes Ctrl-C's path (in-flight work abandoned, commits kept)."""


_state = {"stopped": False, "pending": False}   # a SIGTERM came / came and is not raised yet


def _raise_terminated(signum, frame):
    # One stop is enough: a second SIGTERM (a scheduler repeating itself) must not break the cleanup under way.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _state["stopped"] = True
    raise Terminated()


def _record_stop(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _state["stopped"] = _state["pending"] = True


def _in_main_thread() -> bool:
    # Signal handlers can only be set there.
    return threading.current_thread() is threading.main_thread()


def stop_on_sigterm():
    """From now on SIGTERM raises Terminated in the main thread. Returns the handler it replaced (None when it
    replaced none), for `restore_sigterm` once the command's work is over."""
    if _in_main_thread() and not _state["stopped"]:
        return signal.signal(signal.SIGTERM, _raise_terminated)
    return None


def restore_sigterm(previous) -> None:
    """Back to the handler from before `stop_on_sigterm`: a SIGTERM while the interpreter exits (a scheduler
    stopping a job that just finished) then ends the process the default way, not as a Terminated raised inside
    an exit handler (a traceback in the log)."""
    if previous is not None and _in_main_thread():
        signal.signal(signal.SIGTERM, previous)


def check_stop() -> None:
    """A safe point: raise Terminated if a SIGTERM was recorded and not raised yet."""
    if _state["pending"]:
        _state["pending"] = False
        raise Terminated()


class DeferredStop:
    """From `start()` to `end()`, SIGTERM only records the stop (main thread only; elsewhere nothing changes)."""

    def __init__(self):
        self._previous = None
        self._on = False

    def start(self) -> "DeferredStop":
        if _in_main_thread() and not _state["stopped"]:
            self._previous = signal.signal(signal.SIGTERM, _record_stop)
            self._on = True
        return self

    def end(self) -> None:
        """Back to the handler from before start(), then raise a stop that came meanwhile and no check took."""
        if not self._on:
            return
        self._on = False
        # After a stop, further SIGTERMs are ignored, as _raise_terminated does.
        signal.signal(signal.SIGTERM, signal.SIG_IGN if _state["stopped"] else self._previous)
        check_stop()
