"""The small EAGLE-3 drafters shipped for the embedded tiny models, and their acceptance on a demo's data.

Each is speculators' `Eagle3DraftModel` (probe/drafter.py), trained by scripts/train_tiny_drafter.py on its model's
demo data and saved by speculators' own `save_pretrained` (config.json with the speculators config, model.safetensors):
the format vLLM and SGLang load a drafter in. A profile names its drafter (`ModelProfile.shipped_drafter`).

The saved config names its verifier by profile name, not by path: the embedded model's path depends on where the
package is installed, so `load_drafter` (probe/drafter.py) points it at the installed model. `provenance.json` beside the weights records
how the drafter was trained (command, data, seed, budget, steps) and the hash of every prompt it was trained on, so a
demo measures it only on prompts it never saw, whatever `--limit` built the demo.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.probe.decode import Target
from kimi_eagle_data.probe.drafter import PROVENANCE, Eagle3Drafter, aux_layer_ids, load_drafter, require_speculators
from kimi_eagle_data.probe.split import HELD_OUT, held_out, prompt_key
from kimi_eagle_data.probe.stage import DRAFTS, acceptance_per_prompt, load_target, prompts_of
from kimi_eagle_data.prompts.prepared_file import read_prepared

log = logging.getLogger(__name__)

DEMO_PROMPTS = 2               # held-out prompts per partition the demo decodes
DEMO_NEW_TOKENS = 48           # per prompt, in the demo


def provenance(drafter_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(drafter_dir) / PROVENANCE).read_text(encoding="utf-8"))


class ShippedDrafterMissing(KimiDataError):
    """The profile names a shipped drafter and its directory is not there (one line)."""


@dataclass
class ShippedAcceptance:
    drafter: str
    prompts: int
    steps: int
    tokens: int
    seconds: float

    @property
    def acceptance(self) -> float:
        return self.tokens / self.steps if self.steps else float("nan")


def shipped_acceptance(ctx, prompts_per_config: int = DEMO_PROMPTS,
                       max_new_tokens: int = DEMO_NEW_TOKENS) -> ShippedAcceptance | None:
    """The profile's shipped drafter decoding the workdir's held-out prompts greedily in-process (probe/decode.py):
    per partition the first `prompts_per_config` of the probe's seeded split (split seed 0) that the drafter was not
    trained on. None when the profile ships no drafter; ShippedDrafterMissing when its directory is not
    there; ProbeSetupError when speculators is missing."""
    drafter_dir = ctx.profile.shipped_drafter
    if not drafter_dir:
        return None
    if not (Path(drafter_dir) / PROVENANCE).is_file():
        raise ShippedDrafterMissing(f"{ctx.profile.name}'s drafter is not at {drafter_dir} (a source checkout before "
                                    f"scripts/train_tiny_drafter.py made it?)")
    t0 = time.perf_counter()
    require_speculators()
    trained = set(provenance(drafter_dir)["trained_prompt_sha256"])
    wd = ctx.workdir
    held = {}
    for config in ctx.configs:
        if wd.prepared(config).exists():
            ranked = held_out(read_prepared(wd, config), HELD_OUT, 0, ctx.max_seq_len - max_new_tokens)
            held[config] = [r for r in ranked if prompt_key(r.prompt_ids) not in trained][:prompts_per_config]
    target_path = str(ctx.run["model"])
    target = load_target(target_path)
    model = load_drafter(drafter_dir, target_path)
    aux = aux_layer_ids(int(target.config.num_hidden_layers))
    per_prompt = acceptance_per_prompt(Target(target, aux), Eagle3Drafter(model), prompts_of(held), DRAFTS,
                                       max_new_tokens, (ctx.tokens.end_of_turn,))
    pooled = [p for ps in per_prompt.values() for p in ps]
    return ShippedAcceptance(str(drafter_dir), len(pooled), sum(p["steps"] for p in pooled),
                             sum(p["tokens"] for p in pooled), time.perf_counter() - t0)
