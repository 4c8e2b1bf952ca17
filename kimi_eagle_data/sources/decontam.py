"""Decontamination: drop prompts that share an n-gram with an evaluation set.

Drafters are measured on MT-Bench, GSM8K, MATH-500, HumanEval and the like; a training prompt
that contains an evaluation question inflates the measured acceptance rate. Given local files of
those sets (JSONL / Parquet / JSON array, a text field each — the project ships no eval data),
a prompt is `contaminated` when any of its messages shares a word n-gram (default 13 words, the
GPT-3 paper's choice) with an evaluation text. Words are `\\w+` runs of the normalized text
(NFKC, casefold: `dedup.normalize`), so case, punctuation and spacing do not hide an overlap.
An evaluation text shorter than `ngram` words but with at least `min_words` words counts as one
whole n-gram of its own length; shorter ones (e.g. "What is 2+2?") are too generic and ignored
(counted in `ignored_short`).

The field may name a string or a list of strings (MT-Bench's `turns`), or a chat list of
`{content}` / `{value}` objects; `fields` may list several (e.g. HumanEval `prompt`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.sources.dedup import normalize
from kimi_eagle_data.records import SourceRowError
from kimi_eagle_data.sources.readers import SourceFileError, iter_file

_WORD = re.compile(r"\w+")
DEFAULT_FIELDS = ("question", "prompt", "problem", "turns", "text", "input", "instruction")


@dataclass(frozen=True)
class EvalSet:
    name: str
    path: str
    fields: tuple[str, ...] = ()          # () = the first of DEFAULT_FIELDS a row has


@dataclass(frozen=True)
class DecontamSettings:
    sets: tuple[EvalSet, ...] = ()
    ngram: int = 13
    min_words: int = 8


class DecontamError(KimiDataError, FileNotFoundError):
    """An evaluation file that cannot be used (reported as one line; prepare does not run)."""


def words(text: str) -> list[str]:
    return _WORD.findall(normalize(text))


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        out: list[str] = []
        for v in value:
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, dict):
                c = v.get("content", v.get("value"))
                if isinstance(c, str):
                    out.append(c)
        return out
    return []


@dataclass
class EvalStats:
    rows: int = 0
    texts: int = 0
    ngrams: int = 0
    ignored_short: int = 0
    bad_rows: int = 0


class Decontaminator:
    def __init__(self, settings: DecontamSettings):
        if settings.ngram < 1 or settings.min_words < 1:
            raise DecontamError("decontam: ngram and min_words must be at least 1")
        self.n = settings.ngram
        self.min_words = min(settings.min_words, settings.ngram)
        self.grams: dict[int, dict[str, tuple[str, int]]] = {}   # length -> gram -> (set, row)
        self.stats: dict[str, EvalStats] = {}
        for es in settings.sets:
            st = self.stats[es.name] = EvalStats()
            try:
                for row_n, row in iter_file(Path(es.path)):
                    if isinstance(row, SourceRowError):
                        st.bad_rows += 1
                        continue
                    st.rows += 1
                    keys = es.fields or next(((k,) for k in DEFAULT_FIELDS if k in row), ())
                    texts = [t for k in keys for t in _texts(row.get(k))]
                    if not texts:
                        st.bad_rows += 1
                    for t in texts:
                        st.texts += 1
                        self._add(words(t), es.name, row_n, st)
            except SourceFileError as e:
                raise DecontamError(f"eval set {es.name!r}: {e}") from None
            if not st.texts:
                fields = ", ".join(es.fields or DEFAULT_FIELDS)
                raise DecontamError(f"eval set {es.name!r} ({es.path}): no text found in field(s) {fields}; "
                                    "set `fields` in [[decontam.sets]]")

    def _add(self, ws: list[str], name: str, row_n: int, st: EvalStats) -> None:
        if len(ws) >= self.n:
            table = self.grams.setdefault(self.n, {})
            for i in range(len(ws) - self.n + 1):
                if table.setdefault(" ".join(ws[i:i + self.n]), (name, row_n)) == (name, row_n):
                    st.ngrams += 1
        elif len(ws) >= self.min_words:
            self.grams.setdefault(len(ws), {}).setdefault(" ".join(ws), (name, row_n))
            st.ngrams += 1
        else:
            st.ignored_short += 1

    @property
    def active(self) -> bool:
        return bool(self.grams)

    def check(self, messages: list[dict[str, Any]]) -> tuple[str, int, str] | None:
        """(eval set, eval row, the shared n-gram) for the first overlap, else None."""
        if not self.grams:
            return None
        for m in messages:
            content = m.get("content")
            if not isinstance(content, str) or not content:
                continue
            ws = words(content)
            for length, table in self.grams.items():
                for i in range(len(ws) - length + 1):
                    hit = table.get(" ".join(ws[i:i + length]))
                    if hit:
                        return hit[0], hit[1], " ".join(ws[i:i + length])
        return None

    def summary(self) -> dict[str, dict[str, int]]:
        return {name: dict(vars(st)) for name, st in self.stats.items()}
