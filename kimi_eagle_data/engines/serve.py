"""`kimi-data serve`: launch SGLang for the profile's model, or the local SGLang-protocol stand-in."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from kimi_eagle_data.profile import ModelProfile


@dataclass
class SGLangLaunch:
    model: str
    tp: int = 8
    host: str = "127.0.0.1"
    port: int = 30000
    context_length: int | None = None
    mem_fraction_static: float | None = None
    metrics: bool = True
    extra: list[str] = field(default_factory=list)

    def command(self, profile: ModelProfile, python: str = sys.executable) -> list[str]:
        cmd = [python, "-m", "sglang.launch_server", "--model-path", self.model, "--tp", str(self.tp),
               *profile.sglang_flags, "--host", self.host, "--port", str(self.port)]
        if self.context_length:
            cmd += ["--context-length", str(self.context_length)]
        if self.mem_fraction_static:
            cmd += ["--mem-fraction-static", str(self.mem_fraction_static)]
        if self.metrics:
            cmd.append("--enable-metrics")
        return cmd + list(self.extra)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def wait_healthy(url: str, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before becoming healthy; see its log above")
        try:
            with urllib.request.urlopen(url + "/health_generate", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(2)
    raise TimeoutError(f"{url} not healthy after {timeout_s:.0f}s")


def run_sglang(launch: SGLangLaunch, profile: ModelProfile, *, health_timeout_s: float, echo=print) -> int:
    cmd = launch.command(profile)
    echo(f"launching: {shlex.join(cmd)}")
    proc = subprocess.Popen(cmd)
    try:
        wait_healthy(launch.url, health_timeout_s, proc)
        echo(f"SGLang is healthy at {launch.url}; generate with: kimi-data build --engine sglang --server {launch.url}")
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        return proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
