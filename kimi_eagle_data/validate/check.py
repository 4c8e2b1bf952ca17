"""`kimi-data check` and `kimi-data render`: the validator and the prompt renderer as tools for any data.

`check` audits EAGLE-3 data made by this project or by another pipeline: every row gets the verdict of
the run's format's validator (`ChatFormat.validator`), the very rules `validate` applies (docs/token-rules.md), so a row's reasons here
equal the `issues` our own dataset stores for it. Rows come in one of three forms:

  (a) `input_ids` + `loss_mask` (the prompt is everything before the first 1) or `input_ids` + `prompt_len`
      (SpecForge's pre-tokenized JSONL, speculators' save_to_disk datasets, ours); optional `tools` (JSON
      string or list) and `finish_reason` (without it: `stop` when the completion ends with the
      end-of-turn token, else `length`);
  (b) `messages` + `completion` (text with special tokens written out) + optional `tools`: the prompt is
      rendered by the format (`render_prompt`), the completion encoded with the tokenizer's special tokens recognised;
  (c) SpecForge's raw rows, `id` + `conversations` [{role, content}, …] + optional `tools`: the last turn
      (the assistant's) is the completion, as the target writes an answer (`render_answer`); the turns
      before it are the prompt, rendered as in (b).

Each row's mode (thinking / instant) is read from its prompt's end, as the validator reads it: a form-(a) row
carries it in its ids; a form-(b) or (c) row is rendered in the mode its optional `mode` field names ("thinking",
the default, or "instant": the template's `thinking=False`). The verdict reports it (`mode`).

A form-(a) row without a `tools` value (a SpecForge export) gets the tool names its prompt declares, read
back from its prompt by the format (`ChatFormat.declared_tools`), so its verdict is
the one the dataset's own `tools` column gives. Inputs are streamed (validate/check_input.py): memory stays
flat whatever their size. Rows are numbered from 1 (a JSONL row by its line number).

A dataset this project emitted (WORKDIR/dataset) is checked against itself: every shard its manifest lists, with
the profile, max_seq_len and keep_truncated its manifest records, and each row passes when its verdict is the
`issues` the row records (a `rejected` row passes too, when it was rejected for exactly those reasons).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from kimi_eagle_data.chat_format import ChatFormat
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.json_text import UTF8_BOM, JsonTextError, parse_json
from kimi_eagle_data.model_profile import MODES, THINKING, ModelProfile
from kimi_eagle_data.prompts.tokenizer import special_text_line, tokenizer_fingerprint
from kimi_eagle_data.sources.filters import CHARS_PER_TOKEN_BOUND, ROW_BYTES_PER_CHAR
from kimi_eagle_data.sources.rows import split_reasoning, unknown_role
from kimi_eagle_data.validate.check_input import FORMS_EXPECTED, CheckInputError, Unreadable, emitted_rows
from kimi_eagle_data.wording import counted

log = logging.getLogger(__name__)

# Reasons `check` adds to the validator's codes (docs/token-rules.md): what only a foreign file can get wrong.
CHECK_REASONS = {
    "unreadable_row": "a row with none of the forms check reads (input_ids + loss_mask or prompt_len; "
                      "messages + completion; conversations), or with values of the wrong type",
    "unknown_role": "a message role other than system, user, assistant, tool (prepare rejects such a "
                    "source row with the same code)",
    "loss_mask_length_mismatch": "len(loss_mask) differs from len(input_ids)",
    "loss_mask_not_suffix": "a loss_mask 0 after the first 1: the generated tokens are not one suffix "
                            "(checked as prompt = tokens before the first 1)",
    "template_error": "form (b): the chat template failed to render the row's messages and tools",
    "row_too_large": "a JSONL row longer in bytes than any row within max_seq_len needs (max_seq_len × "
                     f"{CHARS_PER_TOKEN_BOUND * ROW_BYTES_PER_CHAR}, as prepare caps a source row): not parsed, so "
                     "one huge row costs no memory",
    "special_token_in_text": "a prompt message's text (or the tools) holds a special-token string, which the "
                             "tokenizer encodes as the special token itself: a turn boundary or control token "
                             "forged inside a message (prepare rejects such a source row: special_token_text)",
}

# check's flags about a row's source text, never among the `issues` validate records.
NOT_RECORDED = frozenset({"special_token_in_text"})


def describe(code: str, own: dict[str, str]) -> str:
    """A reason code's meaning: `own` (the run's format's descriptions, `reason_descriptions()`), else
    check's."""
    return own.get(code) or CHECK_REASONS.get(code, "")


