"""`kimi-data stats`, `plan` and `inspect`: the data-quality workbench (registered at the end of cli/main.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson

from kimi_eagle_data.cli.common import READS_ONLY, REWRITES, friendly_errors, out
from kimi_eagle_data.wording import counted

from kimi_eagle_data.run_checks import click_config_names

STATS_JSON_HELP = """\b
--json prints one object (stable keys):
  workdir, split, short_threshold (300),
  configs: {CONFIG: S}, overall: S, plots: {CONFIG: png path}
S = counts {selected, rejected_at_prepare, prepared, later_turns, generated,
      failed, pending, valid, rejected} (from validated/<CONFIG>.json),
    rows (samples the numbers below cover),
    lengths {prompt|completion|reasoning: {min, p10, median, mean,
      p90, p99, max}} (numpy linear percentiles; null when no rows),
    short_share (completion < 300 tokens), truncated_share
      (finish_reason length), finish_reasons {reason: n},
    tool_calls {rows (with >= 1 call), rate, calls, args_valid_rows,
      args_valid_rate (rows with calls not rejected for
      args_not_json_object)},
    cache {requests, requests_with_hit, prompt_tokens, cached_tokens,
      hit_share (cached / prompt tokens), by_turn {"1"..: {the same
      but by_turn}}} or null when the engine reported no cached_tokens,
    tokens {prompt, completion, total, train},
    rejection_reasons {code: n},
    modes {thinking|instant: {rows, train, valid_share, completion_median,
      reasoning_median, tokens}} (the modes present),
    conversations: null when every row is a single turn, else (policy
      own_history; overall: the configs with conversations)
      {conversations, rows (their turns), later_turns,
      turns_per_conversation {mean, max, histogram {"1".."max": n}},
      end_reasons {reason: n}} (over every split), by_turn {"1"..:
      {rows, prompt {mean, p50}, completion {mean, p50}}} (the split's rows)
draft_vocab: null before emit, else {top_k (32000), from (the dataset's
  token_freq/), configs: {CONFIG: V or null}, overall: V}
V = loss_tokens, distinct_ids (train split, loss_mask 1), ids_to_cover
    {0.9, 0.95, 0.99, 0.999: ids or null}, top_k, top_k_share
stale_dataset: null, or the line saying dataset/ was made from an
  earlier selection than the one prepared now (a pilot's)
Shares are fractions in [0, 1] (null when there are no rows)."""

PLAN_JSON_HELP = """\b
--json prints one object (stable keys):
  workdir, confidence, gpus, interval (the method, in words),
  naive_chars_per_token (3.5), skipped {CONFIG: why},
  count_notes {CONFIG: why its count is what its sources held, not n},
  throughput {tokens_per_s, source (given|measured|unknown),
    measured {tokens_per_s, output_tokens, span_s, requests,
      per_request_tokens_per_s_median, engine, engine_version,
      device (e.g. cpu) | null, gpus (what ran the pilot; 0: none) | null} | null,
    note},
  configs: {CONFIG: P + pilot {selected, generated (rows), valid, failed,
    conversations (finished: measured), incomplete_conversations,
    mean_rows, mean_tokens, sd_tokens, mean_prompt_tokens,
    mean_completion_tokens, naive_mean_tokens (means per conversation:
    a single-turn prompt is a conversation of one turn),
    bytes_per_token (per token beyond fixed_bytes: the column chunks' headers),
    fixed_bytes, bytes_per_token_from,
    turns (own_history; else null) {conversations, rows,
      turns_per_conversation {mean, max, histogram}, end_reasons,
      by_turn {TURN: {rows, prompt {mean, p50}, completion {mean, p50}}}}}},
  overall: P
P = count (prompts to generate: conversations), and for each of rows (every
    turn), tokens, prompt_tokens, completion_tokens, valid_rate, train_rows,
    train_tokens, disk_bytes, wall_hours, gpu_hours: {estimate, low, high};
    naive {tokens, ratio_to_measured[, prompt_tokens, completion_tokens]};
    cache: the pilot's prefix-cache hits (configs: as stats' cache, by_turn
      included; overall {hit_share} weighted by projected prompt tokens) or
      null; gpu_hours_prefill {with_cache, without_cache: {estimate, low,
      high}} at the measured rates (null without them)
drafter: null (the pilot's engine ran none), or {algorithm, model, num_steps,
  num_draft_tokens, measured_by, requests, verify_steps, output_tokens,
  tokens_per_verify_step (measured: SGLang's spec_verify_ct per request; vLLM:
  1 + accepted / drafts of its /metrics counters over the generate runs, with
  accepted_draft_tokens, draft_tokens; requests, output_tokens null)}; with it
  each P has target_steps {estimate, low, high} (completion tokens / that rate)
prefill: null, or the pilot's rates {method, requests,
  prefill_share_of_time, prefill_tokens_per_s (null: the latencies show
  no prefill cost, priced at nothing), decode_tokens_per_s,
  prefilled_tokens, output_tokens, speed_factor (--throughput / measured)}
score: WORKDIR/score.json as `kimi-data score --json` prints it, or null"""

INSPECT_JSON_HELP = """\b
--json prints one object: id, config, split, picked (how it was chosen),
  source, source_id, finish_reason, mode (thinking | instant, read from the
  prompt's end), length, prompt_len, completion_len,
  reasoning_len, num_tool_calls, loss_boundary (first loss-mask 1),
  tokenizer, profile, where, warnings [str],
  issues [{code, description, detail}],
  conversation_id, turn, end_reason (the row's columns),
  conversation: null for a single-turn row, else (policy own_history)
    {id, turns [{turn, id, split, prompt_len, completion_len, end_reason,
    this (the inspected one)}] (turn order), inspect (the command)},
  segments [{index, kind, label, start, end (exclusive), loss (0|1),
    ids, text, n_tokens}]
kind: prefix, system, tools, user, assistant, tool_result,
  generation_prompt, reasoning, answer, tool_section, tool_call, text
  (stray text in/after the tool-call section; under K3 also text between
  elements, or what follows where the grammar stops reading), end.
The segments' ids concatenated are the row's input_ids."""






def _print_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


# -- formatting ---------------------------------------------------------------------------------

def _n(x: float | int | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:,.{digits}f}"
    return f"{int(x):,}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _si(x: float | None, unit: str = "") -> str:
    if x is None:
        return "–"
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= limit:
            return f"{x / limit:.2f}{suffix}{unit}"
    return f"{x:.0f}{unit}" if abs(x) >= 10 or x == 0 else f"{x:.2f}{unit}"


def _range(iv: dict[str, float | None], fmt=_si, sep: str = "\n") -> str:
    if iv["low"] is None or iv["high"] is None:
        return f"{fmt(iv['estimate'])}"
    return f"{fmt(iv['estimate'])}{sep}[{fmt(iv['low'])}–{fmt(iv['high'])}]"


# -- stats --------------------------------------------------------------------------------------

@click.command(epilog=STATS_JSON_HELP)
@click.argument("configs", nargs=-1, metavar="[CONFIG]...", callback=click_config_names)
@click.option("--workdir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="A workdir after validate (build, demo).")
@click.option("--split", type=click.Choice(["all", "train", "rejected"]), default="all", show_default=True,
              help="Rows the distributions cover (counts per stage always come from the reports).")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write lengths_<CONFIG>.png (default: WORKDIR/stats).")
@click.option("--no-plots", is_flag=True, help="Do not write the histograms.")
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON (keys below) instead of tables.")
@friendly_errors(interrupted=REWRITES)
def stats(configs, workdir: Path, split: str, plots_dir: Path | None, no_plots: bool, as_json: bool):
    """Length distributions, finish reasons, tool calls, cache hits and token totals per config.

    Lengths are reported, never judged: a 92-token answer asking for a missing URL is a valid sample.
    Reads only the light columns of WORKDIR/validated/<CONFIG>.parquet (never input_ids), the
    validate reports and the checkpoint's engine figures.

    \b
    Example:
      kimi-data stats --workdir demo-work
      kimi-data stats B1 B4 --workdir run1 --json | jq '.overall.lengths.completion'
    """
    from kimi_eagle_data.emit.plots import plot_length_histograms
    from kimi_eagle_data.reports.stats import NothingValidatedYet, collect_stats, open_workdir, validated_configs

    try:
        result = collect_stats(workdir, configs, split=split)
    except NothingValidatedYet as so_far:     # a first generate under way: what it has committed is the answer
        _print_progress(so_far, as_json=as_json)
        return
    plots: dict[str, str] = {}
    if not no_plots:
        wd = open_workdir(workdir)
        target = (plots_dir or wd.root / "stats").resolve()
        names = validated_configs(wd, configs)
        written = plot_length_histograms(wd, names, target, prefix=str(target))
        plots = {c: p for c, p in zip(names, written.values())}
    result["plots"] = plots
    if as_json:
        _print_json(result)
        return
    _print_stats(result)


def _print_progress(so_far, *, as_json: bool = False) -> None:
    """The generation progress of a workdir with nothing validated yet (reports.stats.NothingValidatedYet): the
    accounting table generate prints, read from the checkpoints as they are committed."""
    from rich.table import Table

    from kimi_eagle_data.store.progress import PROGRESS_KEYS

    rows = dict(so_far.progress)
    overall = {k: sum(r[k] for r in rows.values()) for k in PROGRESS_KEYS}
    if as_json:
        _print_json({"workdir": str(so_far.workdir.root), "validated": False, "writer": so_far.writer,
                     "configs": rows, "overall": overall})
        return
    later = overall["later_turns"] > 0
    keys = [k for k in PROGRESS_KEYS if later or k != "later_turns"]
    t = Table(title=f"generation so far: {so_far.workdir.root} (from the checkpoint; nothing validated yet)")
    t.add_column("config")
    for k in keys:
        t.add_column(k.replace("_", " "), justify="right")
    for name, row in [*rows.items(), ("all", overall)]:
        t.add_row(name, *(_n(row[k]) for k in keys), style="bold" if name == "all" else None)
    out.print(t)
    out.print(f"{'writing now: ' + so_far.writer if so_far.writer else 'no command is writing the workdir now'}; "
              "lengths, finish reasons and rejection reasons come once it is validated: `kimi-data validate "
              f"--workdir {so_far.workdir.root}` (build and emit validate too)", highlight=False, soft_wrap=True)


def _print_stats(r: dict[str, Any]) -> None:
    from rich.table import Table

    rows = list(r["configs"].items()) + [("all", r["overall"])]
    # Conversations' later turns are counted beside the selected rows (selected + later turns = ...).
    later = r["overall"]["counts"].get("later_turns", 0) > 0
    keys = ("selected", *(("later_turns",) if later else ()), "rejected_at_prepare", "generated", "failed",
            "pending", "valid", "rejected")
    t = Table(title=f"stats: {r['workdir']}" + (f" ({r['split']} rows)" if r["split"] != "all" else ""))
    for col in ("config", "selected", *(("later turns",) if later else ()), "prep-rej", "generated", "failed",
                "pending", "train", "rejected", "tokens", "train tokens", "cache hit"):
        t.add_column(col, justify="left" if col == "config" else "right")
    for name, s in rows:
        c = s["counts"]
        t.add_row(name, *(_n(c[k]) for k in keys),
                  _n(s["tokens"]["total"]), _n(s["tokens"]["train"]),
                  _pct(s["cache"]["hit_share"]) if s["cache"] else "–", style="bold" if name == "all" else None)
    out.print(t)

    q = Table(title="completions" + (f" ({r['split']} rows)" if r["split"] != "all" else ""))
    for col in ("config", "rows", f"short <{r['short_threshold']}", "truncated", "tool-call rate", "args valid",
                "finish reasons", "rejection reasons"):
        q.add_column(col, justify="left" if col in ("config", "finish reasons", "rejection reasons") else "right",
                     overflow="fold")
    for name, s in rows:
        tc = s["tool_calls"]
        reasons = sorted(s["rejection_reasons"].items(), key=lambda kv: (-kv[1], kv[0]))
        q.add_row(name, _n(s["rows"]), _pct(s["short_share"]), _pct(s["truncated_share"]),
                  f"{_pct(tc['rate'])} ({tc['rows']})", _pct(tc["args_valid_rate"]),
                  ", ".join(f"{k} {v}" for k, v in s["finish_reasons"].items()) or "–",
                  ", ".join(f"{k} {v}" for k, v in reasons) or "–", style="bold" if name == "all" else None)
    out.print(q)

    d = Table(title="length distributions (tokens)")
    for col in ("config", "length", "rows", "min", "p10", "median", "mean", "p90", "p99", "max"):
        d.add_column(col, justify="left" if col in ("config", "length") else "right")
    for name, s in rows:
        for kind in ("prompt", "completion", "reasoning"):
            dist = s["lengths"][kind]
            d.add_row(name if kind == "prompt" else "", kind, _n(s["rows"]) if kind == "prompt" else "",
                      *(_n(dist[k]) for k in ("min", "p10", "median", "mean", "p90", "p99", "max")),
                      style="bold" if name == "all" else None, end_section=kind == "reasoning")
    out.print(d)
    _print_modes(rows)
    _print_conversations(rows)
    if r["overall"]["cache"] is None:
        out.print("cache hit: – (the engine reported no cached_tokens)", highlight=False)
    _print_draft_vocab(r.get("draft_vocab"))
    if r.get("plots"):
        first = next(iter(r["plots"].values()))
        out.print(f"histograms: {len(r['plots'])} PNG(s) in {Path(first).parent}", highlight=False, soft_wrap=True)
    if r.get("stale_dataset"):
        out.print(f"dataset: {r['stale_dataset']}", highlight=False, soft_wrap=True, markup=False)


def _print_modes(rows: list[tuple[str, dict[str, Any]]]) -> None:
    """Per config and mode (thinking / instant): rows, valid share, median completion and reasoning."""
    from rich.table import Table

    m = Table(title="modes")
    for col in ("config", "mode", "rows", "train", "valid", "completion median", "reasoning median", "tokens"):
        m.add_column(col, justify="left" if col in ("config", "mode") else "right")
    for name, s in rows:
        modes = list(s.get("modes", {}).items())
        for k, (mode, v) in enumerate(modes):
            m.add_row(name if k == 0 else "", mode, _n(v["rows"]), _n(v["train"]), _pct(v["valid_share"]),
                      _n(v["completion_median"]), _n(v["reasoning_median"]), _n(v["tokens"]),
                      style="bold" if name == "all" else None, end_section=k == len(modes) - 1)
    out.print(m)


def _print_conversations(rows: list[tuple[str, dict[str, Any]]]) -> None:
    """Configs with conversations (own_history): their count, turns per conversation, why they ended, and the
    prompt and completion lengths per turn index. Nothing when every config is single-turn."""
    from rich.table import Table

    talk = [(name, s["conversations"]) for name, s in rows if s.get("conversations")]
    if not talk:
        return
    c = Table(title="conversations (policy own_history)")
    for col in ("config", "conversations", "turns", "later turns", "turns/conv mean", "max",
                "conversations by turns", "end reasons"):
        c.add_column(col, justify="left" if col in ("config", "conversations by turns", "end reasons") else "right",
                     overflow="fold")
    for name, v in talk:
        tpc = v["turns_per_conversation"]
        ends = sorted(v["end_reasons"].items(), key=lambda kv: (-kv[1], kv[0]))
        c.add_row(name, _n(v["conversations"]), _n(v["rows"]), _n(v["later_turns"]), _n(tpc["mean"], 2),
                  _n(tpc["max"]), ", ".join(f"{k} turn{'s' if k != '1' else ''}: {n}"
                                            for k, n in tpc["histogram"].items()),
                  ", ".join(f"{k} {n}" for k, n in ends) or "–", style="bold" if name == "all" else None)
    out.print(c)
    p = Table(title="lengths per turn (tokens)")
    for col in ("config", "turn", "rows", "prompt mean", "prompt p50", "completion mean", "completion p50",
                "cache hit"):
        p.add_column(col, justify="left" if col == "config" else "right")
    caches = dict(rows)
    for name, v in talk:
        turns = list(v["by_turn"].items())
        by_turn = (caches[name].get("cache") or {}).get("by_turn") or {}
        for k, (turn, x) in enumerate(turns):
            hit = (by_turn.get(turn) or {}).get("hit_share")
            p.add_row(name if k == 0 else "", turn, _n(x["rows"]), _n(x["prompt"]["mean"]), _n(x["prompt"]["p50"]),
                      _n(x["completion"]["mean"]), _n(x["completion"]["p50"]), _pct(hit),
                      style="bold" if name == "all" else None, end_section=k == len(turns) - 1)
    out.print(p)


def _print_draft_vocab(v: dict[str, Any] | None) -> None:
    from rich.table import Table

    if v is None:
        out.print("draft vocabulary: – (counted by emit; run `kimi-data emit`)", highlight=False)
        return
    k = f"{v['top_k'] // 1000}k" if v["top_k"] % 1000 == 0 else f"{v['top_k']:,}"
    t = Table(title=f"draft vocabulary (train loss tokens, from {v['from']})")
    for col in ("config", "loss tokens", "distinct ids", f"top {k} cover"):
        t.add_column(col, justify="left" if col == "config" else "right")
    for name, c in list(v["configs"].items()) + [("all", v["overall"])]:
        if c is None:
            t.add_row(name, "–", "–", "– (not emitted)")
        else:
            t.add_row(name, _n(c["loss_tokens"]), _n(c["distinct_ids"]),
                      "–" if c["top_k_share"] is None else f"{100 * c['top_k_share']:.2f}%",
                      style="bold" if name == "all" else None)
    out.print(t)


# -- plan ---------------------------------------------------------------------------------------

@click.command(epilog=PLAN_JSON_HELP)
@click.option("--workdir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The pilot workdir, e.g. made by `kimi-data build --limit 200 --workdir pilot`.")
@click.option("--counts", "counts", multiple=True, metavar="CONFIG=N",
              help="Prompts to generate for a config (repeatable; default: the n the pilot's prepare recorded "
                   "in prepared/CONFIG.json, i.e. the partition's n, 88,000 in all for the built-in defaults; "
                   "what the sources held where the pilot read them all, without --limit, and they held fewer; "
                   "N=0 leaves a config out).")
@click.option("--gpus", default=8, show_default=True, type=click.IntRange(min=1),
              help="GPUs that deliver the throughput together (one 8-GPU SGLang server: 8).")
@click.option("--throughput", type=click.FloatRange(min=0, min_open=True), metavar="TOK_PER_S",
              help="Aggregate output tokens/s of those GPUs (default: measured in the pilot, which is "
                   "meaningless for production when the pilot ran elsewhere, e.g. on CPU).")
@click.option("--confidence", default=0.95, show_default=True, type=click.FloatRange(0, 1, min_open=True,
              max_open=True), help="Confidence level of the intervals.")
@click.option("--json", "as_json", is_flag=True, help="Print the projection as JSON (keys below).")
@friendly_errors(interrupted=READS_ONLY)
def plan(workdir: Path, counts, gpus: int, throughput: float | None, confidence: float, as_json: bool):
    """Project tokens, disk, train rows and GPU-hours of the full run from a pilot, with intervals.

    Each prompt starts a conversation (one turn, or several under policy own_history): rows, tokens and
    train rows are the pilot's measured means per conversation, every turn summed, times the count, with
    t-intervals over the pilot's conversations; the naive characters/3.5 estimate is shown beside them.
    GPU-hours = completion tokens of every turn / throughput x GPUs.

    \b
    Example:
      kimi-data build --limit 200 --engine sglang --server http://node1:30000 --workdir pilot
      kimi-data plan --workdir pilot
      kimi-data plan --workdir pilot --counts B4=20000 --counts B8=0 --throughput 25000 --gpus 8
    """
    from kimi_eagle_data.reports.plan import collect_plan, parse_counts
    from kimi_eagle_data.reports.stats import NothingValidatedYet, QualityError

    try:
        parsed = parse_counts(counts)
    except QualityError as e:
        raise click.BadParameter(str(e).removeprefix("--counts "), param_hint="--counts") from None
    try:
        result = collect_plan(workdir, parsed, gpus=gpus, throughput=throughput, confidence=confidence)
    except NothingValidatedYet as so_far:     # a pilot still generating: its counts, then why no projection
        if not as_json:
            _print_progress(so_far)
        raise
    if as_json:
        _print_json(result)
        return
    _print_plan(result)


def _print_prefill(r: dict[str, Any]) -> None:
    """The prompt tokens the pilot's engine served from cache, per config and turn, and GPU-hours with and without
    them at the pilot's measured prefill and decode rates."""
    rows = list(r["configs"].items()) + [("all", r["overall"])]
    shares = []
    for name, c in rows:
        cache = c.get("cache")
        if cache:
            turns = cache.get("by_turn") or {}
            per_turn = (" (by turn " + ", ".join(f"{k}: {_pct(v['hit_share'])}" for k, v in turns.items()) + ")"
                        if len(turns) > 1 else "")
            shares.append(f"{name} {_pct(cache['hit_share'])}{per_turn}")
    out.print("prefix-cache hits (share of prompt tokens the engine served from its cache): "
              + ("; ".join(shares) if shares else "– (the engine reported no cached_tokens)"),
              highlight=False, soft_wrap=True)
    d = r.get("drafter")
    if d:
        steps = r["overall"].get("target_steps") or {}
        out.print(f"drafter {d['algorithm'] or '?'} {d['model'] or '(model not reported)'}: "
                  + (f"{d['tokens_per_verify_step']:.2f} output tokens per target step measured over "
                     + (counted(d['requests'], 'request') if d["requests"] is not None
                        else f"{counted(d['verify_steps'], 'verify step')} (vLLM's counters)")
                     + f"; the projection's {_si(steps.get('estimate'))} target steps "
                     "(the GPU-hours at the pilot's speed include the drafter)"
                     if d["tokens_per_verify_step"] else "the engine reported no verify steps"),
                  highlight=False, soft_wrap=True)
    pre = r.get("prefill")
    if not pre:
        out.print("prefill: not measured (the pilot's checkpoint holds too few timed requests)", highlight=False)
        return
    g = r["overall"]["gpu_hours_prefill"]
    p_rate = ("no measurable cost" if pre["prefill_tokens_per_s"] is None
              else f"{pre['prefill_tokens_per_s']:,.0f} tokens/s")
    out.print(f"prefill {p_rate}, decode {pre['decode_tokens_per_s']:,.0f} "
              f"tokens/s (measured in the pilot: {_pct(pre['prefill_share_of_time'])} of its busy time prefilling"
              f"{'; scaled to --throughput' if pre['speed_factor'] != 1 else ''}); GPU-hours with the pilot's cache "
              f"hits {_range(g['with_cache'], _hours, ' ')}, every prompt token prefilled "
              f"{_range(g['without_cache'], _hours, ' ')}", highlight=False, soft_wrap=True)


def _print_plan(r: dict[str, Any]) -> None:
    from rich.table import Table

    level = f"{100 * r['confidence']:g}%"
    t = Table(title=f"plan from pilot {r['workdir']}  ({level} intervals)")
    talk = any(c["pilot"]["turns"] for c in r["configs"].values())
    for col in ("config", "prompts", "pilot conv", *(("turns/conv", "rows") if talk else ()), "tokens/conv",
                "tokens", "naive chars/3.5", "valid rate", "train rows", "disk", "GPU-hours"):
        t.add_column(col, justify="left" if col == "config" else "right", overflow="fold")
    rows = list(r["configs"].items()) + [("all", r["overall"])]
    whole = lambda x: _n(None if x is None else round(x))   # noqa: E731
    for i, (name, c) in enumerate(rows):
        p = c.get("pilot")
        ratio = c["naive"]["ratio_to_measured"]
        turns = (f"{p['mean_rows']:,.2f}" if p else "", _range(c["rows"], whole)) if talk else ()
        t.add_row(
            name, _n(c["count"]), _n(p["conversations"]) if p else "", *turns,
            f"{p['mean_tokens']:,.0f} ±{_hw(c)}" if p else "",
            _range(c["tokens"]), f"{_si(c['naive']['tokens'])}\n({ratio:.2f}× measured)" if ratio else "–",
            _range(c["valid_rate"], _pct), _range(c["train_rows"], whole),
            _range(c["disk_bytes"], lambda x: _si(x, "B")), _range(c["gpu_hours"], _hours),
            style="bold" if name == "all" else None, end_section=i >= len(rows) - 2)
    out.print(t)
    for name, c in r["configs"].items():
        shape, p = c["pilot"]["turns"], c["pilot"]
        if shape:
            hist = ", ".join(f"{k}: {v}" for k, v in shape["turns_per_conversation"]["histogram"].items())
            ends = ", ".join(f"{k} {v}" for k, v in shape["end_reasons"].items())
            growth = " → ".join(f"{b['prompt']['mean']:,.0f}" for b in shape["by_turn"].values())
            out.print(f"{name} conversations in the pilot: turns {hist}; ended: {ends}; mean prompt tokens by turn "
                      f"{growth}", highlight=False, soft_wrap=True)
        if p["incomplete_conversations"]:
            out.print(f"[yellow]note:[/] {name}: {counted(p['incomplete_conversations'], 'conversation')} of the "
                      "pilot not ended yet (pending or a turn failed) left out of the means", highlight=False,
                      soft_wrap=True)
    for name, why in r["count_notes"].items():
        out.print(f"[yellow]note:[/] {name}: {why}", highlight=False, soft_wrap=True)
    tp = r["throughput"]
    if tp["tokens_per_s"]:
        from kimi_eagle_data.reports.plan import measured_on

        m = tp["measured"]
        # A measured speed is said to be of what ran the pilot (a CPU is no GPU); a given one is the --gpus'.
        src = (f"given (--throughput) for {counted(r['gpus'], 'GPU')}" if tp["source"] == "given"
               else f"measured in the pilot on {measured_on(m)}")
        extra = (f"; pilot: {counted(m['output_tokens'], 'output token')} in {m['span_s']:,.1f} s "
                 f"({m['engine']} {m['engine_version']})") if m else ""
        out.print(f"throughput: {tp['tokens_per_s']:,.1f} output tokens/s {src}{extra}; "
                  f"wall-clock {_range(r['overall']['wall_hours'], _hours, ' ')} h", highlight=False, soft_wrap=True)
    out.print(f"[yellow]note:[/] {tp['note']}", highlight=False, soft_wrap=True)
    _print_prefill(r)
    out.print(f"intervals: {level}, {r['interval']}; they cover the pilot's sampling error only.",
              highlight=False, soft_wrap=True)
    out.print(f"naive: (characters of the prompt messages + the decoded completion) / "
              f"{r['naive_chars_per_token']}, a common rule-of-thumb estimate; it misses the chat template's "
              "tokens and the tool declarations, and a tokenizer's characters per token differ by language and "
              "content.", highlight=False, soft_wrap=True)
    if r["skipped"]:
        out.print("skipped: " + "; ".join(f"{k}: {v}" for k, v in r["skipped"].items()), highlight=False)
    if r.get("score"):
        from kimi_eagle_data.cli.score import score_table
        from kimi_eagle_data.score.report import threshold_note

        out.print(score_table(r["score"], title="where regeneration pays (kimi-data score)"))
        out.print(threshold_note(r["score"]), highlight=False, soft_wrap=True)
    else:
        out.print("where regeneration pays: run `kimi-data score` on this workdir to compare the upstream answers "
                  "with the target's own completions", highlight=False, soft_wrap=True)


def _hw(c: dict[str, Any]) -> str:
    iv = c["tokens"]
    if iv["high"] is None:
        return "?"
    return f"{(iv['high'] - iv['estimate']) / c['count']:,.0f}"


def _hours(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 1 else f"{x:.3g}"


# -- inspect ------------------------------------------------------------------------------------

@click.command(epilog=INSPECT_JSON_HELP)
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.argument("config", callback=click_config_names)
@click.argument("sample_id", metavar="[ID]", required=False)
@click.option("--random", "random_", is_flag=True, help="Pick a random sample (see --seed).")
@click.option("--seed", type=int, help="Seed of --random (printed when not given, to see the same pick again).")
@click.option("--shortest", is_flag=True, help="Pick the sample with the shortest completion.")
@click.option("--longest", is_flag=True, help="Pick the sample with the longest completion.")
@click.option("--rejected", metavar="REASON", help="Only samples rejected for this reason code (e.g. truncated); "
              "combine with --random/--shortest/--longest, else the first by id.")
@click.option("--raw", is_flag=True, help="Also print the token ids of every segment.")
@click.option("--max-chars", type=click.IntRange(min=1), help="Cut each segment's text to this many characters.")
@click.option("--tokenizer", help="Tokenizer to decode with (default: the run's, from run.json).")
@click.option("--json", "as_json", is_flag=True, help="Print the segments as JSON (keys below).")
@friendly_errors(interrupted=READS_ONLY)
def inspect_cmd(directory: Path, config: str, sample_id: str | None, random_: bool, seed: int | None,
                shortest: bool, longest: bool, rejected: str | None, raw: bool, max_chars: int | None,
                tokenizer: str | None, as_json: bool):
    """One sample decoded and split into segments: system, tool declarations, user, reasoning, answer,
    each tool call, end; with token counts, the loss-mask boundary, finish reason and validation issues.

    DIR is a workdir or its dataset/ directory; ID may be a unique prefix of the id. Segments are cut
    at the profile's special tokens (token ids), so they concatenate to the row's input_ids exactly.

    \b
    Example:
      kimi-data inspect demo-work B1 B1-1b8761b663bb7436
      kimi-data inspect demo-work/dataset B4 --shortest
      kimi-data inspect demo-work B2 --rejected truncated --random --seed 3 --raw
    """
    pickers = sum(bool(x) for x in (sample_id, random_, shortest, longest))
    if pickers > 1:
        raise click.UsageError("give one of ID, --random, --shortest, --longest")
    if sample_id and rejected:
        raise click.UsageError("--rejected browses; give it without an ID")
    from kimi_eagle_data.formats import format_of
    from kimi_eagle_data.reports.inspect import inspect_sample, locate
    from kimi_eagle_data.reports.stats import NothingValidatedYet

    try:
        if not pickers and not rejected:
            locate(directory, config)     # no such config, or nothing validated yet: that, before how to pick
            raise click.UsageError("give an ID, or browse with --random, --shortest, --longest or --rejected "
                                   "REASON")
        result = inspect_sample(directory, config, sample_id, format_of=format_of, tokenizer=tokenizer,
                                random=random_, seed=seed, shortest=shortest, longest=longest, rejected=rejected)
    except NothingValidatedYet as so_far:     # a first generate under way: its counts, then why no sample
        if not as_json:
            _print_progress(so_far)
        raise
    if as_json:
        _print_json(result)
        return
    _print_inspect(result, raw=raw, max_chars=max_chars)


def _print_conversation(r: dict[str, Any]) -> None:
    """The conversation around an own_history turn: every turn in order, this one marked, why it ended."""
    from rich.table import Table
    from rich.text import Text

    from kimi_eagle_data.conversation.next_turn import END_REASONS

    conv = r["conversation"]
    turns = conv["turns"]
    t = Table(title=f"conversation {conv['id']}: turn {r['turn']} of {counted(len(turns), 'turn')}",
              title_justify="left")
    for col in ("", "turn", "id", "split", "prompt", "completion", "end reason"):
        t.add_column(col, justify="right" if col in ("turn", "prompt", "completion") else "left")
    for x in turns:
        t.add_row("▶" if x["this"] else "", str(x["turn"]), x["id"],
                  Text(str(x["split"]), style="green" if x["split"] == "train" else "red"),
                  f"{x['prompt_len']:,}", f"{x['completion_len']:,}", x["end_reason"] or "",
                  style="bold" if x["this"] else None)
    out.print(t)
    last = turns[-1]["end_reason"] if turns else None
    if last:
        out.print(f"ended: {last} — {END_REASONS.get(last, '(not an end reason of this version)')}",
                  highlight=False, soft_wrap=True)
    else:
        out.print("ended: – (its next turn is not generated yet, or failed)", highlight=False)
    if len(turns) > 1:
        out.print(f"inspect another turn: {conv['inspect']}", highlight=False, soft_wrap=True)


def _print_inspect(r: dict[str, Any], *, raw: bool, max_chars: int | None) -> None:
    from rich.rule import Rule
    from rich.table import Table
    from rich.text import Text

    from kimi_eagle_data.reports.inspect import STYLES

    split_style = "green" if r["split"] == "train" else "red"
    head = Text.assemble((r["id"], "bold"), f"  config {r['config']} · split ", (str(r["split"]), split_style),
                         f" · finish {r['finish_reason']} · {r['mode']} mode · {r['source']} row {r['source_id']}")
    out.print(head)
    if r["picked"]:
        out.print(f"picked: {r['picked']}", style="dim", highlight=False)
    out.print(f"{counted(r['length'], 'token')} = prompt {r['prompt_len']:,} (loss 0) + completion "
              f"{r['completion_len']:,} "
              f"(loss 1; reasoning {r['reasoning_len']:,}, tool calls {r['num_tool_calls']})", highlight=False)
    for w in r["warnings"]:
        out.print(f"[yellow]warning:[/] {w}", highlight=False)
    if r["issues"]:
        out.print("[red]validation issues:[/]")
        for i in r["issues"]:
            line = Text.assemble("  ", (i["code"], "bold red"), f": {i['description']}")
            if i["detail"]:
                line.append(f" — {i['detail']}", style="dim")
            out.print(line)
    else:
        out.print("validation issues: none", style="green")
    if r.get("conversation"):
        _print_conversation(r)

    t = Table(title="segments", title_justify="left")
    for col in ("#", "segment", "tokens", "positions", "loss"):
        t.add_column(col, justify="right" if col in ("#", "tokens", "loss") else "left")
    for s in r["segments"]:
        t.add_row(str(s["index"]), Text(s["label"], style=STYLES.get(s["kind"], "")), f"{s['n_tokens']:,}",
                  f"{s['start']}–{s['end'] - 1}", str(s["loss"]),
                  end_section=s["end"] == r["loss_boundary"])
    out.print(t)

    boundary_shown = False
    for s in r["segments"]:
        if s["start"] >= r["loss_boundary"] and not boundary_shown:
            out.print(Rule(f"loss-mask boundary at position {r['loss_boundary']}: prompt above (loss 0), "
                           f"completion below (loss 1)", style="bold red"))
            boundary_shown = True
        style = STYLES.get(s["kind"], "")
        label = f"{s['label']} · {counted(s['n_tokens'], 'token')} · {s['start']}–{s['end'] - 1}"
        out.print(Rule(label, style=style, align="left"))
        text = s["text"]
        if max_chars and len(text) > max_chars:
            text = text[:max_chars] + f"… ({len(s['text']) - max_chars:,} more characters)"
        out.print(Text(text, style=style), soft_wrap=True)
        if raw:
            out.print(Text(" ".join(map(str, s["ids"])), style="dim"), soft_wrap=True)
    if not boundary_shown:
        out.print(Rule(f"loss-mask boundary at position {r['loss_boundary']}: no completion tokens",
                       style="bold red"))

