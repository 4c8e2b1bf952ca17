"""Log-probs from SGLang's native `/generate`: on generation requests (what `generate` records) and
prefill-only scoring (`kimi-data score`).

Checked against SGLang's source (sgl-project/sglang, commit 001067fffe33427bee0ed2f007fb7551a1d76b44:
python/sglang/srt/managers/io_struct.py `GenerateReqInput`, tokenizer_manager.py
`add_logprob_to_meta_info` / `detokenize_logprob_tokens`; commit 004ec010d0292427acff6a0003fd5fd4c91fb356:
scheduler_output_processor_mixin.py `_process_input_token_logprobs` / `_process_input_top_logprobs`):

- request fields (top level, beside `input_ids`): `return_logprob` (bool), `logprob_start_len` (int: the
  first prompt position reported; default -1 = output tokens only), `top_logprobs_num` (int). There is
  no `return_input_logprob` field: input log-probs come back whenever logprob_start_len < len(input_ids).
  `sampling_params.max_new_tokens` 0 makes the request prefill-only (`Req.is_prefill_only`).
- response: `meta_info.input_token_logprobs` = [[logprob, token_id, text|None], ...] for positions
  logprob_start_len .. len-1, built as `[None] + logprobs[:-1]`: the entry at logprob_start_len itself
  has logprob None (the model's output at position p predicts p+1). To score tokens from position
  `start` on, we therefore ask from `start - 1` and drop that first entry.
  `meta_info.input_top_logprobs` = per position None or [[logprob, token_id, text|None]] * top_logprobs_num
  (None at the same first position). `output_token_logprobs` / `output_top_logprobs`: the same per
  sampled token (log_softmax of logits / temperature, before top-p: at temperature 1 the raw log-probs).
"""

from __future__ import annotations

from typing import Any

import orjson

from kimi_eagle_data.records import Completion
from kimi_eagle_data.engines.base import ScoreRequest, ScoreResult

# Log-probs on generation requests: each sampled token's, and the top-1 token at its position.
LOGPROB_FIELDS = {"return_logprob": True, "top_logprobs_num": 1}


class BadLogprobs(ValueError):
    """The server's log-probs do not answer the request (not retried: the request would get the same)."""


def _logprob_entry(e) -> tuple[float, int]:
    if not isinstance(e, (list, tuple)) or len(e) < 2 or not isinstance(e[1], int) or \
            not isinstance(e[0], (int, float)):
        raise ValueError(f"not a [logprob, token_id, text] triple: {str(e)[:80]}")
    return float(e[0]), e[1]


def _top1_ids(tops) -> list[int]:
    out = []
    for pos in tops:
        if not pos:
            raise ValueError("a position without top log-probs")
        out.append(_logprob_entry(pos[0])[1])
    return out


def with_output_logprobs(c: Completion, body: dict[str, Any]) -> Completion:
    """Attach `meta_info.output_token_logprobs` (+ the top-1 ids) to a generated completion. When the
    server sent none, or they do not line up with `output_ids`, the completion stands without them."""
    meta = body.get("meta_info") if isinstance(body, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("output_token_logprobs"), list) or not c.output_ids:
        return c
    try:
        pairs = [_logprob_entry(e) for e in meta["output_token_logprobs"]]
        tops = meta.get("output_top_logprobs")
        top1 = _top1_ids(tops) if isinstance(tops, list) and len(tops) == len(pairs) else None
    except ValueError:
        return c
    if [t for _, t in pairs] != [int(t) for t in c.output_ids]:
        return c
    c.output_logprobs = [lp for lp, _ in pairs]
    c.output_top1_ids = top1
    return c


def parse_score(req: ScoreRequest, body: dict[str, Any]) -> ScoreResult:
    """A prefill-only answer (see the module doc) -> the log-prob and top-1 id of each of input_ids[start:].
    Raises BadLogprobs when the answer does not cover exactly those tokens."""
    meta = body.get("meta_info") or {}
    entries, tops = meta.get("input_token_logprobs"), meta.get("input_top_logprobs")
    want = len(req.input_ids) - (req.start - 1)
    if not isinstance(entries, list) or len(entries) != want or not isinstance(tops, list) or len(tops) != want:
        raise BadLogprobs(f"expected {want} input_token_logprobs and input_top_logprobs, got "
                          f"{len(entries) if isinstance(entries, list) else 'none'}; does the server honour "
                          "logprob_start_len (SGLang >= 0.5.5)?")
    try:
        pairs = [_logprob_entry(e) for e in entries[1:]]
        top1 = _top1_ids(tops[1:])
    except ValueError as e:
        raise BadLogprobs(f"input log-probs: {e}") from None
    if [t for _, t in pairs] != list(req.input_ids[req.start:]):
        raise BadLogprobs("input_token_logprobs name other token ids than the request's")
    return ScoreResult(req.id, logprobs=[lp for lp, _ in pairs], top1_ids=top1)


def score_payload(req: ScoreRequest, rid: str | None = None) -> bytes:
    """The prefill-only request for `req`'s log-probs, sent as request `rid` (default: `req.id`)."""
    return orjson.dumps({
        "input_ids": req.input_ids, "rid": rid or req.id,
        "sampling_params": {"max_new_tokens": 0, "temperature": 1.0},
        "return_logprob": True, "logprob_start_len": req.start - 1, "top_logprobs_num": 1,
    })
