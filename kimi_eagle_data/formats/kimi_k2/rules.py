"""The token-structure rules (docs/token-rules.md), one function and reason code each (validator.py runs them).

A rule reads one `Sample` (the prompt's ids and the completion as the completion grammar, grammar.py, parsed it)
and the run's `RunLimits`, and returns one human line per problem it finds; it never parses or re-reads the
completion itself, so every rule sees the structure every other reader sees. Each sample's `chat_format.Verdict`
carries the codes (validator.py).

Every rule lives in exactly one place: the sample-level ones every format shares (prompt end, length, id range,
finish reason, truncation) in kimi_eagle_data/formats/base.py, each completion rule in one `@_rule` function below,
registered with its reason code, the completions it applies to, and a one-line description
(`reason_descriptions()` collects them all, in K2.5's token names).

Completion kinds (what rules apply to):
  complete   finish_reason `stop`, or `length` whose last token is the end-of-turn token
             (SGLang ≤ 0.5.9 reported `length` when the stop token landed on the last allowed
             position; the turn is whole, so it is validated, and reported, as `stop`);
  truncated  finish_reason `length` otherwise: rules that need the end of the turn are skipped;
  failed     `abort` or an unknown finish reason: only the sample-level rules (base.py) apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from kimi_eagle_data.decoding import SegmentDecoder
from kimi_eagle_data.formats.base import sample_issues, sample_reasons
from kimi_eagle_data.formats.kimi_k2.grammar import (
    CALL_BEGIN, END_OF_TURN, FORBIDDEN, THINK_CLOSE, THINK_OPEN, Fault, ParsedCompletion)
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.chat_format import FormatTokens
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS, K2TokenNames
from kimi_eagle_data.wording import excerpt

COMPLETE, TRUNCATED, FAILED = "complete", "truncated", "failed"
_GENERATED = frozenset({COMPLETE, TRUNCATED})    # rules that do not need the end of the turn
_WHOLE = frozenset({COMPLETE})                    # rules that need the end of the turn

_MAX_MSGS_PER_LINE = 3


# --------------------------------------------------------------------------------------------
# What the rules read


@dataclass(frozen=True)
class RunLimits:
    """What the rules know of the run (the same for every sample)."""

    tokens: FormatTokens
    decoder: SegmentDecoder               # for the text a message quotes
    generation_prompt_ids: list[int]
    max_seq_len: int
    vocab_size: int
    keep_truncated: bool
    # The instant-mode generation prompt (the template's `thinking=False`); empty: the tokens name no instant
    # mode, and every prompt is read as thinking.
    instant_generation_prompt_ids: list[int] = field(default_factory=list)

    def prompt_mode(self, prompt: np.ndarray) -> str:
        """The mode a prompt asks for, read from its end: instant when it ends with the instant generation
        prompt, else thinking (a prompt that ends with neither fails `prompt_not_generation_prompt`)."""
        return INSTANT if _ends_with(prompt, self.instant_generation_prompt_ids) else THINKING


@dataclass(slots=True)
class Sample:
    """One sample as the rules see it: the prompt's ids and the parsed completion."""

    prompt: np.ndarray
    prompt_has_out_of_range_ids: bool
    completion: ParsedCompletion
    kind: str                             # COMPLETE / TRUNCATED / FAILED (`completion_kind`)
    finish_reason: str
    finish_detail: dict
    declared: frozenset[str]              # the tool names the prompt's `tools` declare
    mode: str = THINKING                  # RunLimits.prompt_mode of the prompt

    @property
    def instant(self) -> bool:
        return self.mode == INSTANT


def completion_kind(finish_reason: str, completion: ParsedCompletion) -> str:
    """Which rules apply (the module docstring): complete, truncated or failed."""
    if finish_reason == "stop" or (finish_reason == "length" and completion.ends_with_end_of_turn):
        return COMPLETE
    return TRUNCATED if finish_reason == "length" else FAILED


# --------------------------------------------------------------------------------------------
# The rule table


class Rule(NamedTuple):
    code: str
    applies_to: frozenset[str]
    check: Callable[[RunLimits, Sample], list[str]]


RULES: list[Rule] = []
# code -> description with K2.5's token names as `{fields}` (`K2TokenNames.describe` fills them in).
REASON_TEMPLATES: dict[str, str] = {}


