#!/usr/bin/env python
"""Build the embedded tiny Kimi-K3-format tokenizer and causal LM (CPU, one thread, fixed seeds).

    python scripts/build_tiny_kimi_k3.py --out kimi_eagle_data/assets/tiny-kimi-k3

Steps: the tokenizer (tiny-kimi's BPE ranks, as K3 keeps K2's; K3's special-token layout; our trust_remote_code
class, which renders with kimi_eagle_data.formats.kimi_k3) -> synthetic conversations (scripts/tiny_kimi/synth.py's,
tools from the fixed pool, multi-turn on the model's own history), each with a K3 setting: effort low, high or max,
or thinking off -> prompts and completions rendered by our K3 renderer, token ids per segment -> tiny-kimi's
LlamaForCausalLM (hidden 128, 4 layers, ~1.3M parameters) trained further on the completion tokens (its words and
JSON are a warm start; K3's structure is new) -> bf16 safetensors -> sampled completions on held-out prompts
checked against K3's assistant-turn grammar (scripts/tiny_kimi_k3/check.py). The model's text is meaningless.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tiny_kimi_k3"))
sys.path.insert(0, str(HERE / "tiny_kimi"))

from k3_check import check_completion  # noqa: E402
from k3_conversations import (K3Synth, SETTINGS, completion_segments, declared_tools, prompt_segments,  # noqa: E402
                           render_kwargs, thinking)
from k3_tokenizer import ASSETS, BASE_VOCAB, MARKERS, NAMED, VOCAB_SIZE, token_id, write_tokenizer  # noqa: E402

from kimi_eagle_data.formats.kimi_k3.facts import K3TokenIds  # noqa: E402
from kimi_eagle_data.formats.kimi_k3.grammar import parse_completion as grammar_completion  # noqa: E402
from kimi_eagle_data.formats.kimi_k3.segment_ids import segment_ids  # noqa: E402

MAX_LEN = 1024
MAX_NEW_TOKENS = 256
MAX_PROMPT = MAX_LEN - 2 - MAX_NEW_TOKENS        # 766: SGLang's max_seq_len is the context - 2


def log(msg: str) -> None:
    print(msg, flush=True)


def check_tokenizer(tok) -> None:
    assert type(tok).__name__ == "TinyKimiK3Tokenizer", type(tok)       # our class, through trust_remote_code
    assert len(tok) == VOCAB_SIZE, len(tok)
    for off, s, _ in NAMED:
        assert tok.encode(s) == [BASE_VOCAB + off], s
        assert tok.decode([BASE_VOCAB + off], skip_special_tokens=False) == s, s
    assert tok.decode([BASE_VOCAB + 8]) == f"<|reserved_token_{BASE_VOCAB + 8}|>"
    assert len(tok.encode("<|kimi_image_placeholder|>")) > 1                  # not a token, as in K3
    ids = tok.apply_chat_template([{"role": "user", "content": "a <|open|> b"}], tokenize=True, thinking=False)
    assert ids.count(token_id("<|open|>")) == 3, ids      # user message, assistant message, response: the typed one is text
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], thinking=False)
    assert text.endswith('<|open|>message role="assistant"<|sep|><|open|>response<|sep|>'), text
    # transformers skips the named and additional special tokens only (K3's code's K2-era list): markers stay.
    kept = tok.decode(ids + [token_id("<|im_end|>"), tok.eos_token_id], skip_special_tokens=True)
    assert kept == tok.decode(ids), kept


def encode_rows(tok, convs, tool_weight: float):
    """(ids, weights, prompt_len, style) per conversation that fits the context: the prompt's and the
    completion's ids per segment, loss on the completion (the tools element weighted up)."""
    rows, skipped = [], 0
    for conv in convs:
        prompt = segment_ids(tok.model, prompt_segments(conv))
        ids, weights, in_tools, prev = [], [], False, ""
        for text, special in completion_segments(conv):
            seg = segment_ids(tok.model, [(text, special)])
            in_tools = in_tools or (prev, text) == ("<|open|>", "tools")
            ids += seg
            weights += [tool_weight if in_tools else 1.0] * len(seg)
            in_tools = in_tools and (prev, text) != ("<|close|>", "tools")
            prev = text
        if len(prompt) > MAX_PROMPT or len(prompt) + len(ids) > MAX_LEN:
            skipped += 1
            continue
        rows.append((prompt + ids, [0.0] * len(prompt) + weights, len(prompt), conv["style"]))
    log(f"encoded {len(rows)} conversations ({skipped} skipped: longer than the context); "
        f"{sum(len(r[0]) for r in rows)} tokens, {sum(len(r[0]) - r[2] for r in rows)} completion tokens")
    return rows


