"""The token-structure rules (docs/token-rules.md), one function and reason code each (validator.py runs them).

The validator looks at ids, never at re-encoded text: one vectorised pass classifies every
completion token through a lookup table (id -> structural role), `np.flatnonzero` yields the few
positions that carry structure, and a short walk over those positions parses the turn. Only text
*segments* (reasoning, answer, tool-call id, arguments) are decoded, with
`tokenizer.decode(ids, skip_special_tokens=False)` (through the tokenizer's tiktoken core when it has one,
which gives the same text much faster); the ids themselves are never modified.

Every rule lives in exactly one place: one `@_rule` function below, registered with its reason
code, the completions it applies to, and a one-line description (collected in `REASONS`).

Completion kinds (what rules apply to):
  complete   finish_reason `stop`, or `length` whose last token is the end-of-turn token
             (SGLang ≤ 0.5.9 reported `length` when the stop token landed on the last allowed
             position; the turn is whole, so it is validated, and reported, as `stop`);
  truncated  finish_reason `length` otherwise: rules that need the end of the turn are skipped;
  failed     `abort` or an unknown finish reason: only the sample-level rules apply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from kimi_eagle_data.profile import KIMI_K25, ModelProfile
from kimi_eagle_data.wording import counted

if TYPE_CHECKING:   # the rules take the validator that runs them (validator.py imports this module)
    from kimi_eagle_data.validate.validator import Validator

# --------------------------------------------------------------------------------------------
# Token roles (values of the id -> role lookup table)

_TEXT, _THINK_OPEN, _THINK_CLOSE, _EOT, _SEC_BEGIN, _SEC_END, _CALL_BEGIN, _ARG_BEGIN, _CALL_END, \
    _FORBIDDEN = range(10)
_N_ROLES = 10
assert (_SEC_BEGIN, _SEC_END, _CALL_BEGIN, _ARG_BEGIN, _CALL_END) == tuple(range(_SEC_BEGIN, _CALL_END + 1))
_ROLE_OF_ATTR = {
    "think_open": _THINK_OPEN, "think_close": _THINK_CLOSE, "end_of_turn": _EOT,
    "tool_calls_section_begin": _SEC_BEGIN, "tool_calls_section_end": _SEC_END,
    "tool_call_begin": _CALL_BEGIN, "tool_call_argument_begin": _ARG_BEGIN, "tool_call_end": _CALL_END,
}

COMPLETE, TRUNCATED, FAILED = "complete", "truncated", "failed"
_ALL = frozenset({COMPLETE, TRUNCATED, FAILED})
_GENERATED = frozenset({COMPLETE, TRUNCATED})    # rules that do not need the end of the turn
_WHOLE = frozenset({COMPLETE})                    # rules that need the end of the turn

_MAX_MSGS_PER_LINE = 3


# --------------------------------------------------------------------------------------------
# Results


@dataclass
class Verdict:
    issues: list[str] = field(default_factory=list)      # reason codes (keys of REASONS); empty = valid
    details: list[str] = field(default_factory=list)     # one human line per issue, same order
    reasoning_len: int = 0                               # completion tokens before `</think>`
    num_tool_calls: int = 0                              # number of `<|tool_call_begin|>` in the completion
    args_valid: bool = True                              # every parsed tool call's ARGS is a JSON object
    assistant: dict[str, Any] = field(default_factory=dict)   # the generated turn decoded from tokens
    # The finish reason the sample is reported with: `stop` for a `length` completion that ends with
    # the end-of-turn token (see the module docstring), else the engine's.
    finish_reason: str = ""

    @property
    def valid(self) -> bool:
        return not self.issues


@dataclass
class _Call:
    begin: int          # position of tool_call_begin
    arg: int            # position of tool_call_argument_begin
    end: int            # position of tool_call_end
    id_text: str
    name: str | None    # None when the id does not match the profile's pattern
    index: int | None
    args_text: str
    args_ok: bool


class _Sample:
    """One sample during validation: the ids, the structure found in them, decoded segments."""

    __slots__ = (
        "v", "prompt", "c", "n", "finish_reason", "finish_detail", "tools", "declared", "kind",
        "oob", "prompt_oob", "pos", "roles", "at", "body_end", "think_close_at", "sec_begin", "sec_end",
        "in_reasoning", "outside", "calls", "malformed", "empty_section",
        "reasoning", "content",
    )

    def decode(self, lo: int, hi: int) -> str:
        return self.v._decode(self.c[lo:hi], self.oob)


# --------------------------------------------------------------------------------------------
# The rule table

_RULES: list[tuple[str, frozenset[str], Callable[["Validator", _Sample], list[str]]]] = []
# code -> description with the profile's token names as `{fields}` (ModelProfile.describe fills them in).
REASON_TEMPLATES: dict[str, str] = {}


def _rule(code: str, applies_to: frozenset[str], description: str):
    def register(fn):
        assert code not in REASON_TEMPLATES, code
        _RULES.append((code, applies_to, fn))
        REASON_TEMPLATES[code] = description
        return fn
    return register


def reason_descriptions(profile: ModelProfile = KIMI_K25) -> dict[str, str]:
    """Every reason code with its one-line description in `profile`'s token names."""
    return {code: profile.describe(text) for code, text in REASON_TEMPLATES.items()}


