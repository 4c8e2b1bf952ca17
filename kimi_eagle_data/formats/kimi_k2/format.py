"""A chat format: what a stage asks a profile for that differs between model families.

A profile (`kimi_eagle_data.model_profile.ModelProfile`) names its format (`chat_format`) and `format_of(profile)` is
the object here; stages never compare profile names. What a format answers:

- `tokens(profile, tokenizer)`: its structural tokens resolved to the tokenizer's ids (`end_of_turn` is the stop
  id; `ids` maps every token string the served tokenizer must agree on to its id);
- `tool_encoder_version`: how the format declares tools, bound in run.json (a change re-prepares);
- `efforts`, `default_effort`: the thinking efforts a prompt may announce (none for K2.5); `refused_efforts`:
  effort names a user may expect that the format refuses, each with why;
- `render_prompt(tokenizer, messages, tools, mode, effort)`: a prompt's ids as the model renders them;
- `generation_prompt_ids(profile, tokenizer, mode)`: what every prompt of a mode ends with;
- `special_text(tokenizer)`: the finder of text that the model's tokenizer would read as special tokens, or None
  where typed special-token text stays text (K3);
- `validator(tokens, tokenizer, max_seq_len, …)`: the completion grammar and its rules with reason codes;
- `reasoning_length(ids, tokens, instant)`: completion tokens before the reasoning's end;
- `render_answer(answer, tokenizer, tokens, instant)`: an answer ({"reasoning", "content", "tool_calls"}) as the
  completion the model writes for it after its generation prompt, and how many of those ids are reasoning (what
  `score` scores an upstream answer as, and `check` reads a SpecForge row's last assistant turn as);
- `assistant_message(parsed, profile, first_index)`: a turn its validator accepted (the parse the validator's
  `judge_turn` gives beside the verdict and whether the turn is whole) as the assistant message a client sends
  back, its calls numbered on from the history's `first_index` (conversations on the model's own history);
- `segmenter(profile, tokenizer)`: what splits a sequence into the segments `inspect` shows: `spans(ids,
  prompt_len)` gives (kind, label, start, end) for every message of the prompt, the generation prompt, and the
  completion's reasoning / answer / tool-call section and calls / end of turn as its grammar reads them, covering
  every position once; `mode(ids, prompt_len)` the mode the prompt's end says; `decode(ids)` a segment's text;
- `reason_descriptions(profile)`: every reason code with its description;
- `history_notes(messages)`: codes of what a prompt's history holds that the format renders but its completion
  grammar never accepts (prepare counts and warns; K3: tool-call arguments not JSON, or NaN), with
  `history_note_descriptions`;
- `declared_tools(profile, tokenizer, prompt_ids)`: the tool names a rendered prompt declares, read back (what
  `check` gives a row that comes without its `tools`);
- `check_tokenizer(tokenizer)`: what a tokenizer must pass before any prompt is rendered with it (`load_tokenizer`
  runs it; K2.5: the tool-rendering self-check);
- `check_renderer(tokenizer, records, where)`: prepare's check of a checkpoint's own chat code against ours;
- `fingerprint(tokenizer)`: what run.json binds beside the tokenizer's hashes (K3: the encoder's sha256);
- `card_text(profile)`: what the dataset card says of the format (`CardText`: the rules a `train` row satisfies,
  the text that ends the reasoning, each mode's generation prompt as text).

Kimi-K2.5's format is `KimiK2Format` below; Kimi-K3's is `kimi_k3/format.py` beside it.
"""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Mapping, Sequence

from kimi_eagle_data.chat_format import CardText

THINKING, INSTANT = "thinking", "instant"


