"""The SGLang-protocol stand-in (tests/helpers/standin_server.py: `kimi-data serve --engine local` with fault
injection) as a test's server, and waiting on events."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from typing import Iterator

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

from tests.helpers.cli import popen_cli

TINY = str(TINY_MODEL_DIR)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


class Server:
    """A `python -m tests.helpers.standin_server ARGS` process (helpers.cli.popen_cli) serving the tiny model."""

    def __init__(self, *args: str, port: int | None = None):
        self.fixed_port = port is not None
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = args
        self.proc = None

    def start(self) -> "Server":
        """Up when it answers /server_info with its own pid: with tests running side by side, a port picked
        free may be taken by another test's server first (this one then exits; it is started again on
        another port, unless the port was asked for)."""
        for _ in range(3):
            self.proc = popen_cli("--model", TINY, "--port", str(self.port), *self.args,
                                  module="tests.helpers.standin_server")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if get_json(self.url + "/server_info").get("pid") == self.proc.pid:
                        return self
                except OSError:
                    pass
                time.sleep(0.2)
            self.kill()
            if self.fixed_port:
                break
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
        raise RuntimeError(f"server on {self.port} did not start")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def served(self) -> int:
        return get_json(self.url + "/server_info")["requests_served"]

    def running(self) -> set[str]:
        """The rids it is answering now (a stopped client's stale ones included)."""
        return set(get_json(self.url + "/server_info")["running_rids"])

    def aborted(self) -> list[str]:
        """The rids /abort_request ended while they ran."""
        return get_json(self.url + "/server_info")["aborted_rids"]


def wait_for(condition, timeout_s: float, what: str, proc=None) -> None:
    """Poll `condition` until it holds; fail after `timeout_s`, or at once when `proc` exited first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except OSError:   # a server not answering yet
            pass
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited ({proc.returncode}) first")
        time.sleep(0.1)
    raise AssertionError(f"{what} after {timeout_s:.0f}s")


@contextmanager
def sglang_router(*worker_urls: str, policy: str = "round_robin") -> Iterator[str]:
    """The real sglang-router (`policy`: round robin unless told) in front of `worker_urls`; its URL once it lists
    every worker (its /health answers before the workers register)."""
    port = free_port()
    router = subprocess.Popen([sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port",
                               str(port), "--worker-urls", *worker_urls, "--policy", policy,
                               # its metrics exporter binds 29000 by default: a second router would die
                               "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: len(get_json(url + "/workers").get("workers", [])) == len(worker_urls), 60,
                 "the router did not register every worker", proc=router)
        yield url
    finally:
        router.kill()
        router.wait()
