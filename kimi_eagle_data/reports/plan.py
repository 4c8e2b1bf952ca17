"""`kimi-data plan`: project the full run from a pilot: measure, do not guess.

From a pilot workdir (e.g. `kimi-data build --limit 200 --workdir pilot`) and target prompt counts per config
(default: the `n` the pilot's prepare recorded, or what the sources held where the pilot read them all without
--limit and they held fewer: the run as configured), project. The unit of sampling is the conversation: each prompt starts
one, a single-turn prompt is a conversation of one turn, and an own_history conversation has as many turns (rows)
as the model's answers and the source carried it (its later turns' prompts grow with the history). Every figure
sums each conversation's turns, and its interval is a Student-t interval over the pilot's conversations (its
rows are not independent draws: the turns of one conversation rise and fall together):

- rows, train rows, tokens (prompt + completion), train tokens = count x the pilot's mean per conversation, with a
  t-interval on that mean (per config; the overall interval combines the configs' variances, Welch-Satterthwaite
  degrees of freedom). A config of single-turn prompts projects its train rows with the Wilson interval on its
  valid rate instead (a t-interval on 0/1 values collapses when the pilot's rate is 0 or 1);
- valid rate = train rows / rows: Wilson for single-turn configs, else the ratio estimate with its delta-method
  t-interval over conversations;
- disk = projected tokens x the measured bytes per token of the emitted Parquet, plus the fixed bytes of its
  column chunks' headers (`disk_cost`: a small pilot's files are mostly headers, which a per-token ratio would
  multiply);
- GPU-hours = projected completion tokens (every turn's) / throughput x GPUs. The throughput is the pilot's
  measured aggregate output tokens/s (over the time requests were in flight, from the checkpoint's `created_at`
  and latencies) unless `--throughput` gives the deployment's: a CPU pilot's speed says nothing about an 8xH200
  SGLang server;
- the naive rule-of-thumb estimate, characters / 3.5, side by side with the measured tokens;
- prefill priced (reports/prefill.py): the pilot's prefill and decode rates, measured from its requests' latencies,
  price GPU-hours with the prompt tokens the pilot's prefix cache served left out, and with every one prefilled.

Only finished conversations are measured: an own_history conversation whose last row names no end reason is
still going on (or its next turn failed) and is counted as `incomplete`, not averaged in. The interval covers the
sampling uncertainty of the pilot's means only (throughput, prompt mix and server settings are taken as given).
"""


from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Callable

import numpy as np
import pyarrow.compute as pc

from kimi_eagle_data.reports.intervals import interval_fields, mean_interval, ratio_interval, welch, wilson
from kimi_eagle_data.reports.pilot import (NAIVE_CHARS_PER_TOKEN, conversation_configs, disk_cost,
                                           measure_throughput, per_conversation, read_plan_columns)
from kimi_eagle_data.reports.prefill import add_drafter, add_prefill_pricing
from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.run_checks import config_name_problem
from kimi_eagle_data.reports.stats import (QualityError, open_workdir, read_checkpoint_info, read_columns, read_report,
                    validated_configs)
from kimi_eagle_data.wording import counted
from kimi_eagle_data.store.workdir import Workdir, read_json


# -- the projection ---------------------------------------------------------------------------------

def parse_counts(values: tuple[str, ...] | list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in values:
        config, sep, n = v.partition("=")
        try:
            if not sep or not config:
                raise ValueError
            if config_name_problem(config):   # it names files: no path pieces
                raise QualityError(f"--counts {v!r}: {config_name_problem(config)}")
            counts[config] = int(n.replace("_", "").replace(",", ""))
            if counts[config] < 0:
                raise ValueError
        except ValueError:
            raise QualityError(f"--counts {v!r}: expected CONFIG=N with N a count >= 0, e.g. B1=10000") from None
    return counts


@dataclass
class ConfigPlan:
    """One config's step of the plan: its projection (`entry`, what `configs.<CFG>` of `plan --json` holds), or why
    it is skipped; the pilot's ids and turns of it (prefill pricing reads them, skipped or not)."""

    config: str
    count: int                                          # prompts (conversations) to project
    turns: tuple[list[str], np.ndarray] | None = None   # the pilot's ids and their turns; None: no sample
    skipped: str | None = None
    entry: dict[str, Any] = field(default_factory=dict)
    # per-conversation quantity -> (projected total, its variance, df): what the overall sums combine
    terms: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    naive_mean: float = 0.0                             # the naive token estimate per conversation


@dataclass
class PlanReport:
    """What `kimi-data plan` projects from a pilot; `to_json()` is what `plan --json` prints."""

    workdir: str
    confidence: float
    gpus: int
    count_notes: dict[str, str]
    configs: list[ConfigPlan]
    throughput: dict[str, Any] = field(default_factory=dict)
    overall: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "workdir": self.workdir, "confidence": self.confidence, "gpus": self.gpus,
            "interval": "t-interval on the pilot's mean per conversation (a single-turn prompt: a conversation of "
                        "one turn; overall: configs' variances summed, Welch-Satterthwaite df); train rows and valid "
                        "rate of single-turn configs: Wilson score (overall: its half-width as a standard error); "
                        "valid rate of conversations: ratio of the means, delta-method t-interval",
            "naive_chars_per_token": NAIVE_CHARS_PER_TOKEN,
            "configs": {c.config: c.entry for c in self.configs if c.skipped is None},
            "skipped": {c.config: c.skipped for c in self.configs if c.skipped is not None},
            "count_notes": self.count_notes, "throughput": self.throughput, "overall": self.overall,
        }


