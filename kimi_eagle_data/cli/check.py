"""`kimi-data check` and `kimi-data render` (registered at the end of cli/main.py; the work is in validate/check.py)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import click
import orjson
from rich.markup import escape
from click.core import ParameterSource

from kimi_eagle_data.cli.common import READS_ONLY, UserError, console, friendly_errors, out
from kimi_eagle_data.wording import counted, plural
from kimi_eagle_data.formats import format_of
from kimi_eagle_data.profile import PROFILES, UnknownProfileError, get_profile, plugin_hint, profile_defaults
from kimi_eagle_data.cli.options import ProfileChoice
from kimi_eagle_data.settings import DEFAULT_PROFILE, PROFILE_HELP
from kimi_eagle_data.prompts.tokenizer import load_tokenizer, special_text_line
from kimi_eagle_data.emit.dataset import has_dataset, load_local
from kimi_eagle_data.emit.stale import marked_stale
from kimi_eagle_data.sources.filters import max_row_bytes

_SHOWN_ROWS = 20     # invalid / unreadable rows listed one per line before the summary


class EffortChoice(click.Choice):
    """--effort: one of the efforts the profiles' formats have; a name a format refuses (K3's `medium`) says why
    (the format's `refused_efforts`), where a plain choice would only list the others."""

    def __init__(self):
        formats = {p.chat_format: format_of(p) for p in PROFILES.values()}.values()
        self.refused = {name: why for f in formats for name, why in f.refused_efforts.items()}
        super().__init__(list(dict.fromkeys(e for f in formats for e in f.efforts)))

    def convert(self, value, param, ctx):
        if value in self.refused:
            self.fail(f"{value!r} is refused: {self.refused[value]}; choose from {', '.join(self.choices)}",
                      param, ctx)
        return super().convert(value, param, ctx)


def _load(profile: str, model: str | None, tokenizer: str | None, recorded_in: Path | None = None):
    """The profile and its tokenizer, chosen as `build` chooses them: --tokenizer, else --model, else the
    profile's model (Kimi-K2.5 for the default profile; `--profile tiny-kimi` for the embedded model).
    `recorded_in`: the dataset whose manifest named the profile (no option did)."""
    try:
        prof = get_profile(profile)
    except UnknownProfileError as e:
        if recorded_in is None:
            raise click.BadParameter(str(e), param_hint="--profile") from None
        raise UserError(f"{recorded_in}: its manifest names profile {profile!r}: {e}; {plugin_hint()}") from None
    # its error names --tokenizer/--profile
    return prof, load_tokenizer(tokenizer or model or prof.model_path, format_of(prof))


# What is true when Ctrl-C or SIGTERM stops `check`.
CHECK_STOPPED = ("check writes nothing, and what it printed covers only the rows before the stop; rerun the same "
                 "command to check every row")


def tokenizer_options(fn):
    for opt in reversed([
        click.option("--profile", type=ProfileChoice(), default=DEFAULT_PROFILE, show_default=True,
                     help=f"{PROFILE_HELP} Its tokens, generation prompt and max_seq_len."),
        click.option("--model", help="Model path or Hub id (default: the profile's model)."),
        click.option("--tokenizer", help="Tokenizer path (default: --model)."),
    ]):
        fn = opt(fn)
    return fn


@click.command()
@click.argument("source", metavar="ROW.json")
@click.option("--row", type=click.IntRange(min=1),
              help="ROW.json is JSONL: render its line N (numbered from 1, as `sed -n Np` counts).")
@click.option("--ids", "as_ids", is_flag=True, help="Print the token ids (a JSON list) instead of the text.")
@click.option("--mode", type=click.Choice(["thinking", "instant"]), default="thinking", show_default=True,
              help="instant: the chat template's thinking=False (each format's generation prompt for a mode: "
                   "docs/token-rules.md).")
@click.option("--effort", type=EffortChoice(),
              help="Thinking effort, for a profile that has efforts (Kimi-K3; default: its own, max); thinking "
                   "mode only.")
@click.option("--preserve-thinking/--no-preserve-thinking", default=None,
              help="Kimi-K2.6's chat-template argument: every earlier assistant turn keeps its reasoning. Default: "
                   "the profile's template's.")
@tokenizer_options
@friendly_errors(interrupted=READS_ONLY)
def render(source: str, row: int | None, as_ids: bool, mode: str, effort: str | None, preserve_thinking: bool | None,
           profile: str, model: str | None, tokenizer: str | None):
    """Print the exact prompt the model sees for {"messages": [...], "tools": [...]} (`-`: stdin).

    The prompt is rendered by the code `prepare` uses (the profile's format: K2.5's chat template with tools
    declared TypeScript-style, K3's segments through its tokenizer's code or ours; generation prompt appended);
    the text is those ids decoded with special tokens written out.
    """
    # lazy: keeps pyarrow and pyarrow.compute (the checker's readers) out of every CLI start
    from kimi_eagle_data.validate.check import read_render_row

    messages, tools = read_render_row(source, row)
    prof, tok = _load(profile, model, tokenizer)
    chat_format = format_of(prof)
    if preserve_thinking is not None and "preserve_thinking" not in prof.template_options:
        raise click.BadParameter(f"profile {prof.name}'s chat template takes no such argument; drop it",
                                 param_hint="--preserve-thinking")
    options = {**prof.template_options, **({} if preserve_thinking is None else
                                            {"preserve_thinking": preserve_thinking})}
    if options:
        chat_format = chat_format.with_template_options(options)
    if effort is not None and effort not in chat_format.efforts:
        raise click.BadParameter(f"profile {prof.name} has no thinking effort; drop --effort",
                                 param_hint="--effort")
    if effort is not None and mode != "thinking":
        raise click.BadParameter("an effort applies to thinking mode only; drop --effort or --mode instant",
                                 param_hint="--effort")
    where = "stdin" if source == "-" else source
    try:
        ids = chat_format.bind(prof, tok).render_prompt(messages, tools, mode, effort)
    except Exception as e:  # jinja and the tool encoder raise many types; the message is what matters
        raise UserError(f"{where}: cannot render the prompt: {' '.join(str(e).split())[:300]}") from None
    click.echo(orjson.dumps(ids).decode() if as_ids else tok.decode(ids, skip_special_tokens=False))
    finder = format_of(prof).bind(prof, tok).special_text()   # None: typed special-token text stays text (K3)
    found = finder.in_chat(messages, tools) if finder is not None else None
    if found is not None:
        console.print(f"[yellow]warning:[/] {escape(special_text_line(found))}: rendered as the special token(s) "
                      "themselves, as the tokenizer and the serving stack encode it; prepare rejects such a row "
                      "(special_token_text) unless its partition sets special_text = \"as_served\"",
                      highlight=False, soft_wrap=True)
    shown_effort = f", effort {effort or 'max'}" if format_of(prof).efforts and mode == "thinking" else ""
    console.print(f"{counted(len(ids), 'prompt token')}, {mode} mode{shown_effort} "
                  f"({getattr(tok, 'name_or_path', '?')})",
                  highlight=False, soft_wrap=True)


@click.command()
@click.argument("file", metavar="FILE|DIR", type=click.Path(exists=True, path_type=Path))
@tokenizer_options
@click.option("--max-seq-len", type=click.IntRange(min=1),
              help=f"Default: the profile's ({profile_defaults(lambda p: p.max_seq_len)}).")
@click.option("--keep-truncated", is_flag=True, help="`length` rows without an end of turn are not `truncated`.")
@click.option("--json", "as_json", is_flag=True,
              help='One line per row on stdout: {"row", "valid", "issues", "details"[, "id", "mode"]} (a row of a '
                   'kimi-data dataset also "file", "recorded", "passed"); summary on stderr.')
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@friendly_errors(interrupted=CHECK_STOPPED)
def check(file: Path, profile: str, model: str | None, tokenizer: str | None, max_seq_len: int | None,
          keep_truncated: bool, as_json: bool, no_progress: bool):
    """Audit EAGLE-3 data (ours or another pipeline's) with the rules of docs/token-rules.md.

    \b
    Input (streamed): JSONL; Parquet; an Arrow file (.arrow, as `datasets`
    writes it); a `Dataset.save_to_disk` directory (speculators' data);
    a dataset kimi-data emitted (WORKDIR/dataset, or WORKDIR).
    Rows: input_ids + loss_mask (prompt = tokens before the first 1) or input_ids + prompt_len,
          optional tools (JSON string or list; without it, the tools the prompt declares)
          and finish_reason (without it: stop when the completion ends with
          the end-of-turn token, else length);
      or  messages + completion (text, special tokens written out) + optional tools;
      or  SpecForge's raw rows: conversations [{role, content}, ...] + optional tools
          (the last turn, the assistant's, is the completion).
    Forms 2 and 3 take an optional mode ("thinking", default, or "instant"); each
    row's mode is read from its prompt's end, reported per row and summed by mode.
    Rows are numbered from 1 (a JSONL row by its line number). Exit 0 when every row
    is valid, 1 otherwise (an input without rows included), 2 on usage errors.

    \b
    A kimi-data dataset is checked against itself: every shard its manifest.json
    lists, with the profile, max_seq_len and keep_truncated it records; a row
    passes when its verdict is the `issues` it records (rejected rows included).
    Exit 0 when every row passes.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.table import Table
    from rich.text import Text

    # lazy: keeps pyarrow and pyarrow.compute (the checker's readers) out of every CLI start
    from kimi_eagle_data.validate.check import Checker, check_dataset, check_file, describe, tokenizer_problem
    from kimi_eagle_data.validate.check_input import open_input

    dataset = load_local(file, verify=False) if file.is_dir() and has_dataset(file) else None
    if dataset is not None:
        profile, max_seq_len, keep_truncated = _dataset_settings(dataset, profile, max_seq_len, keep_truncated)
    prof, tok = _load(profile, model, tokenizer, recorded_in=dataset.root if dataset is not None else None)
    checker = Checker(prof, tok, max_seq_len=max_seq_len, keep_truncated=keep_truncated, chat_format=format_of(prof))
    if dataset is not None:
        problem = tokenizer_problem(tok, tokenizer or model or prof.model_path, dataset.manifest["provenance"],
                                    dataset.root)
        if problem:
            raise UserError(problem)
        verdicts, total = check_dataset(checker, dataset.root, dataset.shards()), dataset.rows()
    else:
        rows, total = open_input(file, max_row_bytes(checker.validator.max_seq_len))
        verdicts = check_file(checker, rows)
    report = console if as_json else out
    reasons: Counter[str] = Counter()
    by_mode: Counter[tuple[str, bool]] = Counter()     # (mode, valid) -> rows
    n = valid = passed = tokens = shown = 0
    progress = Progress(TextColumn("[bold]check"), BarColumn(), TextColumn("{task.fields[rows]:>9,} rows"),
                        TextColumn("{task.fields[tps]:>9,.0f} tok/s"), TextColumn("{task.fields[bad]}"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                        console=console, disable=no_progress, transient=False)
    t0 = time.perf_counter()
    with progress:
        task = progress.add_task("check", total=total, rows=0, tps=0.0, bad="")
        for k, (v, advance) in enumerate(verdicts):
            if v is not None:
                n += 1
                tokens += v.tokens
                valid += v.valid
                passed += v.passed
                reasons.update(v.issues)
                if v.mode is not None:
                    by_mode[v.mode, v.valid] += 1
                if as_json:
                    sys.stdout.write(orjson.dumps(v.to_json()).decode() + "\n")
                if not v.passed and shown < _SHOWN_ROWS and (not as_json or "unreadable_row" in v.issues):
                    shown += 1
                    _print_row(report, file if dataset is None else dataset.root, v)
            if k % 256 == 0:
                elapsed = time.perf_counter() - t0
                progress.update(task, advance=advance, rows=n, tps=tokens / elapsed if elapsed else 0.0,
                                bad=_failing(n, passed, dataset))
            else:
                progress.advance(task, advance)
        progress.update(task, rows=n, bad=_failing(n, passed, dataset))
    seconds = time.perf_counter() - t0
    if n == 0:      # nothing checked is not a pass (as in `prepare`, a file without rows is an error)
        empty = file.is_file() and file.stat().st_size == 0
        raise UserError(f"{file} has no rows to check ({'0 bytes' if empty else 'only blank lines, or no records'})")
    if shown < n - passed and not as_json:
        more = n - passed - shown
        report.print(f"… {more:,} more " + (f"invalid {plural(more, 'row')}" if dataset is None else
                                             f"{plural(more, 'row')} whose verdict is not the one recorded")
                     + " (--json lists every row)", highlight=False)
    if reasons:
        t = Table(title=f"check: {file}")
        for col in ("reason", "rows", "meaning"):
            t.add_column(col, justify="right" if col == "rows" else "left", overflow="fold")
        for code, count in reasons.most_common():
            t.add_row(code, f"{count:,}", Text(describe(code, format_of(prof).reason_descriptions())))
        report.print(t)
    rate = f"{n / seconds:,.0f} rows/s, {tokens / seconds:,.0f} tokens/s" if seconds > 0 else ""
    agreed = "" if dataset is None else (f"; {passed:,} with the verdict they record, {n - passed:,} with "
                                         "another")
    report.print(f"{counted(n, 'row')} checked ({counted(tokens, 'token')} in {seconds:.2f}s, {rate}): "
                 f"{valid:,} valid, "
                 f"{n - valid:,} invalid{agreed}  " + ("[green]✓[/]" if passed == n else "[red]✗[/]"),
                 highlight=False, soft_wrap=True)
    modes = sorted({m for m, _ in by_mode})
    if modes:
        report.print("by mode: " + "; ".join(f"{m} {counted(by_mode[m, True] + by_mode[m, False], 'row')}, "
                                              f"{by_mode[m, True]:,} valid" for m in modes), highlight=False)
    if dataset is not None and (stale := marked_stale(dataset.root, dataset.manifest)):
        console.print(f"[yellow]warning:[/] {escape(stale)}", highlight=False, soft_wrap=True)
    if passed != n:
        sys.exit(1)


def _failing(n: int, passed: int, dataset) -> str:
    """The progress bar's count of the rows that fail so far."""
    return "" if passed == n else f"{'invalid' if dataset is None else 'not as recorded'} {n - passed}"


def _dataset_settings(dataset, profile: str, max_seq_len: int | None, keep_truncated: bool):
    """The profile, max_seq_len and keep_truncated an emitted dataset's manifest records: its rows were judged with
    them. An option naming another value is a usage error (its verdicts could not be the recorded ones)."""
    ctx = click.get_current_context()
    judged_with = dataset.judged_with()
    for name, given, recorded in zip(("profile", "max_seq_len", "keep_truncated"),
                                     (profile, max_seq_len, keep_truncated), judged_with):
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT) and given != recorded:
            raise click.BadParameter(f"{dataset.root} was made with {name} {recorded}, and its rows are checked "
                                     "with what they were judged with; drop the option",
                                     param_hint="--" + name.replace("_", "-"))
    return judged_with


def _print_row(report, file: Path, v) -> None:
    """One failing row on one line; an unreadable row is an error line on stderr (the run continues)."""
    from rich.text import Text

    where = file if v.file is None else file / v.file
    recorded = "" if v.recorded is None else (f"records [{', '.join(v.recorded)}], check finds "
                                              f"[{', '.join(v.issues)}]" + ("; " if v.issues else ""))
    line = f"{where} row {v.row}{f' ({v.id})' if v.id else ''}: " + recorded + "; ".join(
        f"{code}: {detail}" for code, detail in zip(v.issues, v.details))
    if "unreadable_row" in v.issues:
        console.print(Text.assemble(("error: ", "bold red"), line), soft_wrap=True)
    else:
        report.print(Text(line), soft_wrap=True)
