"""The probe's GPU check: speculators' own Trainer trains one arm's drafter on a device, the CPU loop the same arm on
CPU, and both drafters' acceptance is measured in-process on the same held-out prompts (docs/probe.md).

Made for a lent GPU machine that has PyTorch and transformers but no registry: it needs from this project only the
tree (kimi_eagle_data/probe's torch-only modules and the tiny target in kimi_eagle_data/assets), a bundle of the arm's
rows and the held-out prompts made here, and speculators' wheel without its dependencies:

    python scripts/gpu/probe_check.py --make-bundle --workdir DEMO     # here: DEMO from `kimi-data demo`
    pip download speculators==0.9.0 --no-deps -d .probe-gpu/wheels     # here
    bash scripts/gpu/probe_check.sh                                    # there (carry .probe-gpu)
    bash scripts/gpu/probe_check.sh --device cpu                       # or here, on CPU

Prints one table (trainer, device, steps, loss tokens, seconds, last loss, acceptance) and writes it as JSON to
--out (default: $OUT/probe_check.json where $OUT is set, else .probe-gpu/probe_check.json).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
STATE = ROOT / ".probe-gpu"
TARGETS = {"tiny-kimi": ROOT / "kimi_eagle_data" / "assets" / "tiny-kimi",
           "tiny-kimi-k3": ROOT / "kimi_eagle_data" / "assets" / "tiny-kimi-k3"}


@dataclass
class Row:
    """An arm's row as the trainers read it: token ids and loss mask (probe/arms.py TrainRow's two arrays)."""

    ids: object
    mask: object

    @property
    def loss_tokens(self) -> int:
        return int(self.mask.sum())


def make_bundle(workdir: Path, out: Path, arm: str, configs: list[str]) -> None:
    """The arm's training rows and the held-out prompts of a workdir's probe split (needs the project installed)."""
    from kimi_eagle_data.cli.options import saved_options
    from kimi_eagle_data.probe.split import HELD_OUT
    from kimi_eagle_data.probe.stage import MAX_NEW_TOKENS, ProbeOptions, _arms, split_rows
    from kimi_eagle_data.runs import open_run
    from kimi_eagle_data.settings import RunSettings

    _, saved = saved_options(workdir)
    ctx = open_run(RunSettings(workdir=str(workdir), progress=False, workers=1, **saved), create=False)
    try:
        split = split_rows(ctx, None, configs, HELD_OUT, 0, MAX_NEW_TOKENS)
        rows = _arms(ctx, ProbeOptions(curve=False, history=False), split.kept, split.firsts)[arm]
        target = next((n for n, p in TARGETS.items() if Path(str(ctx.run["model"])).name == p.name), None)
        if target is None:
            sys.exit(f"probe_check: {workdir}'s model {ctx.run['model']} is none of the tiny targets "
                     f"({', '.join(TARGETS)}); make the bundle from a `kimi-data demo` workdir")
        bundle = {"target": target, "arm": arm, "workdir": str(workdir), "stop": [ctx.tokens.end_of_turn],
                  "max_new_tokens": MAX_NEW_TOKENS,
                  "rows": [[r.ids.tolist(), r.mask.tolist()] for r in rows],
                  "held_out": [[r.id, list(r.prompt_ids)] for rs in split.held.values() for r in rs]}
    finally:
        ctx.lock.release()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(bundle) + "\n", encoding="utf-8")
    print(f"probe_check: {len(bundle['rows'])} rows of arm {arm} and {len(bundle['held_out'])} held-out prompts "
          f"-> {out} ({out.stat().st_size / 2**20:.1f} MiB)")


def import_speculators(wheels: Path) -> str:
    """speculators imported as installed, or else from its wheel (a zip: unpacked into a temporary folder on the
    path); exits in one line naming what is missing."""
    try:
        importlib.import_module("speculators")
        how = "installed"
    except ModuleNotFoundError as e:
        if e.name != "speculators":
            sys.exit(f"probe_check: speculators needs {e.name}, which this Python lacks; carry its wheel too")
        found = sorted(wheels.glob("speculators-0.9.0-*.whl"))
        if not found:
            sys.exit(f"probe_check: speculators is not installed and no speculators-0.9.0 wheel is in {wheels}; "
                     f"make it here: pip download speculators==0.9.0 --no-deps -d {wheels}")
        unpacked = Path(tempfile.mkdtemp(prefix="speculators-wheel-"))
        zipfile.ZipFile(found[0]).extractall(unpacked)
        sys.path.insert(0, str(unpacked))
        how = f"from {found[0].name}"
    for module in ("speculators.models.eagle3", "speculators.train.trainer", "speculators.train.data",
                   "speculators.train.cli", "speculators.losses"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            sys.exit(f"probe_check: {module} needs {e.name}, which this Python lacks; carry its wheel (pip download "
                     f"{e.name} --no-deps) beside speculators'")
    return how


def acceptance(target, aux, model, prompts, drafts: int, max_new: int, stop) -> tuple[int, int]:
    from kimi_eagle_data.probe.decode import Target, speculative
    from kimi_eagle_data.probe.drafter import Eagle3Drafter

    decoder, drafter = Target(target, aux), Eagle3Drafter(model)
    tokens = steps = 0
    for _, ids in prompts:
        d = speculative(decoder, drafter, ids, drafts, max_new, tuple(stop))
        tokens, steps = tokens + d.tokens, steps + d.steps
    return tokens, steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="where speculators' Trainer trains: cuda (default where torch "
                                                    "sees a GPU) or cpu")
    ap.add_argument("--budget", type=int, default=10_000, help="loss tokens per drafter (default 10,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompts", type=int, default=16, help="held-out prompts measured (default 16: every third of "
                                                             "the bundle's, spread over its partitions)")
    ap.add_argument("--bundle", type=Path, default=STATE / "bundle.json")
    ap.add_argument("--wheels", type=Path, default=STATE / "wheels")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--make-bundle", action="store_true", help="write the bundle from --workdir and stop")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--arm", default="own")
    ap.add_argument("configs", nargs="*", help="partitions of the bundle (default: every prepared one)")
    args = ap.parse_args()
    if args.make_bundle:
        if args.workdir is None:
            sys.exit("probe_check: --make-bundle reads a workdir: give --workdir DEMO (from `kimi-data demo`)")
        make_bundle(args.workdir.resolve(), args.bundle, args.arm, args.configs)
        return
    if not args.bundle.is_file():
        sys.exit(f"probe_check: no bundle at {args.bundle}; make it here: python scripts/gpu/probe_check.py "
                 "--make-bundle --workdir DEMO (and carry .probe-gpu)")
    import numpy as np
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else None)
    if device is None:
        sys.exit("probe_check: torch sees no GPU; run with --device cpu to check on CPU")
    how = import_speculators(args.wheels)
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.disable_progress_bar()
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)    # as the probe decodes (probe/stage.py load_target): a tiny model gains nothing

    from kimi_eagle_data.probe.drafter import DrafterSpec, aux_layer_ids, require_speculators
    from kimi_eagle_data.probe.speculators_trainer import train_with_trainer
    from kimi_eagle_data.probe.train import train_cpu_loop

    require_speculators()
    bundle = json.loads(args.bundle.read_text(encoding="utf-8"))
    held = bundle["held_out"]
    prompts = held[::max(1, len(held) // args.prompts)][:args.prompts]
    rows = [Row(np.asarray(i, dtype=np.int64), np.asarray(m, dtype=np.int64)) for i, m in bundle["rows"]]
    target_path = str(TARGETS[bundle["target"]])
    target = AutoModelForCausalLM.from_pretrained(target_path, dtype=torch.float32).eval()
    aux = aux_layer_ids(int(target.config.num_hidden_layers))
    spec = DrafterSpec(target_path, tuple(aux))
    on_device = target if device == "cpu" else \
        AutoModelForCausalLM.from_pretrained(target_path, dtype=torch.float32).to(device).eval()
    print(f"probe_check: torch {torch.__version__}, speculators {how}; device {device}"
          f"{' (' + torch.cuda.get_device_name(0) + ')' if device.startswith('cuda') else ''}; arm {bundle['arm']}: "
          f"{len(rows)} rows; {len(prompts)} held-out prompts; budget {args.budget:,} loss tokens",
          flush=True)
    results = []
    for name, run, dev in (("cpu-loop", lambda: train_cpu_loop(rows, target, spec, budget=args.budget,
                                                                 seed=args.seed), "cpu"),
                           ("speculators Trainer", lambda: train_with_trainer(rows, on_device, spec,
                                                                              budget=args.budget, seed=args.seed,
                                                                              device=device), device)):
        trained = run()
        print(f"probe_check: {name} trained: {trained.steps} steps in {trained.seconds:.0f}s", flush=True)
        t0 = time.perf_counter()
        tokens, steps = acceptance(target, aux, trained.model, prompts, 3, bundle["max_new_tokens"],
                                   bundle["stop"])
        results.append({"trainer": name, "device": dev, "steps": trained.steps, "loss_tokens": trained.loss_tokens,
                        "train_seconds": round(trained.seconds, 1), "last_loss": round(trained.last_loss, 4),
                        "tokens": tokens, "verify_steps": steps, "acceptance": round(tokens / max(1, steps), 4),
                        "decode_seconds": round(time.perf_counter() - t0, 1)})
        print(f"probe_check: {name} done: {results[-1]}", flush=True)
    head = ["trainer", "device", "steps", "loss tokens", "train s", "last loss", "tokens / verify steps", "acceptance"]
    lines = [head] + [[r["trainer"], r["device"], str(r["steps"]), f"{r['loss_tokens']:,}", f"{r['train_seconds']:.1f}",
                       f"{r['last_loss']:.3f}", f"{r['tokens']} / {r['verify_steps']}", f"{r['acceptance']:.3f}"]
                      for r in results]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        print(" | ".join(c.ljust(w) for c, w in zip(line, widths)))
    a, b = results[0]["acceptance"], results[1]["acceptance"]
    print(f"speculators' Trainer against the CPU loop: {b - a:+.3f} ({100 * (b - a) / a:+.1f}%) on the same rows, "
          "batches and held-out prompts")
    out = args.out or (Path(os.environ["OUT"]) / "probe_check.json" if os.environ.get("OUT") else
                       STATE / "probe_check.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": device, "torch": torch.__version__, "speculators": how, "budget": args.budget,
                               "seed": args.seed, "bundle": bundle["workdir"], "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