def _show(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text, parse_constant=_reject_constant), dict)   # strict: no NaN/Infinity
    except (ValueError, RecursionError):
        return False


# -- sample-level rules (every finish reason) ---------------------------------------------------

@_rule("prompt_not_generation_prompt", _ALL,
       "the prompt does not end with the model's generation prompt (last token `{think_open}`)")
def _prompt_suffix(v: "Validator", s: _Sample) -> list[str]:
    k = len(v.generation_prompt_ids)
    p = s.prompt
    if len(p) >= k and p[len(p) - k:].tolist() == v.generation_prompt_ids:
        return []
    tail = p[max(0, len(p) - k):]
    return [f"prompt ends with {_show(v._decode(tail, oob=True))}, expected the generation prompt "
            f"{v.tokens.profile.generation_prompt!r}"]


@_rule("exceeds_max_seq_len", _ALL, "prompt_len + completion_len is larger than max_seq_len")
def _max_seq_len(v: "Validator", s: _Sample) -> list[str]:
    total = len(s.prompt) + s.n
    if total <= v.max_seq_len:
        return []
    return [f"prompt_len {len(s.prompt)} + completion_len {s.n} = {total} > max_seq_len {v.max_seq_len}"]


@_rule("id_out_of_range", _ALL, "a token id outside [0, vocab_size)")
def _id_range(v: "Validator", s: _Sample) -> list[str]:
    msgs = []
    for what, ids, oob in (("prompt", s.prompt, s.prompt_oob), ("completion", s.c, s.oob)):
        if not oob:
            continue
        bad = np.flatnonzero((ids < 0) | (ids >= v.vocab_size))
        if bad.size:
            msgs.append(f"{bad.size} {what} id(s) outside [0, {v.vocab_size}), first {int(ids[bad[0]])} "
                        f"at {int(bad[0])}")
    return msgs


@_rule("aborted", _ALL, "the engine aborted the request: a failure, not a sample")
def _aborted(v: "Validator", s: _Sample) -> list[str]:
    if s.finish_reason != "abort":
        return []
    msg = s.finish_detail.get("message")
    return [f"finish_reason abort{': ' + str(msg) if msg else ''}"]


@_rule("unknown_finish_reason", _ALL, "a finish reason other than stop / length / abort")
def _unknown_finish(v: "Validator", s: _Sample) -> list[str]:
    if s.finish_reason in ("stop", "length", "abort"):
        return []
    return [f"unknown finish_reason {s.finish_reason!r}"]


@_rule("length_mismatch", _ALL,
       "a `length` completion whose token count differs from the length the engine reported")
def _length_mismatch(v: "Validator", s: _Sample) -> list[str]:
    if s.finish_reason != "length" or s.finish_detail.get("length") is None:
        return []
    reported = s.finish_detail["length"]
    try:
        if int(reported) == s.n:
            return []
    except (TypeError, ValueError):
        pass
    return [f"completion has {counted(s.n, 'token')}, the engine reported length {reported!r}"]


