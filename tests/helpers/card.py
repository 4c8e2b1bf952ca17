"""The dataset card as a Markdown renderer reads it (markdown-it-py, CommonMark + GFM tables, as the Hub renders
cards)."""

from __future__ import annotations

import re
from pathlib import Path

CELL_SPLIT = re.compile(r"(?<!\\)\|")


def card_body(card: str) -> str:
    assert card.startswith("---\n")
    end = card.index("\n---\n", 4)
    return card[end + len("\n---\n"):]


def cells(line: str) -> int:
    """Cells of a GFM table row as written (a `\\|` is text, not a separator)."""
    return len(CELL_SPLIT.split(line.strip().strip("|")))


def check_card_markdown(card: str, dataset: Path) -> dict[str, list]:
    """Render the card body; assert the structure; return its tables (rows of source lines), images and links."""
    from markdown_it import MarkdownIt

    body = card_body(card)
    for leak in ("{%", "%}", "{{", "}}", "{#"):
        assert leak not in body, f"template syntax {leak!r} in the card"
    lines = body.splitlines()
    tokens = MarkdownIt("commonmark").enable("table").parse(body)
    tables, in_table, images, links = [], set(), [], []
    for i, t in enumerate(tokens):
        if t.type == "table_open":
            start, end = t.map
            rows = [lines[n] for n in range(start, end) if n != start + 1]    # header + body rows
            assert rows and all(cells(r) == cells(rows[0]) for r in rows), rows
            tables.append(rows)
            in_table.update(range(start, end))
        if t.type == "inline":
            for c in t.children or []:
                if c.type == "image":
                    images.append(c.attrs["src"])
                if c.type == "link_open":
                    links.append(c.attrs["href"])
    # A line that looks like a table row but is not in a table fell out of it (e.g. after a blank line).
    strays = [line for n, line in enumerate(lines) if line.startswith("|") and n not in in_table]
    assert not strays, strays
    for target in images + links:
        if re.match(r"^[a-z]+://", target):
            assert target.startswith("https://huggingface.co/"), target
        else:
            assert not target.startswith(("/", "#")) and (dataset / target).is_file(), target
    return {"tables": tables, "images": images, "links": links}
