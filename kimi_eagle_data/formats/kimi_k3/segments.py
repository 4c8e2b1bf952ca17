"""Kimi-K3's split of one sequence into the segments `inspect` shows (what kimi_k2/segments.py is for
K2.5): the same kinds and labels, so `inspect` prints and `--json` writes either alike.

Found from token ids, never by matching decoded text. The prompt is cut into its messages after each
`<|end_of_msg|>` (a message's kind read from its open tag: `message role="system" type="tool-declare"` is the
tool declarations, `role="tool" tool="f"` a tool result, …), then the generation prompt the format renders. The
completion is split where K3's completion grammar (formats/kimi_k3/grammar.py, what the validator reads too)
finds its elements: the reasoning through `<|close|>think<|sep|>`, the `response` element, the `tools` element's
open tag, each `call`, its close tag, and the end of the turn (`<|close|>message<|sep|><|end_of_msg|>`). What the
grammar reads as no element (text between elements, what follows where it stops reading) is a `text` segment, so
the segments always concatenate to the row's ids and the loss-mask boundary (`prompt_len`) falls between two.
"""

from __future__ import annotations

import numpy as np

from kimi_eagle_data.formats.kimi_k3.grammar import K3Completion, K3Span, parse_completion, tag_head
from kimi_eagle_data.decoding import SegmentDecoder

THINKING, INSTANT = "thinking", "instant"
Span = tuple[str, str, int, int]          # (kind, label, start, end) in the sequence


class K3Segmenter:
    """Splits one K3 sequence into segments with one tokenizer (construct once; `KimiK3Format.segmenter`)."""

    def __init__(self, chat_format, vocab_size: int):
        """`chat_format`: K3's, bound; `vocab_size`: the model's (`model_vocab_size`)."""
        self.tokens, self.k3 = chat_format.tokens, chat_format.k3
        self.decoder = SegmentDecoder(chat_format.tokenizer, vocab_size)
        self.gen_prompt = chat_format.generation_prompt_ids(THINKING)
        self.instant_gen_prompt = chat_format.generation_prompt_ids(INSTANT)

    def decode(self, ids) -> str:
        return self.decoder.decode(np.asarray(ids, dtype=np.int64))

    def mode(self, ids: np.ndarray, p: int) -> str:
        """The sample's mode, read from its prompt's end as the validator reads it."""
        k = len(self.instant_gen_prompt)
        return INSTANT if p >= k and [int(i) for i in ids[p - k:p]] == self.instant_gen_prompt else THINKING

    def spans(self, input_ids, prompt_len: int) -> list[Span]:
        ids = np.asarray(input_ids, dtype=np.int64)
        p = int(prompt_len)
        instant = self.mode(ids, p) == INSTANT
        out = self._prompt(ids, p, self.instant_gen_prompt if instant else self.gen_prompt, instant)
        if ids.size > p:
            out += [(kind, label, p + lo, p + hi) for kind, label, lo, hi in self._completion(ids[p:], instant)]
        return [s for s in out if s[3] > s[2]]

    # the prompt: one segment per message, then the generation prompt
    def _prompt(self, ids: np.ndarray, p: int, gen_prompt: list[int], instant: bool) -> list[Span]:
        k = len(gen_prompt)
        gp_start = p - k if p >= k and [int(i) for i in ids[p - k:p]] == gen_prompt else p
        ends = np.flatnonzero(ids[:gp_start] == self.k3.end_of_msg).tolist()
        starts = [0] + [e + 1 for e in ends if e + 1 < gp_start]
        out = []
        for j, lo in enumerate(starts):
            hi = starts[j + 1] if j + 1 < len(starts) else gp_start
            out.append((*self._message_kind(ids, lo, hi), lo, hi))
        if gp_start < p:
            out.append(("generation_prompt", "generation prompt (instant mode)" if instant else "generation prompt",
                        gp_start, p))
        return out

    def _message_kind(self, ids: np.ndarray, lo: int, hi: int) -> tuple[str, str]:
        """(kind, label) of the message at ids[lo:hi], from its open tag `<|open|>message ATTRS<|sep|>`."""
        seps = np.flatnonzero(ids[lo + 1:hi] == self.k3.sep)
        head = tag_head(self.decode(ids[lo + 1:lo + 1 + int(seps[0])])) if ids[lo] == self.k3.open and seps.size \
            else None
        if head is None or head[0] != "message":
            return "prefix", "not a message"
        attrs = head[1]
        role, kind = attrs.get("role", ""), attrs.get("type")
        if role == "system" and kind == "tool-declare":
            return "tools", "tool declarations"
        if role == "system":
            return "system", f"system ({kind})" if kind else "system"
        if role == "tool":
            return "tool_result", f"tool result ({attrs.get('tool', '')})"
        if role == "assistant":
            return "assistant", "past assistant turn"
        if role == "user":
            return "user", "user"
        return "prefix", f"message ({role})"

    # the completion: as K3's completion grammar reads it
    def _completion(self, ids: np.ndarray, instant: bool) -> list[Span]:
        c = parse_completion(ids.tolist(), self.k3, lambda x: self.decode(x), instant=instant)
        stop = "" if c.read_end == c.body_end else " (where the grammar stops reading)"
        out: list[Span] = []
        at = 0
        for s in (s for s in c.spans if s.depth == 1):
            out.append(("text", "text outside the elements", at, s.lo))
            out += self._element(c, s)
            at = s.hi
        message = c.spans[0]
        if message.close_lo is not None:
            out.append(("text", "text outside the elements", at, message.close_lo))
            if message.hi == c.body_end:
                out.append(("end", "end of turn", message.close_lo, c.n))
                return out
            out.append(("end", "message close", message.close_lo, message.hi))
            at = message.hi
        out.append(("text", f"text after the message{stop}" if message.close_lo is not None
                     else f"text outside the elements{stop}", at, c.body_end))
        out.append(("end", "end of turn", c.body_end, c.n))
        return out

    def _element(self, c: K3Completion, s: K3Span) -> list[Span]:
        """One child of the message: think (reasoning), response (answer) or tools (its tags and calls)."""
        unclosed = "" if s.close_lo is not None else " (not closed: truncated)" if not c.ends_with_end_of_msg \
            else " (not closed)"
        if s.name == "think":
            return [("reasoning", "reasoning + <|close|>think<|sep|>" if not unclosed else f"reasoning{unclosed}",
                     s.lo, s.hi)]
        if s.name == "response":
            return [("answer", f"answer{unclosed}", s.lo, s.hi)]
        out: list[Span] = [("tool_section", "tool-call section begin", s.lo, s.head_end)]
        at = s.head_end
        for call in (x for x in c.spans if x.depth == 2 and s.lo < x.lo < s.hi):
            out.append(("text", "text inside the tool-call section", at, call.lo))
            mark = "" if call.close_lo is not None else " (not closed)"
            out.append(("tool_call", f"tool call {call.attrs.get('index', '?')}: {call.attrs.get('tool', '')}{mark}",
                        call.lo, call.hi))
            at = call.hi
        if s.close_lo is None:
            out.append(("text", "text inside the tool-call section", at, s.hi))
            return out
        out.append(("text", "text inside the tool-call section", at, s.close_lo))
        out.append(("tool_section", "tool-call section end", s.close_lo, s.hi))
        return out
