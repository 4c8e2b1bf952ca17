"""The tiny K3 model on its own history: held-out two-turn conversations (chats and tool loops, K3Synth) replayed
turn by turn. Turn 1 is sampled on the conversation's first prompt; a valid turn (k3_check) is sent back as the
assistant message a client sends (reasoning_content, content, tool_calls with ids), followed by the source's next
messages: its user turn, or, when the source answered calls with tool results, one result per call the model
made (the source's result texts, in order). Turn 2 is sampled on that prompt and checked. A turn 1 that is not
valid ends its conversation (counted once, as turn 1's); so does a turn 1 without calls where the source has
tool results, or with calls where it has a user turn (`diverged`)."""

from __future__ import annotations

from collections import Counter, defaultdict

from k3_check import parse_completion
from k3_conversations import declared_tools, render_kwargs, thinking


def _first_prompt(messages: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the messages before the first assistant turn, the source's messages after it up to its next turn)."""
    at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not at:
        return list(messages), []
    end = at[1] if len(at) > 1 else len(messages)
    return messages[:at[0]], messages[at[0] + 1:end]


def _reply(turn: dict, conv: dict) -> dict:
    msg = {"role": "assistant", "content": turn["content"]}
    if thinking(conv):
        msg["reasoning_content"] = turn["reasoning"]
    if turn["tool_calls"]:
        msg["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": dict(c)}
                             for i, c in enumerate(turn["tool_calls"])]
    return msg


def _next_messages(turn: dict, source_next: list[dict]) -> list[dict] | None:
    results = [m for m in source_next if m["role"] == "tool"]
    if bool(turn["tool_calls"]) != bool(results):
        return None
    if not results:
        return source_next
    return [{"role": "tool", "tool_call_id": f"call_{i}", "content": results[min(i, len(results) - 1)]["content"]}
            for i in range(len(turn["tool_calls"]))]


def evaluate_own_history(model, tok, convs, *, sample, max_prompt: int, **sampling) -> dict:
    stats, issues, ended = defaultdict(Counter), Counter(), Counter()
    live = []
    for c in convs:
        first, after = _first_prompt(c["messages"])
        live.append((c, first, after))
    for turn_no in (1, 2):
        prompts = [tok.apply_chat_template(msgs, tools=c["tools"], tokenize=True, **render_kwargs(c))
                   for c, msgs, _ in live]
        keep = [len(p) <= max_prompt for p in prompts]
        ended["prompt_too_long"] += keep.count(False)
        live = [x for x, k in zip(live, keep) if k]
        prompts = [p for p, k in zip(prompts, keep) if k]
        results = sample(model, tok, prompts, **sampling)
        nxt = []
        for (c, msgs, after), (gen, finish) in zip(live, results):
            found, turn = parse_completion(gen, finish, tok, declared_tools(c), thinking(c))
            key = f"{c['style']} turn{turn_no}"
            stats[key].update(n=1, valid=int(not found))
            issues.update(found)
            if found or turn_no == 2:
                ended["invalid" if found else "done"] += 1
                continue
            more = _next_messages(turn, after)
            if more is None:
                ended["diverged"] += 1
                continue
            nxt.append((c, msgs + [_reply(turn, c)] + more, []))
        live = nxt
    return {"by_turn": {k: dict(v) for k, v in sorted(stats.items())}, "issues": dict(issues.most_common()),
            "ended": dict(ended)}
