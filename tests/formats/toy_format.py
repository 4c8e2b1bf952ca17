"""A third chat format, defined here only: what adding a model's format takes (issue 42's proof).

"toy-chat" is no Kimi format. On the embedded tiny model's tokenizer (its ids, none of its template) it writes each
message as `<|start_header_id|>ROLE<|end_header_id|>TEXT[EOT]`, declares tools in a first system message, and ends
a prompt with the assistant's header, then `<think>` in thinking mode. A completion is `REASONING</think>ANSWER[EOT]`
(instant: `ANSWER[EOT]`); its grammar has three codes of its own beside the sample-level rules every format shares
(formats/base.py). `register()` adds the format and its profile, `toy-chat`, to the registries; nothing outside
this module knows either.
"""

from __future__ import annotations

import json
from typing import Iterator, Sequence

import numpy as np

from kimi_eagle_data.chat_format import CardText, ChatFormat, FormatTokens, Verdict
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.formats import register_format
from kimi_eagle_data.formats.base import ends_with, sample_issues, sample_reasons
from kimi_eagle_data.profile import register_profile
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.model_profile import INSTANT, THINKING, ModelProfile, model_vocab_size

HEADER, HEADER_END, END, THINK, THINK_END = "<|start_header_id|>", "<|end_header_id|>", "[EOT]", "<think>", "</think>"
TOY_REASONS = {
    "toy_reasoning_end": "a thinking completion without exactly one `</think>`, or an instant one with any",
    "toy_special_token": "a special token in the completion other than `</think>` and the final `[EOT]`",
    "toy_empty_answer": "nothing after the reasoning",
}


class ToyValidator:
    def __init__(self, chat_format: "ToyFormat", max_seq_len: int, keep_truncated: bool, vocab_size: int | None):
        self.tokens, self.tokenizer = chat_format.tokens, chat_format.tokenizer
        self.max_seq_len, self.keep_truncated = max_seq_len, keep_truncated
        self.vocab_size = model_vocab_size(chat_format.profile, self.tokenizer) if vocab_size is None else vocab_size
        self.prompts = {m: chat_format.generation_prompt_ids(m) for m in (THINKING, INSTANT)}
        self.special_ids = frozenset(self.tokens.ids.values())

    def validate(self, prompt_ids, output_ids, finish_reason: str, finish_detail: dict | None, tools) -> Verdict:
        prompt, output = [int(i) for i in prompt_ids], [int(i) for i in output_ids]
        mode = THINKING if ends_with(prompt, self.prompts[THINKING]) else INSTANT
        end, think_end = self.tokens.end_of_turn, self.tokens.think_close
        whole = bool(output) and output[-1] == end
        issues = sample_issues(prompt, output, finish_reason, finish_detail,
                               prompt_problem=None if ends_with(prompt, self.prompts[mode]) else "no assistant header",
                               whole=whole, max_seq_len=self.max_seq_len, vocab_size=self.vocab_size,
                               keep_truncated=self.keep_truncated)
        body = output[:-1] if whole else output
        closes = [i for i, t in enumerate(body) if t == think_end]
        if (mode == THINKING) != (len(closes) == 1) or len(closes) > 1:
            issues.append(("toy_reasoning_end", f"{len(closes)} {THINK_END} in a {mode} completion"))
        stray = [t for t in body if t in self.special_ids and t != think_end]
        if stray:
            issues.append(("toy_special_token", f"{self.tokens.token_name(stray[0])} in the completion"))
        reasoning_len = closes[0] + 1 if mode == THINKING and closes else 0
        answer = self.tokenizer.decode(body[reasoning_len:])
        if whole and not answer.strip():
            issues.append(("toy_empty_answer", "the answer is empty"))
        assistant = {"role": "assistant", "content": answer}
        if mode == THINKING:
            assistant["reasoning_content"] = self.tokenizer.decode(body[:max(reasoning_len - 1, 0)])
        return Verdict(issues=[c for c, _ in issues], details=[d for _, d in issues], reasoning_len=reasoning_len,
                       assistant=assistant, finish_reason="stop" if whole else finish_reason, mode=mode)

    def judge_turn(self, prompt_ids, output_ids, finish_reason: str, finish_detail: dict | None, tools):
        verdict = self.validate(prompt_ids, output_ids, finish_reason, finish_detail, tools)
        return verdict, verdict.assistant, bool(len(output_ids)) and int(output_ids[-1]) == self.tokens.end_of_turn

    def validate_many(self, prompt_offsets: np.ndarray, prompt_values: np.ndarray, output_offsets: np.ndarray,
                      output_values: np.ndarray, finish_reasons: Sequence[str],
                      finish_details: Sequence[dict | None], tools: Sequence) -> Iterator[Verdict]:
        for i in range(len(prompt_offsets) - 1):
            yield self.validate(prompt_values[prompt_offsets[i]:prompt_offsets[i + 1]],
                                output_values[output_offsets[i]:output_offsets[i + 1]], finish_reasons[i],
                                finish_details[i], tools[i])


