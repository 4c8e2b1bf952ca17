"""`kimi-data check` and `kimi-data render`: the validator and the prompt renderer as tools for any data.

`check` audits EAGLE-3 data made by this project or by another pipeline: every row gets the
verdict of `validate.Validator`, the very rules `validate` applies, so a row's reasons here equal the
`issues` our own dataset stores for it. Rows come in one of two forms:

  (a) `input_ids` + `loss_mask` (the prompt is everything before the first 1) or `input_ids` + `prompt_len`;
      optional `tools` (JSON string or list) and `finish_reason` (without it: `stop` when the completion
      ends with the end-of-turn token, else `length`);
  (b) `messages` + `completion` (text with special tokens written out) + optional `tools`: the prompt is
      rendered with `render_prompt`, the completion encoded with the tokenizer's special tokens recognised.

A form-(a) row without a `tools` value (a SpecForge export) gets the tool names its prompt declares, read
back from the tool-declaration turn by the profile (`ModelProfile.declared_tool_names`), so its verdict is
the one the dataset's own `tools` column gives. Files are streamed (Parquet in record batches, JSONL line by
line): memory stays flat whatever the file size.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.profile import ModelProfile, ProfileTokens
from kimi_eagle_data.prompts.tokenizer import render_prompt
from kimi_eagle_data.validate.rules import REASONS
from kimi_eagle_data.validate.validator import Validator

# Reasons `check` adds to the validator's codes (docs/token-rules.md): what only a foreign file can get wrong.
CHECK_REASONS = {
    "unreadable_row": "a row with none of the forms check reads (input_ids + loss_mask or prompt_len; "
                      "messages + completion), or with values of the wrong type",
    "loss_mask_length_mismatch": "len(loss_mask) differs from len(input_ids)",
    "loss_mask_not_suffix": "a loss_mask 0 after the first 1: the generated tokens are not one suffix "
                            "(checked as prompt = tokens before the first 1)",
    "template_error": "form (b): the chat template failed to render the row's messages and tools",
}

# Columns read from a Parquet file (others, e.g. a dataset's `messages` next to its `input_ids`, are skipped).
_LIST_COLUMNS = ("input_ids", "loss_mask")
_SCALAR_COLUMNS = ("id", "prompt_len", "tools", "finish_reason", "finish_detail", "completion")
BATCH_ROWS = 1024


class CheckInputError(KimiDataError, ValueError):
    """The file as a whole cannot be read (one line: what, where, what to do)."""


class _Unreadable(ValueError):
    pass


def describe(code: str) -> str:
    return REASONS.get(code) or CHECK_REASONS.get(code, "")


@dataclass
class RowVerdict:
    row: int                               # 0-based position in the file
    id: str | None
    issues: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    tokens: int = 0

    @property
    def valid(self) -> bool:
        return not self.issues

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"row": self.row, "valid": self.valid, "issues": self.issues}
        if self.id is not None:
            d["id"] = self.id
        d["details"] = self.details
        return d


class Checker:
    """One profile + tokenizer: construct once, then `check(row_dict, index)` per row."""

    def __init__(self, profile: ModelProfile, tokenizer, max_seq_len: int | None = None,
                 keep_truncated: bool = False):
        self.profile = profile
        self.tokenizer = tokenizer
        self.tokens = ProfileTokens.from_tokenizer(profile, tokenizer)
        self.validator = Validator(self.tokens, tokenizer, max_seq_len or profile.max_seq_len,
                                   keep_truncated=keep_truncated)
        self._system_id = tokenizer.convert_tokens_to_ids(profile.turn_tokens["system"])
        self._eot_id = self.tokens.end_of_turn

    def check(self, raw: Any, row: int) -> RowVerdict:
        rid = raw.get("id") if isinstance(raw, dict) else None
        out = RowVerdict(row=row, id=str(rid) if rid is not None else None)
        try:
            prompt, output, tools, finish, detail = self._read(raw, out)
        except _Unreadable as e:
            out.issues.insert(0, "unreadable_row")
            out.details.insert(0, str(e))
            return out
        if prompt is None:          # template_error, already recorded
            return out
        out.tokens = int(len(prompt) + len(output))
        inferred = finish is None
        if inferred:
            # No finish_reason (a SpecForge export keeps only ids): engines stop only on the stop token and
            # keep it, so a completion that does not end with it ran out of tokens.
            finish = "stop" if output.size and int(output[-1]) == self._eot_id else "length"
        v = self.validator.validate(prompt, output, finish, detail, tools)
        out.issues += v.issues
        out.details += [d + (" (no finish_reason in the row: taken as length)" if inferred and c == "truncated" else "")
                        for c, d in zip(v.issues, v.details)]
        return out

    # -- the two row forms -----------------------------------------------------------------------

    def _read(self, raw: Any, out: RowVerdict):
        if not isinstance(raw, dict):
            raise _Unreadable(f"a row is a JSON object, got {type(raw).__name__}")
        finish = raw.get("finish_reason") or None
        if finish is not None and not isinstance(finish, str):
            raise _Unreadable(f"finish_reason {finish!r:.40} is not a string")
        detail = raw.get("finish_detail")
        if isinstance(detail, (str, bytes)):
            detail = _json(detail, "finish_detail") if detail else None
        detail = detail if isinstance(detail, dict) else None
        if raw.get("input_ids") is not None:
            ids = _ids(raw["input_ids"], "input_ids")
            start = self._prompt_end(raw, ids, out)
            prompt, output = ids[:start], ids[start:]
            tools = self._tools(raw)
            if raw.get("tools") is None:       # no tools column: what the prompt declares
                tools = self._declared_in(prompt)
            return prompt, output, tools, finish, detail
        if raw.get("messages") is not None and raw.get("completion") is not None:
            messages, completion = raw["messages"], raw["completion"]
            if not isinstance(messages, list) or not isinstance(completion, str):
                raise _Unreadable("messages must be a list and completion a string")
            tools = self._tools(raw)
            try:
                prompt = np.asarray(render_prompt(self.tokenizer, messages, tools), dtype=np.int64)
            except Exception as e:  # jinja and the tool encoder raise many types; the message is what matters
                out.issues.append("template_error")
                out.details.append(f"chat template failed: {' '.join(str(e).split())[:300]}")
                return None, None, None, finish, detail
            output = np.asarray(self.tokenizer.encode(completion, add_special_tokens=False), dtype=np.int64)
            return prompt, output, tools, finish, detail
        keys = ", ".join(sorted(raw)[:8]) or "none"
        raise _Unreadable(f"no input_ids (+ loss_mask or prompt_len) and no messages + completion (keys: {keys})")

    def _prompt_end(self, raw: dict, ids: np.ndarray, out: RowVerdict) -> int:
        mask = raw.get("loss_mask")
        if mask is not None:
            mask = _ids(mask, "loss_mask", kinds="iub")      # some pipelines store the mask as booleans
            if mask.size != ids.size:
                out.issues.append("loss_mask_length_mismatch")
                out.details.append(f"loss_mask has {mask.size} values, input_ids {ids.size}")
            ones = np.flatnonzero(mask[:ids.size])
            start = int(ones[0]) if ones.size else int(ids.size)
            if ones.size and ones.size != min(mask.size, ids.size) - start:
                gap = start + int(np.flatnonzero(mask[start:ids.size] == 0)[0])
                out.issues.append("loss_mask_not_suffix")
                out.details.append(f"loss_mask is 0 at {gap} after its first 1 at {start}")
            return start
        plen = raw.get("prompt_len")
        if plen is None:
            raise _Unreadable("input_ids without loss_mask or prompt_len: cannot tell prompt from completion")
        if isinstance(plen, bool) or not isinstance(plen, (int, np.integer)) or not 0 <= plen <= ids.size:
            raise _Unreadable(f"prompt_len {plen!r:.40} is not an integer in [0, {ids.size}]")
        return int(plen)

    @staticmethod
    def _tools(raw: dict) -> list | None:
        tools = raw.get("tools")
        if isinstance(tools, (str, bytes)):
            tools = _json(tools, "tools") if tools else None
        if tools is not None and not isinstance(tools, list):
            raise _Unreadable(f"tools is a {type(tools).__name__}, expected a list (or its JSON)")
        return tools or None

    def _declared_in(self, prompt: np.ndarray) -> list[dict] | None:
        """Tools (names only: all the validator reads) from the prompt's tool-declaration turn."""
        for begin in np.flatnonzero(prompt == self._system_id).tolist():
            ends = np.flatnonzero(prompt[begin:] == self._eot_id)
            end = begin + int(ends[0]) + 1 if ends.size else prompt.size
            text = self.tokenizer.decode(prompt[begin:end].tolist(), skip_special_tokens=False)
            names = self.profile.declared_tool_names(text)
            if names is not None:
                return [{"name": n} for n in sorted(names)] or None
        return None


