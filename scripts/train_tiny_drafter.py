"""Train the small EAGLE-3 drafter shipped for an embedded tiny model, from that model's demo data.

Runs `kimi-data demo --profile PROFILE` (unless --workdir already holds a finished one), trains speculators' EAGLE-3
model on the demo dataset's rows (kimi_eagle_data/probe/drafter.py and train.py: speculators' model, loss and batch
layout; no EAGLE-3 code of our own), holding out the probe's seeded split (6 first-turn prompts per partition, split
seed 0), saves it with speculators' `save_pretrained` into the profile's `shipped_drafter` directory, loads it back
as speculators loads a drafter, and measures its acceptance on the held-out prompts (greedy speculative decoding
in-process, 3 drafts per verify step, up to 96 new tokens a prompt). Writes provenance.json and README.md beside it.

    python scripts/train_tiny_drafter.py --profile tiny-kimi --workdir /tmp/drafter-k25
    python scripts/train_tiny_drafter.py --profile tiny-kimi-k3 --workdir /tmp/drafter-k3 --budget 40000

Needs the [probe] extra (speculators; docs/probe.md). CPU only; one thread for the target, as the probe.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch

from kimi_eagle_data.probe.decode import Target
from kimi_eagle_data.probe.drafter import SPECULATORS_VERSION, DrafterSpec, Eagle3Drafter, require_speculators
from kimi_eagle_data.probe.drafter import aux_layer_ids
from kimi_eagle_data.probe.drafter import save_drafter
from kimi_eagle_data.probe.drafter import load_drafter
from kimi_eagle_data.probe.split import HELD_OUT, prompt_key
from kimi_eagle_data.probe.stage import (DRAFTS, MAX_NEW_TOKENS, acceptance_per_prompt, load_target, prompts_of,
                                         split_rows)
from kimi_eagle_data.probe.train import SEQ_LEN
from kimi_eagle_data.probe.trainers import CPU_LOOP, train
from kimi_eagle_data.profile import demo_profiles, get_profile
from kimi_eagle_data.runs import demo_settings, open_run

BUDGET = 40_000       # loss tokens: twice the probe's default (the shipped drafter is trained once)
SPLIT_SEED = 0


def readme(profile: str, out: Path, prov: dict) -> str:
    """The drafter's README: what it is, the data, the training and the command, from its provenance."""
    d, a, data = prov["drafter"], prov["acceptance"], prov["data"]
    bullets = [
        f"**Model**: speculators {SPECULATORS_VERSION} `Eagle3DraftModel` ({d['layers']} layer, hidden "
        f"{d['hidden_size']}, {d['trainable_parameters']:,} trainable parameters, auxiliary layers {d['aux_layers']}, "
        f"{d['ttt_steps']} TTT steps, loss {d['loss']}), saved by its own `save_pretrained`: `config.json` holds the "
        f"speculators config (read through speculators' own registered config class; the copy of that class "
        f"`save_pretrained` writes beside it is not shipped), the weights are `model.safetensors` "
        f"({prov['dtype']}). The config names the verifier `{profile}`, the profile, because the embedded model's "
        f"path depends on the install: `kimi_eagle_data.probe.drafter.load_drafter(dir, model_path)` loads it against "
        f"the installed model.",
        f"**Data**: the dataset of `{data['demo']}`: {data['trained_rows']} of its {data['rows']} rows. The other "
        f"{data['excluded_rows']} belong to the probe's held-out prompts ({prov['held_out_per_config']} first-turn "
        f"prompts per partition, split seed {prov['split_seed']}), never trained on; `provenance.json` lists the "
        f"sha256 of every prompt trained on.",
        f"**Training**: `{prov['trainer']}` (speculators' Trainer needs a GPU; on CPU a short loop drives its model, "
        f"loss and batch layout), seed {prov['seed']}, {prov['loss_tokens']:,} loss tokens (budget "
        f"{prov['budget']:,}) in {prov['steps']} steps of {prov['seq_len']} tokens, AdamW lr {prov['learning_rate']}, "
        f"last loss {prov['last_loss']:.3f}, {prov['train_seconds']:.0f} s on a shared 2-core CPU, torch "
        f"{prov['torch']}.",
        f"**Command**: `{prov['command']}`",
        f"**Measured** (the saved drafter loaded back): acceptance length {a['acceptance']:.3f} on {a['prompts']} "
        f"held-out prompts ({a['tokens']:,} tokens in {a['steps']:,} verify steps; greedy, {DRAFTS} drafts per step, "
        f"up to {MAX_NEW_TOKENS} new tokens a prompt); per partition "
        + ", ".join(f"{c} {v:.2f}" for c, v in a["per_config"].items()) + ".",
    ]
    files = [f"`{f.name}`: {f.stat().st_size:,} bytes" for f in sorted(out.iterdir()) if f.name != "README.md"]
    intro = (f"A test asset, like the embedded model it drafts for: {profile}'s text is meaningless, so this drafter "
             f"shows the loop data → drafter → acceptance working, nothing about a real model. `kimi-data demo "
             f"--profile {profile}` reports its acceptance on the data the demo built, with the `[probe]` extra "
             f"installed (docs/probe.md in the kimi-eagle-data repository).")
    fill = functools.partial(textwrap.fill, width=118, break_on_hyphens=False)
    bullet = functools.partial(fill, initial_indent="- ", subsequent_indent="  ")
    return "\n".join([f"# {out.name}: a small EAGLE-3 drafter for {profile}", "", fill(intro), "",
                      *map(bullet, bullets), "", "Files:", "", *map(bullet, files), ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", choices=demo_profiles(), required=True)
    ap.add_argument("--workdir", type=Path, required=True, help="the demo's workdir (made by `kimi-data demo` if it "
                    "has no dataset yet)")
    ap.add_argument("--budget", type=int, default=BUDGET, help="loss tokens to train on")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="where the drafter goes (default: the profile's shipped_drafter)")
    args = ap.parse_args()
    require_speculators()
    profile = get_profile(args.profile)
    out = args.out or Path(profile.shipped_drafter)
    demo = ["kimi-data", "demo", "--profile", args.profile, "--workdir", str(args.workdir), "--no-progress"]
    if not (args.workdir / "dataset").exists():
        subprocess.run([sys.executable, "-m", "kimi_eagle_data", *demo[1:]], check=True)
    ctx = open_run(demo_settings(args.workdir, profile=args.profile, progress=False), create=False,
                   remember_options=False)
    split = split_rows(ctx, None, [], HELD_OUT, SPLIT_SEED, MAX_NEW_TOKENS)
    trained_prompts = {prompt_key(r.prompt.tolist()) for r in split.kept}
    trained_prompts |= {prompt_key(split.firsts[r.conversation].prompt_ids) for r in split.kept
                        if r.conversation in split.firsts}
    target_path = str(ctx.run["model"])
    target = load_target(target_path)
    aux = aux_layer_ids(int(target.config.num_hidden_layers))
    spec = DrafterSpec(target_path, tuple(aux), ttt_steps=DRAFTS)
    trained = train(split.kept, target, spec, budget=args.budget, seed=args.seed, trainer=CPU_LOOP)
    print(f"trained: {trained.steps} steps, {trained.loss_tokens} loss tokens, last loss {trained.last_loss:.3f}, "
          f"{trained.seconds:.0f}s")
    prov = {"profile": args.profile, "command": "python scripts/train_tiny_drafter.py " + shlex.join(sys.argv[1:]),
            "data": {"demo": shlex.join(demo[:4] + ["--workdir", "W"]), "rows": len(split.kept) + split.excluded,
                     "excluded_rows": split.excluded, "trained_rows": len(split.kept)},
            "held_out_per_config": HELD_OUT, "split_seed": SPLIT_SEED, "seed": args.seed, "budget": args.budget,
            "trainer": CPU_LOOP, "seq_len": SEQ_LEN, "learning_rate": 1e-3, "steps": trained.steps,
            "loss_tokens": trained.loss_tokens, "last_loss": round(trained.last_loss, 4),
            "train_seconds": round(trained.seconds, 1), "dtype": "bfloat16", "torch": torch.__version__,
            "drafter": spec.describe(trained.model), "trained_prompt_sha256": sorted(trained_prompts)}
    save_drafter(trained.model, out, args.profile, prov)
    t0 = time.perf_counter()
    shipped = Eagle3Drafter(load_drafter(out, target_path))
    per_prompt = acceptance_per_prompt(Target(target, aux), shipped, prompts_of(split.held), DRAFTS, MAX_NEW_TOKENS,
                                       (ctx.tokens.end_of_turn,))
    pooled = [p for ps in per_prompt.values() for p in ps]
    tokens, steps = sum(p["tokens"] for p in pooled), sum(p["steps"] for p in pooled)
    prov["acceptance"] = {"acceptance": round(tokens / steps, 3), "prompts": len(pooled), "tokens": tokens,
                          "steps": steps, "per_config": {c: round(sum(p["tokens"] for p in ps) /
                                                                  max(1, sum(p["steps"] for p in ps)), 3)
                                                         for c, ps in per_prompt.items()},
                          "seconds": round(time.perf_counter() - t0, 1)}
    save_drafter(trained.model, out, args.profile, prov)
    (out / "README.md").write_text(readme(args.profile, out, prov), encoding="utf-8")
    print(f"acceptance {tokens / steps:.3f} on {len(pooled)} held-out prompts ({steps} verify steps); "
          f"per config {prov['acceptance']['per_config']}; saved to {out}")


if __name__ == "__main__":
    main()
