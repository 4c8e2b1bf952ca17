"""`kimi-data plan`: project the full run from a pilot: measure, do not guess.

From a pilot workdir (e.g. `kimi-data build --limit 200 --workdir pilot`) and target prompt counts per config
(default: each partition's `default_n`), project:

- tokens (prompt + completion) = count x the pilot's mean tokens per sample, with a t-interval on that mean
  (per config; the overall interval combines the configs' variances, Welch-Satterthwaite degrees of freedom);
- expected train rows = count x the pilot's valid rate (Wilson interval per config; overall, the configs'
  Wilson half-widths taken as standard errors and summed);
- disk = projected tokens x the measured bytes per token of the emitted Parquet (column-chunk bytes, so the
  per-file footer of a small pilot does not inflate it);
- GPU-hours = projected completion tokens / throughput x GPUs. The throughput is the pilot's measured
  aggregate output tokens/s (over the time requests were in flight, from the checkpoint's `created_at` and
  latencies) unless `--throughput` gives the deployment's:
  a CPU pilot's speed says nothing about an 8xH200 SGLang server;
- the naive rule-of-thumb estimate, characters / 3.5, side by side with the measured tokens.

The interval covers the sampling uncertainty of the pilot's means only (throughput, prompt mix and server
settings are taken as given).
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from scipy.special import stdtrit

from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.run_checks import config_name_problem
from kimi_eagle_data.reports.stats import (QualityError, open_workdir, read_checkpoint_info, read_columns, read_report,
                    validated_configs)
from kimi_eagle_data.wording import counted
from kimi_eagle_data.store.workdir import Workdir, dataset_shards, read_json

NAIVE_CHARS_PER_TOKEN = 3.5
PLAN_COLUMNS = ["id", "split", "prompt_len", "completion_len", "prompt_chars", "completion_chars"]


# -- statistics -------------------------------------------------------------------------------------

def t_quantile(p: float, df: float) -> float:
    """Student-t p-quantile, exact (scipy's `stdtrit`), for real df > 0: the Welch-Satterthwaite degrees of
    freedom of the overall interval are fractional; a series approximation is too narrow at small df."""
    return float(stdtrit(df, p))


def mean_interval(values: np.ndarray, confidence: float) -> tuple[float, float, float, int]:
    """(mean, half-width of the t-interval, variance of the mean, df). One value: no interval (inf)."""
    v = np.asarray(values, dtype=np.float64)
    n = v.size
    mean = float(v.mean())
    if n < 2:
        return mean, math.inf, math.inf, 0
    var_mean = float(v.var(ddof=1)) / n
    return mean, t_quantile(0.5 + confidence / 2, n - 1) * math.sqrt(var_mean), var_mean, n - 1


def wilson(k: int, n: int, confidence: float) -> tuple[float, float, float]:
    """Proportion k/n with its Wilson score interval."""
    if n == 0:
        return math.nan, 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    hw = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return p, max(0.0, centre - hw), min(1.0, centre + hw)


def _interval(estimate: float, low: float, high: float) -> dict[str, float | None]:
    def r(x):
        return None if x is None or not math.isfinite(x) else round(float(x), 3)
    return {"estimate": r(estimate), "low": r(max(0.0, low)) if math.isfinite(low) else None, "high": r(high)}


def _scale(iv: dict[str, float | None], factor: float) -> dict[str, float | None]:
    return {k: (None if v is None else round(v * factor, 3)) for k, v in iv.items()}


# -- measurements -----------------------------------------------------------------------------------

def bytes_per_token(wd: Workdir, config: str, tokens: int) -> tuple[float | None, str]:
    """Compressed column-chunk bytes of the emitted Parquet (all splits) per token; None when the workdir was
    not emitted (validate writes no token rows)."""
    files = dataset_shards(wd.dataset, config)
    where = f"dataset/data/{config}/*.parquet"
    if not files:
        return None, f"not emitted (run `kimi-data emit --workdir {wd.root}`)"
    total = 0
    for f in files:
        md = pq.ParquetFile(f).metadata
        total += sum(md.row_group(i).column(j).total_compressed_size
                     for i in range(md.num_row_groups) for j in range(md.num_columns))
    return (total / tokens if tokens else None), where


def busy_seconds(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of the intervals [start, end]."""
    order = np.argsort(starts, kind="stable")
    total, cur_start, cur_end = 0.0, None, None
    for a, b in zip(starts[order], ends[order]):
        if cur_end is None or a > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = a, b
        else:
            cur_end = max(cur_end, b)
    if cur_end is not None:
        total += cur_end - cur_start
    return float(total)


def measure_throughput(wd: Workdir, ids: list[str]) -> dict[str, Any] | None:
    """Aggregate output tokens/s over the pilot's generation span, and the per-request decode speed."""
    ckpt = read_checkpoint_info(wd)
    if ckpt is None:
        return None
    idx = ckpt.select(ids)
    if idx.size < 2:
        return None
    created, lat, comp = ckpt.created_at[idx], ckpt.latency_s[idx], ckpt.completion_tokens[idx]
    comp = np.where(np.isnan(comp), 0.0, comp)
    starts = np.where(np.isnan(lat), created, created - lat)
    # Time with at least one request in flight: a pilot resumed across sessions must not count the
    # idle gaps between them.
    span = busy_seconds(starts, created)
    if span <= 0:
        return None
    ok = ~np.isnan(lat) & (lat > 0)
    engine = ckpt.engine or {}
    device, gpus = pilot_hardware(engine)
    return {
        "tokens_per_s": round(float(comp.sum()) / span, 3),
        "output_tokens": int(comp.sum()),
        "span_s": round(span, 3),
        "requests": int(idx.size),
        "per_request_tokens_per_s_median": round(float(np.median(comp[ok] / lat[ok])), 3) if ok.any() else None,
        "engine": engine.get("engine", "?"),
        "engine_version": engine.get("version", "?"),
        "device": device,
        "gpus": gpus,
    }


def pilot_hardware(engine: dict[str, Any]) -> tuple[str | None, int | None]:
    """(device, GPUs) the pilot generated on, from the engine provenance its checkpoint records: the local
    engine's `device` (cpu: 0 GPUs, one accelerator otherwise); one SGLang server's tp_size x dp_size. A server
    on `device` cpu (SGLang runs there too, its tp_size counting CPU workers) used no GPU. GPUs None when the
    record does not tell (a router, several servers, no sizes)."""
    args = engine.get("server_args") or {}
    device = args.get("device") if isinstance(args.get("device"), str) else None
    if device == "cpu":
        return device, 0
    if engine.get("engine") == "local":
        return device, (None if device is None else 0 if device == "cpu" else 1)
    tp, dp = args.get("tp_size"), args.get("dp_size") or 1
    if engine.get("engine") == "sglang" and isinstance(tp, int) and isinstance(dp, int) \
            and len(args.get("urls") or []) == 1 and not args.get("router"):
        return device, tp * dp
    return device, None


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


def collect_plan(workdir: str | Path, counts: dict[str, int] | None = None, *, gpus: int = 8,
                 throughput: float | None = None, confidence: float = 0.95) -> dict[str, Any]:
    """The numbers `kimi-data plan --json` prints (keys documented in cli_quality.PLAN_JSON_HELP)."""
    if not 0 < confidence < 1:
        raise QualityError(f"--confidence {confidence}: use a level between 0 and 1, e.g. 0.95")
    wd = open_workdir(workdir)
    counts = dict(counts or {})
    pilot = validated_configs(wd)
    unknown = [c for c in counts if c not in pilot]
    if unknown:
        raise QualityError(f"--counts {unknown[0]}: the pilot {wd.root} has no validated/{unknown[0]}.parquet "
                           f"(pilot configs: {', '.join(pilot)}); run the pilot for it first")
    targets: dict[str, int] = {}
    for c in pilot:
        n = counts[c] if c in counts else configured_count(wd, c)
        if n > 0:
            targets[c] = n

    level = 0.5 + confidence / 2
    result: dict[str, Any] = {
        "workdir": str(wd.root), "confidence": confidence, "gpus": gpus,
        "interval": "t-interval on the pilot's per-sample mean (overall: configs' variances summed, "
                    "Welch-Satterthwaite df); valid rate: Wilson score (overall: the configs' Wilson "
                    "half-widths as standard errors, summed)",
        "naive_chars_per_token": NAIVE_CHARS_PER_TOKEN, "configs": {}, "skipped": {},
    }
    # The pilot's speed is measured over all its samples, whatever the counts select.
    all_ids = [i for c in pilot for i in read_columns(wd.validated(c), ["id"])["id"].to_pylist()]
    parts: list[dict[str, Any]] = []
    for config, target in targets.items():
        t = read_columns(wd.validated(config), PLAN_COLUMNS)
        n = t.num_rows
        if n == 0:
            result["skipped"][config] = "the pilot generated no sample for it"
            continue
        report = read_report(wd, config)
        prompt = t["prompt_len"].to_numpy().astype(np.float64)
        completion = t["completion_len"].to_numpy().astype(np.float64)
        tokens = prompt + completion
        train = pc.equal(t["split"], "train").to_numpy(zero_copy_only=False).astype(bool)
        p_chars = t["prompt_chars"].to_numpy().astype(np.float64)
        c_chars = t["completion_chars"].to_numpy().astype(np.float64)
        naive = (p_chars + c_chars) / NAIVE_CHARS_PER_TOKEN

        m_tok, hw_tok, var_tok, _ = mean_interval(tokens, confidence)
        m_comp, hw_comp, var_comp, _ = mean_interval(completion, confidence)
        m_prompt, hw_prompt, var_prompt, _ = mean_interval(prompt, confidence)
        m_train_tok, hw_train_tok, var_train_tok, _ = mean_interval(np.where(train, tokens, 0.0), confidence)
        k = int(train.sum())
        p, p_lo, p_hi = wilson(k, n, confidence)
        bpt, bpt_from = bytes_per_token(wd, config, int(tokens.sum()))
        naive_mean = float(naive.mean())

        tok_iv = _interval(target * m_tok, target * (m_tok - hw_tok), target * (m_tok + hw_tok))
        comp_iv = _interval(target * m_comp, target * (m_comp - hw_comp), target * (m_comp + hw_comp))
        entry = {
            "count": target,
            "pilot": {
                "selected": int(report.get("selected", 0)), "generated": n, "valid": k,
                "failed": int(report.get("failed", 0)),
                "mean_tokens": round(m_tok, 3), "sd_tokens": round(float(tokens.std(ddof=1)), 3) if n > 1 else None,
                "mean_prompt_tokens": round(m_prompt, 3), "mean_completion_tokens": round(m_comp, 3),
                "naive_mean_tokens": round(naive_mean, 3),
                "bytes_per_token": None if bpt is None else round(bpt, 4), "bytes_per_token_from": bpt_from,
            },
            "tokens": tok_iv,
            "prompt_tokens": _interval(target * m_prompt, target * (m_prompt - hw_prompt),
                                       target * (m_prompt + hw_prompt)),
            "completion_tokens": comp_iv,
            "valid_rate": _interval(p, p_lo, p_hi),
            "train_rows": _interval(target * p, target * p_lo, target * p_hi),
            "train_tokens": _interval(target * m_train_tok, target * (m_train_tok - hw_train_tok),
                                      target * (m_train_tok + hw_train_tok)),
            "disk_bytes": _scale(tok_iv, bpt) if bpt is not None else dict.fromkeys(("estimate", "low", "high")),
            "naive": {"tokens": round(target * naive_mean, 3),
                      "ratio_to_measured": round(naive_mean / m_tok, 4) if m_tok else None,
                      "prompt_tokens": round(target * float(p_chars.mean()) / NAIVE_CHARS_PER_TOKEN, 3),
                      "completion_tokens": round(target * float(c_chars.mean()) / NAIVE_CHARS_PER_TOKEN, 3)},
        }
        result["configs"][config] = entry
        b = bpt or 0.0
        parts.append({"N": target, "n": n, "m_tok": m_tok, "var_tok": var_tok, "m_comp": m_comp,
                      "var_comp": var_comp, "p": p, "p_lo": p_lo, "p_hi": p_hi, "naive": naive_mean,
                      "m_disk": m_tok * b, "var_disk": var_tok * b * b, "m_prompt": m_prompt, "var_prompt": var_prompt,
                      "m_train_tok": m_train_tok, "var_train_tok": var_train_tok})

    if not parts:
        raise QualityError(f"the pilot {wd.root} has no generated sample in any config; run "
                           f"`kimi-data build --limit 200 --workdir {wd.root}` first")

    # -- throughput and GPU-hours
    measured = measure_throughput(wd, all_ids)
    if throughput is not None:
        tps, source = float(throughput), "given"
    elif measured is not None:
        tps, source = measured["tokens_per_s"], "measured"
    else:
        tps, source = None, "unknown"
    note = _throughput_note(source, measured, gpus)
    result["throughput"] = {"tokens_per_s": tps, "source": source, "measured": measured, "note": note}

    def hours(comp_iv: dict[str, float | None], factor: float) -> dict[str, float | None]:
        if not tps:
            return dict.fromkeys(("estimate", "low", "high"))
        return {k: (None if v is None else round(v / tps / 3600 * factor, 4)) for k, v in comp_iv.items()}

    for entry in result["configs"].values():
        entry["wall_hours"] = hours(entry["completion_tokens"], 1)
        entry["gpu_hours"] = hours(entry["completion_tokens"], gpus)

    # -- overall: sums of the configs, variances combined
    def combined(mean_key: str, var_key: str) -> dict[str, float | None]:
        est = sum(q["N"] * q[mean_key] for q in parts)
        a = [q["N"] ** 2 * q[var_key] for q in parts]
        var = sum(a)
        if not math.isfinite(var):
            return _interval(est, -math.inf, math.inf)
        dfs = [q["n"] - 1 for q in parts]
        denom = sum(ai * ai / d for ai, d in zip(a, dfs) if d > 0 and ai > 0)
        df = (var * var / denom) if denom else math.inf
        hw = t_quantile(level, df) * math.sqrt(var)
        return _interval(est, est - hw, est + hw)

    tok_all = combined("m_tok", "var_tok")
    comp_all = combined("m_comp", "var_comp")
    z = NormalDist().inv_cdf(level)
    rows_est = sum(q["N"] * q["p"] for q in parts)
    # Each config's Wilson interval as a standard error (stays > 0 when a pilot rate is 0 or 1), summed.
    rows_hw = z * math.sqrt(sum((q["N"] * (q["p_hi"] - q["p_lo"]) / (2 * z)) ** 2 for q in parts))
    total_n = sum(q["N"] for q in parts)
    naive_total = sum(q["N"] * q["naive"] for q in parts)
    result["overall"] = {
        "count": total_n,
        "tokens": tok_all,
        "prompt_tokens": combined("m_prompt", "var_prompt"),
        "completion_tokens": comp_all,
        "valid_rate": _interval(rows_est / total_n, (rows_est - rows_hw) / total_n,
                                min(1.0, (rows_est + rows_hw) / total_n)),
        "train_rows": _interval(rows_est, rows_est - rows_hw, min(total_n, rows_est + rows_hw)),
        "train_tokens": combined("m_train_tok", "var_train_tok"),
        "disk_bytes": combined("m_disk", "var_disk"),
        "naive": {"tokens": round(naive_total, 3),
                  "ratio_to_measured": round(naive_total / tok_all["estimate"], 4) if tok_all["estimate"] else None},
        "wall_hours": hours(comp_all, 1),
        "gpu_hours": hours(comp_all, gpus),
    }
    from kimi_eagle_data.score.report import load_report

    result["score"] = load_report(wd)   # where regeneration pays (`kimi-data score`), when it has run
    return result


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
