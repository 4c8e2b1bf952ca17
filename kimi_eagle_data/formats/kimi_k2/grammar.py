"""Kimi-K2.5's completion grammar: a completion's token ids parsed into reasoning, answer, tool calls and end.

    REASONING </think> ANSWER [TOOL-CALL SECTION] <|im_end|>       thinking mode (the prompt ends `<think>`)
    ANSWER [TOOL-CALL SECTION] <|im_end|>                          instant mode (the prompt ends `<think></think>`)

    TOOL-CALL SECTION = <|tool_calls_section_begin|>
                        ( <|tool_call_begin|> ID <|tool_call_argument_begin|> ARGS <|tool_call_end|> )+
                        <|tool_calls_section_end|>

(docs/token-rules.md; the tokens are K2.5's (tokens.py), looked up by string.) Every reader of completions
parses them here, with one tolerance for malformed input: the validator (its rules, rules.py, turn
what is found here into reason codes), `inspect` (which shows the parts), generation and `score` (the
reasoning boundary, `reasoning_length`).

Structure is found by id, never by matching decoded text: a lookup table maps every id to its structural role,
`np.flatnonzero` yields the few positions that carry one, and a short walk over those positions parses the
turn. Only the segments that must be read are decoded (reasoning, answer, each call's id and arguments, text
between calls), through one `SegmentDecoder`; ids are never modified.

The tolerance, i.e. how a malformed completion is read (in instant mode there is no reasoning: the answer
region is the whole body, and a `</think>` or `<think>` in it is noted by its role and read as answer text):
  - the body is the completion without a final end token; the reasoning is the body up to the first
    `</think>`, or the whole body without one (then nothing is read as answer or tool calls);
  - tool-call tokens in the reasoning are noted (`tool_tokens_in_reasoning`) and stay reasoning text;
  - after `</think>`, the first section begin opens the tool-call section; call tokens before it are noted
    (`tool_tokens_outside_section`), a section end before it is a fault; both stay answer text;
  - the section ends at the first section end after its begin (without one: at the end of the body); its calls
    are read in order, and the first token out of that order is a fault where reading the section stops;
    non-blank text between calls is a fault (reading goes on); a completed call is a `ToolCall` whatever its
    id or arguments say (`name`/`index` None for an id of another shape, `arguments_ok` False for arguments
    that are not a JSON object);
  - the answer text is the text before the section plus the text after it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from kimi_eagle_data.decoding import SegmentDecoder
from kimi_eagle_data.id_buffers import pack, rows_with
from kimi_eagle_data.chat_format import FormatTokens
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
from kimi_eagle_data.wording import excerpt


# Structural roles of token ids (the values of the id -> role table); TEXT is every other id. Plain module
# constants: the walk and the rules read them per token and per sample.
TEXT, THINK_OPEN, THINK_CLOSE, END_OF_TURN, SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGUMENT_BEGIN, CALL_END, \
    FORBIDDEN = range(10)
N_ROLES = 10

# The five tool-call roles are consecutive: one range test picks them out of the structural positions.
assert (SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGUMENT_BEGIN, CALL_END) == tuple(range(SECTION_BEGIN, CALL_END + 1))
_ROLE_OF_TOKEN = {   # FormatTokens role -> grammar role
    "think_open": THINK_OPEN, "think_close": THINK_CLOSE, "end_of_turn": END_OF_TURN,
    "tool_calls_section_begin": SECTION_BEGIN, "tool_calls_section_end": SECTION_END,
    "tool_call_begin": CALL_BEGIN, "tool_call_argument_begin": ARGUMENT_BEGIN,
    "tool_call_end": CALL_END,
}


class Fault:
    """Kinds of malformation of the tool-call section (`SectionFault.kind`)."""

    END_WITHOUT_BEGIN = "end_without_begin"       # a section end after `</think>` before any section begin
    OUT_OF_ORDER = "out_of_order"                 # a tool-call token the grammar does not allow there
    TEXT_BETWEEN_CALLS = "text_between_calls"     # non-blank text inside the section, outside the calls
    UNCLOSED = "unclosed"                         # the body ends inside the section (so does a truncated one)
    CLOSED_INSIDE_CALL = "closed_inside_call"     # the section end comes before the open call's end


@dataclass(slots=True)
class ToolCall:
    """One complete call: `<|tool_call_begin|> ID <|tool_call_argument_begin|> ARGS <|tool_call_end|>`."""

    begin: int                  # position of the call begin token (its span is begin..end, both included)
    argument_begin: int         # position of the argument begin token
    end: int                    # position of the call end token
    id_text: str                # ID as decoded (spaces kept)
    name: str | None            # the tool name in ID; None when ID does not have K2.5's shape
    index: int | None           # IDX in ID; None likewise
    arguments: str              # ARGS as decoded
    arguments_ok: bool          # ARGS is a JSON object (strict JSON: no NaN / Infinity)


@dataclass(slots=True)
class SectionFault:
    kind: str                   # a `Fault` value
    position: int               # where in the completion
    message: str                # one human line, in K2.5's token names


@dataclass(slots=True)
class ParsedCompletion:
    """One completion as the grammar reads it; positions are indices into `ids`."""

    ids: np.ndarray = field(compare=False)  # the completion's ids, as given (equal parses: equal parts)
    n: int                                  # len(ids)
    has_out_of_range_ids: bool              # an id outside [0, vocab_size) (left out of decoded text)
    at: list[list[int]]                     # role -> positions of the tokens with that role, in order
    ends_with_end_of_turn: bool             # the last token is the end token
    body_end: int                           # end of the turn's body: the completion without its final end token
    think_close: int | None                 # position of the first `</think>`
    reasoning: str                          # the reasoning text (decoded `ids[:reasoning_end]`)
    answer: str                             # the answer text: before the section + after it
    section_begin: int | None               # the tool-call section's begin token
    section_end: int | None                 # its end token (None: never closed)
    calls: list[ToolCall]                   # the section's complete calls, in order
    tool_tokens_in_reasoning: list[int]     # tool-call tokens before `</think>` (anywhere, without one)
    tool_tokens_outside_section: list[int]  # call tokens after `</think>` before the section
    faults: list[SectionFault]              # what in the section breaks the grammar, in order
    empty_section: bool                     # a closed, well-formed section that holds no call
    instant: bool = False                   # read in instant mode: no reasoning, the answer from the start

    @property
    def reasoning_end(self) -> int:
        """How many tokens are reasoning: those before the first `</think>`, else the whole body; none in
        instant mode."""
        if self.instant:
            return 0
        return self.think_close if self.think_close is not None else self.body_end

    @property
    def answer_start(self) -> int | None:
        """Where the answer region starts: after the first `</think>` (None without one), 0 in instant mode."""
        if self.instant:
            return 0
        return self.think_close + 1 if self.think_close is not None else None


class CompletionGrammar:
    """Parses completions of one tokenizer: construct once (builds the id -> role table)."""

    def __init__(self, tokens: FormatTokens, decoder: SegmentDecoder):
        self.tokens = tokens
        self.decoder = decoder
        self.vocab_size = decoder.vocab_size
        self._id_pattern = K2_TOKENS.tool_call_id_pattern
        self._id_of_role = {role: getattr(tokens, attr) for attr, role in _ROLE_OF_TOKEN.items()}
        # id -> role. Slot `vocab_size` is a sink for out-of-range ids (role TEXT).
        table = np.zeros(self.vocab_size + 1, dtype=np.int8)
        for role, tid in self._id_of_role.items():
            table[tid] = role
        for tid in tokens.forbidden_ids:
            table[tid] = FORBIDDEN
        self._role_table = table

    def parse(self, ids: Sequence[int] | np.ndarray, instant: bool = False) -> ParsedCompletion:
        """One completion; `parse_many` reads a chunk of them the same way."""
        return next(self.parse_many(*pack([ids]), instant=[instant]))

    def parse_many(self, offsets: np.ndarray, values: np.ndarray,
                   instant: Sequence[bool] | None = None) -> Iterator[ParsedCompletion]:
        """Completions given as an (offsets, values) buffer (`pack`), completion i at values[offsets[i]:
        offsets[i + 1]]; `instant[i]`: completion i answers an instant-mode prompt (default: none does). The
        vectorised pass runs once over the whole chunk: the id range check and every token's role through the
        lookup table, then `np.flatnonzero` for the few positions that carry one."""
        vocab = self.vocab_size
        bad = (values < 0) | (values >= vocab)
        oob = rows_with(bad, offsets)
        roles = self._role_table[np.where(bad, vocab, values) if oob.any() else values]
        pos = np.flatnonzero(roles)
        cut = np.searchsorted(pos, offsets).tolist()      # row i's positions: pos[cut[i]:cut[i + 1]]
        pos_list, role_list = pos.tolist(), roles[pos].tolist()
        starts = offsets.tolist()
        for i in range(len(starts) - 1):
            base = starts[i]
            yield self._parse(values[base:starts[i + 1]], bool(oob[i]),
                              [p - base for p in pos_list[cut[i]:cut[i + 1]]], role_list[cut[i]:cut[i + 1]],
                              bool(instant[i]) if instant is not None else False)

    # -- the walk over the structural positions ------------------------------------------------------

    def _parse(self, ids: np.ndarray, oob: bool, pos: list[int], roles: list[int],
               instant: bool = False) -> ParsedCompletion:
        n = int(ids.size)
        at: list[list[int]] = [[] for _ in range(N_ROLES)]
        for p, r in zip(pos, roles):
            at[r].append(p)
        eots = at[END_OF_TURN]
        ends_with_eot = bool(eots) and eots[-1] == n - 1
        body_end = n - 1 if ends_with_eot else n
        closes = at[THINK_CLOSE]
        think_close = closes[0] if closes else None
        r_end = 0 if instant else think_close if think_close is not None else body_end
        tool_events = [(p, r) for p, r in zip(pos, roles) if SECTION_BEGIN <= r <= CALL_END]
        c = ParsedCompletion(
            ids=ids, n=n, has_out_of_range_ids=oob, at=at, ends_with_end_of_turn=ends_with_eot, body_end=body_end,
            think_close=think_close, reasoning=self._decode(ids, oob, 0, r_end), answer="",
            section_begin=None, section_end=None, calls=[],
            tool_tokens_in_reasoning=[p for p, _ in tool_events if p < r_end], tool_tokens_outside_section=[],
            faults=[], empty_section=False, instant=instant)
        a_lo = c.answer_start
        if a_lo is not None:
            self._parse_answer(c, [(p, r) for p, r in tool_events if a_lo <= p < body_end], body_end)
        return c

    def _parse_answer(self, c: ParsedCompletion, events: list[tuple[int, int]], a_hi: int) -> None:
        """The answer region (after `</think>`, or all of an instant completion, before the final end token):
        text, then at most one section."""
        a_lo = c.answer_start
        k = 0      # before the section: stray call tokens, or a section end with no begin
        while k < len(events) and events[k][1] != SECTION_BEGIN:
            p, r = events[k]
            if r == SECTION_END:
                c.faults.append(SectionFault(Fault.END_WITHOUT_BEGIN, p, f"{self._name(SECTION_END)} at {p} "
                                                                         f"without a section begin"))
            else:
                c.tool_tokens_outside_section.append(p)
            k += 1
        if k == len(events):
            c.answer = self._decode(c.ids, c.has_out_of_range_ids, a_lo, a_hi)
            return
        c.section_begin = events[k][0]
        ends = [p for p, r in events[k + 1:] if r == SECTION_END]
        c.section_end = ends[0] if ends else None
        sec_hi = c.section_end if c.section_end is not None else a_hi
        self._parse_section(c, [(p, r) for p, r in events[k + 1:] if p < sec_hi])
        c.answer = self._decode(c.ids, c.has_out_of_range_ids, a_lo, c.section_begin) + (
            self._decode(c.ids, c.has_out_of_range_ids, c.section_end + 1, a_hi) if c.section_end is not None else "")

    def _parse_section(self, c: ParsedCompletion, events: list[tuple[int, int]]) -> None:
        """SECTION_BEGIN (CALL_BEGIN id ARGUMENT_BEGIN args CALL_END)+ SECTION_END over the section's tokens."""
        expect = CALL_BEGIN      # next role the grammar allows (CALL_BEGIN also allows the section end)
        gap_lo = c.section_begin + 1  # start of the text run that must be blank (between calls)
        begin = arg = -1
        for p, r in events:
            if r != expect:
                c.faults.append(SectionFault(Fault.OUT_OF_ORDER, p, f"{self.tokens.token_name(int(c.ids[p]))} at "
                                                                    f"{p} where {self._name(expect)} was expected"))
                return
            if r == CALL_BEGIN:
                self._check_gap(c, gap_lo, p)
                begin, expect = p, ARGUMENT_BEGIN
            elif r == ARGUMENT_BEGIN:
                arg, expect = p, CALL_END
            else:   # CALL_END
                c.calls.append(self._call(c, begin, arg, p))
                gap_lo, expect = p + 1, CALL_BEGIN
        if c.section_end is None:
            c.faults.append(SectionFault(Fault.UNCLOSED, c.section_begin,
                                         f"tool-call section opened at {c.section_begin} is never closed"))
            return
        if expect != CALL_BEGIN:
            c.faults.append(SectionFault(Fault.CLOSED_INSIDE_CALL, c.section_end,
                                         f"tool-call section closed at {c.section_end} inside a tool call"))
            return
        self._check_gap(c, gap_lo, c.section_end)
        if not c.calls and not c.faults:
            c.empty_section = True

    def _check_gap(self, c: ParsedCompletion, lo: int, hi: int) -> None:
        if hi > lo:
            text = self._decode(c.ids, c.has_out_of_range_ids, lo, hi)
            if text.strip():
                c.faults.append(SectionFault(Fault.TEXT_BETWEEN_CALLS, lo, f"text {excerpt(text)} at {lo}–{hi - 1} "
                                                                           "inside the tool-call section"))

    def _call(self, c: ParsedCompletion, begin: int, arg: int, end: int) -> ToolCall:
        id_text = self._decode(c.ids, c.has_out_of_range_ids, begin + 1, arg)
        arguments = self._decode(c.ids, c.has_out_of_range_ids, arg + 1, end)
        m = self._id_pattern.match(id_text)
        return ToolCall(begin=begin, argument_begin=arg, end=end, id_text=id_text,
                        name=m["name"] if m else None, index=int(m["index"]) if m else None,
                        arguments=arguments, arguments_ok=is_json_object(arguments))

    def _decode(self, ids: np.ndarray, oob: bool, lo: int, hi: int) -> str:
        return self.decoder.decode(ids[lo:hi], oob)

    def _name(self, role: int) -> str:
        return self.tokens.token_name(self._id_of_role[role])


def reasoning_length(ids: Sequence[int], tokens: FormatTokens, instant: bool = False) -> int:
    """How many of a completion's tokens are reasoning, without parsing it: the same boundary as
    `ParsedCompletion.reasoning_end` (tested equal): the tokens before the first `</think>`, else all but a
    final end token; none in instant mode. For callers that need only this boundary (generation's and
    `score`'s log-prob sums)."""
    if instant:
        return 0
    ids = [int(t) for t in ids]
    if tokens.think_close in ids:
        return ids.index(tokens.think_close)
    return len(ids) - 1 if ids and ids[-1] == tokens.end_of_turn else len(ids)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def is_json_object(text: str) -> bool:
    """Whether `text` parses as a JSON object; strict JSON (`NaN`, `Infinity` are not accepted)."""
    try:
        return isinstance(json.loads(text, parse_constant=_reject_constant), dict)
    except (ValueError, RecursionError):
        return False