def _rule(code: str, applies_to: frozenset[str], description: str):
    def register(fn):
        assert code not in REASON_TEMPLATES, code
        RULES.append(Rule(code, applies_to, fn))
        REASON_TEMPLATES[code] = description
        return fn
    return register


def judge(run: RunLimits, s: Sample) -> tuple[list[str], list[str]]:
    """(reason codes, one detail line each): the sample-level rules every format shares (formats/base.py), then
    every completion rule below that applies to `s` and finds something."""
    sample = sample_issues(s.prompt, s.completion.ids, s.finish_reason, s.finish_detail,
                           prompt_problem=_prompt_problem(run, s), whole=s.kind == COMPLETE,
                           max_seq_len=run.max_seq_len, vocab_size=run.vocab_size, keep_truncated=run.keep_truncated,
                           reported_length=True,
                           may_be_out_of_range=(s.prompt_has_out_of_range_ids, s.completion.has_out_of_range_ids))
    issues = [code for code, _ in sample]
    details = [detail for _, detail in sample]
    for code, applies_to, check in RULES:
        if s.kind not in applies_to:
            continue
        msgs = check(run, s)
        if msgs:
            issues.append(code)
            extra = len(msgs) - _MAX_MSGS_PER_LINE
            details.append("; ".join(msgs[:_MAX_MSGS_PER_LINE]) + (f"; … ({extra} more)" if extra > 0 else ""))
    return issues, details


def rules_paragraph(names: K2TokenNames = K2_TOKENS) -> str:
    """The card's summary of what a `train` row satisfies (docs/token-rules.md), in K2.5's tokens."""
    if names.instant_generation_prompt:     # two modes: each prompt ends as its mode's generation prompt does
        ends = ("the prompt ends with its mode's generation prompt (thinking: last token `{think_open}`; instant: "
                "`{think_open}{think_close}`); a thinking-mode completion has exactly one `{think_close}`, an "
                "instant-mode one neither `{think_open}` nor `{think_close}`")
    else:
        ends = ("the prompt ends with the generation prompt (last token `{think_open}`); the completion has "
                "exactly one `{think_close}`")
    return names.describe(
        ends + "; every completion has no role or control tokens, a well-formed tool-call section naming "
        "declared tools with JSON-object arguments and call indices continuing the conversation's count "
        "(`{tool_call_id_shape}`), and ends with one `{end_of_turn}`.")


def reason_descriptions(names: K2TokenNames = K2_TOKENS) -> dict[str, str]:
    """Every reason code with its one-line description in K2.5's token names."""
    sample = sample_reasons("", reported_length=True)
    sample["prompt_not_generation_prompt"] = PROMPT_REASON
    return {code: names.describe(text) for code, text in {**sample, **REASON_TEMPLATES}.items()}


def _text(run: RunLimits, s: Sample, lo: int, hi: int) -> str:
    return run.decoder.decode(s.completion.ids[lo:hi], s.completion.has_out_of_range_ids)


# -- sample-level rules (every finish reason): formats/base.py's, written once for every format ----------------

def _ends_with(p: np.ndarray, suffix: list[int]) -> bool:
    k = len(suffix)
    return bool(k) and len(p) >= k and p[len(p) - k:].tolist() == suffix


def _prompt_problem(run: RunLimits, s: Sample) -> str | None:
    """What is wrong with the prompt's end, in K2.5's tokens (None: it ends with its mode's generation prompt)."""
    if _ends_with(s.prompt, run.generation_prompt_ids) or s.instant:
        return None
    k = len(run.generation_prompt_ids)
    tail = s.prompt[max(0, len(s.prompt) - k):]
    return (f"prompt ends with {excerpt(run.decoder.decode(tail, True))}, expected the generation prompt "
            f"{K2_TOKENS.generation_prompt!r}" + (f" or {K2_TOKENS.instant_generation_prompt!r}"
                                                 if run.instant_generation_prompt_ids else ""))


# K2.5's words for the prompt rule (its generation prompts in its tokens); base.py describes the others.
PROMPT_REASON = ("the prompt ends with neither of the model's generation prompts (thinking mode: last token "
                 "`{think_open}`; instant mode: `{think_open}{think_close}`)")


# -- completion rules that do not need the end of the turn ---------------------------------------

@_rule("think_open_in_completion", _GENERATED, "the completion contains `{think_open}` (the prompt opened it)")
def _think_open(run: RunLimits, s: Sample) -> list[str]:
    at = s.completion.at[THINK_OPEN]
    if not at or s.instant:      # instant mode: instant_has_think_start
        return []
    return [f"{K2_TOKENS.think_open} at completion position(s) {_positions(at)}"]