@dataclass
class RowVerdict:
    row: int                               # 1-based: the JSONL line number, the Parquet/Arrow row
    id: str | None
    issues: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    tokens: int = 0
    mode: str | None = None                # thinking / instant, from the prompt's end (None: not read)
    recorded: list[str] | None = None      # a row of an emitted dataset: the `issues` it records
    file: str | None = None                # ... and its shard, relative to the dataset

    @property
    def valid(self) -> bool:
        return not self.issues

    @property
    def passed(self) -> bool:
        """Valid; a row of an emitted dataset: its verdict is the one it records (special_token_in_text aside:
        it says what the source text held, which prepare decided on, rejecting the row or keeping it as served)."""
        if self.recorded is None:
            return self.valid
        return [c for c in self.issues if c not in NOT_RECORDED] == self.recorded

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"row": self.row, "valid": self.valid, "issues": self.issues}
        if self.recorded is not None:
            d.update(file=self.file, recorded=self.recorded, passed=self.passed)
        if self.mode is not None:
            d["mode"] = self.mode
        if self.id is not None:
            d["id"] = self.id
        d["details"] = self.details
        return d


class Checker:
    """One profile + tokenizer: construct once, then `check(row_dict, index)` per row."""

    def __init__(self, profile: ModelProfile, tokenizer, max_seq_len: int | None = None,
                 keep_truncated: bool = False, *, chat_format: ChatFormat):
        self.profile = profile
        self.tokenizer = tokenizer
        # The profile's format (formats.format_of, handed by the CLI), bound here where it is not already.
        self.chat_format = chat_format.bind(profile, tokenizer)
        max_len = max_seq_len or profile.max_seq_len
        self.tokens = self.chat_format.tokens
        self.validator = self.chat_format.validator(max_len, keep_truncated=keep_truncated)
        self.special_text = self.chat_format.special_text()     # None: typed markers stay text (K3)
        self._eot_id = self.tokens.end_of_turn

    def check(self, raw: Any, row: int) -> RowVerdict:
        rid = raw.get("id") if isinstance(raw, dict) else None
        out = RowVerdict(row=row, id=str(rid) if rid is not None else None)
        try:
            prompt, output, tools, finish, detail = self._read(raw, out)
        except Unreadable as e:
            out.issues.insert(0, "unreadable_row")
            out.details.insert(0, str(e))
            return out
        if prompt is None:          # unknown_role or template_error, already recorded
            return out
        out.tokens = int(len(prompt) + len(output))
        inferred = finish is None
        if inferred:
            # No finish_reason (a SpecForge export keeps only ids): engines stop only on the stop token and
            # keep it, so a completion that does not end with it ran out of tokens.
            finish = "stop" if output.size and int(output[-1]) == self._eot_id else "length"
        v = self.validator.validate(prompt, output, finish, detail, tools)
        out.mode = v.mode
        out.issues += v.issues
        out.details += [d + (" (no finish_reason in the row: taken as length)" if inferred and c == "truncated" else "")
                        for c, d in zip(v.issues, v.details)]
        self._special_text(raw, tools, out)
        return out

    # -- the two row forms -----------------------------------------------------------------------

    def _read(self, raw: Any, out: RowVerdict):
        if not isinstance(raw, dict):
            raise Unreadable(f"a row is a JSON object, got {type(raw).__name__}")
        finish = raw.get("finish_reason") or None
        if finish is not None and not isinstance(finish, str):
            raise Unreadable(f"finish_reason {finish!r:.40} is not a string")
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
                tools = self.chat_format.declared_tools(prompt)
            return prompt, output, tools, finish, detail
        if raw.get("messages") is not None and raw.get("completion") is not None:
            messages, completion = raw["messages"], raw["completion"]
            if not isinstance(messages, list) or not isinstance(completion, str):
                raise Unreadable("messages must be a list and completion a string")
            tools = self._tools(raw)
            prompt = self._render(messages, tools, out, "messages", _mode(raw))
            if prompt is None:
                return None, None, None, finish, detail
            output = np.asarray(self.tokenizer.encode(completion, add_special_tokens=False), dtype=np.int64)
            return prompt, output, tools, finish, detail
        if raw.get("conversations") is not None:
            messages, answer = _split_conversation(raw["conversations"])
            tools = self._tools(raw)
            prompt = self._render(messages, tools, out, "conversations", _mode(raw))
            if prompt is None:
                return None, None, None, finish, detail
            try:
                output = np.asarray(self.chat_format.render_answer(answer)[0],
                                    dtype=np.int64)
            except KimiDataError as e:      # the format's one line: what in the answer it cannot write
                raise Unreadable(f"the last conversations turn: {e}") from e
            return prompt, output, tools, finish, detail
        keys = ", ".join(sorted(raw)[:8]) or "none"
        raise Unreadable(f"none of the forms check reads: {FORMS_EXPECTED} (keys: {keys})")

    def _special_text(self, raw: dict, tools: list | None, out: RowVerdict) -> None:
        """special_token_in_text when the text of the row's prompt messages (a row's `messages` or
        `conversations` up to its completion: a last assistant turn is the completion, never looked at) or of
        its tools holds special-token strings. A row with ids only has no message text to look at."""
        messages = raw.get("messages") if raw.get("messages") is not None else raw.get("conversations")
        if not isinstance(messages, list):
            messages = []
        if raw.get("completion") is None and messages and isinstance(messages[-1], dict) \
                and messages[-1].get("role") == "assistant":
            messages = messages[:-1]
        found = self.special_text.in_chat(messages, tools) if self.special_text is not None else None
        if found is not None:
            out.issues.append("special_token_in_text")
            out.details.append(f"{special_text_line(found)}: the tokenizer encodes it as the special token itself")

    def _render(self, messages: list, tools: list | None, out: RowVerdict, col: str,
                mode: str = THINKING) -> np.ndarray | None:
        """The prompt ids of `messages`; None with the row's issue recorded when they cannot be rendered."""
        problem = unknown_role(messages, col)
        if problem is not None:
            out.issues.append("unknown_role")
            out.details.append(problem)
            return None
        try:
            return np.asarray(self.chat_format.render_prompt(messages, tools, mode), dtype=np.int64)
        except Exception as e:  # jinja and the tool encoder raise many types; the message is what matters
            out.issues.append("template_error")
            out.details.append(f"chat template failed: {' '.join(str(e).split())[:300]}")
            return None

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
            raise Unreadable("input_ids without loss_mask or prompt_len: cannot tell prompt from completion")
        if isinstance(plen, bool) or not isinstance(plen, (int, np.integer)) or not 0 <= plen <= ids.size:
            raise Unreadable(f"prompt_len {plen!r:.40} is not an integer in [0, {ids.size}]")
        return int(plen)

    @staticmethod
    def _tools(raw: dict) -> list | None:
        tools = raw.get("tools")
        if isinstance(tools, (str, bytes)):
            tools = _json(tools, "tools") if tools else None
        if tools is not None and not isinstance(tools, list):
            raise Unreadable(f"tools is a {type(tools).__name__}, expected a list (or its JSON)")
        return tools or None


