"""Once a turn's completion is in: the conversation's next turn, or why it ends there.

Generate calls `NextTurn` for every completion of an own_history conversation and stores what it returns in the
same transaction as the completion (store/checkpoint.py): the next turn's prompt (a PromptRecord with the
conversation's id and its turn index) or a ConversationEnd with one of END_REASONS (records.py). It depends only on
the stored completion, the turn's prompt and the source's script, so a resumed run continues every conversation
exactly as an uninterrupted one does.
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Sequence

from kimi_eagle_data.chat_format import ChatFormat, FormatValidator
from kimi_eagle_data.conversation.messages import TurnError, history_call_count, next_turn_messages, tool_call_matches
from kimi_eagle_data.conversation.script import ScriptStep, script_steps, step
from kimi_eagle_data.records import Completion, ConversationEnd, PromptRecord
from kimi_eagle_data.sources.policies import answer_of

# Why a conversation has no next turn (the card counts them per config; docs/data-format.md).
def turn_id(conversation_id: str, turn: int) -> str:
    """A later turn's sample id: stable from the conversation's id (its first turn's) and the turn index, in the
    `CONFIG-<16 hex>` form of every sample id (a seed and a shard are drawn from it as from any other)."""
    if turn == 1:
        return conversation_id
    config = conversation_id.rpartition("-")[0]
    key = f"{conversation_id}\x1fturn\x1f{turn}"
    return f"{config}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


class NextTurn:
    """`next_turn(record, completion)`: the PromptRecord of the conversation's next turn, or its ConversationEnd;
    None for a prompt of a config that does not continue conversations.

    `scripts`: conversation id -> its first prompt's script (records.PromptRecord.script); `max_turns`: config ->
    the partition's max_turns, for the configs whose conversations go on. `config_formats`: config -> the format its
    later turns render with where its partition sets template arguments of its own (its `preserve_thinking`)."""

    def __init__(self, validator: FormatValidator, *, max_new_tokens: int, max_seq_len: int,
                 max_turns: dict[str, int], scripts: dict[str, Sequence[dict] | None], chat_format: ChatFormat,
                 config_formats: Mapping[str, ChatFormat] | None = None):
        self.validator = validator
        self.render = chat_format.render_prompt          # the run's chat format, bound (formats/)
        self.renders = {c: f.render_prompt for c, f in (config_formats or {}).items()}
        self.assistant_message = chat_format.assistant_message
        self.max_new_tokens, self.max_seq_len, self.max_turns = max_new_tokens, max_seq_len, max_turns
        self.steps = {conv: script_steps(s) for conv, s in scripts.items()}
        self.generation_prompts = {m: chat_format.generation_prompt_ids(m) for m in ("thinking", "instant")}

    def turns_left(self, record: PromptRecord) -> int:
        """At most how many turns the conversation has from `record` on, itself included: the source's steps
        that go on after it, up to max_turns (generate starts the longest conversations first)."""
        if record.config not in self.max_turns:
            return 1
        steps, last = self.steps.get(record.conversation) or [], self.max_turns[record.config]
        n = record.turn
        while n < last and step(steps, n).next:
            n += 1
        return n - record.turn + 1

    def __call__(self, record: PromptRecord, completion: Completion) -> PromptRecord | ConversationEnd | None:
        if record.config not in self.max_turns:
            return None
        conv, turn = record.conversation, record.turn

        def end(reason: str, message: str) -> ConversationEnd:
            return ConversationEnd(conv, record.config, turn, reason, message)

        verdict, parsed, whole = self.validator.judge_turn(record.prompt_ids, completion.output_ids,
                                                           completion.finish_reason, completion.finish_detail,
                                                           record.tools)
        if not whole:
            return end("turn_truncated", f"turn {turn} ended with finish reason {completion.finish_reason!r}")
        if verdict.issues:
            return end("turn_rejected", f"turn {turn}: {', '.join(verdict.issues)}")
        if turn >= self.max_turns[record.config]:
            return end("max_turns", f"turn {turn} is the partition's max_turns")
        after = step(self.steps.get(conv) or [ScriptStep(None, [])], turn)
        if not after.next:
            return end("source_exhausted", f"the source has nothing after turn {turn}")
        try:
            own = self.assistant_message(parsed, history_call_count(record.messages))
        except TurnError as e:
            return end("turn_rejected", f"turn {turn}: {e}")
        diverged = _divergence(own, after)
        if diverged:
            return end("call_diverged", f"turn {turn}: {diverged}")
        try:
            messages = next_turn_messages(record.messages, own, after.next)
            # every turn announces the first turn's effort (None: the format's default, or none)
            render = self.renders.get(record.config, self.render)
            prompt_ids = render(messages, record.tools, record.mode, record.effort)
        except Exception as e:  # jinja raises many types; the message is what matters
            return end("next_prompt_error", f"turn {turn + 1}: {' '.join(str(e).split())[:300]}")
        gp = self.generation_prompts[record.mode]
        if prompt_ids[-len(gp):] != gp:
            return end("next_prompt_error", f"turn {turn + 1}: the prompt does not end with the {record.mode}-mode "
                                            "generation prompt")
        if len(prompt_ids) + self.max_new_tokens > self.max_seq_len:
            return end("next_prompt_too_long", f"turn {turn + 1}: prompt_len {len(prompt_ids)} + max_new_tokens "
                                               f"{self.max_new_tokens} > max_seq_len {self.max_seq_len}")
        following = step(self.steps.get(conv) or [], turn + 1)
        return PromptRecord(turn_id(conv, turn + 1), record.config, record.source, record.source_id, messages,
                            record.tools, prompt_ids, answer_of(following.answer), mode=record.mode,
                            effort=record.effort, temperature=record.temperature, top_p=record.top_p, conversation_id=conv, turn=turn + 1)


def _divergence(own: dict, after: ScriptStep) -> str | None:
    """Why the source's next messages cannot follow the model's turn (None: they can). Tool results answer
    calls: they follow only calls that are the source's own, one for one (same name, JSON-equal arguments)."""
    own_calls = own.get("tool_calls") or []
    source_calls = (after.answer or {}).get("tool_calls") or []
    results = sum(m.get("role") == "tool" for m in after.next)
    if not own_calls and not source_calls:
        return "the source's tool results follow no tool call" if results else None
    if len(own_calls) != len(source_calls):
        return f"the model made {len(own_calls)} tool call(s), the source {len(source_calls)}"
    for i, (a, b) in enumerate(zip(own_calls, source_calls)):
        if not tool_call_matches(a, b):
            return (f"call {i}: the model called {a['function']['name']}({a['function']['arguments']}), the source "
                    f"{b['function']['name']}({_text(b['function'].get('arguments'))})")
    if results != len(own_calls):
        return f"the source gives {results} tool result(s) for {len(own_calls)} call(s)"
    return None


def _text(arguments) -> str:
    import json

    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
