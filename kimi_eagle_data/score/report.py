"""`kimi-data score`: run the scoring over a workdir and report it (score/scoring.py does the scoring).

Per partition: the mean log-prob per token (nats/token, token-weighted: the sum of log-probs over the sum
of tokens) of the upstream answers and of the target's own completions, their top-1 agreement (share of
tokens that are the target's most likely token), and the gap = own − upstream with a 95% percentile
bootstrap interval (the prompts of each set resampled, 2,000 times, seeded). Where both sets have
reasoning, the same for the reasoning (the chat format's `reasoning_length`: the tokens before K2.5's `</think>`,
K3's `<|close|>think<|sep|>`) and the answer (the rest) separately.

Verdict (one word), threshold `REGENERATE_GAP` (score/scoring.py) = 0.5 nats/token (override: `--threshold`):
  either      the whole interval lies within ±0.5 nats/token: the upstream answers are text the
              target would write about as readily as its own, so training on them loses little;
  regenerate  anything else: the gap may exceed 0.5 nats/token (or there are too few samples to show it
              does not), so regenerating is what keeps the drafter on the target's distribution.
Regenerating is the product's default; `either` needs evidence. 0.5 nats/token sits far inside the
7.6 nats/token gap (−11.1 vs −3.5) that cost drafters 57% of their acceptance length in the measurement
behind this command, and is a per-token likelihood ratio of e^0.5 ≈ 1.6. The same limit applies below
zero: upstream answers much *more* likely than the target's samples (e.g. near-greedy text) are not its
distribution either.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kimi_eagle_data.prompts.prepared_file import read_prepared
from kimi_eagle_data.score.scoring import DEFAULT_LIMIT, REGENERATE_GAP, Unrenderable, plan_items, run_scoring, sample
from kimi_eagle_data.engines.factory import run_engine
from kimi_eagle_data.run_context import RunContext
from kimi_eagle_data.store.prompt_view import ConfigPrompts
from kimi_eagle_data.store.scores import ScoreCheckpoint
from kimi_eagle_data.store.workdir import read_json, write_json

BOOTSTRAP = 2000


def score_run(ctx: RunContext, configs: list[str] | None = None, *, limit: int | None = None, seed: int = 0,
              retry_failed: bool = False, threshold: float | None = None) -> dict[str, Any]:
    """`score`: the target's log-prob of the upstream answers vs its own completions for `configs` (default: the
    run's configs that are prepared), resumable in score.sqlite; writes score.json and returns it. `limit`,
    `threshold`: score's defaults when None."""
    names = list(configs or ()) or [c for c in ctx.configs if ctx.workdir.prepared(c).exists()]
    return score_workdir(ctx, names, limit=DEFAULT_LIMIT if limit is None else limit, seed=seed,
                         retry_failed=retry_failed, threshold=REGENERATE_GAP if threshold is None else threshold)


def score_workdir(ctx: RunContext, configs: list[str], *, limit: int = DEFAULT_LIMIT, seed: int = 0,
                  retry_failed: bool = False, threshold: float = REGENERATE_GAP, confidence: float = 0.95,
                  engine=None) -> dict[str, Any]:
    """Score `configs` of the run's workdir (resumable) and write score.json; returns the report."""
    p, wd = ctx, ctx.workdir
    rescore_own = float(p.sampling.temperature) != 1.0
    gen = p.checkpoints()
    ckpt = ScoreCheckpoint(wd.score_checkpoint)
    per_config: dict[str, dict[str, Any]] = {}
    items = []
    try:
        for config in configs:
            records = read_prepared(wd, config)
            view = ConfigPrompts.read(wd, config, gen)     # the selection's prompts, and what answers them
            completions = {c.id: c for c in gen.completions(config) if c.id in view.done}
            picked = sample(records, set(completions), limit, seed,
                            later=lambda ids, view=view: gen.turn_records(ids=ids, origins=view.origins),
                            later_ids=sorted(i for i, t in view.later.items() if t.answered))
            own = {r.id: completions[r.id] for r in picked if r.id in completions}
            per_config[config] = {"records": records, "picked": picked, "own": own}
            for it in plan_items(config, picked, own, p.max_seq_len, rescore_own, p.config_format(config)):
                if isinstance(it, Unrenderable):
                    ckpt.record_failure(it.config, it.key, it.failure())
                else:
                    items.append(it)
        run = None
        if items:
            own_engine = engine is None
            done, failed = set(ckpt.scores()), set(ckpt.failures())
            needs = any((i.id, i.kind) not in done and (retry_failed or (i.id, i.kind) not in failed) for i in items)
            if needs:
                engine = engine or run_engine(ctx)
                try:
                    ckpt.set_meta("engine", {"engine": engine.info().engine, "version": engine.info().version})
                    run = run_scoring(items, engine, ckpt, retry_failed=retry_failed, progress=p.progress)
                finally:
                    if own_engine:
                        engine.close()
        scores, failures = ckpt.scores(), ckpt.failures()
        engine_meta = ckpt.get_meta("engine") or {}
    finally:
        ckpt.close()
        gen.close()

    report: dict[str, Any] = {
        "workdir": str(wd.root), "model": p.run["model"], "engine": engine_meta, "limit": limit, "seed": seed,
        "threshold_nats": threshold, "confidence": confidence, "own_source": "rescored" if rescore_own else "recorded",
        "interval": f"percentile bootstrap ({BOOTSTRAP} resamples of each set's prompts, seeded)", "configs": {},
    }
    for config, c in per_config.items():
        prep = read_json(wd.prepare_report(config)) if wd.prepare_report(config).exists() else {}
        report["configs"][config] = _config_entry(c, prep, scores, failures, rescore_own=rescore_own,
                                                  threshold=threshold, confidence=confidence, seed=seed)
    if run is not None:
        report["run"] = {"scored": run.completed, "failed": run.failed, "skipped_done": run.skipped_done,
                         "skipped_failed": run.skipped_failed, "tokens": run.tokens, "seconds": round(run.seconds, 3)}
    write_json(wd.score_report, report)
    return report


