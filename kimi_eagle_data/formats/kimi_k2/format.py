"""Kimi-K2.5's chat format (`KimiK2Format`), the `ChatFormat` the stages ask (chat_format.py says what each member
answers; Kimi-K3's is `kimi_k3/format.py` beside it).

Its tokens are the format's (`tokens.py`: `K2_TOKENS`, every K2 profile's), resolved once when the format is bound to
a run's profile and tokenizer. Rendering is the tokenizer's chat template with tools declared TypeScript-style by our
encoder (`render.py`, `tool_declaration.py`); the completion grammar (`grammar.py`), its rules and reason codes
(`rules.py`) and their validator (`validator.py`); an answer as the completion K2.5 writes (`answer.py`), an accepted
turn as the assistant message a client sends back (`messages.py`), `inspect`'s segments (`segments.py`).
"""

from __future__ import annotations

from typing import Sequence

from kimi_eagle_data.chat_format import CardText, ChatFormat, FormatTokens
from kimi_eagle_data.formats.kimi_k2 import messages, render, rules
from kimi_eagle_data.formats.kimi_k2.answer import render_answer
from kimi_eagle_data.formats.kimi_k2.grammar import reasoning_length
from kimi_eagle_data.formats.kimi_k2.segments import Segmenter
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS, k2_tokens
from kimi_eagle_data.formats.kimi_k2.tool_declaration import ENCODER_VERSION
from kimi_eagle_data.formats.kimi_k2.validator import Validator
from kimi_eagle_data.model_profile import THINKING, model_vocab_size
from kimi_eagle_data.prompts.tokenizer import special_text


class KimiK2Format(ChatFormat):
    """Kimi-K2.5's format: the tokenizer's chat template, `<think>`…`</think>`, the tool-call section tokens.
    Kimi-K2.6 speaks it too, its template taking one argument more (`preserve_thinking`): `template_options` are the
    arguments a run passes (`with_template_options` sets them; runs.open_run does, from the profile and settings)."""

    name = "kimi-k2"
    tool_encoder_version = ENCODER_VERSION      # the TypeScript declarations' encoder (tool_declaration.py)

    def resolve_tokens(self) -> FormatTokens:
        return k2_tokens(self.tokenizer, model=self.profile.name)

    def render_prompt(self, messages, tools, mode: str = THINKING, effort: str | None = None) -> list[int]:
        return render.render_prompt(self.tokenizer, messages, tools, mode, dict(self.template_options))

    def render_text(self, messages, tools, mode: str = THINKING, effort: str | None = None) -> str:
        return render.render_text(self.tokenizer, messages, tools, mode, dict(self.template_options))

    def validator(self, max_seq_len: int, keep_truncated: bool = False, vocab_size: int | None = None) -> Validator:
        return Validator(self.tokens, self.tokenizer, max_seq_len, keep_truncated=keep_truncated,
                         vocab_size=vocab_size if vocab_size is not None
                         else model_vocab_size(self.profile, self.tokenizer))

    def reasoning_length(self, ids: Sequence[int], instant: bool = False) -> int:
        return reasoning_length(ids, self.tokens, instant)

    def render_answer(self, answer, instant: bool = False) -> tuple[list[int], int]:
        return render_answer(answer, self.tokenizer, self.tokens, instant)

    def assistant_message(self, parsed, first_index: int = 0) -> dict:
        """The message K2.5's template reads back: `reasoning_content`, `content`, calls numbered on (messages.py)."""
        return messages.assistant_message(parsed, first_index)

    def reason_descriptions(self) -> dict[str, str]:
        return rules.reason_descriptions()

    def card_text(self) -> CardText:
        """The rules in K2.5's token names (rules.py); the reasoning ends with `</think>`."""
        return CardText(rules=rules.rules_paragraph(), reasoning_end=K2_TOKENS.think_close,
                        thinking_prompt=K2_TOKENS.generation_prompt,
                        instant_prompt=K2_TOKENS.instant_generation_prompt, history_reasoning=self.history_reasoning())

    def history_reasoning(self) -> str:
        """How the prompts render the reasoning of the history's assistant turns, in K2.5's tokens."""
        think_open, think_close = K2_TOKENS.think_open, K2_TOKENS.think_close
        if self.template_options.get("preserve_thinking"):
            return (f"every earlier assistant turn keeps its reasoning, as `{think_open}REASONING{think_close}` "
                    "before its content (the template's `preserve_thinking`), in plain turns and tool loops alike")
        return (f"an earlier assistant turn up to the last one without tool calls renders `{think_open}{think_close}` "
                "(its reasoning dropped); the turns of the tool loop after it keep theirs; instant mode drops every "
                "turn's")

    # -- optional members K2.5 answers --
    def check_tokenizer(self, tokenizer) -> None:
        """The tool-rendering self-check (render.py): the template declares the probes' tools TypeScript-style, and
        a tokenizer with its own chat code (K2.5's) renders them exactly as our encoder."""
        render.check_tool_rendering(tokenizer)

    def special_text(self):
        """The tokenizer reads typed special-token text as the tokens themselves (prompts/tokenizer.py)."""
        return special_text(self.tokenizer)

    def segmenter(self) -> Segmenter:
        """Turns by their role tokens, the completion by grammar.py (segments.py)."""
        return Segmenter(self.tokens, self.tokenizer, model_vocab_size(self.profile, self.tokenizer), self.profile.name)

    def declared_tools(self, prompt_ids) -> list[dict] | None:
        """Read back from the tool-declaration turn: the TypeScript block, or the template's JSON fallback
        (render.py)."""
        return render.declared_tools(self.tokenizer, prompt_ids)


KIMI_K2_FORMAT = KimiK2Format()
