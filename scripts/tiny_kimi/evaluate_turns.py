"""Multi-turn evaluation of the tiny model on its own history, as the project's turn-by-turn regeneration runs it.

Each held-out synthetic conversation (synth.py `multi_turn`: a chat or a tool loop, one mode) is replayed turn by
turn: turn 1 is sampled on the conversation's first prompt; a turn the project's Validator accepts is parsed by its
grammar and sent back as the client's assistant message (kimi_eagle_data/formats/kimi_k2/messages.py), followed by
the source's next user turn or tool result(s), and the next turn is sampled on that prompt. A turn the Validator
rejects ends its conversation (it is counted once, as invalid); so does a source tool result with no model call to
answer.
Per turn number: how many were sampled and how many the Validator (docs/token-rules.md) accepted; and the same
for the turns that run past the 512 positions of the model's first context (prompt and completion together).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.formats.kimi_k2.tokens import k2_tokens
from kimi_eagle_data.formats.kimi_k2.render import render_prompt
from kimi_eagle_data.conversation.messages import TurnError, history_call_count, next_turn_messages
from kimi_eagle_data.formats.kimi_k2.messages import assistant_message
from kimi_eagle_data.formats.kimi_k2.validator import Validator

from evaluate import sample


def source_turns(messages: list[dict]) -> tuple[list[dict], list[list[dict]]]:
    """(the first prompt's messages, the source's messages after each of its assistant turns): the model's turns
    replace the source's assistant turns."""
    at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    nexts = [messages[a + 1:b] for a, b in zip(at, at[1:] + [len(messages)])]
    return messages[:at[0]] if at else list(messages), nexts


def evaluate_turns(model, tok, convs, *, max_new_tokens=192, batch_size=16, seed=4321) -> dict:
    import torch

    torch.manual_seed(seed)
    model.eval()
    validator = Validator(k2_tokens(tok), tok, TINY_KIMI.max_seq_len)
    budget = TINY_KIMI.max_seq_len - max_new_tokens       # the longest prompt a turn may have (prepare's rule)
    live = []                                               # (conversation, messages so far, source turns left)
    for c in convs:
        first, nexts = source_turns(c["messages"])
        live.append((c, first, nexts))
    stats = defaultdict(Counter)                            # "KIND MODE turnN" -> n, valid, length
    past_512 = Counter()
    issues, ended = Counter(), Counter()
    turn = 1
    while live:
        mode = {id(c): INSTANT if c["mode"] == "instant" else THINKING for c, _, _ in live}
        prompts = [render_prompt(tok, msgs, c["tools"], mode[id(c)]) for c, msgs, _ in live]
        fits = [len(p) <= budget for p in prompts]
        ended["prompt_too_long"] += fits.count(False)
        live = [x for x, ok in zip(live, fits) if ok]
        prompts = [p for p, ok in zip(prompts, fits) if ok]
        results = sample(model, tok, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size)
        nxt = []
        for (c, msgs, nexts), p, (gen, finish) in zip(live, prompts, results):
            verdict = validator.validate(p, gen, finish, None, c["tools"])
            st = stats[f"{c['style']} {c['mode']} turn{turn}"]
            st["n"] += 1
            st["valid"] += verdict.valid
            st["length"] += finish == "length"
            issues.update(verdict.issues)
            if len(p) + len(gen) > 512:
                past_512.update(n=1, valid=int(verdict.valid))
            if not verdict.valid or not nexts:
                ended["invalid" if not verdict.valid else "done"] += 1
                continue
            parsed = validator.grammar.parse(gen, instant=mode[id(c)] == INSTANT)
            try:
                reply = assistant_message(parsed, history_call_count(msgs))
                nxt.append((c, next_turn_messages(msgs, reply, nexts[0]), nexts[1:]))
            except TurnError:
                ended["source_result_without_call"] += 1
        live, turn = nxt, turn + 1
    return {"by_turn": {k: dict(v) for k, v in sorted(stats.items())}, "issues": dict(issues.most_common()),
            "ended": dict(ended), "past_512": dict(past_512)}


def turn_rates(summary: dict) -> dict[str, dict]:
    """Valid rate per kind and turn number, both modes together: {"chat_mt turn2": {"n", "valid", "rate"}}."""
    out = defaultdict(Counter)
    for key, st in summary["by_turn"].items():
        kind, _, turn = key.split()
        out[f"{kind} {turn}"].update(n=st["n"], valid=st["valid"])
    return {k: dict(v, rate=v["valid"] / v["n"]) for k, v in sorted(out.items())}


def format_turns(summary: dict) -> str:
    lines = [f"{'conversation turn':24s} {'n':>4s} {'valid':>6s} {'length':>6s} {'valid%':>7s}"]
    for k, v in summary["by_turn"].items():
        lines.append(f"{k:24s} {v['n']:4d} {v['valid']:6d} {v.get('length', 0):6d} {100 * v['valid'] / v['n']:6.1f}%")
    for k, v in turn_rates(summary).items():
        lines.append(f"{k + ' (both modes)':24s} {v['n']:4d} {v['valid']:6d} {'':6s} {100 * v['rate']:6.1f}%")
    past = summary["past_512"]
    lines.append(f"turns past 512 positions: {past.get('valid', 0)} of {past.get('n', 0)} valid")
    lines.append(f"issues: {summary['issues']}; conversations ended: {summary['ended']}")
    return "\n".join(lines)


def evaluate_long_history(model, tok, convs, *, max_new_tokens=192, batch_size=16, seed=4321) -> dict:
    """The last turn of conversations whose synthetic history renders past 512 tokens (the positions the
    1024-token context added), each prompt at most max_seq_len - max_new_tokens: sampled once, judged by the
    Validator. {"n", "valid", "length", "issues", "prompt_tokens": [min, max]}."""
    import torch

    torch.manual_seed(seed)
    validator = Validator(k2_tokens(tok), tok, TINY_KIMI.max_seq_len)
    modes = [INSTANT if c["mode"] == "instant" else THINKING for c in convs]
    prompts = [render_prompt(tok, c["messages"], c["tools"], m) for c, m in zip(convs, modes)]
    results = sample(model, tok, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size)
    out, issues = Counter(), Counter()
    for c, p, (gen, finish) in zip(convs, prompts, results):
        verdict = validator.validate(p, gen, finish, None, c["tools"])
        out.update(n=1, valid=int(verdict.valid), length=int(finish == "length"))
        issues.update(verdict.issues)
    return dict(out, issues=dict(issues.most_common()), prompt_tokens=[min(map(len, prompts)), max(map(len, prompts))])