@_rule("multiple_think_close", _GENERATED, "the completion contains more than one `{think_close}`")
def _multiple_think_close(run: RunLimits, s: Sample) -> list[str]:
    at = s.completion.at[THINK_CLOSE]
    if len(at) <= 1 or s.instant:      # instant mode: instant_has_think_end
        return []
    return [f"{len(at)}× {K2_TOKENS.think_close} at positions {_positions(at)}"]


@_rule("instant_has_think_end", _GENERATED,
       "an instant-mode completion (the prompt ended `{think_open}{think_close}`) contains `{think_close}`: "
       "instant answers have no reasoning")
def _instant_think_close(run: RunLimits, s: Sample) -> list[str]:
    at = s.completion.at[THINK_CLOSE]
    if not s.instant or not at:
        return []
    return [f"{K2_TOKENS.think_close} at completion position(s) {_positions(at)} of an instant-mode "
            "completion"]


@_rule("instant_has_think_start", _GENERATED,
       "an instant-mode completion (the prompt ended `{think_open}{think_close}`) contains `{think_open}`")
def _instant_think_open(run: RunLimits, s: Sample) -> list[str]:
    at = s.completion.at[THINK_OPEN]
    if not s.instant or not at:
        return []
    return [f"{K2_TOKENS.think_open} at completion position(s) {_positions(at)} of an instant-mode "
            "completion"]


@_rule("forbidden_token", _GENERATED,
       "a role, control or media token in the completion ({forbidden})")
def _forbidden(run: RunLimits, s: Sample) -> list[str]:
    found: dict[int, list[int]] = {}                      # distinct ids, in order of appearance
    for p in s.completion.at[FORBIDDEN]:
        found.setdefault(int(s.completion.ids[p]), []).append(p)
    return [f"{run.tokens.token_name(tid)} at position(s) {_positions(where)}" for tid, where in found.items()]


@_rule("tool_section_in_reasoning", _GENERATED, "tool-call tokens before `{think_close}` (inside the reasoning)")
def _tool_in_reasoning(run: RunLimits, s: Sample) -> list[str]:
    at = s.completion.tool_tokens_in_reasoning
    if not at:
        return []
    return [f"{len(at)} tool-call token(s) before {K2_TOKENS.think_close}, first "
            f"{run.tokens.token_name(int(s.completion.ids[at[0]]))} at {at[0]}"]


@_rule("tool_call_outside_section", _GENERATED,
       "a tool-call token after `{think_close}` but outside `{tool_calls_section_begin}…{tool_calls_section_end}`")
def _outside(run: RunLimits, s: Sample) -> list[str]:
    at = s.completion.tool_tokens_outside_section
    if not at:
        return []
    return [f"{len(at)} tool-call token(s) after {K2_TOKENS.think_close} outside a tool-call "
            f"section, first {run.tokens.token_name(int(s.completion.ids[at[0]]))} at {at[0]}"]


@_rule("malformed_tool_section", _GENERATED,
       "the tool-call section does not follow SECTION_BEGIN (CALL_BEGIN id ARG_BEGIN args CALL_END)+ "
       "SECTION_END (tokens out of order, nested, unclosed, or text between calls)")
def _malformed(run: RunLimits, s: Sample) -> list[str]:
    # A section still open when generation stopped short is not malformed: the turn is not over.
    return [f.message for f in s.completion.faults if f.kind != Fault.UNCLOSED or s.kind == COMPLETE]


@_rule("empty_tool_section", _GENERATED, "a tool-call section with no tool call in it")
def _empty_section(run: RunLimits, s: Sample) -> list[str]:
    c = s.completion
    if not c.empty_section:
        return []
    return [f"tool-call section at {c.section_begin}–{c.section_end} holds no call"]


@_rule("text_after_tool_section", _GENERATED,
       "tokens between `{tool_calls_section_end}` and the final `{end_of_turn}`")
def _text_after(run: RunLimits, s: Sample) -> list[str]:
    c = s.completion
    if c.section_end is None or c.section_end + 1 >= c.body_end:
        return []
    k = c.body_end - c.section_end - 1
    return [f"{k} token(s) after the tool-call section: {excerpt(_text(run, s, c.section_end + 1, c.body_end))}"]


