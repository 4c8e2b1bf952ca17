"""Kimi-K3's chat format as the stages ask for it (chat_format.py says what each member answers).

Rendering: a tokenizer with its own chat code (a K3 checkpoint's trust_remote_code tokenizer, the tiny K3 one)
renders through its own `apply_chat_template`; any other tokenizer through our renderer (`render.py`), each
segment encoded on its own (`segment_ids.py`). Typed special-token text is text in K3 (a non-special segment), so
there is no special-text finder: `special_text` is None.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from kimi_eagle_data.chat_format import CardText, ChatFormat, FormatTokens
from kimi_eagle_data.formats.base import sample_reasons
from kimi_eagle_data.formats.kimi_k3.facts import GENERATION_PROMPTS, K3TokenIds
from kimi_eagle_data.formats.kimi_k3.grammar import CARD_RULES, REASONS, reasoning_length
from kimi_eagle_data.formats.kimi_k3.normalize import HISTORY_ARGUMENT_NOTES, history_argument_notes
from kimi_eagle_data.formats.kimi_k3.checkpoint import check_prompts, encoder_sha256
from kimi_eagle_data.formats.kimi_k3.render import (CLOSE, DEFAULT_EFFORT, EFFORTS, END_OF_MSG, OPEN,
                                                     REFUSED_EFFORTS, SEP, check_effort, completion_segments,
                                                     joined_text, render_segments)
from kimi_eagle_data.formats.kimi_k3.segment_ids import encode_segments
from kimi_eagle_data.formats.kimi_k3.segments import K3Segmenter
from kimi_eagle_data.formats.kimi_k3.validator import K3Validator
from kimi_eagle_data.model_profile import model_vocab_size
from kimi_eagle_data.prompts.tokenizer import own_chat_code

THINKING, INSTANT = "thinking", "instant"
# The sample-level codes K3's validator shares with every format (base.py; docs/token-rules.md).
SAMPLE_REASONS = sample_reasons("thinking: `…<|open|>think<|sep|>`; instant: `…<|open|>response<|sep|>`")


def _effort(mode: str, effort: str | None) -> str | None:
    if mode == INSTANT:
        return None
    effort = effort or DEFAULT_EFFORT
    check_effort(effort)
    return effort


class KimiK3Format(ChatFormat):
    """Kimi-K3's format: its own renderer (or a checkpoint's own chat code), the `<|open|>`/`<|close|>`/`<|sep|>`
    elements, its completion grammar (grammar.py) and validator (validator.py)."""

    name = "kimi-k3"
    efforts: tuple[str, ...] = EFFORTS
    refused_efforts: Mapping[str, str] = REFUSED_EFFORTS
    history_note_descriptions: Mapping[str, str] = HISTORY_ARGUMENT_NOTES
    # What every K3 workdir has bound from the first: K3 declares tools with its own renderer, whose changes
    # `fingerprint` binds (the encoder's sha256); a new value here would refuse every existing workdir.
    tool_encoder_version = "2"
    default_effort = DEFAULT_EFFORT

    # -- unbound --
    def segments(self, messages, tools, mode: str = THINKING, effort: str | None = None):
        """The prompt as our renderer's segments (render.py): what `render_prompt` encodes segment by segment for a
        tokenizer without its own chat code, and `check_renderer` compares a checkpoint's with."""
        return render_segments(list(messages), tools or None, thinking=mode != INSTANT, effort=_effort(mode, effort))

    def reason_descriptions(self) -> dict[str, str]:
        return {**SAMPLE_REASONS, **{code: text for code, (text, _) in REASONS.items()}}

    def card_text(self) -> CardText:
        """The rules paragraph of K3's grammar (`CARD_RULES`); the reasoning ends with `<|close|>think<|sep|>`."""
        return CardText(rules=CARD_RULES, reasoning_end=f"{CLOSE}think{SEP}",
                        thinking_prompt=GENERATION_PROMPTS[THINKING], instant_prompt=GENERATION_PROMPTS[INSTANT])

    def history_notes(self, messages) -> set[str]:
        return history_argument_notes(messages)

    # -- bound --
    _k3: K3TokenIds | None = None

    @property
    def k3(self) -> K3TokenIds:
        """K3's markers as its grammar reads them (with the forbidden and K2-era ids by name), resolved by `bind`."""
        return self._k3 if self._k3 is not None else self._needs_binding()

    def resolve_tokens(self) -> FormatTokens:
        """Also keeps the grammar's `k3` of the same tokenizer (bind runs this on the bound copy)."""
        k3 = self._k3 = K3TokenIds.from_vocab(self.tokenizer.get_vocab())
        ids = {OPEN: k3.open, CLOSE: k3.close, SEP: k3.sep, END_OF_MSG: k3.end_of_msg}
        # The generation prompt's own segments (the tail after the last message), encoded segment by segment.
        segs = {mode: render_segments([{"role": "user", "content": "x"}], thinking=mode != INSTANT, effort=None)
                for mode in (THINKING, INSTANT)}
        prompts = {mode: tuple(encode_segments(self.tokenizer, s[max(i for i, x in enumerate(s)
                                                                       if x.text == END_OF_MSG) + 1:]))
                   for mode, s in segs.items()}
        return FormatTokens(ids=ids, roles={"end_of_turn": k3.end_of_msg, "open": k3.open, "close": k3.close,
                                            "sep": k3.sep},
                            generation_prompts=prompts, forbidden_ids=frozenset(k3.forbidden) | frozenset(k3.legacy))

    def render_prompt(self, messages, tools, mode: str = THINKING, effort: str | None = None) -> list[int]:
        if own_chat_code(self.tokenizer):
            return list(self.tokenizer.apply_chat_template(list(messages), tools=tools or None, tokenize=True,
                                                           add_generation_prompt=True, thinking=mode != INSTANT,
                                                           thinking_effort=_effort(mode, effort)))
        return encode_segments(self.tokenizer, self.segments(messages, tools, mode, effort))

    def render_text(self, messages, tools, mode: str = THINKING, effort: str | None = None) -> str:
        return joined_text(self.segments(messages, tools, mode, effort))

    def validator(self, max_seq_len: int, keep_truncated: bool = False,
                  vocab_size: int | None = None) -> K3Validator:
        return K3Validator(self, max_seq_len, keep_truncated=keep_truncated,
                           vocab_size=vocab_size if vocab_size is not None
                           else model_vocab_size(self.profile, self.tokenizer))

    def reasoning_length(self, ids: Sequence[int], instant: bool = False) -> int:
        return reasoning_length(ids, self.k3, instant)

    def render_answer(self, answer, instant: bool = False) -> tuple[list[int], int]:
        """The answer as the assistant message K3 writes after its generation prompt (`completion_segments`),
        each segment encoded on its own; its reasoning is the ids before `<|close|>think<|sep|>`."""
        message = {"content": answer.get("content") or "", "tool_calls": answer.get("tool_calls") or None}
        if not instant:
            message["reasoning_content"] = answer.get("reasoning") or ""
        ids = encode_segments(self.tokenizer, completion_segments(message, thinking=not instant))
        return ids, reasoning_length(ids, self.k3, instant)

    def assistant_message(self, parsed, first_index: int = 0) -> dict:
        """The message the validator read the turn into (`K3Turn.assistant`): its call ids are the ones it wrote."""
        return dict(parsed.assistant)

    # -- optional members K3 answers --
    def check_renderer(self, records, where: str) -> None:
        """With a tokenizer that has its own chat code: its first prompts rendered by ours too, one line on any
        difference (checkpoint.py). Nothing at load (`check_tokenizer`): the comparison needs prompts."""
        if own_chat_code(self.tokenizer):
            check_prompts(self, self.tokenizer, records, where)

    def fingerprint(self) -> dict[str, str]:
        """What run.json binds beside the tokenizer's hashes: the encoder's sha256."""
        return {"encoder_sha256": encoder_sha256(self.tokenizer)}

    def segmenter(self) -> K3Segmenter:
        return K3Segmenter(self, model_vocab_size(self.profile, self.tokenizer))


KIMI_K3_FORMAT = KimiK3Format()
