"""probe.json, its table (terminal and card) and the learning-curve plot.

Acceptance per partition and arm is pooled: the tokens every verify step of every held-out prompt yielded, over both
seeds, divided by those steps. Its 95% interval is a percentile bootstrap over prompts of that pooled ratio (the
prompts resampled with replacement, each carrying its tokens and steps summed over the seeds; 2,000 resamples,
seeded). The gain over upstream answers is own − upstream, its interval the same bootstrap with both arms' figures of
each resampled prompt taken together (paired: the arms were decoded on the same prompts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kimi_eagle_data.store.workdir import read_json, write_json

BOOTSTRAP = 2000
CONFIDENCE = 0.95
REPORT = "probe.json"
PLOT = "probe-learning-curve.png"
ALL = "all"


def _per_prompt(seeds: dict[int, dict[str, Any]], configs: list[str]) -> dict[str, tuple[int, int]]:
    """prompt id -> (tokens, steps) summed over the seeds."""
    out: dict[str, list[int]] = {}
    for s in seeds.values():
        for c in configs:
            for p in s["prompts_by_config"].get(c, []):
                t = out.setdefault(p["id"], [0, 0])
                t[0] += p["tokens"]
                t[1] += p["steps"]
    return {k: (a, b) for k, (a, b) in out.items()}


def _interval(samples: np.ndarray) -> tuple[float, float]:
    a = (1 - CONFIDENCE) / 2
    lo, hi = np.quantile(samples, [a, 1 - a])
    return round(float(lo), 3), round(float(hi), 3)


def acceptance(prompts: dict[str, tuple[int, int]], ids: list[str], seed: int = 0) -> dict[str, Any]:
    tokens = np.array([prompts[i][0] for i in ids], dtype=float)
    steps = np.array([prompts[i][1] for i in ids], dtype=float)
    if not ids or steps.sum() == 0:
        return {"acceptance": None, "low": None, "high": None, "prompts": len(ids), "steps": 0}
    est = float(tokens.sum() / steps.sum())
    pick = np.random.default_rng(seed).integers(0, len(ids), size=(BOOTSTRAP, len(ids)))
    boots = tokens[pick].sum(1) / np.maximum(steps[pick].sum(1), 1)
    lo, hi = _interval(boots)
    return {"acceptance": round(est, 3), "low": lo, "high": hi, "prompts": len(ids), "steps": int(steps.sum())}


def gain(own: dict[str, tuple[int, int]], up: dict[str, tuple[int, int]], ids: list[str], seed: int = 0
         ) -> dict[str, Any] | None:
    if not ids:
        return None
    ot, os_ = (np.array([own[i][j] for i in ids], dtype=float) for j in (0, 1))
    ut, us = (np.array([up[i][j] for i in ids], dtype=float) for j in (0, 1))
    if os_.sum() == 0 or us.sum() == 0:
        return None
    est = ot.sum() / os_.sum() - ut.sum() / us.sum()
    pick = np.random.default_rng(seed).integers(0, len(ids), size=(BOOTSTRAP, len(ids)))
    boots = ot[pick].sum(1) / np.maximum(os_[pick].sum(1), 1) - ut[pick].sum(1) / np.maximum(us[pick].sum(1), 1)
    lo, hi = _interval(boots)
    return {"estimate": round(float(est), 3), "low": lo, "high": hi}


def gain_key(baseline: str) -> str:
    """The report's key of the gain over `baseline` ("gain_over_upstream", "gain_over_source_history")."""
    return "gain_over_" + baseline.replace(" ", "_")


def build_report(setup: dict[str, Any], held: dict[str, list[str]], results: dict[str, dict[int, dict[str, Any]]],
                 lead: str = "own", baseline: str = "upstream") -> dict[str, Any]:
    """The report of `results` on the held-out prompts `held`; the gain is `lead` − `baseline` (paired)."""
    configs = list(held)
    scopes = {**{c: [c] for c in configs}, ALL: configs}
    arms: dict[str, Any] = {}
    for arm, seeds in results.items():
        first = next(iter(seeds.values()))
        arms[arm] = {"rows": first["rows"], "prompts": first["prompts"],
                     "loss_tokens_available": first["loss_tokens_available"],
                     "seeds": {str(s): {k: v for k, v in r.items() if k != "prompts_by_config"} | {
                         "acceptance": acceptance(_per_prompt({s: r}, configs), [i for c in configs for i in held[c]])
                         ["acceptance"]} for s, r in seeds.items()}}
    per_config: dict[str, Any] = {}
    for scope, cs in scopes.items():
        ids = [i for c in cs for i in held[c]]
        entry: dict[str, Any] = {"held_out": len(ids), "arms": {}}
        for arm, seeds in results.items():
            entry["arms"][arm] = acceptance(_per_prompt(seeds, configs), ids)
        if lead in results and baseline in results:
            entry[gain_key(baseline)] = gain(_per_prompt(results[lead], configs),
                                             _per_prompt(results[baseline], configs), ids)
        per_config[scope] = entry
    curve = [{"share": share, **per_config[ALL]["arms"][name]}
             for share, name in ((0.25, "own 0.25"), (0.5, "own 0.5"), (1.0, "own")) if name in results]
    return {"setup": setup, "interval": f"percentile bootstrap over prompts of the pooled ratio ({BOOTSTRAP} "
            f"resamples, seeded); gain: paired", "confidence": CONFIDENCE, "held_out": held, "arms": arms,
            "configs": per_config, "learning_curve": curve}


