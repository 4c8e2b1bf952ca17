"""Render + validate throughput, Kimi-K3 vs Kimi-K2.5, on the same conversations: the requests of the K3 golden
files (tests/golden/k3/conversations.json) that both formats render, cycled up to --conversations, each rendered
as the stages render it (the format bound to the profile and tokenizer, `render_prompt`, thinking mode) and given
one well-formed assistant turn
of the same text (reasoning, answer) in its format, then validated by the format's validator (`validate_many`
in chunks of 256, as validate and emit run it).

The tokenizers are the embedded tiny ones (tiny-kimi: K2.5's Jinja template; tiny-kimi-k3: its own chat code,
and our renderer segment by segment for a tokenizer without one), so the figures compare the formats' code
paths on one machine, not the real models' vocabularies.

    PYTHONPATH=. python benchmarks/bench_formats.py [--conversations 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kimi_eagle_data.id_buffers import pack  # noqa: E402
from kimi_eagle_data.profile import get_profile  # noqa: E402
from kimi_eagle_data.formats.kimi_k3.segment_ids import encode_segments  # noqa: E402
from kimi_eagle_data.prompts.tokenizer import load_tokenizer  # noqa: E402
from kimi_eagle_data.formats import format_of  # noqa: E402

REASONING, ANSWER = "Let me add the two numbers carefully. " * 8, "The answer is 4. " * 6
TURNS = {"kimi-k2": f"{REASONING}</think>{ANSWER}<|im_end|>",
         "kimi-k3": (f"{REASONING}<|close|>think<|sep|><|open|>response<|sep|>{ANSWER}<|close|>response<|sep|>"
                     "<|close|>message<|sep|><|end_of_msg|>")}


def requests() -> list[dict]:
    data = json.loads((ROOT / "tests" / "golden" / "k3" / "conversations.json").read_text(encoding="utf-8"))
    return [c["request"] for c in data["conversations"]]


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    profiles = {"K2.5 (tiny-kimi)": get_profile("tiny-kimi"), "K3 (tiny-kimi-k3)": get_profile("tiny-kimi-k3")}
    toks = {name: load_tokenizer(p.model_path, format_of(p)) for name, p in profiles.items()}
    bound = {name: format_of(p).bind(p, toks[name]) for name, p in profiles.items()}
    both = []
    for r in requests():
        try:
            for name in profiles:
                bound[name].render_prompt(r["messages"], r.get("tools"))
        except Exception:       # noqa: BLE001 -- a request one format does not render is left out of both
            continue
        both.append(r)
    chats = [both[i % len(both)] for i in range(args.conversations)]
    print(f"{len(both)} golden requests both formats render, cycled to {len(chats)} conversations")
    rows = []
    for name, p in profiles.items():
        tok, fmt = toks[name], bound[name]
        paths = [("tokenizer's path", lambda: [fmt.render_prompt(r["messages"], r.get("tools")) for r in chats])]
        if fmt.name == "kimi-k3":
            paths.append(("our renderer", lambda: [encode_segments(tok, fmt.segments(r["messages"], r.get("tools")))
                                                   for r in chats]))
        for label, render in paths:
            secs, prompts = best(render, args.repeat)
            rows.append((name, f"render ({label})", len(chats) / secs, sum(map(len, prompts)) / secs))
        validator = fmt.validator(1 << 30)
        turn = tok.encode(TURNS[fmt.name])

        def validate():
            verdicts = []
            for at in range(0, len(prompts), 256):
                part = prompts[at:at + 256]
                verdicts += validator.validate_many(*pack(part), *pack([turn] * len(part)), ["stop"] * len(part),
                                                    [None] * len(part), [r.get("tools") for r in chats[at:at + 256]])
            return verdicts

        secs, verdicts = best(validate, args.repeat)
        bad = sum(not v.valid for v in verdicts)
        n_tok = sum(len(x) + len(turn) for x in prompts)
        rows.append((name, f"validate ({bad} of {len(verdicts)} invalid)", len(chats) / secs, n_tok / secs))
    print("\n| format | step | conversations/s | tokens/s |\n|---|---|---|---|")
    for name, step, cps, tps in rows:
        print(f"| {name} | {step} | {cps:,.0f} | {tps:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