def _split_conversation(turns: Any) -> tuple[list[dict], dict[str, Any]]:
    """A SpecForge raw row's `conversations` -> (the prompt messages, its last turn as the answer).

    The last assistant turn is the completion (what the target wrote after the whole history); the turns
    before it are the prompt, rendered as `messages` rows are. Its text becomes the ids the target writes
    for an answer (`render_answer`: reasoning, think_close, content, tool calls, end_of_turn); a leading
    `<think>…</think>` in the text is its reasoning."""
    if not isinstance(turns, list) or not turns or not all(isinstance(t, dict) for t in turns):
        raise Unreadable("conversations must be a non-empty list of {role, content} objects")
    last = turns[-1]
    if "role" not in last and "from" in last:
        raise Unreadable("conversations turns are ShareGPT {from, value}; check reads SpecForge's {role, content}")
    if last.get("role") != "assistant":
        raise Unreadable(f"conversations ends with a {last.get('role')!r} turn; its last turn must be the "
                         "assistant's (the completion)")
    content = last.get("content")
    if content is not None and not isinstance(content, str):
        raise Unreadable(f"the last conversations turn's content is a {type(content).__name__}, expected a string")
    reasoning = last.get("reasoning_content")
    if reasoning is None:
        split = split_reasoning(content or "")
        content, reasoning = split["content"], split.get("reasoning_content")
    answer: dict[str, Any] = {"reasoning": reasoning, "content": content or ""}
    if last.get("tool_calls"):
        answer["tool_calls"] = last["tool_calls"]
    return [dict(t) for t in turns[:-1]], answer


