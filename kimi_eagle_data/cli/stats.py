"""`kimi-data stats`: length distributions, finish reasons, tool calls, cache hits and token totals per config
(registered at the end of cli/main.py; the numbers come from reports/stats.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kimi_eagle_data.cli.common import REWRITES, friendly_errors, out
from kimi_eagle_data.cli.report_output import num, pct, print_json, print_progress
from kimi_eagle_data.cli.options import click_config_names

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
drafter: null when the engine ran none, else as `kimi-data plan --json`'s
  drafter {algorithm, model, num_steps, num_draft_tokens, measured_by,
  requests, verify_steps, output_tokens, tokens_per_verify_step}
stale_dataset: null, or the line saying dataset/ was made from an
  earlier selection than the one prepared now (a pilot's)
Shares are fractions in [0, 1] (null when there are no rows)."""



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
    # lazy: keeps pyarrow and pyarrow.compute (the reports read Parquet) out of every CLI start
    from kimi_eagle_data.emit.plots import plot_length_histograms
    from kimi_eagle_data.reports.stats import NothingValidatedYet, collect_stats, open_workdir, validated_configs

    try:
        result = collect_stats(workdir, configs, split=split)
    except NothingValidatedYet as so_far:     # a first generate under way: what it has committed is the answer
        print_progress(so_far, as_json=as_json)
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
        print_json(result)
        return
    _print_stats(result)




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
        t.add_row(name, *(num(c[k]) for k in keys),
                  num(s["tokens"]["total"]), num(s["tokens"]["train"]),
                  pct(s["cache"]["hit_share"]) if s["cache"] else "–", style="bold" if name == "all" else None)
    out.print(t)

    q = Table(title="completions" + (f" ({r['split']} rows)" if r["split"] != "all" else ""))
    for col in ("config", "rows", f"short <{r['short_threshold']}", "truncated", "tool-call rate", "args valid",
                "finish reasons", "rejection reasons"):
        q.add_column(col, justify="left" if col in ("config", "finish reasons", "rejection reasons") else "right",
                     overflow="fold")
    for name, s in rows:
        tc = s["tool_calls"]
        reasons = sorted(s["rejection_reasons"].items(), key=lambda kv: (-kv[1], kv[0]))
        q.add_row(name, num(s["rows"]), pct(s["short_share"]), pct(s["truncated_share"]),
                  f"{pct(tc['rate'])} ({tc['rows']})", pct(tc["args_valid_rate"]),
                  ", ".join(f"{k} {v}" for k, v in s["finish_reasons"].items()) or "–",
                  ", ".join(f"{k} {v}" for k, v in reasons) or "–", style="bold" if name == "all" else None)
    out.print(q)

    d = Table(title="length distributions (tokens)")
    for col in ("config", "length", "rows", "min", "p10", "median", "mean", "p90", "p99", "max"):
        d.add_column(col, justify="left" if col in ("config", "length") else "right")
    for name, s in rows:
        for kind in ("prompt", "completion", "reasoning"):
            dist = s["lengths"][kind]
            d.add_row(name if kind == "prompt" else "", kind, num(s["rows"]) if kind == "prompt" else "",
                      *(num(dist[k]) for k in ("min", "p10", "median", "mean", "p90", "p99", "max")),
                      style="bold" if name == "all" else None, end_section=kind == "reasoning")
    out.print(d)
    _print_modes(rows)
    _print_conversations(rows)
    if r["overall"]["cache"] is None:
        out.print("cache hit: – (the engine reported no cached_tokens)", highlight=False)
    _print_draft_vocab(r.get("draft_vocab"))
    d = r.get("drafter")
    if d:
        rate = d.get("tokens_per_verify_step")
        out.print(f"drafter: {d.get('algorithm') or 'a drafter'} {d.get('model') or ''}".rstrip() + ": "
                  + (f"{rate:.2f} output tokens per target verify step ({d['measured_by']})" if rate
                     else "the engine reported no verify steps"), highlight=False, soft_wrap=True, markup=False)
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
            m.add_row(name if k == 0 else "", mode, num(v["rows"]), num(v["train"]), pct(v["valid_share"]),
                      num(v["completion_median"]), num(v["reasoning_median"]), num(v["tokens"]),
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
        c.add_row(name, num(v["conversations"]), num(v["rows"]), num(v["later_turns"]), num(tpc["mean"], 2),
                  num(tpc["max"]), ", ".join(f"{k} turn{'s' if k != '1' else ''}: {n}"
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
            p.add_row(name if k == 0 else "", turn, num(x["rows"]), num(x["prompt"]["mean"]), num(x["prompt"]["p50"]),
                      num(x["completion"]["mean"]), num(x["completion"]["p50"]), pct(hit),
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
            t.add_row(name, num(c["loss_tokens"]), num(c["distinct_ids"]),
                      "–" if c["top_k_share"] is None else f"{100 * c['top_k_share']:.2f}%",
                      style="bold" if name == "all" else None)
    out.print(t)


# -- plan ---------------------------------------------------------------------------------------