def write_report(workdir, report: dict[str, Any]) -> None:
    write_json(workdir.root / REPORT, report)
    if len(report["learning_curve"]) > 1:
        plot_curve(report, workdir.root / PLOT)


def load_report(workdir) -> dict[str, Any] | None:
    path = workdir.root / REPORT
    return read_json(path) if path.exists() else None


def plot_curve(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [p for p in report["learning_curve"] if p["acceptance"] is not None]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    x = [p["share"] for p in pts]
    y = [p["acceptance"] for p in pts]
    ax.errorbar(x, y, yerr=[[a - p["low"] for a, p in zip(y, pts)], [p["high"] - a for a, p in zip(y, pts)]],
                marker="o", capsize=3, label="own completions")
    up = report["configs"][ALL]["arms"].get("upstream")
    if up and up["acceptance"] is not None:
        ax.axhline(up["acceptance"], color="grey", linestyle="--", label="upstream answers (all)")
    ax.set_xlabel("share of the training prompts (equal loss-token budget)")
    ax.set_ylabel("acceptance length")
    ax.set_xticks(x)
    ax.legend(fontsize=8)
    ax.set_title("probe: acceptance over data size", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the table (CLI and card) --------------------------------------------------------------------------

def _acc(a: dict[str, Any] | None) -> str:
    if not a or a.get("acceptance") is None:
        return "–"
    return f"{a['acceptance']:.2f} [{a['low']:.2f}, {a['high']:.2f}]"


def _gain(g: dict[str, Any] | None) -> str:
    return "–" if not g else f"{g['estimate']:+.2f} [{g['low']:+.2f}, {g['high']:+.2f}]"


def table(report: dict[str, Any], lead: str = "own", baseline: str = "upstream") -> tuple[list[str], list[list[str]]]:
    """The per-config table of a report (the main arms; `report["history"]` with lead `own history`, baseline
    `source history`)."""
    arms = list(next(iter(report["configs"].values()))["arms"])
    compared = lead in arms and baseline in arms
    head = ["config", "held-out", *arms] + ([f"gain {lead} − {baseline}"] if compared else [])
    rows = []
    for scope, e in report["configs"].items():
        row = [scope, str(e["held_out"]), *(_acc(e["arms"][a]) for a in arms)]
        if compared:
            row.append(_gain(e.get(gain_key(baseline))))
        rows.append(row)
    return head, rows


def history_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The history arms' table (probe/history.py); None when the probe measured none."""
    from kimi_eagle_data.probe.history import OWN, SOURCE

    history = report.get("history")
    if not history or not history.get("configs"):
        return None
    return table(history, OWN, SOURCE)


def setup_line(report: dict[str, Any]) -> str:
    s, d = report["setup"], report["setup"]["drafter"]
    steps = sorted({r["steps"] for a in report["arms"].values() for r in a["seeds"].values()})
    return (f"Target {Path(str(s['model'])).name}; drafter {d.get('model')} ({d.get('layers')} layer, hidden "
            f"{d.get('hidden_size')}, {d.get('trainable_parameters'):,} trainable parameters, loss {d.get('loss')}), "
            f"trained by {s['trainer']} on {s['device']} for {s['budget_loss_tokens']:,} loss tokens per arm "
            f"({steps[0]}–{steps[-1]} steps of {s['seq_len']} tokens), seeds {', '.join(map(str, s['seeds']))}; "
            f"greedy speculative decoding {measured_by(s)} with {s['drafts_per_step']} drafts per verify step, up to "
            f"{s['max_new_tokens']} new tokens on {s['held_out_per_config']} held-out prompts per config. "
            f"Acceptance: tokens per target verify step, pooled over prompts and seeds; interval "
            f"{100 * report['confidence']:g}%: {report['interval']}.")


def measured_by(setup: dict[str, Any]) -> str:
    """Who decoded: "in-process", or the engine that served each drafter (a report from before engines: in-process)."""
    engine = setup.get("engine")
    if setup.get("measured_by") != "engine" or not engine:
        return "in-process"
    return f"by {engine['name']} {engine['version']} serving each drafter on {engine['device']}"


def markdown_table(report: dict[str, Any]) -> str:
    return _markdown(*table(report))


def _markdown(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def card_section(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """probe.json as the dataset card shows it (None: no probe, the section is left out)."""
    if not report or not report.get("configs"):
        return None
    history = history_table(report)
    return {"table": markdown_table(report), "setup": setup_line(report),
            "history_table": _markdown(*history) if history else None}