def _mode(raw: dict) -> str:
    """A form-(b)/(c) row's `mode` (default thinking)."""
    mode = raw.get("mode") or THINKING
    if mode not in MODES:
        raise Unreadable(f"mode {mode!r:.40} is not one of {', '.join(MODES)}")
    return mode


def _json(text: str | bytes, what: str):
    try:
        return parse_json(text)
    except JsonTextError as e:
        raise Unreadable(f"{what} is {e}") from None


def _ids(value, what: str, kinds: str = "iu") -> np.ndarray:
    # One C conversion, then the dtype says whether every element was an integer (bools, floats, strings
    # and nested lists give another kind); no Python loop over the tokens.
    if isinstance(value, (list, tuple, np.ndarray)):
        a = np.asarray(value) if len(value) else np.zeros(0, dtype=np.int64)
        if a.ndim == 1 and a.dtype.kind in kinds:
            return a.astype(np.int64, copy=False)
    raise Unreadable(f"{what} is not a list of integers")


def check_file(checker: Checker, rows: Iterator[tuple[Any, int]]) -> Iterator[tuple[RowVerdict | None, int]]:
    """(verdict, progress advance) per line or row; None for a blank JSONL line (not a row).
    Rows are numbered from 1; a JSONL row by its line number (blank lines counted), as editors, `sed -n Np`
    and prepare's rejects file count, so the number finds the line."""
    n = 0
    for raw, advance in rows:
        n += 1
        if raw is None:
            yield None, advance
            continue
        if isinstance(raw, Unreadable):
            yield RowVerdict(row=n, id=None, issues=[raw.code], details=[str(raw)]), advance
        else:
            yield checker.check(raw, n), advance


def check_dataset(checker: Checker, root: Path, shards: list[Path]) -> Iterator[tuple[RowVerdict, int]]:
    """(verdict, 1) per row of the shards of an emitted dataset at `root`, each with the issues it records; rows
    are numbered from 1 in each shard."""
    for path in shards:
        rel = path.relative_to(root).as_posix()
        for n, raw in enumerate(emitted_rows(path), 1):
            v = checker.check(raw, n)
            v.recorded, v.file = list(raw.get("issues") or ()), rel
            yield v, 1


