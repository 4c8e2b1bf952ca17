"""Probe benchmark: `kimi-data probe` on a demo dataset, both arms (own completions, upstream answers) and 2 seeds,
its wall time, CPU time and peak RSS (target: ≤ 10 minutes on 2 cores). Needs the [probe] extra (speculators).

    python benchmarks/bench_probe.py                                 # K2.5 demo, both arms, 2 seeds
    python benchmarks/bench_probe.py --profile tiny-kimi-k3 --curve  # K3, with the learning curve's arms too

The demo is built first when `--workdir` holds none (not timed). The probe runs in a fresh process started from
this small one, so the peak RSS (ru_maxrss of the children) is the probe's own.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=None, help="a demo workdir (default: a new one in a temp dir)")
    ap.add_argument("--profile", default="tiny-kimi", choices=["tiny-kimi", "tiny-kimi-k3"])
    ap.add_argument("--limit", type=int, default=None, help="the demo's --limit (prompts per config)")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--budget", type=int, default=None, help="loss tokens per drafter (default: probe's)")
    ap.add_argument("--held-out", type=int, default=None)
    ap.add_argument("--curve", action="store_true", help="also the learning curve's ¼ and ½ arms")
    args = ap.parse_args()
    kimi = [sys.executable, "-m", "kimi_eagle_data"]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp) / "demo"
        if not (workdir / "dataset" / "manifest.json").is_file():
            demo = [*kimi, "demo", "--profile", args.profile, "--workdir", str(workdir), "--no-progress"]
            subprocess.run(demo + (["--limit", str(args.limit)] if args.limit else []), check=True,
                           capture_output=True)
        probe = [*kimi, "probe", "--workdir", str(workdir), "--seeds", str(args.seeds), "--json"]
        probe += ([] if args.curve else ["--no-curve"]) + (["--budget", str(args.budget)] if args.budget else [])
        probe += ["--held-out", str(args.held_out)] if args.held_out else []
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        proc = subprocess.run(probe, capture_output=True, text=True)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode:
            print(proc.stdout[-2000:], proc.stderr[-4000:])
            return 1
        report = json.loads(proc.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    arms = report["arms"]
    pooled = report["configs"]["all"]["arms"]
    print(f"| profile | arms × seeds | loss tokens / drafter | wall s | CPU s | peak RSS MB | acceptance (all) |")
    print("|---|---|---:|---:|---:|---:|---|")
    acc = ", ".join(f"{a} {pooled[a]['acceptance']}" for a in arms)
    print(f"| {args.profile} | {len(arms)} × {args.seeds} | {report['setup']['budget_loss_tokens']:,} | {wall:.0f} | "
          f"{cpu:.0f} | {after.ru_maxrss / 1024:.0f} | {acc} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
