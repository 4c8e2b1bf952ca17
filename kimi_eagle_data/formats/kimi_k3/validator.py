"""Kimi-K3's validator: the sample-level rules every format shares (prompt end, length, id range, finish reason,
truncation: base.py) and K3's completion grammar (`grammar.py`, its reason codes); the same interface and `Verdict` as
kimi_eagle_data/formats/kimi_k2/validator.py, so validate, emit, check and generate read either."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from kimi_eagle_data.formats.base import ends_with, sample_issues
from kimi_eagle_data.id_buffers import pack
from kimi_eagle_data.formats.kimi_k3.grammar import K3Completion, parse_completion
from kimi_eagle_data.decoding import SegmentDecoder
from kimi_eagle_data.chat_format import Verdict

THINKING, INSTANT = "thinking", "instant"


@dataclass
class K3Turn:
    """A parsed K3 completion with the assistant message it is (what a conversation's next turn sends back)."""

    completion: K3Completion
    assistant: dict


class K3Validator:
    def __init__(self, chat_format, max_seq_len: int, keep_truncated: bool = False, vocab_size: int = 0):
        """`chat_format`: K3's, bound (`KimiK3Format.validator`); `vocab_size`: the model's (`model_vocab_size`)."""
        self.tokens, self.tokenizer, self.k3 = chat_format.tokens, chat_format.tokenizer, chat_format.k3
        self.max_seq_len, self.keep_truncated = int(max_seq_len), bool(keep_truncated)
        self.vocab_size = int(vocab_size)
        self.decoder = SegmentDecoder(self.tokenizer, self.vocab_size)
        self.generation_prompt_ids = chat_format.generation_prompt_ids(THINKING)
        self.instant_generation_prompt_ids = chat_format.generation_prompt_ids(INSTANT)

    def validate(self, prompt_ids, output_ids, finish_reason: str, finish_detail: dict | None,
                 tools: list[dict] | None) -> Verdict:
        return self.judge_turn(prompt_ids, output_ids, finish_reason, finish_detail, tools)[0]

    def validate_many(self, prompt_offsets: np.ndarray, prompt_values: np.ndarray, output_offsets: np.ndarray,
                      output_values: np.ndarray, finish_reasons: Sequence[str],
                      finish_details: Sequence[dict | None], tools: Sequence[list[dict] | None]) -> Iterator[Verdict]:
        for i in range(len(prompt_offsets) - 1):
            prompt = prompt_values[prompt_offsets[i]:prompt_offsets[i + 1]]
            output = output_values[output_offsets[i]:output_offsets[i + 1]]
            yield self.judge_turn(prompt, output, finish_reasons[i], finish_details[i], tools[i])[0]

    def judge_turn(self, prompt_ids, output_ids, finish_reason: str, finish_detail: dict | None,
                   tools: list[dict] | None) -> tuple[Verdict, K3Turn, bool]:
        prompt = [int(i) for i in prompt_ids]
        output = [int(i) for i in output_ids]
        mode = INSTANT if ends_with(prompt, self.instant_generation_prompt_ids) else THINKING
        in_range = [i for i in output if 0 <= i < self.vocab_size]
        c = parse_completion(in_range, self.k3, lambda ids: self.decoder.decode(np.asarray(ids, np.int64)),
                             instant=mode == INSTANT, declared_tools=_declared(tools))
        whole = finish_reason == "stop" or (finish_reason == "length" and c.ends_with_end_of_msg)
        off_end = mode == THINKING and not ends_with(prompt, self.generation_prompt_ids)
        issues = sample_issues(prompt, output, finish_reason, finish_detail,
                               prompt_problem="the prompt does not end with a K3 generation prompt" if off_end else None,
                               whole=whole, max_seq_len=self.max_seq_len, vocab_size=self.vocab_size,
                               keep_truncated=self.keep_truncated)
        if finish_reason in ("stop", "length"):
            seen = set()
            for v in c.violations:
                if v.code in c.codes_for(whole) and v.code not in seen:
                    seen.add(v.code)
                    issues.append((v.code, v.message))
        calls = [{"id": f"functions.{call.tool}:{call.index}", "type": "function",
                  "function": {"name": call.tool, "arguments": _json(call.arguments)}} for call in c.calls]
        assistant = {"role": "assistant", "content": c.content, "tool_calls": calls}
        if mode == THINKING:
            assistant = {"role": "assistant", "reasoning_content": c.reasoning, **assistant}
        verdict = Verdict(issues=[i for i, _ in issues], details=[d for _, d in issues],
                          reasoning_len=c.reasoning_end if mode == THINKING else 0, num_tool_calls=len(c.calls),
                          args_valid="bad_argument" not in c.codes, assistant=assistant,
                          finish_reason="stop" if whole else finish_reason, mode=mode)
        message = {k: v for k, v in assistant.items() if k != "tool_calls" or v}
        return verdict, K3Turn(c, message), whole


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _declared(tools: list[dict] | None) -> frozenset[str] | None:
    if not tools:
        return frozenset()
    names = set()
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else (t.get("name") if isinstance(t, dict) else None)
        if isinstance(name, str) and name:
            names.add(name)
    return frozenset(names)


__all__ = ["K3Validator", "pack"]