def _json(text: str | bytes, what: str):
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise _Unreadable(f"{what} is not valid JSON ({e})") from None


def _ids(value, what: str, kinds: str = "iu") -> np.ndarray:
    # One C conversion, then the dtype says whether every element was an integer (bools, floats, strings
    # and nested lists give another kind); no Python loop over the tokens.
    if isinstance(value, (list, tuple, np.ndarray)):
        a = np.asarray(value) if len(value) else np.zeros(0, dtype=np.int64)
        if a.ndim == 1 and a.dtype.kind in kinds:
            return a.astype(np.int64, copy=False)
    raise _Unreadable(f"{what} is not a list of integers")


# -- reading files ------------------------------------------------------------------------------

def open_rows(path: Path) -> tuple[Iterator[tuple[Any, int]], int]:
    """(rows, total): rows yields (row dict, an _Unreadable, or None for a blank line; progress advance);
    total is the progress bar's: the number of rows (Parquet) or bytes (JSONL)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise CheckInputError(f"cannot read {path}: {e.strerror}") from None
    if magic == b"PAR1":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
        except Exception as e:  # pyarrow raises ArrowInvalid, OSError, …
            raise CheckInputError(f"{path} is not a readable Parquet file: {' '.join(str(e).split())}") from None
        return _parquet_rows(pf, path), pf.metadata.num_rows
    return _jsonl_rows(path), path.stat().st_size


def _jsonl_rows(path: Path) -> Iterator[tuple[Any, int]]:
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                yield None, len(line)       # blank lines are not rows
                continue
            try:
                yield orjson.loads(line), len(line)
            except orjson.JSONDecodeError as e:
                yield _Unreadable(f"not valid JSON ({e})"), len(line)


def _parquet_rows(pf, path: Path) -> Iterator[tuple[Any, int]]:
    names = set(pf.schema_arrow.names)
    wanted = [c for c in (*_LIST_COLUMNS, *_SCALAR_COLUMNS) if c in names]
    if "completion" in names and "messages" in names:
        wanted.append("messages")       # form (b); a dataset's decoded `messages` alone is not read
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
            cols: dict[str, Any] = {}
            for name in batch.schema.names:
                arr = batch.column(name)
                if name in _LIST_COLUMNS and arr.null_count == 0 and arr.values.null_count == 0:
                    cols[name] = (arr.offsets.to_numpy(), arr.values.to_numpy(zero_copy_only=False))
                else:
                    cols[name] = arr.to_pylist()
            for i in range(batch.num_rows):
                row = {}
                for name, col in cols.items():
                    if isinstance(col, tuple):
                        offsets, values = col
                        row[name] = values[offsets[i]:offsets[i + 1]]
                    else:
                        row[name] = col[i]
                yield row, 1
    except OSError as e:   # a file cut short or corrupt past its footer
        raise CheckInputError(f"{path}: Parquet read failed: {' '.join(str(e).split())}") from None


def check_file(checker: Checker, rows: Iterator[tuple[Any, int]]) -> Iterator[tuple[RowVerdict | None, int]]:
    """(verdict, progress advance) per line or row; None for a blank JSONL line (not a row, not counted)."""
    n = 0
    for raw, advance in rows:
        if raw is None:
            yield None, advance
            continue
        if isinstance(raw, _Unreadable):
            yield RowVerdict(row=n, id=None, issues=["unreadable_row"], details=[str(raw)]), advance
        else:
            yield checker.check(raw, n), advance
        n += 1


# -- render -------------------------------------------------------------------------------------

def read_render_row(source: str, row: int | None) -> tuple[list, list | None]:
    """(messages, tools) of one JSON object (a file, or `-` for stdin), or of line `row` of a JSONL file."""
    where = "stdin" if source == "-" else source
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as e:
        raise CheckInputError(f"cannot read {where}: {e.strerror}") from None
    if row is not None:
        lines = [ln for ln in data.splitlines() if ln.strip()]
        if not 0 <= row < len(lines):
            raise CheckInputError(f"{where} has {len(lines)} JSON lines; --row {row} is out of range")
        data, where = lines[row], f"{where} row {row}"
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        hint = "; for a JSONL file pick a line with --row N" if row is None and data.count(b"\n") > 1 else ""
        raise CheckInputError(f"{where} is not valid JSON ({e}){hint}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
        raise CheckInputError(f'{where} has no "messages" list; expected {{"messages": [...], "tools": [...]}}')
    try:
        tools = Checker._tools(obj)
    except _Unreadable as e:
        raise CheckInputError(f"{where}: {e}") from None
    return obj["messages"], tools
