#!/usr/bin/env python
"""Check the SGLang contract kimi-eagle-data relies on, against a running server (GPU machine).

    # on a GPU machine with sglang installed, any small HF chat model:
    python -m sglang.launch_server --model-path Qwen/Qwen2.5-0.5B-Instruct --port 30000 &
    python scripts/sglang_contract_check.py --url http://127.0.0.1:30000

It asserts, with one PASS/FAIL line each (exit 1 on any failure):
 1. /health_generate answers 200; /server_info (or /get_server_info) reports version >= 0.5.5;
    /model_info (or /get_model_info) has model_path.
 2. /generate with input_ids, greedy, no stop: finish_reason {"type": "length", "length": N},
    len(output_ids) == completion_tokens == N, prompt_tokens == len(input_ids), no prompt tokens
    leaked into output_ids (the 0.5.2-0.5.3 bug).
 3. the same request with stop_token_ids = [the first token greedy decoding emits] (the first,
    so no EOS can come before it): finish_reason {"type": "stop", "matched": that id} and
    output_ids == [that id] (the matched stop token is kept in output_ids).
 4. a batch (input_ids as a list of lists) answers a list, one dict per prompt, in order.
 5. input_ids + max_new_tokens beyond the context length is refused with HTTP 400 and
    {"error": {"message": ...}}.
 6. /tokenize (>= 0.5.5) returns {"tokens", "count"}.
 7. log-probs (`kimi-data score`, generate's recorded sums): a generation request with return_logprob
    and top_logprobs_num 1 has meta_info.output_token_logprobs = [[logprob, id, text], ...] naming
    output_ids; a prefill-only request (max_new_tokens 0) of prompt + the greedy output with
    logprob_start_len = len(prompt) - 1 has input_token_logprobs for those positions, null log-prob at
    the first, the output ids after it, and input_top_logprobs whose top-1 ids are the greedy output
    (so the positions line up), with log-probs equal to the generation's (within 0.05).
The same script runs in the CPU test suite against `kimi-data serve --engine local`, which mirrors
this contract, so the script itself is tested.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request

RESULTS: list[tuple[str, bool, str]] = []


def call(url: str, path: str, body: dict | None = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw.strip() else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except json.JSONDecodeError:
            return e.code, raw.decode(errors="replace")


def check(name: str, ok: bool, detail: str = "") -> bool:
    RESULTS.append((name, bool(ok), detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"  ({detail})" if detail and not ok else ""))
    return bool(ok)


def first_ok(url: str, *paths: str) -> dict:
    for p in paths:
        status, body = call(url, p)
        if status == 200 and isinstance(body, dict):
            return body
    return {}


def version_tuple(v: str) -> tuple[int, ...]:
    parts = []
    for x in str(v).lstrip("v").split(".")[:3]:
        digits = "".join(ch for ch in x if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:30000")
    ap.add_argument("--prompt-ids", default="", help="comma-separated prompt ids (default: ids from /tokenize)")
    ap.add_argument("--new-tokens", type=int, default=12)
    args = ap.parse_args()
    url = args.url.rstrip("/")

    status, _ = call(url, "/health_generate")
    check("health_generate answers 200", status == 200, f"status {status}")
    info = first_ok(url, "/server_info", "/get_server_info")
    version = str(info.get("version", ""))
    check("server_info reports SGLang >= 0.5.5", version and version_tuple(version) >= (0, 5, 5), f"version {version!r}")
    minfo = first_ok(url, "/model_info", "/get_model_info")
    check("model_info has model_path", bool(minfo.get("model_path")), f"got {sorted(minfo)}")

    status, tok = call(url, "/tokenize", {"prompt": "The quick brown fox jumps over", "add_special_tokens": False})
    check("/tokenize returns tokens and count", status == 200 and isinstance(tok, dict) and "tokens" in tok
          and "count" in tok, f"status {status}, body {str(tok)[:200]}")
    if args.prompt_ids:
        prompt = [int(x) for x in args.prompt_ids.split(",")]
    elif status == 200 and isinstance(tok, dict) and tok.get("tokens"):
        prompt = list(tok["tokens"])
    else:
        prompt = [100, 200, 300, 400, 500]

    n = args.new_tokens
    base = {"temperature": 0.0, "max_new_tokens": n, "skip_special_tokens": False, "ignore_eos": True}
    status, r = call(url, "/generate", {"input_ids": prompt, "sampling_params": base})
    ok = status == 200 and isinstance(r, dict)
    check("/generate with input_ids answers 200 with a dict", ok, f"status {status}, body {str(r)[:300]}")
    if not ok:
        return summary()
    meta, out = r.get("meta_info", {}), r.get("output_ids")
    fin = meta.get("finish_reason")
    check("length finish: finish_reason == {type: length, length: N}",
          isinstance(fin, dict) and fin.get("type") == "length" and fin.get("length") == n, f"got {fin}")
    check("len(output_ids) == completion_tokens == max_new_tokens",
          isinstance(out, list) and len(out) == meta.get("completion_tokens") == n,
          f"len {len(out) if isinstance(out, list) else out}, completion_tokens {meta.get('completion_tokens')}")
    check("prompt_tokens == len(input_ids)", meta.get("prompt_tokens") == len(prompt),
          f"prompt_tokens {meta.get('prompt_tokens')} vs {len(prompt)}")
    check("no prompt tokens leaked into output_ids (0.5.2-0.5.3 bug)",
          isinstance(out, list) and out[:len(prompt)] != prompt[:len(out)], f"output starts {out[:8]}")
    check("meta_info has id, cached_tokens, e2e_latency",
          all(k in meta for k in ("id", "cached_tokens", "e2e_latency")), f"keys {sorted(meta)}")

    stop_id = out[0]
    first = 0
    status, r2 = call(url, "/generate", {"input_ids": prompt, "sampling_params": {
        **base, "ignore_eos": False, "stop_token_ids": [stop_id]}})
    fin2 = (r2 or {}).get("meta_info", {}).get("finish_reason") if isinstance(r2, dict) else None
    out2 = r2.get("output_ids") if isinstance(r2, dict) else None
    check("stop finish: finish_reason == {type: stop, matched: id}",
          isinstance(fin2, dict) and fin2.get("type") == "stop" and fin2.get("matched") == stop_id, f"got {fin2}")
    check("the matched stop token is the last of output_ids", out2 == out[:first + 1],
          f"got {out2}, expected {out[:first + 1]}")

    status, rb = call(url, "/generate", {"input_ids": [prompt, prompt[:-1]], "sampling_params": base})
    check("batch input_ids answer a list, one dict per prompt, in order",
          status == 200 and isinstance(rb, list) and len(rb) == 2 and rb[0].get("output_ids") == out
          and rb[1]["meta_info"]["prompt_tokens"] == len(prompt) - 1, f"status {status}, body {str(rb)[:300]}")

    status, rg = call(url, "/generate", {"input_ids": prompt, "sampling_params": base, "return_logprob": True,
                                         "top_logprobs_num": 1})
    olp = (rg or {}).get("meta_info", {}).get("output_token_logprobs") if isinstance(rg, dict) else None
    check("return_logprob: output_token_logprobs are [logprob, id, text] naming output_ids",
          isinstance(olp, list) and [e[1] for e in olp] == out and all(isinstance(e[0], float) for e in olp),
          f"status {status}, got {str(olp)[:300]}")
    status, rs = call(url, "/generate", {"input_ids": prompt + out, "sampling_params": {"max_new_tokens": 0},
                                         "return_logprob": True, "logprob_start_len": len(prompt) - 1,
                                         "top_logprobs_num": 1})
    meta_s = rs.get("meta_info", {}) if isinstance(rs, dict) else {}
    ilp, itop = meta_s.get("input_token_logprobs"), meta_s.get("input_top_logprobs")
    shape_ok = (isinstance(ilp, list) and len(ilp) == n + 1 and ilp[0][0] is None and ilp[0][1] == prompt[-1]
                and [e[1] for e in ilp[1:]] == out)
    check("prefill-only: input_token_logprobs from logprob_start_len, null first, then the scored ids",
          shape_ok, f"status {status}, got {str(ilp)[:300]}")
    check("prefill-only: input_top_logprobs top-1 ids are the greedy output (positions line up)",
          isinstance(itop, list) and len(itop) == n + 1 and itop[0] is None
          and [pos[0][1] for pos in itop[1:]] == out, f"got {str(itop)[:300]}")
    if shape_ok and isinstance(olp, list) and len(olp) == n:
        worst = max(abs(a[0] - b[0]) for a, b in zip(olp, ilp[1:]))
        check("prefill log-probs equal the generation's (within 0.05)", worst < 0.05, f"max difference {worst:.4f}")

    ctx = info.get("context_length") or info.get("max_req_input_len") or 1 << 20
    status, r3 = call(url, "/generate", {"input_ids": prompt, "sampling_params": {**base, "max_new_tokens": int(ctx)}})
    check("over-long request refused with HTTP 400 and {error: {message}}",
          status == 400 and isinstance(r3, dict) and "message" in (r3.get("error") or r3),
          f"status {status}, body {str(r3)[:300]}")
    return summary()


def summary() -> int:
    failed = [n for n, ok, _ in RESULTS if not ok]
    print(f"\n{len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