def collect_plan(workdir: str | Path, counts: dict[str, int] | None = None, *, gpus: int = 8,
                 throughput: float | None = None, confidence: float = 0.95,
                 score_of: Callable[[Workdir], dict[str, Any] | None] | None = None) -> dict[str, Any]:
    """The numbers `kimi-data plan --json` prints (keys documented in cli/plan.py, PLAN_JSON_HELP). `score_of`: a
    workdir's score report (`kimi-data score`'s, handed in by the CLI: the plan does not know the score stage), or
    None where it has none. Steps: the counts to project, each config's projection, the throughput, the overall
    sums; then prefill pricing, the drafter and the score report."""
    if not 0 < confidence < 1:
        raise QualityError(f"--confidence {confidence}: use a level between 0 and 1, e.g. 0.95")
    wd = open_workdir(workdir)
    pilot = validated_configs(wd)
    targets, count_notes = plan_targets(wd, pilot, dict(counts or {}))
    continuing = conversation_configs(wd)
    plans = [project_config(wd, config, target, config in continuing, confidence)
             for config, target in targets.items()]
    projected = [c for c in plans if c.skipped is None]
    if not projected:
        raise QualityError(f"the pilot {wd.root} has no generated sample in any config; run "
                           f"`kimi-data build --limit 200 --workdir {wd.root}` first")
    report = PlanReport(str(wd.root), confidence, gpus, count_notes, plans)
    # The pilot's speed is measured over all its samples, whatever the counts select.
    all_ids = [i for c in pilot for i in read_columns(wd.validated(c), ["id"])["id"].to_pylist()]
    report.throughput = throughput_of(wd, all_ids, throughput, gpus)
    hours = _hours_at(report.throughput["tokens_per_s"], gpus)
    for c in projected:
        c.entry["wall_hours"], c.entry["gpu_hours"] = hours(c.entry["completion_tokens"])
    report.overall = overall_of(projected, 0.5 + confidence / 2, hours)
    result = report.to_json()
    # Prefill priced at the pilot's measured rates, with and without its prefix-cache hits (reports/prefill.py).
    ckpt = read_checkpoint_info(wd)
    add_prefill_pricing(result, ckpt, {c.config: c.turns for c in plans if c.turns is not None}, gpus)
    add_drafter(result, ckpt, all_ids)    # a drafter the pilot's engine ran, with the acceptance it measured
    result["score"] = score_of(wd) if score_of else None   # where regeneration pays (`kimi-data score`), when run
    return result


def plan_targets(wd: Workdir, pilot: list[str], counts: dict[str, int]) -> tuple[dict[str, int], dict[str, str]]:
    """The prompts to project per config (--counts, else the run as configured, capped by what its sources held),
    and a note for each config whose sources held fewer than its n."""
    unknown = [c for c in counts if c not in pilot]
    if unknown:
        raise QualityError(f"--counts {unknown[0]}: the pilot {wd.root} has no validated/{unknown[0]}.parquet "
                           f"(pilot configs: {', '.join(pilot)}); run the pilot for it first")
    targets: dict[str, int] = {}
    count_notes: dict[str, str] = {}
    for c in pilot:
        n = counts[c] if c in counts else configured_count(wd, c)
        held = None if c in counts else source_holds(wd, c)
        if held is not None and held < n:    # the run as configured makes no more than its sources hold
            count_notes[c] = (f"its sources held {held:,} prompts, short of n = {n:,}: the run as configured makes "
                              f"{held:,}; pass --counts {c}={n} to project a run on larger sources")
            n = held
        if n > 0:
            targets[c] = n
    return targets, count_notes


