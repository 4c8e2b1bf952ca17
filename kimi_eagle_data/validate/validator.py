"""The validator: construct once per run, then `validate_many()` each chunk of samples (or `validate()` one;
docs/token-rules.md; the rules are in rules.py).

One vectorised pass per chunk classifies every completion token through a lookup table (id -> structural role),
`np.flatnonzero` yields the few positions that carry structure, and a short walk over those positions parses
the turn; then every registered rule runs on the parsed sample."""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from kimi_eagle_data.profile import ProfileTokens, model_vocab_size
from kimi_eagle_data.prompts.tokenizer import token_byte_table
from kimi_eagle_data.validate.rules import (
    _ARG_BEGIN, _CALL_BEGIN, _CALL_END, _FORBIDDEN, _MAX_MSGS_PER_LINE, _N_ROLES, _ROLE_OF_ATTR, _RULES,
    _SEC_BEGIN, _SEC_END, _THINK_CLOSE, COMPLETE, FAILED, TRUNCATED, Verdict, _Call, _is_json_object, _Sample,
    _show)


class Validator:
    """Validates samples of one run: construct once (looks up ids, builds the role table)."""

    def __init__(self, tokens: ProfileTokens, tokenizer, max_seq_len: int, keep_truncated: bool = False,
                 vocab_size: int | None = None):
        self.tokens = tokens
        self.tokenizer = tokenizer
        self.max_seq_len = int(max_seq_len)
        self.keep_truncated = bool(keep_truncated)
        if vocab_size is None:
            vocab_size = model_vocab_size(tokens.profile, tokenizer)
        self.vocab_size = int(vocab_size)
        self.id_to_token = {i: t for t, i in tokens.ids.items()}
        self._token_bytes = token_byte_table(tokenizer)
        self._id_pattern = tokens.profile.tool_call_id_pattern

        profile = tokens.profile
        gp = tokenizer.encode(profile.generation_prompt, add_special_tokens=False)
        if not gp or gp[-1] != tokens.think_open:
            raise ValueError(
                f"the {profile.name} generation prompt {profile.generation_prompt!r} encodes to {gp}, which "
                f"does not end with {profile.think_open} (id {tokens.think_open}); wrong tokenizer for this profile?")
        self.generation_prompt_ids: list[int] = list(gp)

        # id -> role. Slot `vocab_size` is a sink for out-of-range ids (role TEXT).
        table = np.zeros(self.vocab_size + 1, dtype=np.int8)
        for attr, role in _ROLE_OF_ATTR.items():
            table[getattr(tokens, attr)] = role
        for tid in tokens.forbidden_ids:
            table[tid] = _FORBIDDEN
        self._role_table = table

    # -- the one decode ------------------------------------------------------------------------

    def _decode(self, ids: np.ndarray, oob: bool = False) -> str:
        if oob:
            ids = ids[(ids >= 0) & (ids < self.vocab_size)]
        if ids.size == 0:
            return ""
        if self._token_bytes is not None and ids.min() >= 0:
            # The tiktoken core's bytes of each id, joined and decoded as the core does (errors="replace"):
            # the same text as decode(..., skip_special_tokens=False) (tested), without transformers'
            # per-token Python path through a slow PreTrainedTokenizer.
            try:
                return b"".join(self._token_bytes[ids].tolist()).decode("utf-8", errors="replace")
            except (IndexError, TypeError):
                pass   # an id the core does not name: let the tokenizer say what it decodes to
        # transformers checks a list's elements one by one in Python; an array converts in C. Short segments
        # (ids, arguments) are cheaper as lists.
        return self.tokenizer.decode(ids if ids.size > 64 else ids.tolist(), skip_special_tokens=False)

    # -- entry points --------------------------------------------------------------------------

    def validate(self, prompt_ids: Sequence[int] | np.ndarray, output_ids: Sequence[int] | np.ndarray,
                 finish_reason: str, finish_detail: dict | None, tools: list[dict] | None) -> Verdict:
        """One sample (check, inspect); `validate_many` judges a chunk the same way."""
        return next(self.validate_many(*pack([prompt_ids]), *pack([output_ids]), [finish_reason], [finish_detail],
                                       [tools]))

    def validate_many(self, prompt_offsets: np.ndarray, prompt_values: np.ndarray, output_offsets: np.ndarray,
                      output_values: np.ndarray, finish_reasons: Sequence[str],
                      finish_details: Sequence[dict | None], tools: Sequence[list[dict] | None]
                      ) -> Iterator[Verdict]:
        """Samples given as (offsets, values) buffers, sample i at values[offsets[i]:offsets[i + 1]]. The
        vectorised pass runs once over the whole chunk: the id range check and every completion token's role
        through the lookup table, then `np.flatnonzero` for the few positions that carry structure."""
        vocab = self.vocab_size
        p_oob = _rows_with((prompt_values < 0) | (prompt_values >= vocab), prompt_offsets)
        bad = (output_values < 0) | (output_values >= vocab)
        o_oob = _rows_with(bad, output_offsets)
        roles = self._role_table[np.where(bad, vocab, output_values) if o_oob.any() else output_values]
        pos = np.flatnonzero(roles)
        cut = np.searchsorted(pos, output_offsets).tolist()      # row i's positions: pos[cut[i]:cut[i + 1]]
        pos_list, role_list = pos.tolist(), roles[pos].tolist()
        starts = output_offsets.tolist()
        for i in range(len(finish_reasons)):
            s = _Sample()
            s.prompt = prompt_values[prompt_offsets[i]:prompt_offsets[i + 1]]
            s.c = output_values[starts[i]:starts[i + 1]]
            s.prompt_oob, s.oob = bool(p_oob[i]), bool(o_oob[i])
            base = starts[i]
            s.pos = [p - base for p in pos_list[cut[i]:cut[i + 1]]]
            s.roles = role_list[cut[i]:cut[i + 1]]
            yield self._judge(s, finish_reasons[i], finish_details[i], tools[i])

    def _judge(self, s: _Sample, finish_reason: str, finish_detail: dict | None,
               tools: list[dict] | None) -> Verdict:
        s.v = self
        s.n = n = int(s.c.size)
        s.finish_reason = finish_reason
        s.finish_detail = finish_detail or {}
        s.tools = tools
        s.declared = _declared_names(tools)

        ends_with_eot = n > 0 and int(s.c[-1]) == self.tokens.end_of_turn
        if finish_reason == "stop" or (finish_reason == "length" and ends_with_eot):
            s.kind = COMPLETE
        elif finish_reason == "length":
            s.kind = TRUNCATED
        else:
            s.kind = FAILED

        s.at = at = [[] for _ in range(_N_ROLES)]
        for p, r in zip(s.pos, s.roles):
            at[r].append(p)
        s.body_end = n - 1 if ends_with_eot else n      # the turn without its final end-of-turn
        self._parse(s)

        issues: list[str] = []
        details: list[str] = []
        for code, applies_to, check in _RULES:
            if s.kind not in applies_to:
                continue
            msgs = check(self, s)
            if msgs:
                issues.append(code)
                extra = len(msgs) - _MAX_MSGS_PER_LINE
                details.append("; ".join(msgs[:_MAX_MSGS_PER_LINE]) + (f"; … ({extra} more)" if extra > 0 else ""))

        tool_calls = [
            {"id": c_.id_text.strip(), "type": "function",
             "function": {"name": c_.name if c_.name is not None else "", "arguments": c_.args_text}}
            for c_ in s.calls
        ]
        assistant = {"role": "assistant", "reasoning_content": s.reasoning, "content": s.content,
                     "tool_calls": tool_calls}
        reported = "stop" if s.kind == COMPLETE and finish_reason == "length" else finish_reason
        return Verdict(
            issues=issues, details=details,
            reasoning_len=int(s.think_close_at if s.think_close_at is not None else s.body_end),
            num_tool_calls=len(s.at[_CALL_BEGIN]),
            args_valid=all(c_.args_ok for c_ in s.calls),
            assistant=assistant, finish_reason=reported,
        )

    # -- structure -----------------------------------------------------------------------------

    def _parse(self, s: _Sample) -> None:
        """Split reasoning / answer / tool section and parse the calls, walking only the structural positions."""
        tc = s.at[_THINK_CLOSE]
        s.think_close_at = tc[0] if tc else None
        r_end = s.think_close_at if s.think_close_at is not None else s.body_end
        tool_events = [(p, r) for p, r in zip(s.pos, s.roles) if _SEC_BEGIN <= r <= _CALL_END]
        s.in_reasoning = [p for p, _ in tool_events if p < r_end]
        s.outside, s.calls, s.malformed = [], [], []
        s.sec_begin = s.sec_end = None
        s.empty_section = False
        s.reasoning = s.decode(0, r_end)
        if s.think_close_at is None:
            s.content = ""
            return

        a_lo, a_hi = s.think_close_at + 1, s.body_end       # the answer region
        events = [(p, r) for p, r in tool_events if a_lo <= p < a_hi]

        # Before the section: stray call tokens, or a section end with no begin.
        k = 0
        while k < len(events) and events[k][1] != _SEC_BEGIN:
            p, r = events[k]
            if r == _SEC_END:
                s.malformed.append(f"{self.id_to_token[self.tokens.tool_calls_section_end]} at {p} without "
                                   f"a section begin")
            else:
                s.outside.append(p)
            k += 1
        if k == len(events):
            s.content = s.decode(a_lo, a_hi)
            return

        s.sec_begin = events[k][0]
        ends = [p for p, r in events[k + 1:] if r == _SEC_END]
        s.sec_end = ends[0] if ends else None
        sec_hi = s.sec_end if s.sec_end is not None else a_hi
        self._parse_section(s, [(p, r) for p, r in events[k + 1:] if p < sec_hi])
        s.content = s.decode(a_lo, s.sec_begin) + (s.decode(s.sec_end + 1, a_hi) if s.sec_end is not None else "")

    def _parse_section(self, s: _Sample, events: list[tuple[int, int]]) -> None:
        """SECTION_BEGIN (CALL_BEGIN id ARG_BEGIN args CALL_END)+ SECTION_END over the section's tool tokens."""
        expect = _CALL_BEGIN          # next role the grammar allows (CALL_BEGIN also allows the section end)
        gap_lo = s.sec_begin + 1      # start of the text run that must be blank (between calls)
        begin = arg = -1
        name_of = self.id_to_token
        for p, r in events:
            if r != expect:
                s.malformed.append(f"{name_of[int(s.c[p])]} at {p} where "
                                   f"{name_of[self._role_id(expect)]} was expected")
                return
            if r == _CALL_BEGIN:
                self._check_gap(s, gap_lo, p)
                begin, expect = p, _ARG_BEGIN
            elif r == _ARG_BEGIN:
                arg, expect = p, _CALL_END
            else:   # _CALL_END
                s.calls.append(self._make_call(s, begin, arg, p))
                gap_lo, expect = p + 1, _CALL_BEGIN
        if s.sec_end is None:
            if s.kind == COMPLETE:
                s.malformed.append(f"tool-call section opened at {s.sec_begin} is never closed")
            return
        if expect != _CALL_BEGIN:
            s.malformed.append(f"tool-call section closed at {s.sec_end} inside a tool call")
            return
        self._check_gap(s, gap_lo, s.sec_end)
        if not s.calls and not s.malformed:
            s.empty_section = True

    def _check_gap(self, s: _Sample, lo: int, hi: int) -> None:
        if hi > lo:
            text = s.decode(lo, hi)
            if text.strip():
                s.malformed.append(f"text {_show(text)} at {lo}–{hi - 1} inside the tool-call section")

    def _make_call(self, s: _Sample, begin: int, arg: int, end: int) -> _Call:
        id_text = s.decode(begin + 1, arg)
        args_text = s.decode(arg + 1, end)
        m = self._id_pattern.match(id_text)
        return _Call(begin=begin, arg=arg, end=end, id_text=id_text,
                     name=m["name"] if m else None, index=int(m["index"]) if m else None,
                     args_text=args_text, args_ok=_is_json_object(args_text))

    def _role_id(self, role: int) -> int:
        for attr, r in _ROLE_OF_ATTR.items():
            if r == role:
                return getattr(self.tokens, attr)
        raise KeyError(role)