def eval_conversations(seed: int, n: int, tok) -> list[dict]:
    """Held-out prompts: 40% tool-style, 40% other styles, 20% last turns of multi-turn conversations; the
    settings in turn (max, high, low, off); each prompt at most MAX_PROMPT tokens."""
    ev = K3Synth(seed + 10_000)
    others = ("code", "cp", "math", "thoughts", "chat", "sharegpt", "swe")
    out, k = [], 0
    while len(out) < n:
        setting = SETTINGS[len(out) % len(SETTINGS)]
        part = len(out) / n
        if part < 0.4:
            conv = ev.conversation("tool", setting)
        elif part < 0.8:
            conv = ev.conversation(others[k % len(others)], setting)
        else:
            conv = ev.multi_turn(setting=setting)
        conv["kind"] = "multi_turn" if part >= 0.8 else "tool" if part < 0.4 else "other"
        conv["prompt_ids"] = tok.apply_chat_template(conv["messages"], tools=conv["tools"], tokenize=True,
                                                     **render_kwargs(conv))
        if len(conv["prompt_ids"]) > MAX_PROMPT:
            continue
        k += part >= 0.4
        out.append(conv)
    return out


def evaluate(model, tok, convs, *, batch_size=16, seed=1234, temperature=1.0, top_p=0.95) -> dict:
    import torch

    from evaluate import sample

    torch.manual_seed(seed)
    t0 = time.time()
    results = sample(model, tok, [c["prompt_ids"] for c in convs], max_new_tokens=MAX_NEW_TOKENS,
                     batch_size=batch_size, temperature=temperature, top_p=top_p, end_of_turn="<|end_of_msg|>")
    dt = time.time() - t0
    groups, issues = defaultdict(Counter), Counter()
    tokens = K3TokenIds.from_vocab(tok.get_vocab())
    for c, (gen, finish) in zip(convs, results):
        iss = check_completion(gen, finish, tok, declared_tools(c), thinking(c))
        # A second opinion: the project's K3 grammar (shape and declared tools, not argument keys).
        parsed = grammar_completion(gen, tokens, tok.model.decode, instant=not thinking(c),
                                    declared_tools=frozenset(declared_tools(c)))
        grammar_ok = finish == "stop" and not parsed.codes
        groups["all"].update(grammar_valid=int(grammar_ok), agree=int(grammar_ok == (not iss)))
        calls = finish == "stop" and not iss and c["tools"] and '<|open|>tools<|sep|>' in tok.model.decode(gen)
        for key in ("all", c["setting"], c["kind"]):
            groups[key].update(n=1, valid=int(not iss), length=int(finish == "length"), calls=int(bool(calls)))
        issues.update(iss)
    n_gen = sum(len(g) for g, _ in results)
    return {"groups": {k: dict(v) for k, v in groups.items()}, "issues": dict(issues.most_common()),
            "valid_rate": groups["all"]["valid"] / groups["all"]["n"], "generated_tokens": n_gen,
            "seconds": round(dt, 1), "tok_per_s": round(n_gen / dt, 1), "batch_size": batch_size,
            "temperature": temperature, "top_p": top_p, "max_new_tokens": MAX_NEW_TOKENS}