def project_config(wd: Workdir, config: str, target: int, continues: bool, confidence: float) -> ConfigPlan:
    """One config projected to `target` conversations from its pilot's finished ones (module doc)."""
    plan = ConfigPlan(config, target)
    t = read_plan_columns(wd, config)
    if t.num_rows == 0:
        plan.skipped = "the pilot generated no sample for it"
        return plan
    conv = per_conversation(t, continues)
    plan.turns = (t["id"].to_pylist(), t["turn"].to_numpy())
    n = conv.rows.size
    if n == 0:
        plan.skipped = (f"none of the pilot's {counted(conv.incomplete, 'conversation')} has ended yet (rerun the "
                        "pilot's build to finish them)")
        return plan
    report = read_report(wd, config)
    level = 0.5 + confidence / 2
    z = NormalDist().inv_cdf(level)

    def total(values: np.ndarray) -> tuple[float, float, float]:
        """(projected total, its variance, df) of a per-conversation quantity."""
        m, _, var_mean, df = mean_interval(values, confidence)
        return target * m, target * target * var_mean, df

    single = bool((conv.rows == 1).all())
    k_train = int(conv.train.sum())
    if single:
        p, p_lo, p_hi = wilson(k_train, n, confidence)
        train_total = (target * p, (target * (p_hi - p_lo) / (2 * z)) ** 2, math.inf)
        train_iv = interval_fields(target * p, target * p_lo, target * p_hi)
    else:
        p, p_lo, p_hi = ratio_interval(conv.train, conv.rows, confidence)
        train_total = total(conv.train)
        train_iv = welch([train_total], level)
    disk, disk_from = disk_cost(wd, config)
    b = disk.per_token if disk else 0.0
    terms = {"rows": total(conv.rows), "tokens": total(conv.tokens), "prompt_tokens": total(conv.prompt),
             "completion_tokens": total(conv.completion), "train_tokens": total(conv.train_tokens),
             "train_rows": train_total}
    terms["disk_bytes"] = (terms["tokens"][0] * b + (disk.fixed if disk else 0.0), terms["tokens"][1] * b * b,
                           terms["tokens"][2])
    naive_mean = float(conv.naive.mean())
    m_tok = float(conv.tokens.mean())
    tok_iv = welch([terms["tokens"]], level)
    plan.entry = {
        "count": target,
        "pilot": {
            "selected": int(report.get("selected", 0)), "generated": int(t.num_rows),
            "valid": int(pc.sum(pc.equal(t["split"], "train")).as_py() or 0),
            "failed": int(report.get("failed", 0)),
            "conversations": n, "incomplete_conversations": conv.incomplete,
            "mean_rows": round(float(conv.rows.mean()), 3),
            "mean_tokens": round(m_tok, 3),
            "sd_tokens": round(float(conv.tokens.std(ddof=1)), 3) if n > 1 else None,
            "mean_prompt_tokens": round(float(conv.prompt.mean()), 3),
            "mean_completion_tokens": round(float(conv.completion.mean()), 3),
            "naive_mean_tokens": round(naive_mean, 3),
            "bytes_per_token": None if disk is None else round(disk.per_token, 4),
            "fixed_bytes": None if disk is None else round(disk.fixed), "bytes_per_token_from": disk_from,
            "turns": conv.shape,
        },
        "rows": welch([terms["rows"]], level),
        "tokens": tok_iv,
        "prompt_tokens": welch([terms["prompt_tokens"]], level),
        "completion_tokens": welch([terms["completion_tokens"]], level),
        "valid_rate": interval_fields(p, p_lo, p_hi),
        "train_rows": train_iv,
        "train_tokens": welch([terms["train_tokens"]], level),
        "disk_bytes": ({k: (None if v is None else round(disk.bytes(v), 3)) for k, v in tok_iv.items()}
                       if disk is not None else dict.fromkeys(("estimate", "low", "high"))),
        "naive": {"tokens": round(target * naive_mean, 3),
                  "ratio_to_measured": round(naive_mean / m_tok, 4) if m_tok else None,
                  "prompt_tokens": round(target * float(conv.prompt_chars.mean()) / NAIVE_CHARS_PER_TOKEN, 3),
                  "completion_tokens": round(target * float(conv.completion_chars.mean()) / NAIVE_CHARS_PER_TOKEN,
                                             3)},
    }
    plan.terms, plan.naive_mean = terms, naive_mean
    return plan


def throughput_of(wd: Workdir, all_ids: list[str], given: float | None, gpus: int) -> dict[str, Any]:
    """The output tokens/s the GPU-hours are priced at: --throughput, else the pilot's measured one."""
    measured = measure_throughput(wd, all_ids)
    if given is not None:
        tps, source = float(given), "given"
    elif measured is not None:
        tps, source = measured["tokens_per_s"], "measured"
    else:
        tps, source = None, "unknown"
    return {"tokens_per_s": tps, "source": source, "measured": measured,
            "note": _throughput_note(source, measured, gpus)}