@_rule("truncated", frozenset({TRUNCATED}),
       "generation hit max_new_tokens before the end of the turn (kept only with --keep-truncated)")
def _truncated(v: "Validator", s: _Sample) -> list[str]:
    if v.keep_truncated:
        return []
    return [f"finish_reason length after {counted(s.n, 'token')}, no end-of-turn token"]


# -- completion rules that do not need the end of the turn ---------------------------------------

@_rule("think_open_in_completion", _GENERATED, "the completion contains `{think_open}` (the prompt opened it)")
def _think_open(v: "Validator", s: _Sample) -> list[str]:
    at = s.at[_THINK_OPEN]
    if not at:
        return []
    return [f"{v.tokens.profile.think_open} at completion position(s) {_positions(at)}"]


@_rule("multiple_think_close", _GENERATED, "the completion contains more than one `{think_close}`")
def _multiple_think_close(v: "Validator", s: _Sample) -> list[str]:
    at = s.at[_THINK_CLOSE]
    if len(at) <= 1:
        return []
    return [f"{len(at)}× {v.tokens.profile.think_close} at positions {_positions(at)}"]


@_rule("forbidden_token", _GENERATED,
       "a role, control or media token in the completion ({forbidden})")
def _forbidden(v: "Validator", s: _Sample) -> list[str]:
    found: dict[int, list[int]] = {}                      # distinct ids, in order of appearance
    for p in s.at[_FORBIDDEN]:
        found.setdefault(int(s.c[p]), []).append(p)
    return [f"{v.id_to_token[tid]} at position(s) {_positions(where)}" for tid, where in found.items()]


@_rule("tool_section_in_reasoning", _GENERATED, "tool-call tokens before `{think_close}` (inside the reasoning)")
def _tool_in_reasoning(v: "Validator", s: _Sample) -> list[str]:
    if not s.in_reasoning:
        return []
    return [f"{len(s.in_reasoning)} tool-call token(s) before {v.tokens.profile.think_close}, first "
            f"{v.id_to_token[int(s.c[s.in_reasoning[0]])]} at {s.in_reasoning[0]}"]


@_rule("tool_call_outside_section", _GENERATED,
       "a tool-call token after `{think_close}` but outside `{tool_calls_section_begin}…{tool_calls_section_end}`")
def _outside(v: "Validator", s: _Sample) -> list[str]:
    if not s.outside:
        return []
    return [f"{len(s.outside)} tool-call token(s) after {v.tokens.profile.think_close} outside a tool-call "
            f"section, first {v.id_to_token[int(s.c[s.outside[0]])]} at {s.outside[0]}"]


@_rule("malformed_tool_section", _GENERATED,
       "the tool-call section does not follow SECTION_BEGIN (CALL_BEGIN id ARG_BEGIN args CALL_END)+ "
       "SECTION_END (tokens out of order, nested, unclosed, or text between calls)")
def _malformed(v: "Validator", s: _Sample) -> list[str]:
    return s.malformed


@_rule("empty_tool_section", _GENERATED, "a tool-call section with no tool call in it")
def _empty_section(v: "Validator", s: _Sample) -> list[str]:
    if not s.empty_section:
        return []
    return [f"tool-call section at {s.sec_begin}–{s.sec_end} holds no call"]


@_rule("text_after_tool_section", _GENERATED,
       "tokens between `{tool_calls_section_end}` and the final `{end_of_turn}`")
def _text_after(v: "Validator", s: _Sample) -> list[str]:
    if s.sec_end is None or s.sec_end + 1 >= s.body_end:
        return []
    k = s.body_end - s.sec_end - 1
    return [f"{k} token(s) after the tool-call section: {_show(s.decode(s.sec_end + 1, s.body_end))}"]


@_rule("bad_tool_call_id", _GENERATED, "a tool-call id that does not match `{tool_call_id_shape}`")
def _bad_id(v: "Validator", s: _Sample) -> list[str]:
    return [f"call {k}: id {_show(c.id_text)} does not match {v.tokens.profile.tool_call_id_regex}"
            for k, c in enumerate(s.calls) if c.name is None]


