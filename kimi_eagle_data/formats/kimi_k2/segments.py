"""Kimi-K2.5's split of one sequence into the segments `inspect` shows (`KimiK2Format.segmenter`; Kimi-K3's is
k3_segments.py beside it).

Found from token ids, never by matching decoded text: turn-opening role tokens split the prompt into turns
(system, tool declarations, user, past assistant turns, tool results, the generation prompt), and the completion
grammar (grammar.py beside it, what the validator reads too) splits the completion (reasoning up to
`</think>`, the answer, each tool call `<|tool_call_begin|>…<|tool_call_end|>`, the final `<|im_end|>`). Only a
turn's header name (the one or two tokens between its role token and `<|im_middle|>`, e.g. `tool_declare`) is
decoded, to tell a system turn from the tool declarations or a tool result. Turn-opening role tokens and the header
terminator come from the format's tokens (`K2_TOKENS.turn_tokens`, `turn_header_end`) by token *string*; their ids
are looked up from the tokenizer.
"""

from __future__ import annotations

import numpy as np

from kimi_eagle_data.decoding import SegmentDecoder
from kimi_eagle_data.formats.kimi_k2.grammar import CompletionGrammar, ParsedCompletion
from kimi_eagle_data.chat_format import FormatTokens
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS, TokenLookupError


class Segmenter:
    """Splits one sequence into segments with one tokenizer and its resolved tokens (construct once);
    `vocab_size`: the model's (`model_vocab_size`); `model`: the profile's name, for messages."""

    def __init__(self, tokens: FormatTokens, tokenizer, vocab_size: int, model: str):
        self.tokenizer = tokenizer
        self.tokens = tokens
        vocab = tokenizer.get_vocab()
        turn_tokens, header_end = K2_TOKENS.turn_tokens, K2_TOKENS.turn_header_end
        missing = [t for t in [*turn_tokens.values(), header_end] if t not in vocab]
        if missing:
            raise TokenLookupError(f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} lacks the turn tokens "
                               f"{missing} of profile {model}; pass --tokenizer with the run's tokenizer")
        self.role_of = {vocab[t]: role for role, t in turn_tokens.items()}
        self.header_end = vocab[header_end]
        self.gen_prompt = list(tokens.generation_prompts[THINKING])
        # instant mode's (the template's thinking=False): a prompt ending with it is read in instant mode
        self.instant_gen_prompt = list(tokens.generation_prompts[INSTANT])
        self.decoder = SegmentDecoder(tokenizer, vocab_size)
        self.grammar = CompletionGrammar(self.tokens, self.decoder)

    def decode(self, ids) -> str:
        return self.decoder.decode(np.asarray(ids, dtype=np.int64))

    def mode(self, ids: np.ndarray, p: int) -> str:
        """The sample's mode, read from its prompt's end as the validator reads it."""
        k = len(self.instant_gen_prompt)
        return INSTANT if k and p >= k and ids[p - k:p].tolist() == self.instant_gen_prompt else THINKING

    def spans(self, input_ids, prompt_len: int) -> list[tuple[str, str, int, int]]:
        """(kind, label, start, end) of every segment, in order (empty ones included)."""
        ids = np.asarray(input_ids, dtype=np.int64)
        n, p = int(ids.size), int(prompt_len)
        segs: list[tuple[str, str, int, int]] = []
        instant = self.mode(ids, p) == INSTANT
        self._prompt(ids, p, segs, self.instant_gen_prompt if instant else self.gen_prompt)
        self._completion(ids, p, n, segs, instant)
        return segs

    # the prompt: turns opened by role tokens, then the generation prompt
    def _prompt(self, ids: np.ndarray, p: int, segs: list, gen_prompt: list[int]) -> None:
        k = len(gen_prompt)
        gp_start = p - k if p >= k and ids[p - k:p].tolist() == gen_prompt else p
        starts = np.flatnonzero(np.isin(ids[:gp_start], list(self.role_of))).tolist()
        if not starts or starts[0] > 0:
            segs.append(("prefix", "before the first turn", 0, starts[0] if starts else gp_start))
        counters: dict[str, int] = {}
        for j, lo in enumerate(starts):
            hi = starts[j + 1] if j + 1 < len(starts) else gp_start
            kind, name = self._turn_kind(ids, lo, hi)
            counters[kind] = counters.get(kind, 0) + 1
            label = {"tools": "tool declarations", "tool_result": f"tool result ({name})",
                     "assistant": "past assistant turn"}.get(kind, kind if name in ("", kind) else f"{kind} ({name})")
            segs.append((kind, label, lo, hi))
        if gp_start < p:
            label = "generation prompt (instant mode)" if gen_prompt is self.instant_gen_prompt else "generation prompt"
            segs.append(("generation_prompt", label, gp_start, p))

    def _turn_kind(self, ids: np.ndarray, lo: int, hi: int) -> tuple[str, str]:
        role = self.role_of[int(ids[lo])]
        ends = np.flatnonzero(ids[lo + 1:hi] == self.header_end)
        name = self.decode(ids[lo + 1:lo + 1 + int(ends[0])].tolist()).strip() if ends.size else ""
        if role == "system":
            if name == "tool_declare":
                return "tools", name
            if name and name != "system":
                return "tool_result", name
        return role, name

    # the completion: as the completion grammar parses it (the validator reads the same parts)
    def _completion(self, ids: np.ndarray, p: int, n: int, segs: list, instant: bool = False) -> None:
        if n <= p:
            return
        c = self.grammar.parse(ids[p:], instant=instant)
        body_end = p + c.body_end
        if instant:             # no reasoning: the answer from the first token
            self._answer(c, p, segs)
        elif c.think_close is None:
            label = "reasoning (no </think>: truncated)" if body_end == n else "reasoning (no </think>)"
            segs.append(("reasoning", label, p, body_end))
        else:
            segs.append(("reasoning", "reasoning + </think>", p, p + c.think_close + 1))
            self._answer(c, p, segs)
        if body_end < n:
            segs.append(("end", "end of turn", body_end, n))

    @staticmethod
    def _answer(c: ParsedCompletion, p: int, segs: list) -> None:
        """The answer text, then the tool-call section: its complete calls, and what else stands in it as text
        (blank runs between calls, or what follows the first token out of the grammar's order)."""
        lo, hi = p + c.answer_start, p + c.body_end
        if c.section_begin is None:
            segs.append(("answer", "answer", lo, hi))
            return
        begin = p + c.section_begin
        segs.append(("answer", "answer", lo, begin))
        segs.append(("tool_section", "tool-call section begin", begin, begin + 1))
        at = begin + 1
        for k, call in enumerate(c.calls):
            segs.append(("text", "text inside the tool-call section", at, p + call.begin))
            name = call.name if call.name is not None else "malformed id"
            segs.append(("tool_call", f"tool call {k}: {name}", p + call.begin, p + call.end + 1))
            at = p + call.end + 1
        if c.section_end is None:
            segs.append(("text", "text inside the tool-call section", at, hi))
            return
        end = p + c.section_end
        segs.append(("text", "text inside the tool-call section", at, end))
        segs.append(("tool_section", "tool-call section end", end, end + 1))
        segs.append(("text", "text after the tool-call section", end + 1, hi))