def _hours_at(tps: float | None, gpus: int):
    """completion tokens' interval -> (wall hours, GPU-hours) at `tps` output tokens/s (None everywhere without)."""
    def hours(comp_iv: dict[str, float | None], factor: float) -> dict[str, float | None]:
        if not tps:
            return dict.fromkeys(("estimate", "low", "high"))
        return {k: (None if v is None else round(v / tps / 3600 * factor, 4)) for k, v in comp_iv.items()}

    return lambda comp_iv: (hours(comp_iv, 1), hours(comp_iv, gpus))


def overall_of(projected: list[ConfigPlan], level: float, hours) -> dict[str, Any]:
    """The run overall: sums of the configs' projections, their variances combined."""
    def combined(key: str) -> dict[str, float | None]:
        return welch([c.terms[key] for c in projected], level)

    tok_all, comp_all, rows_all, train_all = (combined(k) for k in ("tokens", "completion_tokens", "rows",
                                                                   "train_rows"))
    naive_total = sum(c.count * c.naive_mean for c in projected)
    rows_est = rows_all["estimate"]
    wall, gpu = hours(comp_all)
    return {
        "count": sum(c.count for c in projected),
        "rows": rows_all,
        "tokens": tok_all,
        "prompt_tokens": combined("prompt_tokens"),
        "completion_tokens": comp_all,
        # the train rows' interval over the projected rows (the rows' own spread left out: it moves with them)
        "valid_rate": interval_fields(train_all["estimate"] / rows_est, (train_all["low"] or 0.0) / rows_est,
                                min(1.0, (train_all["high"] if train_all["high"] is not None else math.inf)
                                    / rows_est)) if rows_est else dict.fromkeys(("estimate", "low", "high")),
        "train_rows": train_all,
        "train_tokens": combined("train_tokens"),
        "disk_bytes": combined("disk_bytes"),
        "naive": {"tokens": round(naive_total, 3),
                  "ratio_to_measured": round(naive_total / tok_all["estimate"], 4) if tok_all["estimate"] else None},
        "wall_hours": wall,
        "gpu_hours": gpu,
    }


def configured_count(wd: Workdir, config: str) -> int:
    """The prompts the run is configured to make for a config: the `n` the pilot's prepare recorded in
    prepared/<CFG>.json (the partition's, a config file's override or user-defined partition included),
    else the built-in partition's default."""
    path = wd.prepare_report(config)
    n = read_json(path).get("n") if path.is_file() else None
    if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
        return n
    if config in PARTITIONS:
        return PARTITIONS[config].default_n
    raise QualityError(f"{config} is a user-defined partition and {path} records no n; pass --counts {config}=N")


def source_holds(wd: Workdir, config: str) -> int | None:
    """How many prompts the config's sources hold, where the pilot read them all: a prepare without --limit
    that prepared fewer than its n (every candidate taken: the sources ran out, e.g. the bundled --samples);
    None when the pilot stopped short of that (a --limit) or reached n."""
    path = wd.prepare_report(config)
    if not path.is_file():
        return None
    r = read_json(path)
    n, prepared = r.get("n"), r.get("prepared")
    if r.get("limit") is not None or r.get("exhausted") or not isinstance(n, int) or not isinstance(prepared, int):
        return None
    return prepared if prepared < n else None


def measured_on(measured: dict[str, Any]) -> str:
    """Where the pilot's speed was measured, in words: engine, device, GPUs when known."""
    device = measured.get("device")
    gpus = measured.get("gpus")
    where = f"the {measured.get('engine', '?')} engine" + (f" on {device}" if device else "")
    if gpus:
        return f"{where}, {counted(gpus, 'GPU')}"
    return where + (": no GPU" if gpus == 0 else ", GPU count unknown")


def _throughput_note(source: str, measured: dict[str, Any] | None, gpus: int) -> str:
    if source == "given":
        return (f"GPU-hours at the given --throughput, taken as the aggregate output tokens/s of "
                f"{counted(gpus, 'GPU')} serving together")
    if source == "measured":
        on = measured_on(measured) if measured else "an unknown engine"
        return (f"GPU-hours at the pilot's measured speed ({on}) as if {counted(gpus, 'GPU')} (--gpus) delivered "
                "it: a pilot on another machine (a CPU, the local engine, a different server) says nothing about "
                "production speed; pass --throughput with the real servers' measured output tokens/s (e.g. from "
                "SGLang's gen throughput log or a `build --limit 200` on them)")
    return "no throughput: the pilot's checkpoint holds no timing; pass --throughput TOK_PER_S for GPU-hours"