def _config_entry(c: dict[str, Any], prep: dict[str, Any], scores, failures, *, rescore_own: bool, threshold: float,
                  confidence: float, seed: int) -> dict[str, Any]:
    """One config's entry of score.json: the upstream/own comparison over its sampled prompts, per mode and (for
    conversations) per turn. `c`: {"records", "picked", "own"}; `prep`: prepare's report of the config."""
    up, own, n_failed, clipped, rescored = [], [], 0, 0, 0
    by_mode: dict[str, tuple[list, list]] = {}
    by_turn: dict[int, tuple[list, list]] = {}
    for r in c["picked"]:
        groups = (by_mode.setdefault(r.mode, ([], [])), by_turn.setdefault(r.turn, ([], [])))
        s = scores.get((r.id, "upstream"))
        if s is not None:
            up.append(s.sums.as_dict())
            for g in groups:
                g[0].append(s.sums.as_dict())
            clipped += s.clipped
        n_failed += (r.id, "upstream") in failures
        comp = c["own"].get(r.id)
        if comp is None:
            continue
        scaled = r.temperature is not None and float(r.temperature) != 1.0    # rescored (plan_items)
        if rescore_own or scaled or comp.logprob_stats is None:
            rescore = scores.get((r.id, "own"))
            s = rescore.sums.as_dict() if rescore is not None else None
        else:
            s = comp.logprob_stats
        if s is not None and s.get("n"):
            own.append(s)
            for g in groups:
                g[1].append(s)
            rescored += (r.id, "own") in scores
        n_failed += (r.id, "own") in failures
    entry = summarize(up, own, threshold=threshold, confidence=confidence, seed=seed)
    entry.update({"prompts": len(c["records"]), "with_answer": sum(r.answer is not None for r in c["records"]),
                  "without_answer": prep.get("without_answer", sum(r.answer is None for r in c["records"])),
                  "sampled": len(c["picked"]), "own_completions": len(c["own"]), "failed": n_failed,
                  "clipped": clipped, "own_rescored": rescored,
                  # per mode (thinking / instant) of the sampled prompts: the same comparison on each
                  "modes": {m: summarize(u, o, threshold=threshold, confidence=confidence, seed=seed)
                            for m, (u, o) in sorted(by_mode.items())}})
    if len(by_turn) > 1:   # own_history: each turn's upstream answer given the model's own history
        entry["turns"] = {str(k): summarize(u, o, threshold=threshold, confidence=confidence, seed=seed)
                          for k, (u, o) in sorted(by_turn.items())}
    return entry


# -- statistics -------------------------------------------------------------------------------------

