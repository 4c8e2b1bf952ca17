"""Kimi-K3's chat format as the stages ask for it (kimi_k2/format.py says what a format answers).

Rendering: a tokenizer with its own chat code (a K3 checkpoint's trust_remote_code tokenizer, the tiny K3 one)
renders through its own `apply_chat_template`; any other tokenizer through our renderer (`render.py`), each
segment encoded on its own (`segment_ids.py`). Typed special-token text is text in K3 (a non-special segment), so
there is no special-text finder: `special_text` is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kimi_eagle_data.chat_format import CardText
from kimi_eagle_data.formats.base import sample_reasons
from kimi_eagle_data.formats.kimi_k3.facts import GENERATION_PROMPTS, K3TokenIds
from kimi_eagle_data.formats.kimi_k3.grammar import CARD_RULES, REASONS, reasoning_length
from kimi_eagle_data.formats.kimi_k3.normalize import HISTORY_ARGUMENT_NOTES, history_argument_notes
from kimi_eagle_data.formats.kimi_k3.render import (CLOSE, DEFAULT_EFFORT, EFFORTS, END_OF_MSG, REFUSED_EFFORTS,
                                                     SEP, check_effort, completion_segments, joined_text,
                                                     render_segments)
from kimi_eagle_data.formats.kimi_k3.segment_ids import encode_segments
from kimi_eagle_data.prompts.tokenizer import own_chat_code

THINKING, INSTANT = "thinking", "instant"
# The sample-level codes K3's validator shares with every format (base.py; docs/token-rules.md).
SAMPLE_REASONS = sample_reasons("thinking: `…<|open|>think<|sep|>`; instant: `…<|open|>response<|sep|>`")


@dataclass(frozen=True)
class K3Tokens:
    """K3's tokens resolved to one tokenizer: what `K2Tokens` is for K2.5 (the stop id is `end_of_turn`)."""

    profile: Any
    ids: Mapping[str, int]                 # marker string -> id (the served tokenizer must agree)
    k3: K3TokenIds
    forbidden_ids: frozenset[int] = field(default_factory=frozenset)

    @property
    def end_of_turn(self) -> int:
        return self.k3.end_of_msg

    def token_name(self, token_id: int) -> str:
        return next(t for t, i in self.ids.items() if i == token_id)


def _effort(mode: str, effort: str | None) -> str | None:
    if mode == INSTANT:
        return None
    effort = effort or DEFAULT_EFFORT
    check_effort(effort)
    return effort