@_rule("tool_call_index_out_of_order", _GENERATED,
       "tool-call IDX values do not continue the conversation's count: the first call's IDX must equal the "
       "number of tool calls already in the prompt's history (0 for a fresh conversation), then +1 per call")
def _index_order(v: "Validator", s: _Sample) -> list[str]:
    if not s.calls:
        return []
    first = int(np.count_nonzero(s.prompt == v.tokens.tool_call_begin))
    return [f"call {k}: id {_show(c.id_text)} has index {c.index}, expected {first + k}"
            + (f" ({first} call(s) in the prompt's history)" if first else "")
            for k, c in enumerate(s.calls) if c.index is not None and c.index != first + k]


@_rule("undeclared_tool", _GENERATED, "a tool call naming a tool the prompt did not declare")
def _undeclared(v: "Validator", s: _Sample) -> list[str]:
    if not s.declared:
        return []
    return [f"call {k}: tool {c.name!r} is not declared (declared: {', '.join(sorted(s.declared))})"
            for k, c in enumerate(s.calls) if c.name is not None and c.name not in s.declared]


@_rule("tool_call_without_tools", _GENERATED, "a tool call in a sample whose prompt declared no tools")
def _call_without_tools(v: "Validator", s: _Sample) -> list[str]:
    if s.declared or not s.calls:
        return []
    return [f"{len(s.calls)} tool call(s) but no tools were declared"]


@_rule("args_not_json_object", _GENERATED, "tool-call arguments that do not decode to a JSON object")
def _args(v: "Validator", s: _Sample) -> list[str]:
    return [f"call {k}: arguments {_show(c.args_text)} are not a JSON object"
            for k, c in enumerate(s.calls) if not c.args_ok]


@_rule("end_of_turn_not_last", _GENERATED, "an `{end_of_turn}` that is not the last completion token")
def _eot_not_last(v: "Validator", s: _Sample) -> list[str]:
    at = s.at[_EOT]
    if not at or at[-1] == s.n - 1:
        return []
    return [f"{v.tokens.profile.end_of_turn} at {_positions(at)}, completion length {s.n}"]


@_rule("multiple_end_of_turn", _GENERATED, "more than one `{end_of_turn}` in the completion")
def _multiple_eot(v: "Validator", s: _Sample) -> list[str]:
    at = s.at[_EOT]
    if len(at) <= 1:
        return []
    return [f"{len(at)}× {v.tokens.profile.end_of_turn} at {_positions(at)}"]


# -- completion rules that need the whole turn ---------------------------------------------------

@_rule("missing_think_close", _WHOLE, "a finished completion without `{think_close}`")
def _missing_think_close(v: "Validator", s: _Sample) -> list[str]:
    if s.think_close_at is not None:
        return []
    return [f"no {v.tokens.profile.think_close} in {s.n} completion tokens"]


@_rule("missing_end_of_turn", _WHOLE, "a finished completion without `{end_of_turn}`")
def _missing_eot(v: "Validator", s: _Sample) -> list[str]:
    if s.at[_EOT]:
        return []
    last = _show(s.decode(s.n - 1, s.n)) if s.n else "nothing (empty completion)"
    return [f"no {v.tokens.profile.end_of_turn}; the completion ends with {last}"]


@_rule("empty_answer", _WHOLE, "no answer text after `{think_close}` and no tool call")
def _empty_answer(v: "Validator", s: _Sample) -> list[str]:
    if s.think_close_at is None or s.at[_CALL_BEGIN] or s.content.strip():
        return []
    return [f"answer after {v.tokens.profile.think_close} is empty ({_show(s.content)}) and there is no tool call"]


def _positions(at: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(p) for p in at[:limit])
    return shown + (f", … ({len(at)} in all)" if len(at) > limit else "")


# The default profile's wording, for readers that show a code's meaning (check, inspect).
REASONS: dict[str, str] = reason_descriptions()
