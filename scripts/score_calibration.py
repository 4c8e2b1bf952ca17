"""How far `kimi-data score`'s gap predicts the drafter's: acceptance gap against nats/token gap, per partition.

Reads each workdir's `probe.json` (`kimi-data probe`: acceptance own − upstream per partition, paired over the same
held-out prompts) and `score.json` (`kimi-data score`: the target's mean log-prob per token of its own completions −
of the upstream answers, per partition), prints one row per (workdir, partition) with both gaps and their 95%
intervals, the Pearson and Spearman correlations over all rows (and per workdir), and plots them (docs/score.md).

    python scripts/score_calibration.py W25 W3 --out docs/score-calibration.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scipy import stats


def points(workdir: Path) -> list[dict]:
    probe = json.loads((workdir / "probe.json").read_text(encoding="utf-8"))
    score = json.loads((workdir / "score.json").read_text(encoding="utf-8"))
    label = Path(str(probe["setup"]["target"])).name
    rows = []
    for config, measured in sorted(probe["configs"].items()):
        scored = score["configs"].get(config) or {}
        gain, gap = measured.get("gain_over_upstream"), scored.get("gap")
        if config == "all" or not gain or not gap:
            continue
        rows.append({"target": label, "config": config, "score_gap": gap["estimate"], "score_low": gap["low"],
                     "score_high": gap["high"], "acc_gap": gain["estimate"], "acc_low": gain["low"],
                     "acc_high": gain["high"], "own": measured["arms"]["own"]["acceptance"],
                     "upstream": measured["arms"]["upstream"]["acceptance"]})
    return rows


def correlations(rows: list[dict]) -> str:
    x = [r["score_gap"] for r in rows]
    y = [r["acc_gap"] for r in rows]
    pearson, spearman = stats.pearsonr(x, y), stats.spearmanr(x, y)
    slope = stats.linregress(x, y)
    return (f"n={len(rows)}  Pearson r={pearson.statistic:+.2f} (p={pearson.pvalue:.3f})  Spearman rho="
            f"{spearman.statistic:+.2f} (p={spearman.pvalue:.3f})  fit: acceptance gap = {slope.slope:+.3f} x nats "
            f"gap {slope.intercept:+.3f}")


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.6))
    for target, marker in zip(sorted({r["target"] for r in rows}), "os^v"):
        mine = [r for r in rows if r["target"] == target]
        ax.errorbar([r["score_gap"] for r in mine], [r["acc_gap"] for r in mine],
                    xerr=[[r["score_gap"] - r["score_low"] for r in mine], [r["score_high"] - r["score_gap"]
                                                                           for r in mine]],
                    yerr=[[r["acc_gap"] - r["acc_low"] for r in mine], [r["acc_high"] - r["acc_gap"] for r in mine]],
                    fmt=marker, capsize=2, alpha=0.8, label=target)
        for r in mine:
            ax.annotate(r["config"], (r["score_gap"], r["acc_gap"]), textcoords="offset points", xytext=(4, 3),
                        fontsize=7)
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel("score gap, own − upstream (nats/token, 95% interval)")
    ax.set_ylabel("probe acceptance gap, own − upstream (95% interval)")
    ax.set_title(correlations(rows).split("  fit")[0], fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workdirs", nargs="+", type=Path, help="workdirs with probe.json and score.json")
    ap.add_argument("--out", type=Path, help="where the plot goes (PNG); none: no plot")
    args = ap.parse_args()
    rows = [r for wd in args.workdirs for r in points(wd)]
    print(f"{'target':<14} {'config':<6} {'score gap [95%]':>24} {'own':>6} {'upstr':>6} {'acceptance gap [95%]':>24}")
    for r in rows:
        print(f"{r['target']:<14} {r['config']:<6} {r['score_gap']:>+7.2f} [{r['score_low']:+.2f}, "
              f"{r['score_high']:+.2f}]  {r['own']:>6.2f} {r['upstream']:>6.2f} {r['acc_gap']:>+7.2f} "
              f"[{r['acc_low']:+.2f}, {r['acc_high']:+.2f}]")
    for target in sorted({r["target"] for r in rows}):
        print(f"{target}: {correlations([r for r in rows if r['target'] == target])}")
    print(f"all: {correlations(rows)}")
    if args.out:
        plot(rows, args.out)
        print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