class KimiK3Format:
    name = "kimi-k3"
    efforts: tuple[str, ...] = EFFORTS
    refused_efforts: Mapping[str, str] = REFUSED_EFFORTS
    history_note_descriptions: Mapping[str, str] = HISTORY_ARGUMENT_NOTES
    # What every K3 workdir has bound from the first: K3 declares tools with its own renderer, whose changes
    # `fingerprint` binds (the encoder's sha256); a new value here would refuse every existing workdir.
    tool_encoder_version = "2"
    default_effort = DEFAULT_EFFORT

    def declared_tools(self, profile, tokenizer, prompt_ids) -> list[dict] | None:
        """Not read back: a K3 row without its `tools` is checked as declaring none."""
        return None

    def check_tokenizer(self, tokenizer) -> None:
        """Nothing at load: a checkpoint's own chat code is compared with ours on prepare's first prompts
        (`check_renderer`)."""

    def check_renderer(self, tokenizer, records, where: str) -> None:
        """With a tokenizer that has its own chat code: its first prompts rendered by ours too, one line on any
        difference (checkpoint.py)."""
        if own_chat_code(tokenizer):
            from kimi_eagle_data.formats.kimi_k3.checkpoint import check_prompts

            check_prompts(self, tokenizer, records, where)

    def fingerprint(self, tokenizer) -> dict[str, str]:
        """What run.json binds beside the tokenizer's hashes: the encoder's sha256."""
        from kimi_eagle_data.formats.kimi_k3.checkpoint import encoder_sha256

        return {"encoder_sha256": encoder_sha256(tokenizer)}

    def tokens(self, profile, tokenizer) -> K3Tokens:
        k3 = K3TokenIds.from_vocab(tokenizer.get_vocab())
        ids = {"<|open|>": k3.open, "<|close|>": k3.close, "<|sep|>": k3.sep, END_OF_MSG: k3.end_of_msg}
        return K3Tokens(profile=profile, ids=ids, k3=k3, forbidden_ids=frozenset(k3.forbidden) | frozenset(k3.legacy))

    def segments(self, messages, tools, mode: str = THINKING, effort: str | None = None):
        return render_segments(list(messages), tools or None, thinking=mode != INSTANT, effort=_effort(mode, effort))

    def render_prompt(self, tokenizer, messages, tools, mode: str = THINKING, effort: str | None = None) -> list[int]:
        if own_chat_code(tokenizer):
            return list(tokenizer.apply_chat_template(list(messages), tools=tools or None, tokenize=True,
                                                      add_generation_prompt=True, thinking=mode != INSTANT,
                                                      thinking_effort=_effort(mode, effort)))
        return encode_segments(tokenizer, self.segments(messages, tools, mode, effort))

    def render_text(self, tokenizer, messages, tools, mode: str = THINKING, effort: str | None = None) -> str:
        return joined_text(self.segments(messages, tools, mode, effort))

    def generation_prompt_ids(self, profile, tokenizer, mode: str = THINKING) -> list[int]:
        # The generation prompt's own segments (the tail after the last message), encoded segment by segment.
        segs = render_segments([{"role": "user", "content": "x"}], thinking=mode != INSTANT, effort=None)
        last = max(i for i, s in enumerate(segs) if s.text == END_OF_MSG)
        return encode_segments(tokenizer, segs[last + 1:])

    def special_text(self, tokenizer):
        return None          # typed special-token text is a non-special segment: text, as K3 renders it

    def validator(self, tokens, tokenizer, max_seq_len: int, keep_truncated: bool = False,
                  vocab_size: int | None = None):
        from kimi_eagle_data.formats.kimi_k3.validator import K3Validator

        return K3Validator(self, tokens, tokenizer, max_seq_len, keep_truncated=keep_truncated,
                           vocab_size=vocab_size)

    def reasoning_length(self, ids: Sequence[int], tokens, instant: bool = False) -> int:
        return reasoning_length(ids, tokens.k3, instant)

    def render_answer(self, answer, tokenizer, tokens, instant: bool = False) -> tuple[list[int], int]:
        """The answer as the assistant message K3 writes after its generation prompt (`completion_segments`),
        each segment encoded on its own; its reasoning is the ids before `<|close|>think<|sep|>`."""
        message = {"content": answer.get("content") or "", "tool_calls": answer.get("tool_calls") or None}
        if not instant:
            message["reasoning_content"] = answer.get("reasoning") or ""
        ids = encode_segments(tokenizer, completion_segments(message, thinking=not instant))
        return ids, reasoning_length(ids, tokens.k3, instant)

    def assistant_message(self, parsed, profile, first_index: int = 0) -> dict:
        """The message the validator read the turn into (`K3Turn.assistant`): its call ids are the ones it wrote."""
        return dict(parsed.assistant)

    def segmenter(self, profile, tokenizer):
        from kimi_eagle_data.formats.kimi_k3.segments import K3Segmenter

        return K3Segmenter(self, profile, tokenizer)

    def history_notes(self, messages) -> set[str]:
        return history_argument_notes(messages)

    def card_text(self, profile) -> CardText:
        """The rules paragraph of K3's grammar (`CARD_RULES`); the reasoning ends with `<|close|>think<|sep|>`."""
        return CardText(rules=CARD_RULES, reasoning_end=f"{CLOSE}think{SEP}",
                        thinking_prompt=GENERATION_PROMPTS[THINKING], instant_prompt=GENERATION_PROMPTS[INSTANT])

    def reason_descriptions(self, profile) -> dict[str, str]:
        return {**SAMPLE_REASONS, **{code: text for code, (text, _) in REASONS.items()}}


KIMI_K3_FORMAT = KimiK3Format()