class ToyFormat(ChatFormat):
    """The core only: every optional member (chat_format.py) keeps its default."""

    name = "toy-chat"
    tool_encoder_version = "toy-1"

    def reason_descriptions(self) -> dict[str, str]:
        prompts = "thinking: `…<|end_header_id|><think>`; instant: `…<|end_header_id|>`"
        return {**sample_reasons(prompts), **TOY_REASONS}

    def card_text(self) -> CardText:
        return CardText(rules=f"a thinking completion holds exactly one `{THINK_END}`, an instant one none; no special "
                              f"token but `{THINK_END}` and the final `{END}`; an answer after the reasoning.",
                        reasoning_end=THINK_END, thinking_prompt=f"{HEADER}assistant{HEADER_END}{THINK}",
                        instant_prompt=f"{HEADER}assistant{HEADER_END}")

    def resolve_tokens(self) -> FormatTokens:
        ids = dict(self.tokenizer.get_added_vocab())           # every special token by name; the toy's among them
        header = [ids[HEADER], *self._text("assistant"), ids[HEADER_END]]
        return FormatTokens(ids=ids, roles={"end_of_turn": ids[END], "think_close": ids[THINK_END]},
                            generation_prompts={THINKING: (*header, ids[THINK]), INSTANT: tuple(header)})

    def _text(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def render_prompt(self, messages, tools, mode: str = THINKING, effort: str | None = None) -> list[int]:
        ids, turns = self.tokens.ids, [{"role": "system", "content": "tools: " + json.dumps(tools, sort_keys=True)}]
        out: list[int] = []
        for m in [*(turns if tools else []), *messages]:
            content = m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
            out += [ids[HEADER], *self._text(m["role"]), ids[HEADER_END], *self._text(content), ids[END]]
        return out + self.generation_prompt_ids(mode)

    def render_text(self, messages, tools, mode: str = THINKING, effort: str | None = None) -> str:
        return self.tokenizer.decode(self.render_prompt(messages, tools, mode))

    def validator(self, max_seq_len: int, keep_truncated: bool = False,
                  vocab_size: int | None = None) -> ToyValidator:
        return ToyValidator(self, max_seq_len, keep_truncated, vocab_size)

    def reasoning_length(self, ids: Sequence[int], instant: bool = False) -> int:
        ids, close = [int(i) for i in ids], self.tokens.think_close
        return 0 if instant or close not in ids else ids.index(close) + 1

    def render_answer(self, answer, instant: bool = False) -> tuple[list[int], int]:
        if answer.get("tool_calls"):
            raise KimiDataError("the toy format writes no tool calls")
        reasoning = [] if instant else [*self._text(answer.get("reasoning") or ""), self.tokens.think_close]
        return reasoning + self._text(answer.get("content") or "") + [self.tokens.end_of_turn], len(reasoning)

    def assistant_message(self, parsed, first_index: int = 0) -> dict:
        return dict(parsed)            # the toy writes no tool calls: the verdict's message is the turn


TOY_FORMAT = ToyFormat()
# The tiny model's tokenizer and lengths, in the toy format (its model never speaks it: rows are handcrafted).
# A plain `ModelProfile`: the embedded tiny model's checkpoint and lengths, the toy's format and tokens.
TOY_PROFILE = ModelProfile(name="toy-chat", model_path=TINY_KIMI.model_path, chat_format=TOY_FORMAT.name,
                           special_tokens=(HEADER, HEADER_END, END, THINK, THINK_END), sampling=TINY_KIMI.sampling,
                           instant_sampling=TINY_KIMI.instant_sampling, max_seq_len=TINY_KIMI.max_seq_len,
                           display_name="Toy", card_tags=("toy-chat",), is_test_model=True)


def register() -> None:
    """The format and its profile into the registries, as a plug-in adds them."""
    register_format(TOY_FORMAT)
    register_profile(TOY_PROFILE)
