"""Sample from the tiny model and check the rules of docs/token-rules.md (a self-contained checker for the build script;
the project's own validator lives in the package)."""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict

from conversation_text import history_calls

ID_RE = re.compile(r"^\s*functions\.(?P<name>[A-Za-z0-9_\-\.]+):(?P<index>\d+)\s*$")
FORBIDDEN = ("<|im_user|>", "<|im_system|>", "<|im_assistant|>", "<|im_middle|>", "[BOS]", "[EOS]",
             "<|media_begin|>", "<|media_content|>", "<|media_end|>", "<|media_pad|>", "<|kimi_k25_video_placeholder|>")


def check_completion(ids: list[int], finish: str, tok, declared: set[str], first_index: int = 0,
                     mode: str = "thinking") -> list[str]:
    """Issues of one completion (empty list = valid). `finish` is 'stop' or 'length'. Tool-call ids are global to
    the conversation: the first call's IDX is `first_index` (the calls already in the prompt), then +1 each.
    Thinking mode: exactly one `</think>`; instant mode (prompt ended `<think></think>`): none."""
    v = tok.get_vocab()
    T = {s: v[s] for s in ("<|im_end|>", "<think>", "</think>", "<|tool_calls_section_begin|>",
                           "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                           "<|tool_call_end|>")}
    forb = {v[s] for s in FORBIDDEN if s in v}
    issues = []
    if finish == "length":
        issues.append("truncated")
    if any(i in forb for i in ids):
        issues.append("forbidden_token")
    if T["<think>"] in ids:
        issues.append("think_open_in_completion")
    n_close = ids.count(T["</think>"])
    want_close = 1 if mode == "thinking" else 0
    if finish == "length":
        if n_close > want_close:
            issues.append("multiple_think_close" if want_close else "instant_has_think_close")
        return issues
    if n_close != want_close:
        issues.append("think_close_count_%d" % n_close if want_close else "instant_has_think_close")
    if not ids or ids[-1] != T["<|im_end|>"] or ids.count(T["<|im_end|>"]) != 1:
        issues.append("bad_end")
        return issues
    if n_close != want_close:
        return issues
    after = ids[ids.index(T["</think>"]) + 1:-1] if want_close else ids[:-1]
    sb = T["<|tool_calls_section_begin|>"]
    tool_toks = {T[k] for k in ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                                "<|tool_call_argument_begin|>", "<|tool_call_end|>")}
    if sb in after:
        k = after.index(sb)
        answer, section = after[:k], after[k:]
    else:
        answer, section = after, []
    if any(t in tool_toks for t in answer):
        issues.append("tool_token_outside_section")
    n_calls = 0
    if section:
        if not declared:
            issues.append("tool_call_without_tools")
        if section[-1] != T["<|tool_calls_section_end|>"]:
            issues.append("section_not_closed")
        else:
            body = section[1:-1]
            i = 0
            while i < len(body):
                if body[i] != T["<|tool_call_begin|>"]:
                    issues.append("bad_section_body")
                    break
                try:
                    a = body.index(T["<|tool_call_argument_begin|>"], i)
                    e = body.index(T["<|tool_call_end|>"], a)
                except ValueError:
                    issues.append("unterminated_call")
                    break
                idpart, argpart = body[i + 1:a], body[a + 1:e]
                if any(t in tool_toks for t in idpart + argpart):
                    issues.append("bad_call_tokens")
                    break
                m = ID_RE.match(tok.decode(idpart))
                if not m:
                    issues.append("bad_call_id")
                else:
                    if m["name"] not in declared:
                        issues.append("undeclared_tool")
                    if int(m["index"]) != first_index + n_calls:
                        issues.append("bad_call_index")
                try:
                    if not isinstance(json.loads(tok.decode(argpart)), dict):
                        issues.append("args_not_object")
                except ValueError:
                    issues.append("args_not_json")
                n_calls += 1
                i = e + 1
            if n_calls == 0:
                issues.append("empty_section")
    if n_calls == 0 and not tok.decode(answer).strip():
        issues.append("empty_answer")
    return issues


def sample(model, tok, prompts_ids, *, max_new_tokens=192, batch_size=16, temperature=1.0, top_p=0.95,
           end_of_turn="<|im_end|>"):
    """(completion ids up to and with the stop token `end_of_turn`, 'stop' | 'length') per prompt, batches of
    similar length."""
    import torch

    im_end = tok.convert_tokens_to_ids(end_of_turn)
    pad = tok.pad_token_id
    order = sorted(range(len(prompts_ids)), key=lambda i: len(prompts_ids[i]))
    results = [None] * len(prompts_ids)
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        L = max(len(prompts_ids[i]) for i in idx)
        inp = torch.full((len(idx), L), pad, dtype=torch.long)
        att = torch.zeros((len(idx), L), dtype=torch.long)
        for r, i in enumerate(idx):
            p = prompts_ids[i]
            inp[r, L - len(p):] = torch.tensor(p)
            att[r, L - len(p):] = 1
        with torch.no_grad():  # plain fp32: autocast slows generation of a model this small
            out = model.generate(input_ids=inp, attention_mask=att, do_sample=True, temperature=temperature,
                                 top_p=top_p, top_k=0, max_new_tokens=max_new_tokens, eos_token_id=im_end,
                                 pad_token_id=pad)
        for r, i in enumerate(idx):
            gen = out[r, L:].tolist()
            if im_end in gen:
                results[i] = (gen[:gen.index(im_end) + 1], "stop")
            else:
                results[i] = (gen, "length")
    return results


def evaluate(model, tok, convs, prompts_ids, *, max_new_tokens=192, batch_size=16, temperature=1.0, top_p=0.95,
             seed=1234, log=print):
    import torch

    torch.manual_seed(seed)
    model.eval()
    t0 = time.time()
    results = sample(model, tok, prompts_ids, max_new_tokens=max_new_tokens, batch_size=batch_size,
                     temperature=temperature, top_p=top_p)
    n_gen = sum(len(gen) for gen, _ in results)
    dt = time.time() - t0
    by_style, by_mode = defaultdict(Counter), defaultdict(Counter)
    issues_all = Counter()
    for c, (gen, finish) in zip(convs, results):
        declared = {t["function"]["name"] for t in (c["tools"] or [])}
        iss = check_completion(gen, finish, tok, declared, first_index=history_calls(c["messages"]), mode=c["mode"])
        for st in (by_style[c["style"]], by_mode[c["mode"]]):
            st["n"] += 1
            if finish == "length":
                st["length"] += 1
                st["length_ok_prefix"] += iss == ["truncated"]
            else:
                st["stop"] += 1
                st["valid"] += not iss
            st["calls"] += (finish == "stop" and tok.convert_tokens_to_ids("<|tool_call_begin|>") in gen)
        issues_all.update(x for x in iss if x != "truncated")
    tot = Counter()
    for st in by_style.values():
        tot.update(st)
    summary = {
        "n": tot["n"], "valid": tot["valid"], "stop": tot["stop"], "length": tot["length"],
        "valid_rate": tot["valid"] / tot["n"],
        "valid_rate_of_stop": tot["valid"] / max(1, tot["stop"]),
        "valid_or_clean_truncated_rate": (tot["valid"] + tot["length_ok_prefix"]) / tot["n"],
        "by_style": {k: dict(v) for k, v in sorted(by_style.items())},
        "by_mode": {k: dict(v) for k, v in sorted(by_mode.items())},
        "issues": dict(issues_all.most_common()),
        "generated_tokens": n_gen, "seconds": round(dt, 2), "tok_per_s": round(n_gen / dt, 1),
        "batch_size": batch_size,
    }
    return summary, results


def format_summary(s: dict) -> str:
    lines = [f"{'style/mode':10s} {'n':>4s} {'valid':>6s} {'stop':>5s} {'length':>6s} {'calls':>5s} {'valid%':>7s} {'valid%stop':>10s}"]
    for k, v in [*s["by_style"].items(), *s["by_mode"].items()]:
        lines.append(f"{k:10s} {v.get('n', 0):4d} {v.get('valid', 0):6d} {v.get('stop', 0):5d} {v.get('length', 0):6d} "
                     f"{v.get('calls', 0):5d} {100 * v.get('valid', 0) / v['n']:6.1f}% "
                     f"{100 * v.get('valid', 0) / max(1, v.get('stop', 0)):9.1f}%")
    lines.append(f"overall: {s['valid']}/{s['n']} valid ({100 * s['valid_rate']:.1f}%), "
                 f"{100 * s['valid_rate_of_stop']:.1f}% of stop completions, {s['length']} hit max_new_tokens "
                 f"({100 * s['valid_or_clean_truncated_rate']:.1f}% valid or cleanly truncated)")
    lines.append(f"issues: {s['issues']}")
    lines.append(f"generation: {s['generated_tokens']} tokens in {s['seconds']} s = {s['tok_per_s']} tok/s "
                 f"(batch {s['batch_size']}, CPU)")
    return "\n".join(lines)
