"""Wording of user-facing messages: counts (`counted(1, "token")` is "1 token", `counted(2, "token")` "2 tokens")
and quoted excerpts of text."""

from __future__ import annotations


def plural(n: int | float, noun: str, plural_form: str | None = None) -> str:
    """`noun` as `n` of it reads: singular for exactly 1, else `plural_form` (default noun + "s")."""
    return noun if n == 1 else plural_form or noun + "s"


def counted(n: int | float, noun: str, plural_form: str | None = None) -> str:
    """`n` (thousands separated) and the noun in the form that count takes: "1 token", "1,024 tokens"."""
    return f"{n:,} {plural(n, noun, plural_form)}"


def excerpt(text: str, limit: int = 60) -> str:
    """`text` quoted as Python writes it (escapes visible), cut to `limit` characters with an ellipsis."""
    return repr(text if len(text) <= limit else text[:limit] + "…")
