"""Validator throughput: Kimi-K2.5's numpy validator (`kimi_eagle_data.formats.kimi_k2.validator.Validator`, which
parses through `kimi_eagle_data.formats.kimi_k2.grammar`) against a naive per-token Python loop implementing the same checks, on a synthetic
corpus built from the embedded tiny Kimi-format tokenizer's ids (mostly valid samples of 100–2,000 completion
tokens; plain answers, tool calls, ~10% broken).

Both implementations produce the full verdict (reason codes, counts, the decoded assistant turn); the benchmark
first checks that they agree on every sample, then times each (best of --repeat) and prints a table.

    PYTHONPATH=. python benchmarks/bench_validate.py [--samples 3000] [--repeat 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
from transformers import AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR  # noqa: E402
from kimi_eagle_data.chat_format import FormatTokens  # noqa: E402
from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS, k2_tokens  # noqa: E402
from kimi_eagle_data.chat_format import Verdict  # noqa: E402
from kimi_eagle_data.formats.kimi_k2.rules import reason_descriptions  # noqa: E402
from kimi_eagle_data.formats.kimi_k2.validator import Validator  # noqa: E402
from kimi_eagle_data.id_buffers import pack  # noqa: E402

# --------------------------------------------------------------------------------------------
# The baseline: one Python loop over every token, a state machine, the same rules.

_TEXT, _OPEN, _CLOSE, _EOT, _SB, _SE, _CB, _AB, _CE, _FORBID = range(10)


def _no_constant(name):
    raise ValueError(name)


class NaiveValidator:
    def __init__(self, tokens: FormatTokens, tokenizer, max_seq_len: int, keep_truncated: bool = False):
        self.tokens, self.tokenizer = tokens, tokenizer
        self.max_seq_len, self.keep_truncated = max_seq_len, keep_truncated
        self.vocab_size = len(tokenizer)
        self.gp = tokenizer.encode(K2_TOKENS.generation_prompt, add_special_tokens=False)
        self.role = {tokens.think_open: _OPEN, tokens.think_close: _CLOSE, tokens.end_of_turn: _EOT,
                     tokens.tool_calls_section_begin: _SB, tokens.tool_calls_section_end: _SE,
                     tokens.tool_call_begin: _CB, tokens.tool_call_argument_begin: _AB, tokens.tool_call_end: _CE}
        for t in tokens.forbidden_ids:
            self.role[t] = _FORBID
        self.pattern = K2_TOKENS.tool_call_id_pattern

    def _dec(self, ids: list[int]) -> str:
        ids = [t for t in ids if 0 <= t < self.vocab_size]
        return self.tokenizer.decode(ids, skip_special_tokens=False) if ids else ""

    def validate(self, prompt_ids, output_ids, finish_reason, finish_detail, tools) -> Verdict:
        p = [int(x) for x in prompt_ids]
        c = [int(x) for x in output_ids]
        n = len(c)
        finish_detail = finish_detail or {}
        declared = set()
        for t in tools or ():
            fn = t.get("function")
            name = fn.get("name") if isinstance(fn, dict) else t.get("name")
            if name:
                declared.add(name)
        eot = self.tokens.end_of_turn
        ends_eot = n > 0 and c[-1] == eot
        kind = ("complete" if finish_reason == "stop" or (finish_reason == "length" and ends_eot)
                else "truncated" if finish_reason == "length" else "failed")
        body_end = n - 1 if ends_eot else n
        found: dict[str, str] = {}

        def issue(code, msg="x"):
            found.setdefault(code, msg)

        # sample level
        k = len(self.gp)
        ok = len(p) >= k
        for i in range(k if ok else 0):
            if p[len(p) - k + i] != self.gp[i]:
                ok = False
                break
        if not ok:
            issue("prompt_not_generation_prompt")
        if len(p) + n > self.max_seq_len:
            issue("exceeds_max_seq_len")
        for t in p:
            if t < 0 or t >= self.vocab_size:
                issue("id_out_of_range")
        if finish_reason == "abort":
            issue("aborted")
        elif finish_reason not in ("stop", "length"):
            issue("unknown_finish_reason")
        if finish_reason == "length" and finish_detail.get("length") is not None and finish_detail["length"] != n:
            issue("length_mismatch")
        if kind == "truncated" and not self.keep_truncated:
            issue("truncated")

        # the walk
        counts = [0] * 10
        reasoning: list[int] = []
        pre: list[int] = []
        post: list[int] = []
        gap: list[int] = []
        id_buf: list[int] = []
        arg_buf: list[int] = []
        calls = []
        state = "reasoning"
        think_close_at = None
        sec_seen = sec_closed = False
        malformed = False
        in_reasoning = outside = 0
        eot_positions = []
        for i, t in enumerate(c):
            if t < 0 or t >= self.vocab_size:
                issue("id_out_of_range")
            r = self.role.get(t, _TEXT)
            counts[r] += 1
            if r == _EOT:
                eot_positions.append(i)
            if i >= body_end:
                break
            if state == "reasoning":
                if r == _CLOSE:
                    think_close_at = i
                    state = "out"
                    continue
                if _SB <= r <= _CE:
                    in_reasoning += 1
                reasoning.append(t)
            elif state == "out":
                if r == _SB:
                    state, sec_seen = "in", True
                    continue
                if r == _SE:
                    malformed = True
                elif _CB <= r <= _CE:
                    outside += 1
                pre.append(t)
            elif state == "after":
                post.append(t)
            elif r == _SE:                           # closes the section, whatever the state
                sec_closed = True
                if state in ("id", "args"):
                    malformed = True
                elif state == "in":
                    if self._dec(gap).strip():
                        malformed = True
                    if not calls and not malformed:
                        issue("empty_tool_section")
                state = "after"
            elif state == "dead":
                continue
            elif state == "in":
                if r == _CB:
                    if self._dec(gap).strip():
                        malformed = True
                    gap, id_buf, state = [], [], "id"
                elif r == _TEXT or r in (_OPEN, _CLOSE, _EOT, _FORBID):
                    gap.append(t)
                else:
                    malformed, state = True, "dead"
            elif state == "id":
                if r == _AB:
                    arg_buf, state = [], "args"
                elif r >= _SB and r <= _CE:
                    malformed, state = True, "dead"
                else:
                    id_buf.append(t)
            elif state == "args":
                if r == _CE:
                    calls.append((self._dec(id_buf), self._dec(arg_buf)))
                    gap, state = [], "in"
                elif _SB <= r <= _CE:
                    malformed, state = True, "dead"
                else:
                    arg_buf.append(t)
        if sec_seen and not sec_closed and state != "dead" and kind == "complete":
            malformed = True

        parsed = []
        for id_text, args_text in calls:
            m = self.pattern.match(id_text)
            try:
                args_ok = isinstance(json.loads(args_text, parse_constant=_no_constant), dict)
            except ValueError:
                args_ok = False
            parsed.append((id_text, m["name"] if m else None, int(m["index"]) if m else None, args_text, args_ok))
        content = self._dec(pre) + self._dec(post) if think_close_at is not None else ""

        if kind != "failed":
            if counts[_OPEN]:
                issue("think_open_in_completion")
            if counts[_CLOSE] > 1:
                issue("multiple_think_close")
            if counts[_FORBID]:
                issue("forbidden_token")
            if in_reasoning:
                issue("tool_section_in_reasoning")
            if outside:
                issue("tool_call_outside_section")
            if malformed:
                issue("malformed_tool_section")
            if post:
                issue("text_after_tool_section")
            for k_, (_, name, index, _, args_ok) in enumerate(parsed):
                if name is None:
                    issue("bad_tool_call_id")
                if index is not None and index != k_:
                    issue("tool_call_index_out_of_order")
                if declared and name is not None and name not in declared:
                    issue("undeclared_tool")
                if not declared:
                    issue("tool_call_without_tools")
                if not args_ok:
                    issue("args_not_json_object")
            if eot_positions and eot_positions[-1] != n - 1:
                issue("end_of_turn_not_last")
            if counts[_EOT] > 1:
                issue("multiple_end_of_turn")
        if kind == "complete":
            if think_close_at is None:
                issue("missing_think_close")
            if not counts[_EOT]:
                issue("missing_end_of_turn")
            if think_close_at is not None and not counts[_CB] and not content.strip():
                issue("empty_answer")

        codes = [code for code in reason_descriptions() if code in found]
        return Verdict(
            issues=codes, details=[found[c_] for c_ in codes],
            reasoning_len=think_close_at if think_close_at is not None else body_end,
            num_tool_calls=counts[_CB], args_valid=all(x[4] for x in parsed),
            assistant={"role": "assistant", "reasoning_content": self._dec(reasoning), "content": content,
                       "tool_calls": [{"id": i_.strip(), "type": "function",
                                       "function": {"name": nm if nm is not None else "", "arguments": a}}
                                      for i_, nm, _, a, _ in parsed]},
            finish_reason="stop" if kind == "complete" and finish_reason == "length" else finish_reason,
        )


# --------------------------------------------------------------------------------------------
# The synthetic corpus


def build_corpus(tok, tokens: FormatTokens, n: int, seed: int):
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    added = set(tok.get_added_vocab().values())
    text_ids = np.array([i for i in range(len(tok)) if i not in added], dtype=np.int32)
    tools = [{"type": "function", "function": {"name": nm, "description": "d", "parameters": {"type": "object"}}}
             for nm in ("get_weather", "search_web", "convert_currency")]

    def render(text, with_tools):
        return np.asarray(tok.apply_chat_template([{"role": "user", "content": text}], tools=tools if with_tools else None,
                                                  add_generation_prompt=True, tokenize=True, return_dict=False),
                          dtype=np.int32)

    plain_prompts = [render(f"Question number {i}: explain something in detail.", False) for i in range(8)]
    tool_prompts = [render(f"Request {i}: weather in Paris and search the web.", True) for i in range(8)]
    enc = lambda s: np.asarray(tok.encode(s, add_special_tokens=False), dtype=np.int32)  # noqa: E731
    sp = tokens.ids
    one = lambda s: np.asarray([sp[s]], dtype=np.int32)  # noqa: E731
    call_parts = [(enc(f"functions.{nm}:{k}"), enc(json.dumps({"arg": "value", "n": k})))
                  for k in range(3) for nm in ("get_weather", "search_web")]

    def text(k):
        return text_ids[rng.integers(0, text_ids.size, size=max(k, 0))]

    corpus = []
    for i in range(n):
        total = int(np.exp(rng.uniform(np.log(100), np.log(2000))))
        is_tool = rng.random() < 0.3
        reasoning_len = int(total * rng.uniform(0.5, 0.9))
        parts = [text(reasoning_len), one("</think>")]
        if is_tool:
            parts.append(text(rng.integers(0, 20)))
            parts.append(one("<|tool_calls_section_begin|>"))
            for k in range(int(rng.integers(1, 3))):
                idp, argp = call_parts[2 * k + int(rng.integers(0, 2))]
                parts += [one("<|tool_call_begin|>"), idp, one("<|tool_call_argument_begin|>"), argp,
                          one("<|tool_call_end|>")]
            parts.append(one("<|tool_calls_section_end|>"))
        else:
            parts.append(text(total - reasoning_len - 2))
        parts.append(one("<|im_end|>"))
        out = np.concatenate(parts)
        finish, detail = "stop", {"type": "stop", "matched": tokens.end_of_turn}
        r = rng.random()
        if r < 0.04:                                  # truncated
            out = out[: max(1, out.size // 2)]
            finish, detail = "length", {"type": "length", "length": int(out.size)}
        elif r < 0.06:                                # a forbidden token in the answer
            out = np.insert(out, out.size - 2, sp["<|im_user|>"])
        elif r < 0.08:                                # a second </think>
            out = np.insert(out, out.size // 4, sp["</think>"])
        elif r < 0.10:                                # no end of turn
            out = out[:-1]
        prompts = tool_prompts if is_tool else plain_prompts
        corpus.append((pyrng.choice(prompts), out, finish, detail, tools if is_tool else None))
    return corpus


# --------------------------------------------------------------------------------------------


def _key(v: Verdict):
    return (v.issues, v.reasoning_len, v.num_tool_calls, v.args_valid, v.assistant, v.finish_reason)


def _chunk(samples):
    """Samples as validate_many takes them: prompt and completion buffers, then the per-sample columns."""
    return (*pack([s[0] for s in samples]), *pack([s[1] for s in samples]), [s[2] for s in samples],
            [s[3] for s in samples], [s[4] for s in samples])


def _time(fn, corpus, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for s in corpus:
            fn(*s)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    tok = AutoTokenizer.from_pretrained(str(TINY_MODEL_DIR), trust_remote_code=True)
    tokens = k2_tokens(tok)
    max_seq_len = 4096                                # the tiny profile's 512 is too small for 2,000-token samples
    fast = Validator(tokens, tok, max_seq_len)
    naive = NaiveValidator(tokens, tok, max_seq_len)
    corpus = build_corpus(tok, tokens, args.samples, args.seed)
    completion_tokens = sum(int(s[1].size) for s in corpus)
    prompt_tokens = sum(int(s[0].size) for s in corpus)

    # Same verdicts first (the naive loop is also a differential check of the validator).
    naive_corpus = [(s[0].tolist(), s[1].tolist(), *s[2:]) for s in corpus]
    n_valid = 0
    for s, ns in zip(corpus, naive_corpus):
        a, b = fast.validate(*s), naive.validate(*ns)
        assert _key(a) == _key(b), (_key(a), _key(b))
        n_valid += a.valid

    t_naive = _time(naive.validate, naive_corpus, args.repeat)
    t_fast = _time(fast.validate, corpus, args.repeat)
    # What emit runs: chunks of 256 samples as (offsets, values) buffers, one vectorised pass per chunk.
    chunks = [_chunk(corpus[i:i + 256]) for i in range(0, len(corpus), 256)]
    for c, i in zip(chunks, range(0, len(corpus), 256)):
        assert [_key(v) for v in fast.validate_many(*c)] == [_key(fast.validate(*s)) for s in corpus[i:i + 256]]
    t_chunks = _time(lambda *c: list(fast.validate_many(*c)), chunks, args.repeat)
    # The decoding both must do, alone: one decode of each whole completion (as an array, the fast way).
    t_decode = _time(lambda p, o, *_: fast.decoder.decode(o), corpus, args.repeat)

    # Structure only: the same two implementations with decoding stubbed out (constant text).
    stub = _StubTokenizer(tok)
    fast_s, naive_s = Validator(tokens, stub, max_seq_len), NaiveValidator(tokens, stub, max_seq_len)
    for s, ns in zip(corpus[:200], naive_corpus[:200]):
        assert _key(fast_s.validate(*s)) == _key(naive_s.validate(*ns))
    t_naive_s = _time(naive_s.validate, naive_corpus, args.repeat)
    t_fast_s = _time(fast_s.validate, corpus, args.repeat)

    print(f"validate benchmark: {len(corpus)} samples ({n_valid} valid), {completion_tokens:,} completion tokens "
          f"(+{prompt_tokens:,} prompt tokens), mean {completion_tokens / len(corpus):.0f}/sample, "
          f"best of {args.repeat}; verdicts identical")
    hdr = f"{'implementation':<40}{'samples':>9}{'tokens':>12}{'seconds':>10}{'tokens/s':>14}{'speed-up':>10}"
    print(hdr)
    print("-" * len(hdr))
    rows = [("naive per-token loop", t_naive, t_naive), ("numpy Validator", t_fast, t_naive),
            ("numpy Validator, chunks of 256 (emit)", t_chunks, t_naive),
            ("  structure only: naive loop", t_naive_s, t_naive_s),
            ("  structure only: numpy Validator", t_fast_s, t_naive_s),
            ("  (decode of each completion alone)", t_decode, None)]
    for name, t, base in rows:
        up = f"{base / t:>9.1f}×" if base else f"{'':>10}"
        print(f"{name:<40}{len(corpus):>9}{completion_tokens:>12,}{t:>10.3f}{completion_tokens / t:>14,.0f}{up}")
    print("full = the whole verdict incl. the decoded assistant turn; structure only = decode stubbed out in both. "
          "The naive loop decodes Python lists (transformers type-checks list elements one by one); the Validator "
          "hands long segments over as numpy arrays.")


class _StubTokenizer:
    """Delegates everything to the tokenizer except decode, which returns constant text (and hides the tiktoken
    core, which the Validator would otherwise decode through)."""

    model = None

    def __init__(self, tok):
        self._tok = tok

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def __len__(self):
        return len(self._tok)

    def decode(self, ids, skip_special_tokens=False):
        return "x"


if __name__ == "__main__":
    main()
