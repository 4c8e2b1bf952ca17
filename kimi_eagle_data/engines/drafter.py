"""A drafter the engine generates with (speculative decoding), as the engine itself reports it: which drafter, how
much of its drafting the target accepted, and whether the engine keeps the samples the target's own at the run's
temperature.

SGLang reports its launch arguments (`/server_info`: speculative_algorithm, speculative_draft_model_path,
speculative_num_steps, ...) and each request's target verify steps (meta_info.spec_verify_ct, kept per completion).
vLLM 0.32.0 reports neither: that it drafts, and how much was accepted, is on its Prometheus `/metrics` (counters
created only when it runs with a --speculative-config, vllm/v1/spec_decode/metrics.py `SpecDecodingProm`):

    vllm:spec_decode_num_drafts_total{engine="0",model_name="..."}              target verify steps with a draft
    vllm:spec_decode_num_draft_tokens_total{...}                                tokens proposed
    vllm:spec_decode_num_accepted_tokens_total{...}                             tokens the target accepted
    vllm:spec_decode_num_accepted_tokens_per_pos_total{...,position="0".."k-1"} one series per speculative token

A verify step turns its accepted tokens plus one of the target's own into output, so tokens per target step is
1 + accepted / drafts (vLLM's "mean acceptance length", the docstring of `SpecDecodingProm`). The counters are the
server's since it started, over every client: `generate` reads them before and after its run and keeps the
difference. Which drafter model vLLM runs it serves only on its development endpoint (`/server_info`, under
VLLM_SERVER_DEV_MODE=1): read when there, else the drafter is recorded without its model.

Lossless sampling, as the engines' source says (SGLang 0.5.23, vLLM 0.32.0):
- vLLM samples every drafted token by rejection sampling against the target's probabilities after temperature, top-k
  and top-p (vllm/v1/sample/rejection_sampler.py `apply_sampling_constraints`, `rejection_random_sample_kernel`,
  recovered tokens from max(target - draft, 0)); greedy requests accept only the target's argmax. Its benchmarking
  mode `rejection_sample_method: "synthetic"` accepts drafts at fixed rates, whatever the target says. The CPU
  backend registers C++ ports of the same kernels (vllm/platforms/cpu.py); measured on vLLM 0.32.0's CPU backend
  (the real-engine tier, tests/real_engines/test_vllm_eagle3.py, and docs/production.md):
  - EAGLE-3 (`method: eagle3`, the drafters `serve --draft` and the probe serve) keeps greedy outputs: every
    completion of an all-greedy load equal to the same server's without the drafter. It does not keep sampled ones
    (VLLM_CPU_EAGLE3_SAMPLED): on CPU a run that samples is refused with a drafter, a greedy one is not.
  - `draft_model` (a model drafting for itself) changed even greedy outputs (VLLM_CPU_DRAFT_MODEL): refused.
  A vLLM server reports its device and drafter method only on its development /server_info
  (VLLM_SERVER_DEV_MODE=1, which `serve --device cpu` sets).
- SGLang verifies a tree of drafts by sampling from the target's probabilities after temperature, top-k and top-p
  (sglang/srt/speculative/eagle_utils.py `eagle_sample`: `tree_speculative_sampling_target_only`, exact with its
  accept thresholds at their default 1.0) on CUDA and NPU, but commits the target's argmax whatever the temperature
  on CPU and XPU, and on ROCm unless --speculative-use-rejection-sampling (`_verify_uses_greedy`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kimi_eagle_data.records import SpecDecodeCounts, describe_drafter

# The counters of vLLM's SpecDecodingProm, as Prometheus exposes a Counter (name + "_total").
VLLM_COUNTERS = {"drafts": "vllm:spec_decode_num_drafts_total",
                 "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
                 "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total"}
VLLM_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# SGLang platforms whose EAGLE verify commits the target's argmax at any temperature (eagle_utils.py
# `_verify_uses_greedy`; `device` as SGLang's /server_info reports it).
SGLANG_GREEDY_DEVICES = ("cpu", "xpu")
# vLLM rejection methods that do not take each token from the target's distribution (config/speculative.py).
VLLM_LOSSY_METHODS = ("synthetic",)
# vLLM platforms whose drafting was measured to change the target's samples (module doc); the device of its
# development /server_info's device_config.
VLLM_LOSSY_DEVICES = ("cpu",)
# The one drafter method measured to keep greedy outputs there.
VLLM_CPU_GREEDY_EXACT = "eagle3"
# What was measured of each (module doc; the tier's tests re-measure them and fail when a refusal no longer stands).
VLLM_CPU_DRAFT_MODEL = ("tiny-kimi-k3 drafting for itself (draft_model, 2 tokens) changed 4 of 24 greedy completions "
                        "and kept 67 and 47 of 96 samples well-formed, against 96 of 96 without it")
VLLM_CPU_EAGLE3_SAMPLED = ("with the tiny models' shipped EAGLE-3 drafters, 32 greedy requests sent beside 64 sampled "
                           "ones came back equal 1 to 15 times in 32, against 32 of 32 without the drafter; and of "
                           "200 samples at temperature 1, 172 stopped against 88 without it (tiny-kimi-k3: 160 "
                           "against 45)")
# Why SGLang's drafting on CPU does not keep the target's samples (module doc): `serve --draft --device cpu` says it.
SGLANG_CPU_DRAFTING = "SGLang accepts a drafter's tokens on CPU by the target's argmax whatever the temperature"

# Why `serve --draft --engine sglang --device cpu` could not serve even if it were allowed: measured with SGLang 0.5.23
# from the CPU recipe and a tiny-kimi EAGLE-3 drafter (`--speculative-algorithm EAGLE3`).
SGLANG_CPU_DRAFT_START = ("SGLang 0.5.23 on CPU dies at start with any speculative algorithm (AttributeError: "
                          "'_OpNamespace' 'sgl_kernel' object has no attribute 'copy_all_layer_kv_cache_cpu', in "
                          "mem_cache/memory_pool.py _init_kv_copy_and_warmup; the registry's sglang-kernel is a CUDA "
                          "build)")

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_POSITION = re.compile(r'position="([^"]*)"')


@dataclass(frozen=True)
class VLLMMetrics:
    """What a vLLM server's /metrics says of its drafter: None counts when it runs none."""

    counts: SpecDecodeCounts | None
    num_speculative_tokens: int | None     # the per-position series it keeps (its num_speculative_tokens)