@_rule("bad_tool_call_id", _GENERATED, "a tool-call id that does not match `{tool_call_id_shape}`")
def _bad_id(run: RunLimits, s: Sample) -> list[str]:
    return [f"call {k}: id {excerpt(c.id_text)} does not match {K2_TOKENS.tool_call_id_regex}"
            for k, c in enumerate(s.completion.calls) if c.name is None]


@_rule("tool_call_index_out_of_order", _GENERATED,
       "tool-call IDX values do not continue the conversation's count: the first call's IDX must equal the "
       "number of tool calls already in the prompt's history (0 for a fresh conversation), then +1 per call")
def _index_order(run: RunLimits, s: Sample) -> list[str]:
    calls = s.completion.calls
    if not calls:
        return []
    first = int(np.count_nonzero(s.prompt == run.tokens.tool_call_begin))
    return [f"call {k}: id {excerpt(c.id_text)} has index {c.index}, expected {first + k}"
            + (f" ({first} call(s) in the prompt's history)" if first else "")
            for k, c in enumerate(calls) if c.index is not None and c.index != first + k]


@_rule("undeclared_tool", _GENERATED, "a tool call naming a tool the prompt did not declare")
def _undeclared(run: RunLimits, s: Sample) -> list[str]:
    if not s.declared:
        return []
    return [f"call {k}: tool {c.name!r} is not declared (declared: {', '.join(sorted(s.declared))})"
            for k, c in enumerate(s.completion.calls) if c.name is not None and c.name not in s.declared]


@_rule("tool_call_without_tools", _GENERATED, "a tool call in a sample whose prompt declared no tools")
def _call_without_tools(run: RunLimits, s: Sample) -> list[str]:
    calls = s.completion.calls
    if s.declared or not calls:
        return []
    return [f"{len(calls)} tool call(s) but no tools were declared"]


@_rule("args_not_json_object", _GENERATED, "tool-call arguments that do not decode to a JSON object")
def _args(run: RunLimits, s: Sample) -> list[str]:
    return [f"call {k}: arguments {excerpt(c.arguments)} are not a JSON object"
            for k, c in enumerate(s.completion.calls) if not c.arguments_ok]


@_rule("end_of_turn_not_last", _GENERATED, "an `{end_of_turn}` that is not the last completion token")
def _eot_not_last(run: RunLimits, s: Sample) -> list[str]:
    at = s.completion.at[END_OF_TURN]
    if not at or at[-1] == s.completion.n - 1:
        return []
    return [f"{K2_TOKENS.end_of_turn} at {_positions(at)}, completion length {s.completion.n}"]


@_rule("multiple_end_of_turn", _GENERATED, "more than one `{end_of_turn}` in the completion")
def _multiple_eot(run: RunLimits, s: Sample) -> list[str]:
    at = s.completion.at[END_OF_TURN]
    if len(at) <= 1:
        return []
    return [f"{len(at)}× {K2_TOKENS.end_of_turn} at {_positions(at)}"]


# -- completion rules that need the whole turn ---------------------------------------------------

@_rule("missing_think_close", _WHOLE, "a finished thinking-mode completion without `{think_close}`")
def _missing_think_close(run: RunLimits, s: Sample) -> list[str]:
    if s.completion.think_close is not None or s.instant:
        return []
    return [f"no {K2_TOKENS.think_close} in {s.completion.n} completion tokens"]


@_rule("missing_end_of_turn", _WHOLE, "a finished completion without `{end_of_turn}`")
def _missing_eot(run: RunLimits, s: Sample) -> list[str]:
    if s.completion.at[END_OF_TURN]:
        return []
    n = s.completion.n
    last = excerpt(_text(run, s, n - 1, n)) if n else "nothing (empty completion)"
    return [f"no {K2_TOKENS.end_of_turn}; the completion ends with {last}"]


@_rule("empty_answer", _WHOLE,
       "no answer text (after `{think_close}`; in instant mode, in the whole completion) and no tool call")
def _empty_answer(run: RunLimits, s: Sample) -> list[str]:
    c = s.completion
    if c.answer_start is None or c.at[CALL_BEGIN] or c.answer.strip():
        return []
    where = "of the instant-mode completion" if s.instant else f"after {K2_TOKENS.think_close}"
    return [f"answer {where} is empty ({excerpt(c.answer)}) and there is no tool call"]


def _positions(at: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(p) for p in at[:limit])
    return shown + (f", … ({len(at)} in all)" if len(at) > limit else "")

