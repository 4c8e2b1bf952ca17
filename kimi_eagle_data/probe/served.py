"""Acceptance measured by an engine: vLLM serving the target with one trained drafter, as a user's server would.

Each drafter is saved as speculators saves one (`save_pretrained`, probe/drafter.py `save_drafter`) and served with
the target by `vllm serve --speculative-config {"method": "eagle3", "model": DIR, "num_speculative_tokens": k}
--per-request-spec-decode-metrics summary` (engines/serve.py `VLLMLaunch`): on a machine without a GPU, vLLM's CPU
recipe (`kimi-data serve --engine vllm --device cpu`, greedy-exact with EAGLE-3: engines/drafter.py); on a GPU node,
the vLLM of this environment with `tp` GPUs. The held-out prompts go to its token-in endpoint greedily through the
project's vLLM client, and each answer's own `metrics.speculative_decoding` gives its verify steps.

Counted as the in-process decoder counts (probe/decode.py): tokens = the answer's tokens less the prefill's first
(no verify step made it), steps = vLLM's `num_spec_steps`. vLLM's own `mean_acceptance_length` (1 + accepted drafts
/ steps) also counts drafts accepted past the stop token, which the answer drops (1.7% more on the K2.5 demo's
prompts; docs/probe.md).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimi_eagle_data.engines.base import EngineError, GenerationRequest, SamplingParams
from kimi_eagle_data.model_profile import ModelProfile
from kimi_eagle_data.records import Completion
from kimi_eagle_data.engines.serve import VLLMLaunch, cpu_venv, wait_healthy
from kimi_eagle_data.engines.vllm import VLLMEngine

log = logging.getLogger(__name__)

HEALTH_TIMEOUT_S = 1800.0     # a CPU start takes about a minute on 2 idle cores; a GPU node loads K2.5 for minutes


@dataclass(frozen=True)
class ServedTarget:
    """How the probe serves its target: which model, on what, with what context."""

    model: str
    profile: ModelProfile
    max_model_len: int
    log_dir: Path
    device: str = "cpu"           # "cpu": the CPU recipe's venv; "gpu": vLLM installed here
    tp: int = 1
    vocab_size: int | None = None

    def describe(self, version: str) -> dict[str, Any]:
        return {"name": "vllm", "version": version, "device": self.device, "tp": self.tp if self.device == "gpu"
                else None, "counted_by": "each answer's metrics.speculative_decoding.num_spec_steps"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DrafterServer:
    """One vLLM server of the target with `drafter` (a saved EAGLE-3 directory), its output in the log folder."""

    def __init__(self, target: ServedTarget, drafter: Path, drafts: int):
        self.target = target
        venv = cpu_venv("vllm") if target.device == "cpu" else None
        self.launch = VLLMLaunch(model=target.model, tp=target.tp, port=_free_port(),
                                 max_model_len=target.max_model_len, venv=venv, draft=str(drafter), draft_steps=drafts)
        self.log = target.log_dir / f"vllm-{drafter.name}.log"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "DrafterServer":
        self.target.log_dir.mkdir(parents=True, exist_ok=True)
        cmd, env = self.launch.command(self.target.profile), self.launch.env()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.target.log_dir)
        try:
            wait_healthy(self.launch.url, HEALTH_TIMEOUT_S, self.proc, self.launch.health_path)
        except (RuntimeError, TimeoutError) as e:
            self.stop()
            raise EngineError(f"vLLM serving drafter {self.launch.draft} did not start ({e}); its log: {self.log}") \
                from None
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    @property
    def url(self) -> str:
        return self.launch.url


def served_acceptance(target: ServedTarget, drafter: Path, prompts: dict[str, list[tuple[str, list[int]]]],
                      drafts: int, max_new_tokens: int, stop: tuple[int, ...]
                      ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Each held-out prompt (config -> (id, prompt ids)) answered greedily by vLLM serving `drafter`: per partition
    its tokens, verify steps, accepted drafts and output, as probe/stage.py's in-process measure gives them; and the
    engine that measured (name, version, device)."""
    t0 = time.perf_counter()
    with DrafterServer(target, drafter, drafts) as server:
        ready = time.perf_counter() - t0
        engine = VLLMEngine([server.url], concurrency=32, vocab_size=target.vocab_size, health_timeout_s=60)
        try:
            version = engine.info().version
            greedy = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, top_p=1.0, stop_token_ids=stop)
            order = {pid: config for config, pairs in prompts.items() for pid, _ in pairs}
            answers: dict[str, Completion] = {}
            for c in engine.generate(GenerationRequest(pid, list(ids), greedy)
                                     for pairs in prompts.values() for pid, ids in pairs):
                if not isinstance(c, Completion):
                    raise EngineError(f"vLLM serving drafter {drafter} failed held-out prompt {c.id}: {c.reason} "
                                      f"({c.message}); its log: {server.log}")
                answers[c.id] = c
        finally:
            engine.close()
    per_prompt: dict[str, list[dict[str, Any]]] = {config: [] for config in prompts}
    for pid, config in order.items():
        c = answers[pid]
        if c.spec_verify_ct is None:
            raise EngineError(f"vLLM reported no verify steps for {pid} (is it >= 0.32.0, with "
                              f"--per-request-spec-decode-metrics?); its log: {server.log}")
        per_prompt[config].append({"id": pid, "tokens": len(c.output_ids) - 1, "steps": c.spec_verify_ct,
                                   "output": list(c.output_ids)})
    log.info("probe: vLLM with %s ready in %.0fs, answered %d prompts in %.0fs", drafter.name, ready, len(answers),
             time.perf_counter() - t0 - ready)
    return per_prompt, target.describe(version)
