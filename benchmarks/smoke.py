"""Every benchmark at a smoke size: each runs to the end and prints its table. CI runs this so no benchmark can
break unseen; it checks that each ran, never a speed (the figures at these sizes mean nothing).

    python benchmarks/smoke.py            # the CPU benchmarks (about a minute)
    python benchmarks/smoke.py --real     # bench_real_engine against real SGLang on CPU (the real-engine tier)
    python benchmarks/smoke.py --trainer  # bench_probe (speculators: the [probe] extra; the trainer tier)

`synthetic_server.py` is the server bench_client and bench_scheduler start; it runs inside them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# script -> (smoke arguments, a line its output must hold: the start of its table or result line)
CPU = {
    "bench_affinity.py": (["--conversations", "30", "--requests", "60", "--repeat", "1"],
                          "single-turn wall time affinity / least busy"),
    "bench_client.py": (["--requests", "100", "--prompt-len", "100", "--output-len", "100", "--concurrency", "8"],
                        "| kimi-data sglang engine"),
    "bench_dedup.py": (["--rows", "300"], "300 rensa"),
    "bench_emit.py": (["--tokens", "0.01", "--repeat", "1"], "speed-up at 0.01M (medians)"),
    "bench_formats.py": (["--conversations", "40", "--repeat", "1"], "| K3 (tiny-kimi-k3) | validate"),
    "bench_shards.py": (["--limit", "4", "--shards", "2"], "| 2 | dealt (kimi-data) |"),
    "bench_rehearsal.py": (["--conversations", "24", "--bare-limit", "50"], "Dataset.from_generator / emit"),
    "bench_scheduler.py": (["--requests", "200", "--median", "50", "--max-len", "400", "--conversations", "100"],
                           "| conversations continuous"),
    "bench_validate.py": (["--samples", "100", "--repeat", "1"], "numpy Validator"),
}
# Benchmarks that need the EAGLE-3 trainers (the [probe] extra): `--trainer`, in the trainer tier.
TRAINER = {
    "bench_probe.py": (["--limit", "2", "--seeds", "1", "--budget", "1000", "--held-out", "1"],
                       "| profile | arms × seeds |"),
}
REAL = {
    "bench_real_engine.py": (["--launch-cpu", "--configs", "B4", "--limit", "4", "--max-new-tokens", "16"],
                             "ratio kimi-data / bare"),
}
DEADLINE_S = 900


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", action="store_true", help="the benchmarks that need a real engine instead")
    ap.add_argument("--trainer", action="store_true", help="the benchmarks that need the EAGLE-3 trainers instead")
    args = ap.parse_args()
    benches = REAL if args.real else TRAINER if args.trainer else CPU
    rows, failed = [], 0
    for script, (argv, expect) in benches.items():
        t0 = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, str(HERE / script), *argv], capture_output=True, text=True,
                                  timeout=DEADLINE_S)
            out, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = f"{e.stdout or ''}{e.stderr or ''}\ntimed out after {DEADLINE_S} s", -1
        ok = rc == 0 and expect in out
        failed += not ok
        rows.append((script, " ".join(argv), f"{time.monotonic() - t0:.1f}", "ok" if ok else f"FAILED (exit {rc})"))
        if not ok:
            print(f"--- {script} {' '.join(argv)}: exit {rc}, expected a line with {expect!r}; its output:\n{out[-4000:]}")
        else:
            print(out.rstrip())
    print("\n| benchmark | smoke arguments | seconds | result |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