def _as_ids(ids: Sequence[int] | np.ndarray) -> np.ndarray:
    a = np.asarray(ids)
    if a.ndim != 1:
        a = a.reshape(-1)
    if a.dtype.kind not in "iu":
        a = a.astype(np.int64) if a.size else np.zeros(0, dtype=np.int64)
    elif a.dtype.kind == "u":
        a = a.astype(np.int64)
    return a


def pack(seqs: Sequence[Sequence[int] | np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Id sequences as one (offsets, values) buffer pair, sequence i at values[offsets[i]:offsets[i + 1]]:
    what validate_many takes. Values keep their integer width (int64 for Python lists)."""
    arrays = [_as_ids(x) for x in seqs]
    if len(arrays) == 1:          # validate(): one sample, no copy
        return np.array([0, arrays[0].size], dtype=np.int64), arrays[0]
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([a.size for a in arrays], out=offsets[1:])
    return offsets, (np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64))


def _rows_with(mask: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per row of an (offsets, values) buffer: whether `mask` is set anywhere in it (empty rows: False)."""
    if not mask.any():    # the usual case: no cumulative sum over every token
        return np.zeros(len(offsets) - 1, dtype=bool)
    hits = np.zeros(len(mask) + 1, dtype=np.int64)
    np.cumsum(mask, out=hits[1:])
    return hits[offsets[1:]] > hits[offsets[:-1]]


def _declared_names(tools: list[dict] | None) -> frozenset[str]:
    names = set()
    for t in tools or ():
        if not isinstance(t, dict):
            continue
        fn = t.get("function")
        name = fn.get("name") if isinstance(fn, dict) else t.get("name")
        if isinstance(name, str) and name:
            names.add(name)
    return frozenset(names)