def summary_line(ev: dict) -> str:
    g = ev["groups"]
    def rate(k: str) -> str:
        return f"{100 * g[k]['valid'] / g[k]['n']:.1f}% of {g[k]['n']}" if k in g else "none sampled"

    return (f"{rate('all')} sampled completions valid (temperature {ev['temperature']}, top_p {ev['top_p']}); "
            f"by setting: " + ", ".join(f"{s} {rate(s)}" for s in SETTINGS if s in g)
            + f"; tool prompts {rate('tool')} ({g.get('tool', {}).get('calls', 0)} valid ones with calls), other styles "
            f"{rate('other')}, multi-turn last turns {rate('multi_turn')}; {g['all'].get('length', 0)} hit "
            f"max_new_tokens={MAX_NEW_TOKENS}; issues {ev['issues'] or 'none'}; {ev['tok_per_s']:.0f} tok/s at batch "
            f"{ev['batch_size']} on CPU; the project's K3 grammar (kimi_eagle_data/formats/kimi_k3/grammar.py) finds "
            f"{g['all'].get('grammar_valid', 0)} of them valid and agrees on {g['all'].get('agree', 0)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="kimi_eagle_data/assets/tiny-kimi-k3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-train", type=int, default=6000, help="single-turn synthetic conversations")
    ap.add_argument("--n-multi", type=int, default=3000, help="multi-turn ones (chats, tool loops)")
    ap.add_argument("--corpus-seed", type=int, default=None,
                    help="the training conversations' seed (default: --seed); the held-out ones come from --seed")
    ap.add_argument("--tool-weight", type=float, default=2.0, help="loss weight of the tools element's tokens")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--tokens-per-batch", type=int, default=3800)
    ap.add_argument("--init-from", default=str(ASSETS / "tiny-kimi"),
                    help="the model to continue from (default: tiny-kimi, same ranks and ids for its words); "
                         "'none' for a fresh one")
    ap.add_argument("--lr-max", type=float, default=2e-3)
    ap.add_argument("--lr-min", type=float, default=2e-4)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--n-eval", type=int, default=240)
    ap.add_argument("--n-turn-eval", type=int, default=8,
                    help="held-out two-turn conversations per kind (chat, tool loop) and setting, replayed on the "
                         "model's own first turn")
    ap.add_argument("--eval-batch-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tokenizer-only", action="store_true")
    ap.add_argument("--eval-only", action="store_true", help="evaluate the model already in --out")
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    if not args.eval_only:
        write_tokenizer(out)
    tok = AutoTokenizer.from_pretrained(str(out), trust_remote_code=True)
    check_tokenizer(tok)
    if args.tokenizer_only:
        return 0

    if not args.eval_only:
        train_and_save(args, tok, out)
    evaluate_and_describe(args, tok, out)
    return 0


def train_and_save(args, tok, out: Path) -> None:
    """Render the training corpus, continue (or start) the model, train it, save it in bf16."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    from train import build_model, train

    t0 = time.time()
    synth = K3Synth(args.seed if args.corpus_seed is None else args.corpus_seed)
    convs = [synth.conversation() for _ in range(args.n_train)]
    convs += [synth.multi_turn() for _ in range(args.n_multi)]
    log(f"generated {len(convs)} conversations: " + json.dumps(Counter(c["setting"] for c in convs)))
    rows = encode_rows(tok, convs, args.tool_weight)
    log(f"rendered and encoded in {time.time() - t0:.0f}s")
    if args.init_from != "none":
        model = AutoModelForCausalLM.from_pretrained(args.init_from, dtype=torch.float32)
        log(f"continuing from {args.init_from}")
    else:
        model = build_model(tok, args.seed, end_of_turn="<|end_of_msg|>")
    end = token_id("<|end_of_msg|>")
    model.config.eos_token_id = end
    model.config.bos_token_id, model.config.pad_token_id = tok.bos_token_id, tok.pad_token_id
    model.config.max_position_embeddings = MAX_LEN
    log(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters; "
        f"training {args.steps} steps x ~{args.tokens_per_batch} tokens")
    train_s = train(model, tok, rows, steps=args.steps, tokens_per_batch=args.tokens_per_batch, seed=args.seed,
                    log=log, lr_max=args.lr_max, lr_min=args.lr_min, warmup=args.warmup)
    log(f"training took {train_s:.0f}s")
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=end, pad_token_id=tok.pad_token_id, do_sample=True,
        temperature=1.0, top_p=0.95, top_k=0, max_new_tokens=MAX_NEW_TOKENS)
    model.to(torch.bfloat16).save_pretrained(out)
    size = sum(f.stat().st_size for f in out.glob("*.safetensors"))
    log(f"saved model ({size / 1e6:.2f} MB safetensors) -> {out}")
    (out / "build_eval.json").write_text(json.dumps({"train_seconds": round(train_s), "steps": args.steps}) + "\n")


def evaluate_and_describe(args, tok, out: Path) -> None:
    """Sample the saved model on held-out prompts and on its own history; build_eval.json and README.md."""
    import torch
    from transformers import AutoModelForCausalLM

    prev = json.loads((out / "build_eval.json").read_text())

    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    model.eval()
    convs = eval_conversations(args.seed, args.n_eval, tok)
    ev = evaluate(model, tok, convs, batch_size=args.eval_batch_size)
    line = summary_line(ev)
    log("SUMMARY: " + line)

    from evaluate import sample
    from k3_turns import evaluate_own_history

    torch.manual_seed(args.seed + 4321)
    mt = K3Synth(args.seed + 30_000)
    turn_convs = [mt.multi_turn(kind, setting, turns=2) for kind in ("chat_mt", "tool_mt") for setting in SETTINGS
                  for _ in range(args.n_turn_eval)]
    turns = evaluate_own_history(model, tok, turn_convs, sample=sample, max_prompt=MAX_PROMPT,
                                 max_new_tokens=MAX_NEW_TOKENS, batch_size=args.eval_batch_size, temperature=1.0,
                                 top_p=0.95, end_of_turn="<|end_of_msg|>")
    log(f"own history: {json.dumps(turns)}")
    line += "; on its own history: " + ", ".join(
        f"{k.replace('chat_mt', 'chat').replace('tool_mt', 'tool loop')} {100 * v['valid'] / v['n']:.1f}% of {v['n']}"
        for k, v in turns["by_turn"].items())
    log("SUMMARY: " + line)
    ev.update(own_history=turns, train_seconds=prev["train_seconds"], steps=prev["steps"])
    (out / "build_eval.json").write_text(json.dumps(ev, indent=1) + "\n")
    (out / "README.md").write_text(readme(args, ev, line))




def readme(args, ev: dict, line: str) -> str:
    return (HERE / "tiny_kimi_k3" / "README.template.md").read_text().format(
        summary=line, steps=ev["steps"], train_min=round(ev["train_seconds"] / 60), train_s=ev["train_seconds"],
        n_train=args.n_train, n_multi=args.n_multi, n_eval=args.n_eval, n_turns=2 * len(SETTINGS) * args.n_turn_eval,
        tokens=args.tokens_per_batch, base=BASE_VOCAB, vocab=VOCAB_SIZE, markers=", ".join(f"`{m}`" for m in MARKERS))


if __name__ == "__main__":
    sys.exit(main())