def _arrays(rows: list[dict[str, Any]], segment: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = np.array([r["n"] for r in rows], dtype=np.float64)
    s = np.array([r["sum"] for r in rows], dtype=np.float64)
    t = np.array([r["top1"] if r.get("top1") is not None else np.nan for r in rows], dtype=np.float64)
    if segment == "all":
        return n, s, t
    rn = np.array([r["reasoning_n"] for r in rows], dtype=np.float64)
    rs = np.array([r["reasoning_sum"] for r in rows], dtype=np.float64)
    rt = np.array([r["reasoning_top1"] if r.get("reasoning_top1") is not None else np.nan for r in rows])
    return (rn, rs, rt) if segment == "reasoning" else (n - rn, s - rs, t - rt)


def _side(n: np.ndarray, s: np.ndarray, t: np.ndarray) -> dict[str, Any] | None:
    keep = n > 0
    if not keep.any():
        return None
    n, s, t = n[keep], s[keep], t[keep]
    top = None if np.isnan(t).any() else round(float(t.sum() / n.sum()), 4)
    return {"samples": int(keep.sum()), "tokens": int(n.sum()), "nats_per_token": round(float(s.sum() / n.sum()), 4),
            "top1": top}


def _boot(n: np.ndarray, s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, n.size, size=(BOOTSTRAP, n.size))
    return s[idx].sum(axis=1) / np.maximum(n[idx].sum(axis=1), 1)


def _gap(up: tuple, own: tuple, confidence: float, seed: int) -> dict[str, float | None]:
    (un, us, _), (on, os_, _) = up, own
    ku, ko = un > 0, on > 0
    un, us, on, os_ = un[ku], us[ku], on[ko], os_[ko]
    est = float(os_.sum() / on.sum() - us.sum() / un.sum())
    if un.size < 2 or on.size < 2:
        return {"estimate": round(est, 4), "low": None, "high": None}
    rng = np.random.default_rng(seed)
    diff = _boot(on, os_, rng) - _boot(un, us, rng)
    a = (1 - confidence) / 2
    lo, hi = np.quantile(diff, [a, 1 - a])
    return {"estimate": round(est, 4), "low": round(float(lo), 4), "high": round(float(hi), 4)}


def verdict(gap: dict[str, float | None] | None, threshold: float) -> str:
    if gap is None:
        return "n/a"
    if gap["low"] is None or gap["high"] is None:
        return "regenerate"
    return "either" if -threshold < gap["low"] and gap["high"] < threshold else "regenerate"


def summarize(up: list[dict[str, Any]], own: list[dict[str, Any]], *, threshold: float = REGENERATE_GAP,
              confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Both sets' mean nats/token and top-1 agreement, the gap with its interval, the verdict; and per
    segment (reasoning / answer) where both sets have that segment."""
    out: dict[str, Any] = {"upstream": None, "own": None, "gap": None, "verdict": "n/a", "segments": None}
    if up:
        out["upstream"] = _side(*_arrays(up, "all"))
    if own:
        out["own"] = _side(*_arrays(own, "all"))
    if out["upstream"] and out["own"]:
        out["gap"] = _gap(_arrays(up, "all"), _arrays(own, "all"), confidence, seed)
    out["verdict"] = verdict(out["gap"], threshold)
    if up and own:
        segs = {}
        for seg in ("reasoning", "answer"):
            a, b = _arrays(up, seg), _arrays(own, seg)
            sa, sb = _side(*a), _side(*b)
            if sa is None or sb is None:
                segs = {}
                break
            segs[seg] = {"upstream": sa, "own": sb, "gap": _gap(a, b, confidence, seed)}
        out["segments"] = segs or None
    return out


# -- the table (score, plan, card share it) --------------------------------------------------------------

def _f(x: float | None, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def gap_text(g: dict[str, float | None] | None) -> str:
    if not g:
        return "–"
    if g["low"] is None:
        return f"{g['estimate']:+.2f}"
    return f"{g['estimate']:+.2f} [{g['low']:+.2f}, {g['high']:+.2f}]"


def table_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """One row per config (and one per segment below it): the strings the CLI, plan and card print."""
    rows = []
    for config, c in report["configs"].items():
        up, own = c["upstream"] or {}, c["own"] or {}
        rows.append({"config": config, "segment": "all", "sampled": str(c["sampled"]),
                     "no_answer": str(c["without_answer"]),
                     "upstream": _f(up.get("nats_per_token")), "own": _f(own.get("nats_per_token")),
                     "gap": gap_text(c["gap"]), "top1_upstream": _pct(up.get("top1")), "top1_own": _pct(own.get("top1")),
                     "n": f"{up.get('samples', 0)}/{own.get('samples', 0)}", "verdict": c["verdict"]})
        segments = c.get("segments") or {}
        modes = c.get("modes") or {}
        for mode, m in modes.items() if len(modes) > 1 else ():    # one mode: the config's row says it all
            mu, mo = m["upstream"] or {}, m["own"] or {}
            rows.append({"config": "", "segment": f"{mode} mode", "sampled": "", "no_answer": "",
                         "upstream": _f(mu.get("nats_per_token")), "own": _f(mo.get("nats_per_token")),
                         "gap": gap_text(m["gap"]), "top1_upstream": _pct(mu.get("top1")),
                         "top1_own": _pct(mo.get("top1")), "n": f"{mu.get('samples', 0)}/{mo.get('samples', 0)}",
                         "verdict": m["verdict"]})
        for seg, s in ((k, segments[k]) for k in ("reasoning", "answer") if k in segments):
            rows.append({"config": "", "segment": seg, "sampled": "", "no_answer": "",
                         "upstream": _f(s["upstream"]["nats_per_token"]), "own": _f(s["own"]["nats_per_token"]),
                         "gap": gap_text(s["gap"]), "top1_upstream": _pct(s["upstream"]["top1"]),
                         "top1_own": _pct(s["own"]["top1"]), "n": "", "verdict": ""})
    return rows


COLUMNS = (("config", "config"), ("segment", "segment"), ("sampled", "sampled"), ("no_answer", "no answer"),
           ("upstream", "upstream nats/tok"), ("own", "own nats/tok"), ("gap", "gap own−upstream [95%]"),
           ("top1_upstream", "top-1 upstream"), ("top1_own", "top-1 own"), ("n", "n up/own"),
           ("verdict", "verdict"))


def card_section(score: dict[str, Any] | None) -> dict[str, Any] | None:
    """score.json as the dataset card shows it (cards/card.py; None: no score, the section is left out)."""
    if not score or not score.get("configs"):
        return None
    return {"table": markdown_table(score), "note": threshold_note(score, see_readme=False), "limit": score["limit"],
            "engine": score.get("engine") or {}}


def load_report(workdir) -> dict[str, Any] | None:
    """score.json of a workdir, or None when `kimi-data score` has not run there."""
    path = workdir.score_report
    return read_json(path) if path.exists() else None


def markdown_table(report: dict[str, Any]) -> str:
    lines = ["| " + " | ".join(h for _, h in COLUMNS) + " |",
             "|" + "|".join("---" if k in ("config", "segment", "verdict", "gap") else "---:" for k, _ in COLUMNS) + "|"]
    for r in table_rows(report):
        lines.append("| " + " | ".join(r[k] for k, _ in COLUMNS) + " |")
    return "\n".join(lines)


def probe_agreement(score: dict[str, Any], probe: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """Per config that both measured: the score's verdict beside what the probe measured of the same choice (its
    gain own − upstream, drafters trained on either set: probe.json's `configs`), whether they agree, and why they
    may not. None without a probe report.

    They answer different questions: the score is a distance (how likely the target finds the upstream answers),
    the probe a consequence (how much a small drafter trained on them accepts). A wide gap can cost a drafter little
    where the upstream text is short or formulaic, and a partition's probe interval over a few prompts is
    exploratory (probe/interval.py): where they part, the probe is the measurement of acceptance, the score the
    cheaper lead."""
    if not probe or not probe.get("configs"):
        return None
    out: dict[str, dict[str, Any]] = {}
    for config, c in score["configs"].items():
        gain = ((probe["configs"].get(config) or {}).get("gain_over_upstream"))
        if not gain or c["verdict"] == "n/a":
            continue
        measured = "gain" if gain["low"] > 0 else "loss" if gain["high"] < 0 else "no difference shown"
        agrees = (c["verdict"] == "regenerate") == (measured == "gain")
        why = None
        if not agrees:
            why = {("regenerate", "no difference shown"): "the drafters trained on either set accepted alike: the "
                   "gap in likelihood did not cost acceptance here",
                   ("regenerate", "loss"): "drafters trained on the upstream answers accepted more",
                   ("either", "gain"): "drafters trained on the own completions accepted more than the score's "
                   "small gap predicts"}[(c["verdict"], measured)]
            if gain.get("exploratory"):
                why += " (the probe's interval here is exploratory: too few prompts or seeds)"
        out[config] = {"verdict": c["verdict"], "probe_gain": gain, "probe": measured, "agrees": agrees, "why": why}
    return out


def agreement_lines(agreement: dict[str, dict[str, Any]]) -> list[str]:
    """One line per config where the score and the probe disagree, then how many agree."""
    lines = [f"{config}: score says {a['verdict']}, the probe measured {a['probe']} "
             f"({gap_text(a['probe_gain'])} tokens per verify step): {a['why']}"
             for config, a in agreement.items() if not a["agrees"]]
    agreeing = [c for c, a in agreement.items() if a["agrees"]]
    if agreeing:
        lines.append(f"the probe agrees with the score on {', '.join(agreeing)}")
    return lines


def threshold_note(report: dict[str, Any], *, see_readme: bool = True) -> str:
    """The table's legend. `see_readme=False` for the dataset card: on the Hub, "README" is the card itself."""
    th = report["threshold_nats"]
    readme = ' (see README, "Where regeneration pays")' if see_readme else ""
    return (f"nats/token: the target's mean log-prob per token (higher is likelier). gap = own − upstream; "
            f"verdict `either` when the whole {100 * report['confidence']:g}% interval lies within ±{th:g} nats/token, "
            f"else `regenerate`{readme}. One target, one scale: the numbers compare sets under this model only.")