def parse_vllm_metrics(text: str) -> VLLMMetrics:
    """vLLM's speculative-decoding counters in a Prometheus text exposition (module doc), summed over labels."""
    sums = dict.fromkeys(VLLM_COUNTERS, 0.0)
    seen, positions = set(), set()
    names = {v: k for k, v in VLLM_COUNTERS.items()}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, labels, value = m.groups()
        if name in names:
            try:
                sums[names[name]] += float(value)
            except ValueError:
                continue
            seen.add(names[name])
        elif name == VLLM_PER_POSITION and labels and (p := _POSITION.search(labels)):
            positions.add(p.group(1))
    if seen != set(VLLM_COUNTERS):
        return VLLMMetrics(None, None)
    return VLLMMetrics(SpecDecodeCounts(*(int(round(sums[k])) for k in VLLM_COUNTERS)), len(positions) or None)


def vllm_speculative_config(metrics: VLLMMetrics, dev_config: Any, device: Any = None) -> dict[str, Any] | None:
    """The drafter a vLLM server runs, for the manifest's server_args: None when /metrics shows none. `dev_config`:
    `vllm_config.speculative_config` from its development /server_info (None when not served); `device`: its
    `device_config`'s device there (where it drafts; None when not said)."""
    if metrics.counts is None:
        return None
    dev = dev_config if isinstance(dev_config, dict) else {}
    steps = dev.get("num_speculative_tokens")
    config = {"method": dev.get("method"), "model": dev.get("model"),
              "num_speculative_tokens": steps if type(steps) is int else metrics.num_speculative_tokens,
              "rejection_sample_method": dev.get("rejection_sample_method"),
              "reported_by": "/metrics and /server_info" if dev else "/metrics"}
    if isinstance(device, str):
        config["device"] = device
    return config


def lossy_drafter(engine: str, server_args: dict[str, Any], temperature: float) -> str | None:
    """Why this engine, with the drafter it reports, would not sample the target's own distribution at
    `temperature` (the run's highest); None when it would (or runs no drafter). Module doc: the engines' source."""
    drafter = describe_drafter(server_args)
    if drafter is None:
        return None
    urls = ", ".join(server_args.get("urls") or []) or "the server"
    if engine == "sglang" and temperature > 0 and server_args.get("device") in SGLANG_GREEDY_DEVICES:
        return (f"{urls} runs drafter {drafter['algorithm']} on device {server_args['device']}, where SGLang accepts "
                f"drafted tokens by the target's argmax whatever the temperature: the samples at temperature "
                f"{temperature:g} would not be the target's; serve it without a drafter, or on CUDA GPUs")
    vllm = server_args.get("speculative_config") or {}
    if engine == "vllm" and vllm.get("device") in VLLM_LOSSY_DEVICES:
        method = vllm.get("method")
        if method != VLLM_CPU_GREEDY_EXACT:
            return (f"{urls} runs drafter method {method or '(not reported)'} on device {vllm['device']}, where vLLM "
                    f"changes the target's outputs ({VLLM_CPU_DRAFT_MODEL}); serve it without a drafter, with an "
                    f"EAGLE-3 drafter for a greedy run, or on GPUs")
        if temperature > 0:
            return (f"{urls} runs an EAGLE-3 drafter on device {vllm['device']}, where vLLM keeps greedy outputs but "
                    f"not samples ({VLLM_CPU_EAGLE3_SAMPLED}): this run samples at temperature {temperature:g}; "
                    "build with --temperature 0 in every partition, or serve it without a drafter, or on GPUs")
    method = vllm.get("rejection_sample_method")
    if engine == "vllm" and method in VLLM_LOSSY_METHODS:
        return (f"{urls} runs its drafter with rejection_sample_method {method!r}, which accepts drafted tokens at "
                f"fixed rates, not by the target's distribution; relaunch it with the default 'standard'")
    return None
