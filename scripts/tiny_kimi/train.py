"""Train the tiny Kimi-format causal LM (LlamaForCausalLM, ~1.3M parameters) on synthetic conversations."""

from __future__ import annotations

import math
import random
import time

from conversation_text import completion_text, render_prompt

# The context: 1024 tokens, room for a multi-turn prompt (the model's own earlier turns) and a 192-token completion.
MAX_LEN = 1024
MAX_PROMPT = MAX_LEN - 192


def encode_dataset(tok, convs, log=print):
    """Render prompts with the chat template and append the completion tokens.
    Returns rows (input_ids, weights, prompt_len, style) for prompts of at most MAX_PROMPT tokens."""
    v = tok.get_vocab()
    sb, se = v["<|tool_calls_section_begin|>"], v["<|tool_calls_section_end|>"]
    prompts = [render_prompt(tok, c, tokenize=False) for c in convs]
    # The tiktoken core (`tok.model`, as in K2.5's class) encodes special-token strings as their ids, like the
    # class's own encode; it is much faster than transformers' generic path over 20k conversations.
    p_ids = tok.model.encode_batch(prompts, allowed_special="all")
    c_ids = tok.model.encode_batch([completion_text(c) for c in convs], allowed_special="all")
    rows, skipped = [], 0
    for conv, p, c in zip(convs, p_ids, c_ids):
        if len(p) > MAX_PROMPT:
            skipped += 1
            continue
        w = [1.0] * len(c)
        if sb in c:
            a, b = c.index(sb), c.index(se)
            for i in range(a, b + 1):
                w[i] = 3.0
        ids = (p + c)[:MAX_LEN]
        weights = ([0.0] * len(p) + w)[:MAX_LEN]
        rows.append((ids, weights, len(p), conv["style"]))
    log(f"encoded {len(rows)} conversations ({skipped} skipped: prompt > {MAX_PROMPT} tokens); "
        f"{sum(len(r[0]) for r in rows)} tokens, {sum(len(r[0]) - r[2] for r in rows)} completion tokens")
    return rows


def make_batches(rows, tokens_per_batch, rng):
    """Length-bucketed batches of about `tokens_per_batch` padded tokens, in random order."""
    idx = list(range(len(rows)))
    rng.shuffle(idx)
    batches = []
    chunk = 2048
    for s in range(0, len(idx), chunk):
        part = sorted(idx[s:s + chunk], key=lambda i: len(rows[i][0]))
        cur, cur_max = [], 0
        for i in part:
            n = len(rows[i][0])
            if cur and max(cur_max, n) * (len(cur) + 1) > tokens_per_batch:
                batches.append(cur)
                cur, cur_max = [], 0
            cur.append(i)
            cur_max = max(cur_max, n)
        if cur:
            batches.append(cur)
    rng.shuffle(batches)
    return batches


def build_model(tok, seed, end_of_turn="<|im_end|>"):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    im_end = tok.convert_tokens_to_ids(end_of_turn)    # the stop token (tiny-kimi-k3: <|end_of_msg|>)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=MAX_LEN, tie_word_embeddings=True, rms_norm_eps=1e-5,
        rope_theta=10000.0, bos_token_id=tok.bos_token_id, eos_token_id=im_end, pad_token_id=tok.pad_token_id,
        initializer_range=0.02,
    )
    return LlamaForCausalLM(cfg)


def train(model, tok, rows, *, steps, tokens_per_batch=4096, lr_max=3e-3, lr_min=3e-4, warmup=100, seed=0,
          log=print, log_every=100, bf16=False):
    import torch

    rng = random.Random(seed)
    torch.manual_seed(seed)
    pad = tok.pad_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=lr_max, betas=(0.9, 0.95), weight_decay=0.01)
    model.train()
    batches, bi, epoch = make_batches(rows, tokens_per_batch, rng), 0, 0
    t0 = time.time()
    run_loss, run_n = 0.0, 0
    for step in range(steps):
        if bi >= len(batches):
            batches, bi, epoch = make_batches(rows, tokens_per_batch, rng), 0, epoch + 1
        b = batches[bi]
        bi += 1
        L = max(len(rows[i][0]) for i in b)
        ids = torch.full((len(b), L), pad, dtype=torch.long)
        att = torch.zeros((len(b), L), dtype=torch.long)
        wts = torch.zeros((len(b), L), dtype=torch.float32)
        for r, i in enumerate(b):
            x, w = rows[i][0], rows[i][1]
            ids[r, :len(x)] = torch.tensor(x)
            att[r, :len(x)] = 1
            wts[r, :len(x)] = torch.tensor(w)
        if step < warmup:
            lr = lr_max * (step + 1) / warmup
        else:
            p = (step - warmup) / max(1, steps - warmup)
            lr = lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * p))
        for g in opt.param_groups:
            g["lr"] = lr
        # bf16 autocast is ~2x faster than fp32 on CPUs with native bf16 (AVX512-BF16, AMX) and ~10x slower on
        # AVX2-only ones (emulated): fp32 by default, so the default rebuild is fast enough everywhere.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=ids, attention_mask=att).logits
        logits = logits[:, :-1].float()
        tgt = ids[:, 1:]
        w = wts[:, 1:]
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1),
                                                reduction="none").view_as(w)
        loss = (nll * w).sum() / w.sum().clamp_min(1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        run_loss += loss.item()
        run_n += 1
        if (step + 1) % log_every == 0 or step + 1 == steps:
            el = time.time() - t0
            log(f"step {step + 1}/{steps} epoch {epoch} loss {run_loss / run_n:.3f} lr {lr:.2e} "
                f"{el:.0f}s elapsed, ~{el / (step + 1) * (steps - step - 1):.0f}s left")
            run_loss, run_n = 0.0, 0
    model.eval()
    return time.time() - t0
