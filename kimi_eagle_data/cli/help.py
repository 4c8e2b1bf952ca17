"""A command's help with its options under headings: the command's own options first, then the settings it takes
(cli/options.py options_for) under the heading of each (settings.SECTIONS: Run, Model, Sources, Sampling, Engine,
Validation, Output)."""

from __future__ import annotations

import click

from kimi_eagle_data.settings import SECTIONS

OWN = "Options"


class SectionedCommand(click.Command):
    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            if not isinstance(param, click.Option):   # arguments are in the usage line
                continue
            record = param.get_help_record(ctx)
            if record is not None:
                rows.setdefault(getattr(param, "section", OWN), []).append(record)
        for heading in (OWN, *SECTIONS):
            if rows.get(heading):
                with formatter.section(heading):
                    formatter.write_dl(rows[heading])
