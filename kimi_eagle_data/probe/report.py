"""probe.json, its table (terminal and card) and the learning-curve plot.

Acceptance per partition and arm is pooled: the tokens every verify step of every held-out prompt yielded, over every
seed, divided by those steps. Its 95% interval (probe/interval.py) is a t interval on that pooled ratio whose variance
has a prompts part and a training-seeds part; the gain over upstream answers is own − upstream, its interval the same
on the paired difference (the arms were decoded on the same prompts, seed i of each arm trained from seed i). A scope
over fewer held-out prompts, or fewer pooled seed degrees of freedom, than the simulation showed to cover is marked
exploratory.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from kimi_eagle_data.probe.interval import (CONFIDENCE, METHOD, difference_interval, exploratory, parts,
                                            pooled_share, ratio_interval, seed_figures)
from kimi_eagle_data.store.workdir import read_json, write_json
from kimi_eagle_data.probe.history import OWN, SOURCE
from kimi_eagle_data.probe.interval import COVERING_PROMPTS, MIN_SEED_DF

log = logging.getLogger(__name__)

REPORT = "probe.json"
PLOT = "probe-learning-curve.png"
ALL = "all"


def cells(seeds: dict[int, dict[str, Any]], scope: dict[str, list[str]]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(tokens, steps) shaped (prompts, seeds) of an arm's `seeds` on the held-out prompts of `scope` (config ->
    ids), and each prompt's config index (the pooled scope's strata)."""
    order = sorted(seeds)
    found = [{p["id"]: (p["tokens"], p["steps"]) for ps in seeds[s]["prompts_by_config"].values() for p in ps}
             for s in order]
    ids = [(i, n) for n, c in enumerate(scope) for i in scope[c]]
    tokens = np.array([[f[i][0] for f in found] for i, _ in ids], dtype=float).reshape(len(ids), len(order))
    steps = np.array([[f[i][1] for f in found] for i, _ in ids], dtype=float).reshape(len(ids), len(order))
    return tokens, steps, [n for _, n in ids]


def _r(x) -> float:
    return round(float(x), 3)


def acceptance(tokens: np.ndarray, steps: np.ndarray, strata: list[int], seeds: list[int], share, seed_df: int
               ) -> dict[str, Any]:
    """An arm's pooled acceptance over cells (prompts, seeds) with its interval (None below 2 prompts, or when no
    step was taken), each seed's figure and their spread; `share`, `seed_df` the scope's pooled seeds' part."""
    prompts = int(tokens.shape[0])
    if not prompts or steps.sum() == 0:
        return {"acceptance": None, "low": None, "high": None, "prompts": prompts, "steps": 0}
    est, lo, hi, df = ratio_interval(parts(tokens, steps, strata), share, seed_df)
    ok = prompts >= 2
    return {"acceptance": _r(est), "low": _r(lo) if ok else None, "high": _r(hi) if ok else None, "prompts": prompts,
            "steps": int(steps.sum()), "df": round(float(df), 1), "exploratory": exploratory(prompts, seed_df),
            **seed_figures(tokens, steps, seeds)}


def gain(lead: tuple[np.ndarray, np.ndarray], base: tuple[np.ndarray, np.ndarray], strata: list[int], share,
         seed_df: int) -> dict[str, Any] | None:
    """lead − base, each (tokens, steps) on the same cells, with its paired interval; None when either took no
    step."""
    if not lead[0].shape[0] or lead[1].sum() == 0 or base[1].sum() == 0:
        return None
    est, lo, hi, df = difference_interval(parts(*lead, strata), parts(*base, strata), strata, share, seed_df)
    ok = lead[0].shape[0] >= 2
    return {"estimate": _r(est), "low": _r(lo) if ok else None, "high": _r(hi) if ok else None,
            "df": round(float(df), 1), "exploratory": exploratory(lead[0].shape[0], seed_df)}


def gain_key(baseline: str) -> str:
    """The report's key of the gain over `baseline` ("gain_over_upstream", "gain_over_source_history")."""
    return "gain_over_" + baseline.replace(" ", "_")


