"""The validator: construct once per run, then `validate_many()` each chunk of samples (or `validate()` one;
docs/token-rules.md).

The completion grammar (grammar.py) parses each completion, one vectorised pass per chunk; then
every registered rule (rules.py) runs on the parsed sample, and the verdict carries the decoded assistant turn."""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from kimi_eagle_data.chat_format import Verdict
from kimi_eagle_data.decoding import SegmentDecoder
from kimi_eagle_data.formats.kimi_k2.grammar import CALL_BEGIN, CompletionGrammar, ParsedCompletion
from kimi_eagle_data.formats.kimi_k2.rules import COMPLETE, RunLimits, Sample, completion_kind, judge
from kimi_eagle_data.id_buffers import pack, rows_with
from kimi_eagle_data.chat_format import FormatTokens
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
from kimi_eagle_data.model_profile import INSTANT, THINKING


class Validator:
    """Validates samples of one run: construct once (looks up ids, builds the grammar's role table)."""

    def __init__(self, tokens: FormatTokens, tokenizer, max_seq_len: int, keep_truncated: bool = False,
                 vocab_size: int | None = None):
        """`vocab_size`: the model's (`model_vocab_size`, what the format passes); None: the tokenizer's length."""
        self.tokens = tokens
        self.tokenizer = tokenizer
        self.max_seq_len = int(max_seq_len)
        self.keep_truncated = bool(keep_truncated)
        if vocab_size is None:
            vocab_size = len(tokenizer)
        self.vocab_size = int(vocab_size)
        self.decoder = SegmentDecoder(tokenizer, self.vocab_size)
        self.grammar = CompletionGrammar(tokens, self.decoder)

        gp = list(tokens.generation_prompts[THINKING])
        if not gp or gp[-1] != tokens.think_open:
            raise ValueError(
                f"the thinking generation prompt encodes to {gp}, which does not end with {K2_TOKENS.think_open} "
                f"(id {tokens.think_open}); wrong tokenizer for this profile?")
        self.generation_prompt_ids: list[int] = gp
        instant_gp = list(tokens.generation_prompts.get(INSTANT, ()))
        self.limits = RunLimits(tokens=tokens, decoder=self.decoder, generation_prompt_ids=gp,
                                max_seq_len=self.max_seq_len, vocab_size=self.vocab_size,
                                keep_truncated=self.keep_truncated, instant_generation_prompt_ids=instant_gp)

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
        """Samples given as (offsets, values) buffers, sample i at values[offsets[i]:offsets[i + 1]]; the
        completions are parsed in one vectorised pass over the chunk (`CompletionGrammar.parse_many`)."""
        for s in self._samples(prompt_offsets, prompt_values, output_offsets, output_values, finish_reasons,
                               finish_details, tools):
            yield self._verdict(s)

    def judge_turn(self, prompt_ids: Sequence[int] | np.ndarray, output_ids: Sequence[int] | np.ndarray,
                   finish_reason: str, finish_detail: dict | None, tools: list[dict] | None
                   ) -> tuple[Verdict, ParsedCompletion, bool]:
        """One sample's verdict, its parse (what a conversation's next turn is built from) and whether the
        completion is a whole turn (ends with the end-of-turn token, not cut at max_new_tokens)."""
        s = next(self._samples(*pack([prompt_ids]), *pack([output_ids]), [finish_reason], [finish_detail], [tools]))
        return self._verdict(s), s.completion, s.kind == COMPLETE

    def _samples(self, prompt_offsets, prompt_values, output_offsets, output_values, finish_reasons, finish_details,
                 tools) -> Iterator[Sample]:
        vocab = self.vocab_size
        p_oob = rows_with((prompt_values < 0) | (prompt_values >= vocab), prompt_offsets)
        # Each sample's mode, from its prompt's end: the completion is parsed in that mode.
        modes = [self.limits.prompt_mode(prompt_values[prompt_offsets[i]:prompt_offsets[i + 1]])
                 for i in range(len(prompt_offsets) - 1)]
        parsed = self.grammar.parse_many(output_offsets, output_values, instant=[m == INSTANT for m in modes])
        for i, completion in enumerate(parsed):
            yield Sample(prompt=prompt_values[prompt_offsets[i]:prompt_offsets[i + 1]],
                         prompt_has_out_of_range_ids=bool(p_oob[i]), completion=completion,
                         kind=completion_kind(finish_reasons[i], completion), finish_reason=finish_reasons[i],
                         finish_detail=finish_details[i] or {}, declared=_declared_names(tools[i]), mode=modes[i])

    def _verdict(self, s: Sample) -> Verdict:
        issues, details = judge(self.limits, s)
        c: ParsedCompletion = s.completion
        tool_calls = [
            {"id": call.id_text.strip(), "type": "function",
             "function": {"name": call.name if call.name is not None else "", "arguments": call.arguments}}
            for call in c.calls
        ]
        assistant = {"role": "assistant", "reasoning_content": c.reasoning, "content": c.answer,
                     "tool_calls": tool_calls}
        reported = "stop" if s.kind == COMPLETE and s.finish_reason == "length" else s.finish_reason
        return Verdict(
            issues=issues, details=details, reasoning_len=c.reasoning_end,
            num_tool_calls=len(c.at[CALL_BEGIN]),
            args_valid=all(call.arguments_ok for call in c.calls),
            assistant=assistant, finish_reason=reported, mode=s.mode,
        )


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
