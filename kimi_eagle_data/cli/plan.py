"""`kimi-data plan`: what generating the full run would take, projected from a pilot (registered at the end of
cli/main.py; the projection comes from reports/plan.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kimi_eagle_data.cli.common import READS_ONLY, friendly_errors, out
from kimi_eagle_data.cli.report_output import num, pct, print_json, print_progress
from kimi_eagle_data.wording import counted
from kimi_eagle_data.cli.score import score_table

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
    # lazy: keeps pyarrow, scipy (the plan's intervals) and asyncio (score's engine clients) out of every CLI start
    from kimi_eagle_data.reports.plan import collect_plan, parse_counts
    from kimi_eagle_data.reports.stats import NothingValidatedYet, QualityError
    from kimi_eagle_data.score.report import load_report

    try:
        parsed = parse_counts(counts)
    except QualityError as e:
        raise click.BadParameter(str(e).removeprefix("--counts "), param_hint="--counts") from None
    try:
        result = collect_plan(workdir, parsed, gpus=gpus, throughput=throughput, confidence=confidence,
                              score_of=load_report)
    except NothingValidatedYet as so_far:     # a pilot still generating: its counts, then why no projection
        if not as_json:
            print_progress(so_far)
        raise
    if as_json:
        print_json(result)
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
            per_turn = (" (by turn " + ", ".join(f"{k}: {pct(v['hit_share'])}" for k, v in turns.items()) + ")"
                        if len(turns) > 1 else "")
            shares.append(f"{name} {pct(cache['hit_share'])}{per_turn}")
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
              f"tokens/s (measured in the pilot: {pct(pre['prefill_share_of_time'])} of its busy time prefilling"
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
    whole = lambda x: num(None if x is None else round(x))   # noqa: E731
    for i, (name, c) in enumerate(rows):
        p = c.get("pilot")
        ratio = c["naive"]["ratio_to_measured"]
        turns = (f"{p['mean_rows']:,.2f}" if p else "", _range(c["rows"], whole)) if talk else ()
        t.add_row(
            name, num(c["count"]), num(p["conversations"]) if p else "", *turns,
            f"{p['mean_tokens']:,.0f} ±{_hw(c)}" if p else "",
            _range(c["tokens"]), f"{_si(c['naive']['tokens'])}\n({ratio:.2f}× measured)" if ratio else "–",
            _range(c["valid_rate"], pct), _range(c["train_rows"], whole),
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
        # lazy: keeps pyarrow and scipy (the plan's intervals) out of every CLI start
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
        # lazy: keeps pyarrow and asyncio (score's engine clients) out of every CLI start
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
