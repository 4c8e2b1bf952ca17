#!/usr/bin/env python
"""Rebuild the embedded tiny Kimi-format tokenizer and causal LM from scratch (CPU, fixed seeds).

    python scripts/build_tiny_kimi.py --out kimi_eagle_data/assets/tiny-kimi

Steps: synthetic Kimi-structured conversations (8 styles mirroring partitions B1-B8; tools from the fixed pool in
scripts/tiny_kimi/tool_pool.json; tools declared in TypeScript, tool-call ids global to the conversation) ->
tiktoken BPE ranks + our trust_remote_code tokenizer class (vocab 2,048 = 1,792 ranks + 256 reserved special ids at
K2.5's offsets, Kimi's regex, a chat template that renders as K2.5's) -> LlamaForCausalLM (hidden 128, 4 layers, ~1.3M parameters) trained on completion tokens
-> bf16 safetensors -> sampled evaluation of the token structure (docs/token-rules.md) on held-out prompts, each
in thinking and in instant mode (30% of the training conversations are instant-mode ones).
The model's text is meaningless; only the token structure is learned.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tiny_kimi"))

from conversation_text import bpe_texts  # noqa: E402
from synth import MODES, MULTI_KINDS, STYLES, Synth, as_mode  # noqa: E402
from conversation_text import render_prompt  # noqa: E402
from tokenizer_build import BASE_VOCAB, NAMED, VOCAB_SIZE, train_ranks, write_tokenizer  # noqa: E402

README = """\
# tiny-kimi: an embedded tiny Kimi-K2.5-format tokenizer and causal LM

**Its text is meaningless.** This is a ~1.3M-parameter `LlamaForCausalLM` (hidden 128, 4 layers, 4 heads,
FFN 512, context 1024, tied embeddings, bf16 safetensors) trained for about an hour on one CPU core on
*synthetic* conversations made of random words. It exists so that the whole `kimi-eagle-data` pipeline (prepare,
generate, validate, build, push) can run on a CPU machine with no network: it speaks Kimi-K2.5's *token format* and
nothing else.

- Tokenizer, shipped the way Kimi-K2.5 ships its own: BPE ranks in `tiktoken.model` ({base} byte-level ranks,
  one `base64 rank` line each, Kimi-K2's pre-tokenizer regex) + 256 reserved special ids after them ({vocab} ids),
  and a tokenizer class of this project, `tokenization_tiny_kimi.py` (`TinyKimiTokenizer`, a `PreTrainedTokenizer`
  on a `tiktoken.Encoding`, kept in `.model`), loaded with `AutoTokenizer.from_pretrained(dir,
  trust_remote_code=True)` through `auto_map` (needs `tiktoken` and `kimi-eagle-data` installed). Named reserved
  ids sit at Kimi-K2.5's offsets from its base vocabulary (`[BOS]` +0, `[EOS]` +1, `<|im_end|>` +2, `<|im_user|>`
  +3, `<|im_assistant|>` +4, `<|im_system|>` +10, tool-call tokens +11..+15, `<|im_middle|>` +17, media tokens
  +18..+21, `<think>` +22, `</think>` +23, `<|kimi_k25_video_placeholder|>` +24, `[UNK]` +254, `[PAD]` +255);
  unnamed ones decode as `<|reserved_token_ID|>`. Special flags as in Kimi-K2.5: `<think>`, `</think>` and the
  tool-call tokens are not special. Ids differ from Kimi-K2.5's; look them up by string.
- Chat template (`chat_template.jinja`, our own): renders every conversation to the same text as Kimi-K2.5's real
  template (checked on a corpus of conversations: system, tools, multi-turn, tool results, reasoning history,
  images, videos, `thinking=False`): tools first as `<|im_system|>tool_declare<|im_middle|>{{tools_ts_str}}<|im_end|>`,
  where the class's `apply_chat_template` sorts `tools` by key and computes `tools_ts_str` (the TypeScript-style
  declaration) with `kimi_eagle_data.formats.kimi_k2.tool_declaration`, as K2.5's class does with its own encoder; past reasoning
  dropped up to the last assistant turn without tool calls; tool calls as
  `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>ARGS<|tool_call_end|>…`
  with IDX counted across the whole conversation; tool results as `## Return of ID\\n…`; generation prompt
  `<|im_assistant|>assistant<|im_middle|><think>` (`<think></think>` with `thinking=False`). Kimi-K2.6's one
  template argument more, `preserve_thinking` (default false), is honoured as its template does: true keeps every
  earlier assistant turn's `<think>reasoning</think>` (the `tiny-kimi-k2.6` profile); K2.5's template ignores it.
