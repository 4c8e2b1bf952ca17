"""`kimi-data inspect`: one sample's tokens, segment by segment, as the model saw and wrote them (registered at the
end of cli/main.py; the segments come from reports/inspect.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kimi_eagle_data.cli.common import READS_ONLY, friendly_errors, out
from kimi_eagle_data.cli.report_output import print_json, print_progress
from kimi_eagle_data.cli.options import click_config_names
from kimi_eagle_data.wording import counted
from kimi_eagle_data.formats import format_of
from kimi_eagle_data.records import END_REASONS

# A segment's kind (reports/inspect.py Segment.kind) -> its rich style
STYLES = {
    "prefix": "bright_black", "system": "magenta", "tools": "yellow", "user": "green", "assistant": "cyan",
    "tool_result": "dark_orange", "generation_prompt": "bright_black", "reasoning": "blue", "answer": "bold white",
    "tool_section": "bright_black", "tool_call": "bold yellow", "text": "red", "end": "bright_black",
}

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
    # lazy: keeps pyarrow and pyarrow.compute (the reports read Parquet) out of every CLI start
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
            print_progress(so_far)
        raise
    if as_json:
        print_json(result)
        return
    _print_inspect(result, raw=raw, max_chars=max_chars)


def _print_conversation(r: dict[str, Any]) -> None:
    """The conversation around an own_history turn: every turn in order, this one marked, why it ended."""
    from rich.table import Table
    from rich.text import Text

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