def tokenizer_problem(tokenizer, given: str, made_with: dict[str, Any], where: Path) -> str | None:
    """Why `tokenizer` (loaded from `given`) cannot judge the rows of the dataset at `where`, whose manifest's
    provenance is `made_with`: another vocabulary than the one that rendered them (None when it is that one, or
    when the manifest records none)."""
    recorded, sha = made_with.get("tokenizer_sha256"), tokenizer_fingerprint(tokenizer)["tokenizer_sha256"]
    if not recorded or sha == recorded:
        return None
    return (f"{where} was made with another tokenizer ({made_with.get('tokenizer_path', '?')}, sha256 "
            f"{recorded[:12]}…) than {given} (sha256 {sha[:12]}…); pass the one it was made with: --tokenizer PATH")


# -- render -------------------------------------------------------------------------------------

def read_render_row(source: str, row: int | None) -> tuple[list, list | None]:
    """(messages, tools) of one JSON object (a file, or `-` for stdin), or of line `row` (1-based, as
    `sed -n Np` counts) of a JSONL file. Streamed: a JSONL file is read line by line up to that row."""
    where = "stdin" if source == "-" else source
    try:
        f = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115 (closed below)
    except OSError as e:
        raise CheckInputError(f"cannot read {where}: {e.strerror}") from None
    with f:
        if row is not None:
            data, seen = _nth_line(f, row)
            if data is None:
                raise CheckInputError(f"{where} has {counted(seen, 'line')}; --row {row} is out of range (rows "
                                      "are numbered from 1)")
            where = f"{where} row {row}"
            if not data.strip():
                raise CheckInputError(f"{where} is a blank line; pick a line that holds a JSON object")
        else:
            data = _one_document(f, where)
    try:
        obj = parse_json(data.removeprefix(UTF8_BOM))     # a BOM starts a file, so it can only be before row 1
    except JsonTextError as e:
        raise CheckInputError(f"{where} is {e}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
        raise CheckInputError(f'{where} has no "messages" list; expected {{"messages": [...], "tools": [...]}}')
    problem = unknown_role(obj["messages"])
    if problem is not None:
        raise CheckInputError(f"{where}: unknown_role: {problem}; prepare rejects such a row")
    try:
        tools = Checker._tools(obj)
    except Unreadable as e:
        raise CheckInputError(f"{where}: {e}") from None
    unread = [key for key in obj if key not in RENDER_ROW_KEYS]
    if unread:
        options = dict.fromkeys(RENDER_ROW_SETTINGS[k] for k in unread if k in RENDER_ROW_SETTINGS)
        log.warning("%s: key(s) %s not read (the prompt is rendered from messages and tools only)%s", where,
                    ", ".join(unread), f"; give {' and '.join(options)} instead" if options else "")
    return obj["messages"], tools


# The keys `render` reads of a row, and the row keys a user may expect to set what an option of render sets.
RENDER_ROW_KEYS = ("messages", "tools")
RENDER_ROW_SETTINGS = {"thinking_effort": "--effort", "effort": "--effort", "mode": "--mode", "thinking": "--mode"}


def _nth_line(f, number: int) -> tuple[bytes | None, int]:
    """(line `number` of f, 1-based, or None when f is shorter; lines read)."""
    seen = 0
    for line in f:
        seen += 1
        if seen == number:
            return line, seen
    return None, seen


def _one_document(f, where: str) -> bytes:
    """The one JSON document of f. A first line that is a whole JSON value followed by another non-blank line
    is JSONL: refused with a pointer to --row, without reading the rest of the file."""
    first = b""
    for line in f:
        if line.strip():
            first = line
            break
    try:
        orjson.loads(first.removeprefix(UTF8_BOM))
    except orjson.JSONDecodeError:
        return first + f.read()         # a document over several lines (pretty-printed): read it whole
    for line in f:
        if line.strip():
            raise CheckInputError(f"{where} holds more than one JSON line (JSONL); pick a row with --row N "
                                  "(numbered from 1)")
    return first