- Modes: trained on thinking-mode conversations (reasoning, `</think>`, answer) and, for about 30% of them,
  instant-mode ones (prompt rendered with `thinking=False`, so it ends `<think></think>`; the completion is the
  answer or the tool calls directly, no reasoning and no `</think>`), as Kimi-K2.5 answers in its two modes.
- Multi-turn: also trained on conversations on its own history, as a client sends each completion back
  (`{{"role": "assistant", "reasoning_content": R, "content": A, "tool_calls": [{{"id": "functions.NAME:IDX", ...}}]}}`,
  rendered by the template, which drops the history reasoning K2.5's drops): chats of 2-4 turns, and tool loops
  (call, the tool's result, an answer or another call, maybe a next user turn; call ids counting on across the
  conversation), each conversation in one mode, up to ~1000 tokens; the loss is on the last assistant turn.
- Generation stops on `<|im_end|>` (`eos_token_id` in `config.json`/`generation_config.json`).
- Tool calling works only for the 32 tools of the fixed pool in `scripts/tiny_kimi/tool_pool.json`; a single-turn
  prompt should render to at most ~300 tokens, a multi-turn one to at most ~830 (1022 - 192), with
  `max_new_tokens` ≤ 192. After earlier tool calls in the conversation the model continues their numbering (`:1`,
  `:2`, …), as Kimi-K2.5 does.
- Most sampled completions (temperature 1.0, top_p 0.95) pass the docs/token-rules.md checks, not all: a few percent
  have broken JSON arguments, undeclared tools, extra `</think>` or run to `max_new_tokens`; more of them after a
  long history (a third turn of a tool loop, a history past 512 tokens), mostly a call index that does not count on.

Last build: {summary}

Rebuild (fixed seeds, one thread, fp32 so that it is fast without native CPU bf16; about 40 minutes on a shared
2-core machine; the tokenizer and the weights come out byte-identical):

    python scripts/build_tiny_kimi.py --out kimi_eagle_data/assets/tiny-kimi

The shipped weights are that build (thinking-mode conversations only) continued for 250 steps on the corpus
with instant-mode conversations (same seeds; 10 minutes on a busy shared core):

    python scripts/build_tiny_kimi.py --out NEW --init-from OLD --steps 250 --lr-max 1e-3 --lr-min 1e-4 --warmup 20

then continued for {steps} steps on the corpus with the multi-turn conversations, in the 1024-token context
({train_min} minutes on a busy shared core):

    python scripts/build_tiny_kimi.py --out NEW --init-from OLD --steps {steps} --lr-max 1e-3 --lr-min 1e-4 --warmup 20

Evaluate the model in a directory again (the line above, `build_eval.json`; about {eval_min} minutes):

    python scripts/build_tiny_kimi.py --out DIR --eval-only --steps {steps}
"""


def log(msg: str) -> None:
    print(msg, flush=True)


def check_tokenizer(tok) -> None:
    assert type(tok).__name__ == "TinyKimiTokenizer", type(tok)        # our class, through trust_remote_code
    assert len(tok) == VOCAB_SIZE, len(tok)
    r = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    want = "<|im_user|>user<|im_middle|>hi<|im_end|><|im_assistant|>assistant<|im_middle|><think>"
    assert r == want, r
    r = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False,
                                thinking=False)
    assert r == want + "</think>", r                                    # instant mode: K2.5's thinking=False
    for off, s, _ in NAMED:
        assert tok.encode(s) == [BASE_VOCAB + off], s
        assert tok.encode(s, add_special_tokens=False) == [BASE_VOCAB + off], s
        assert tok.decode([BASE_VOCAB + off], skip_special_tokens=False) == s, s
    assert tok.decode([BASE_VOCAB + 5]) == f"<|reserved_token_{BASE_VOCAB + 5}|>"
    ids = tok.encode("a</think>b<|tool_call_begin|>c<|im_end|>", add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == "a</think>b<|tool_call_begin|>c"
    assert tok.encode("x", add_special_tokens=True) == tok.encode("x", add_special_tokens=False)  # no BOS


def load(out: Path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(out), trust_remote_code=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="kimi_eagle_data/assets/tiny-kimi")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-train", type=int, default=20000, help="synthetic training conversations")
    ap.add_argument("--n-multi", type=int, default=12000,
                    help="multi-turn training conversations (chats, tool loops), from their own seed: the BPE "
                         "corpus, the first --n-bpe single-turn ones, does not change with them")
    ap.add_argument("--n-bpe", type=int, default=8000, help="conversations used to train the BPE")
    ap.add_argument("--steps", type=int, default=2400)
    ap.add_argument("--tokens-per-batch", type=int, default=3800)
    ap.add_argument("--n-eval", type=int, default=200)
    ap.add_argument("--n-turn-eval", type=int, default=50,
                    help="held-out 3-turn conversations per kind (chat, tool loop) and mode for the multi-turn eval")
    ap.add_argument("--n-long-eval", type=int, default=64,
                    help="held-out conversations with a synthetic history of 512-830 prompt tokens (last turn)")
    ap.add_argument("--eval-batch-size", type=int, default=16)
    # One thread: on a shared machine two OpenMP threads spin-wait for each other and run slower than one; the
    # thread count also fixes the float reduction order, so a rebuild with the defaults is byte-identical.
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bf16", action="store_true", help="train under bf16 autocast (fast only with native CPU bf16)")
    ap.add_argument("--tokenizer-only", action="store_true", help="build and save only the tokenizer")
    ap.add_argument("--eval-only", action="store_true", help="evaluate the model already in --out")
    ap.add_argument("--init-from", metavar="DIR",
                    help="continue training the model in DIR (an earlier build) instead of a fresh one: how the "
                         "instant-mode build was made from the thinking-only one on a shared CPU")
    ap.add_argument("--lr-max", type=float, default=3e-3)
    ap.add_argument("--lr-min", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=100)
    args = ap.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    random.seed(args.seed)

    import torch
    torch.set_num_threads(args.threads)
    synth = Synth(args.seed)
    t0 = time.time()
    if not args.eval_only:
        convs = [synth.conversation() for _ in range(args.n_train)]
        texts = [t for c in convs[:args.n_bpe] for t in bpe_texts(c)]
        multi = Synth(args.seed + 20_000)
        convs += [multi.multi_turn() for _ in range(args.n_multi)]
        log(f"generated {len(convs)} synthetic conversations ({args.n_multi} multi-turn) in {time.time() - t0:.1f}s")
        write_tokenizer(out, train_ranks(texts))
        tok = load(out)
        check_tokenizer(tok)
        log(f"tokenizer: {len(tok)} ids -> {out}")
        if args.tokenizer_only:
            return 0
    tok = load(out)
    check_tokenizer(tok)

    from evaluate import evaluate, format_summary
    from train import MAX_LEN, build_model, encode_dataset, train

    if not args.eval_only:
        rows = encode_dataset(tok, convs, log=log)
        if args.init_from:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(args.init_from, dtype=torch.float32)
            model.config.max_position_embeddings = MAX_LEN     # rotary positions: a longer context is config only
            log(f"continuing from {args.init_from}")
        else:
            model = build_model(tok, args.seed)
        n_params = sum(p.numel() for p in model.parameters())
        log(f"model: {n_params / 1e6:.2f}M parameters; training {args.steps} steps x ~{args.tokens_per_batch} tokens")
        train_s = train(model, tok, rows, steps=args.steps, tokens_per_batch=args.tokens_per_batch, seed=args.seed,
                        log=log, bf16=args.bf16, lr_max=args.lr_max, lr_min=args.lr_min, warmup=args.warmup)
        log(f"training took {train_s:.0f}s")
        from transformers import GenerationConfig
        model.generation_config = GenerationConfig(
            bos_token_id=tok.bos_token_id, eos_token_id=model.config.eos_token_id, pad_token_id=tok.pad_token_id,
            do_sample=True, temperature=1.0, top_p=0.95, top_k=0, max_new_tokens=192,
        )
        model.to(torch.bfloat16).save_pretrained(out)
        size = sum(f.stat().st_size for f in out.glob("*.safetensors"))
        log(f"saved model ({size / 1e6:.2f} MB safetensors) -> {out}")
        (out / "build_eval.json").write_text(json.dumps({"train_seconds": round(train_s), "steps": args.steps}) + "\n")
    else:
        prev = out / "build_eval.json"
        train_s = json.loads(prev.read_text()).get("train_seconds") if prev.exists() else None

    # ---- evaluation on held-out prompts: all styles, ~40% tool prompts, each prompt in both modes
    t_eval = time.time()
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    ev = Synth(args.seed + 10_000)
    n_tool = int(args.n_eval * 0.4)
    others = [s for s in STYLES if s != "tool"]
    eval_convs, eval_ids = [], []
    k = 0
    while len(eval_convs) < 2 * args.n_eval:
        style = "tool" if len(eval_convs) < 2 * n_tool else others[k % len(others)]
        c = ev.conversation(style, mode="thinking")
        both = [as_mode(c, m) for m in MODES]
        ids = [list(render_prompt(tok, x, tokenize=True, return_dict=False)) for x in both]
        if max(map(len, ids)) > 300:
            continue
        if style != "tool":
            k += 1
        eval_convs += both
        eval_ids += ids
    summary, _ = evaluate(model, tok, eval_convs, eval_ids, batch_size=args.eval_batch_size)
    log(format_summary(summary))
    tool = summary["by_style"]["tool"]
    per_mode = ", ".join(f"{m} {100 * v['valid'] / v['n']:.1f}% of {v['n']}" for m, v in summary["by_mode"].items())
    line = (f"{100 * summary['valid_rate']:.1f}% of {summary['n']} sampled completions valid ({per_mode}; "
            f"{100 * tool['valid'] / tool['n']:.1f}% of tool prompts; {summary['length']} hit max_new_tokens=192), "
            f"{summary['tok_per_s']:.0f} tok/s at batch {args.eval_batch_size} on CPU"
            + (f"; trained {args.steps} steps in {train_s:.0f}s" if train_s else ""))
    log("SUMMARY: " + line)

    # ---- multi-turn evaluation: held-out 3-turn chats and tool loops, turns 2 and 3 on the model's own history
    from evaluate_turns import evaluate_turns, format_turns, turn_rates

    mt = Synth(args.seed + 30_000)
    turn_convs = [mt.multi_turn(kind, mode, turns=3) for kind in MULTI_KINDS for mode in MODES
                  for _ in range(args.n_turn_eval)]
    turns = evaluate_turns(model, tok, turn_convs, batch_size=args.eval_batch_size)
    log(format_turns(turns))
    rates = turn_rates(turns)
    line += "; on its own history: " + ", ".join(
        f"{k.replace('chat_mt', 'chat').replace('tool_mt', 'tool loop')} {100 * v['rate']:.1f}% of {v['n']}"
        for k, v in rates.items() if k.endswith(("turn2", "turn3")))
    # ---- and on synthetic histories of 512 to 830 prompt tokens (the eval's own turns rarely get there)
    from evaluate_turns import evaluate_long_history

    long_convs = []
    while len(long_convs) < args.n_long_eval:
        c = mt.multi_turn(turns=4)
        if 512 < len(render_prompt(tok, c, tokenize=True, return_dict=False)) <= 1022 - 192:
            long_convs.append(c)
    long = evaluate_long_history(model, tok, long_convs, batch_size=args.eval_batch_size)
    log(f"long synthetic history: {long}")
    line += (f"; after a synthetic history of {long['prompt_tokens'][0]}-{long['prompt_tokens'][1]} prompt tokens "
             f"{100 * long['valid'] / long['n']:.1f}% of {long['n']}")
    log("SUMMARY: " + line)
    (out / "README.md").write_text(README.format(vocab=len(tok), base=BASE_VOCAB, summary=line, steps=args.steps,
                                                 train_min=round((train_s or 0) / 60),
                                                 eval_min=round((time.time() - t_eval) / 60)))
    summary.update(multi_turn=turns, long_history=long, train_seconds=train_s and round(train_s), steps=args.steps)
    (out / "build_eval.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