class KimiK2Format:
    """Kimi-K2.5's format: the tokenizer's chat template, `<think>`…`</think>`, the tool-call section tokens.
    Kimi-K2.6 speaks it too, its template taking one argument more (`preserve_thinking`): `template_options` are the
    arguments a run passes (`with_template_options` binds them; runs.open_run does, from the profile and settings)."""

    name = "kimi-k2"

    def __init__(self, template_options: Mapping | None = None):
        self.template_options = MappingProxyType(dict(template_options or {}))

    def with_template_options(self, options: Mapping) -> "KimiK2Format":
        """This format passing `options` to the chat template (the same grammar, tokens and validator)."""
        bound = copy.copy(self)
        bound.template_options = MappingProxyType(dict(options))
        return bound
    efforts: tuple[str, ...] = ()          # K2.5 has no thinking effort
    refused_efforts: Mapping[str, str] = MappingProxyType({})
    default_effort = None

    history_note_descriptions: Mapping[str, str] = MappingProxyType({})

    @property
    def tool_encoder_version(self) -> str:
        """The TypeScript declarations' encoder (tool_declaration.py), loaded with the renderer."""
        from kimi_eagle_data.formats.kimi_k2.tool_declaration import ENCODER_VERSION

        return ENCODER_VERSION

    def history_notes(self, messages) -> set[str]:
        return set()        # K2.5's template renders a call's arguments text as given

    def tokens(self, profile, tokenizer):
        from kimi_eagle_data.formats.kimi_k2.tokens import K2Tokens

        return K2Tokens.from_tokenizer(profile, tokenizer)

    def render_prompt(self, tokenizer, messages, tools, mode: str = THINKING, effort: str | None = None) -> list[int]:
        from kimi_eagle_data.formats.kimi_k2.render import render_prompt

        return render_prompt(tokenizer, messages, tools, mode, dict(self.template_options))

    def render_text(self, tokenizer, messages, tools, mode: str = THINKING, effort: str | None = None) -> str:
        from kimi_eagle_data.formats.kimi_k2.render import render_text

        return render_text(tokenizer, messages, tools, mode, dict(self.template_options))

    def generation_prompt_ids(self, profile, tokenizer, mode: str = THINKING) -> list[int]:
        return profile.generation_prompt_ids(tokenizer, mode)

    def special_text(self, tokenizer):
        from kimi_eagle_data.prompts.tokenizer import special_text

        return special_text(tokenizer)

    def validator(self, tokens, tokenizer, max_seq_len: int, keep_truncated: bool = False,
                  vocab_size: int | None = None):
        from kimi_eagle_data.formats.kimi_k2.validator import Validator

        return Validator(tokens, tokenizer, max_seq_len, keep_truncated=keep_truncated, vocab_size=vocab_size)

    def reasoning_length(self, ids: Sequence[int], tokens, instant: bool = False) -> int:
        from kimi_eagle_data.formats.kimi_k2.grammar import reasoning_length

        return reasoning_length(ids, tokens, instant)

    def render_answer(self, answer, tokenizer, tokens, instant: bool = False) -> tuple[list[int], int]:
        from kimi_eagle_data.formats.kimi_k2.answer import render_answer

        return render_answer(answer, tokenizer, tokens, instant)

    def assistant_message(self, parsed, profile, first_index: int = 0) -> dict:
        """The message K2.5's template reads back: `reasoning_content`, `content`, calls numbered on (messages.py)."""
        from kimi_eagle_data.formats.kimi_k2.messages import assistant_message

        return assistant_message(parsed, profile, first_index)

    def segmenter(self, profile, tokenizer):
        """Turns by their role tokens, the completion by grammar.py (segments.py)."""
        from kimi_eagle_data.formats.kimi_k2.segments import Segmenter

        return Segmenter(profile, tokenizer)

    def reason_descriptions(self, profile) -> dict[str, str]:
        from kimi_eagle_data.formats.kimi_k2.rules import reason_descriptions

        return reason_descriptions(profile)

    def declared_tools(self, profile, tokenizer, prompt_ids) -> list[dict] | None:
        """Read back from the tool-declaration turn: the TypeScript block, or the template's JSON fallback
        (render.py)."""
        from kimi_eagle_data.formats.kimi_k2.render import declared_tools

        return declared_tools(profile, tokenizer, prompt_ids)

    def check_tokenizer(self, tokenizer) -> None:
        """The tool-rendering self-check (render.py): the template declares the probes' tools TypeScript-style, and
        a tokenizer with its own chat code (K2.5's) renders them exactly as our encoder."""
        from kimi_eagle_data.formats.kimi_k2.render import check_tool_rendering

        check_tool_rendering(tokenizer)

    def check_renderer(self, tokenizer, records, where: str) -> None:
        """K2.5's tokenizer is checked at load (`check_tokenizer`): nothing more here."""

    def fingerprint(self, tokenizer) -> dict[str, str]:
        """What run.json binds beside the tokenizer's hashes (K2.5: nothing more)."""
        return {}

    def card_text(self, profile) -> CardText:
        """The rules in the profile's token names (rules.py); the reasoning ends with `</think>`."""
        from kimi_eagle_data.formats.kimi_k2.rules import rules_paragraph

        return CardText(rules=rules_paragraph(profile), reasoning_end=profile.think_close,
                        thinking_prompt=profile.generation_prompt, instant_prompt=profile.instant_generation_prompt,
                        history_reasoning=self.history_reasoning(profile))

    def history_reasoning(self, profile) -> str:
        """How the prompts render the reasoning of the history's assistant turns, in the profile's tokens."""
        empty = f"`{profile.think_open}{profile.think_close}`"
        if self.template_options.get("preserve_thinking"):
            return (f"every earlier assistant turn keeps its reasoning, as `{profile.think_open}REASONING"
                    f"{profile.think_close}` before its content (the template's `preserve_thinking`), in plain "
                    "turns and tool loops alike")
        return (f"an earlier assistant turn up to the last one without tool calls renders {empty} (its reasoning "
                "dropped); the turns of the tool loop after it keep theirs; instant mode drops every turn's")


KIMI_K2_FORMAT = KimiK2Format()
