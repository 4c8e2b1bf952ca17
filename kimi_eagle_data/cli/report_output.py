"""What the report commands (`stats`, `plan`, `inspect`) share: their JSON output, number formats, and the table of
a workdir's generation so far (what each prints while nothing is validated yet)."""

from __future__ import annotations

from typing import Any

import click
import orjson

from kimi_eagle_data.cli.common import out


def print_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


def num(x: float | int | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:,.{digits}f}"
    return f"{int(x):,}"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def print_progress(so_far, *, as_json: bool = False) -> None:
    """The generation progress of a workdir with nothing validated yet (reports.stats.NothingValidatedYet): the
    accounting table generate prints, read from the checkpoints as they are committed."""
    from rich.table import Table

    # lazy: keeps pyarrow.parquet (the checkpoints' progress) out of every CLI start
    from kimi_eagle_data.store.progress import PROGRESS_KEYS

    rows = dict(so_far.progress)
    overall = {k: sum(r[k] for r in rows.values()) for k in PROGRESS_KEYS}
    if as_json:
        print_json({"workdir": str(so_far.workdir.root), "validated": False, "writer": so_far.writer,
                     "configs": rows, "overall": overall})
        return
    later = overall["later_turns"] > 0
    keys = [k for k in PROGRESS_KEYS if later or k != "later_turns"]
    t = Table(title=f"generation so far: {so_far.workdir.root} (from the checkpoint; nothing validated yet)")
    t.add_column("config")
    for k in keys:
        t.add_column(k.replace("_", " "), justify="right")
    for name, row in [*rows.items(), ("all", overall)]:
        t.add_row(name, *(num(row[k]) for k in keys), style="bold" if name == "all" else None)
    out.print(t)
    out.print(f"{'writing now: ' + so_far.writer if so_far.writer else 'no command is writing the workdir now'}; "
              "lengths, finish reasons and rejection reasons come once it is validated: `kimi-data validate "
              f"--workdir {so_far.workdir.root}` (build and emit validate too)", highlight=False, soft_wrap=True)