def build_report(setup: dict[str, Any], held: dict[str, list[str]], results: dict[str, dict[int, dict[str, Any]]],
                 lead: str = "own", baseline: str = "upstream") -> dict[str, Any]:
    """The report of `results` on the held-out prompts `held`; the gain is `lead` − `baseline` (paired)."""
    configs = list(held)
    scopes = {**{c: {c: held[c]} for c in configs}, ALL: held}
    arms: dict[str, Any] = {}
    for arm, seeds in results.items():
        first = next(iter(seeds.values()))
        tokens, steps, _ = cells(seeds, held)
        per_seed = seed_figures(tokens, steps, sorted(seeds))
        arms[arm] = {"rows": first["rows"], "prompts": first["prompts"],
                     "loss_tokens_available": first["loss_tokens_available"],
                     "seeds": {str(s): {k: v for k, v in r.items() if k != "prompts_by_config"} | {
                         "acceptance": per_seed["per_seed"][str(s)]} for s, r in seeds.items()},
                     "seed_spread": per_seed["seed_spread"]}
    per_config: dict[str, Any] = {}
    for scope, ids in scopes.items():
        entry: dict[str, Any] = {"held_out": sum(map(len, ids.values())), "arms": {}}
        arm_cells = {arm: cells(seeds, ids) for arm, seeds in results.items()}
        measured = [parts(*c) for c in arm_cells.values() if c[0].shape[0] and c[1].sum()]
        share, seed_df = pooled_share(measured) if measured else (0.0, 0)
        for arm, (tokens, steps, strata) in arm_cells.items():
            entry["arms"][arm] = acceptance(tokens, steps, strata, sorted(results[arm]), share, seed_df)
        if lead in results and baseline in results:
            entry[gain_key(baseline)] = gain(arm_cells[lead][:2], arm_cells[baseline][:2], arm_cells[lead][2], share,
                                             seed_df)
        entry["seed_df"] = seed_df
        entry["exploratory"] = exploratory(entry["held_out"], seed_df)
        per_config[scope] = entry
    curve = [{"share": share, **per_config[ALL]["arms"][name]}
             for share, name in ((0.25, "own 0.25"), (0.5, "own 0.5"), (1.0, "own")) if name in results]
    return {"setup": setup, "interval": METHOD, "confidence": CONFIDENCE, "held_out": held, "arms": arms,
            "configs": per_config, "learning_curve": curve}


def is_workdir_dataset(workdir, data: Path | None) -> bool:
    return data is None or Path(data).resolve() == Path(workdir.dataset).resolve()


def _stem(data: Path) -> str:
    return Path(data).name.split(".")[0] or "data"


def report_path(workdir, data: Path | None, out: Path | None, compare: Path | None = None) -> Path:
    """Where a probe's report goes: WORKDIR/probe.json (the card reads it) for the workdir's own dataset,
    WORKDIR/probe-NAME.json for other data and WORKDIR/probe-A-vs-B.json for two datasets compared, so that their
    figures never reach this dataset's card. ValueError: `out` is the card's report for other data."""
    card = workdir.root / REPORT
    if is_workdir_dataset(workdir, data) and compare is None:
        return out or card
    if out is not None and out.resolve() == card.resolve():
        what = data if compare is None else f"{data} against {compare}"
        raise ValueError(f"{card} is the report the dataset card reads, and {what} is not this workdir's dataset; "
                         "give --out another file")
    name = _stem(data or workdir.dataset) + (f"-vs-{_stem(compare)}" if compare is not None else "")
    return out or workdir.root / f"probe-{name}.json"


def plot_path(report_file: Path) -> Path:
    return report_file.with_name(report_file.stem + "-learning-curve.png")


def write_report(path: Path, report: dict[str, Any]) -> None:
    write_json(path, report)
    if len(report["learning_curve"]) > 1:
        plot_curve(report, plot_path(path))


def load_report(workdir) -> dict[str, Any] | None:
    """WORKDIR/probe.json for the card; None when there is none, or when it measured other data than the workdir's
    dataset (a report a --data run wrote there before such runs had their own file)."""
    path = workdir.root / REPORT
    if not path.exists():
        return None
    report = read_json(path)
    data = (report.get("setup") or {}).get("data")
    if data and not is_workdir_dataset(workdir, Path(data)):
        log.warning("%s measured %s, not this dataset: the card leaves the probe out (run `kimi-data probe "
                    "--workdir %s` to measure this dataset)", path, data, workdir.root)
        return None
    return report


def plot_curve(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [p for p in report["learning_curve"] if p["acceptance"] is not None]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    x = [p["share"] for p in pts]
    y = [p["acceptance"] for p in pts]
    ax.errorbar(x, y, yerr=[[a - (p["low"] if p["low"] is not None else a) for a, p in zip(y, pts)],
                            [(p["high"] if p["high"] is not None else a) - a for a, p in zip(y, pts)]],
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
    if a.get("low") is None:
        return f"{a['acceptance']:.2f} [–]"
    return f"{a['acceptance']:.2f} [{a['low']:.2f}, {a['high']:.2f}]"


def _gain(g: dict[str, Any] | None) -> str:
    if not g:
        return "–"
    if g.get("low") is None:
        return f"{g['estimate']:+.2f} [–]"
    return f"{g['estimate']:+.2f} [{g['low']:+.2f}, {g['high']:+.2f}]"


EXPLORATORY = "exploratory"


def scope_label(scope: str, entry: dict[str, Any]) -> str:
    """A table's config cell: the scope, marked exploratory below the held-out prompts or seeds that cover."""
    return f"{scope} ({EXPLORATORY})" if entry.get(EXPLORATORY) else scope


def table(report: dict[str, Any], lead: str | None = None, baseline: str | None = None
          ) -> tuple[list[str], list[list[str]]]:
    """The per-config table of a report (the main arms, own − upstream or the two datasets compared;
    `report["history"]` with lead `own history`, baseline `source history`)."""
    lead, baseline = (lead, baseline) if lead else report.get("compared") or ("own", "upstream")
    arms = list(next(iter(report["configs"].values()))["arms"])
    compared = lead in arms and baseline in arms
    head = ["config", "held-out", *arms] + ([f"gain {lead} − {baseline}"] if compared else [])
    rows = []
    for scope, e in report["configs"].items():
        row = [scope_label(scope, e), str(e["held_out"]), *(_acc(e["arms"][a]) for a in arms)]
        if compared:
            row.append(_gain(e.get(gain_key(baseline))))
        rows.append(row)
    return head, rows


def history_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The history arms' table (probe/history.py); None when the probe measured none."""
    history = report.get("history")
    if not history or not history.get("configs"):
        return None
    return table(history, OWN, SOURCE)


def setup_line(report: dict[str, Any]) -> str:
    s = report["setup"]
    if "drafter" not in s:       # saved drafters measured (--drafter): nothing trained here
        return (f"Target {Path(str(s['model'])).name}; saved drafters "
                f"{'; '.join(f'{a}: ' + ', '.join(ds) for a, ds in s['drafters'].items())}; greedy speculative "
                f"decoding {measured_by(s)} with {s['drafts_per_step']} drafts per verify step, up to "
                f"{s['max_new_tokens']} new tokens on {s['held_out_per_config']} held-out prompts per config; interval "
                f"{100 * report['confidence']:g}%: {report['interval']}.{_caveat(report)}")
    d = s["drafter"]
    steps = sorted({r["steps"] for a in report["arms"].values() for r in a["seeds"].values()})
    return (f"Target {Path(str(s['model'])).name}; drafter {d.get('model')} ({d.get('layers')} layer, hidden "
            f"{d.get('hidden_size')}, {d.get('trainable_parameters'):,} trainable parameters, loss {d.get('loss')}), "
            f"trained by {s['trainer']} on {s['device']} for {s['budget_loss_tokens']:,} loss tokens per arm "
            f"({steps[0]}–{steps[-1]} steps of {s['seq_len']} tokens), seeds {', '.join(map(str, s['seeds']))}; "
            f"greedy speculative decoding {measured_by(s)} with {s['drafts_per_step']} drafts per verify step, up to "
            f"{s['max_new_tokens']} new tokens on {s['held_out_per_config']} held-out prompts per config. "
            f"Acceptance: tokens per target verify step, pooled over prompts and seeds; interval "
            f"{100 * report['confidence']:g}%: {report['interval']}.{_caveat(report)}{_data(s)}")


def _caveat(report: dict[str, Any]) -> str:
    if not any(e.get(EXPLORATORY) for e in report["configs"].values()):
        return ""
    return (f" Rows marked {EXPLORATORY} are over fewer than {COVERING_PROMPTS} held-out prompts, or fewer than "
            f"{MIN_SEED_DF + 1} drafters' seeds in all (pooled over the arms, one less per arm), below what these "
            "intervals were shown to cover at: read them as leads, not findings.")


def _data(setup: dict[str, Any]) -> str:
    return f" Data measured: {setup['data_name']}." if setup.get("data_name") else ""


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
