"""What a format's validator shares with every other: the sample-level rules, written once (docs/token-rules.md).

Whatever the completion grammar, a sample fails these the same way: its prompt does not end with its mode's
generation prompt, it is longer than max_seq_len, it holds an id the model cannot embed, the engine aborted it or
gave an unknown finish reason, the engine's reported length contradicts the completion's (where the format holds
the engine to it), or it ran out of tokens before the end of its turn. Every validator judges a sample with
`sample_issues` and describes the codes with `sample_reasons`: Kimi-K2.5's (kimi_k2/rules.py), Kimi-K3's
(`kimi_k3/validator.py`) and a format registered from outside (tests/formats/toy_format.py). The `ChatFormat`
protocol is chat_format.py's.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from kimi_eagle_data.wording import counted

SAMPLE_CODES = ("prompt_not_generation_prompt", "exceeds_max_seq_len", "id_out_of_range", "aborted",
                "unknown_finish_reason", "length_mismatch", "truncated")


def sample_reasons(generation_prompts: str, reported_length: bool = False) -> dict[str, str]:
    """The sample-level codes with their descriptions, in SAMPLE_CODES' order; `generation_prompts` says the
    format's, as text; `reported_length`: the format judges `length_mismatch` (`sample_issues`)."""
    reasons = {
        "prompt_not_generation_prompt": f"the prompt ends with neither of the format's generation prompts "
                                        f"({generation_prompts})",
        "exceeds_max_seq_len": "prompt_len + completion_len is larger than max_seq_len",
        "id_out_of_range": "a token id outside [0, vocab_size)",
        "aborted": "the engine aborted the request: a failure, not a sample",
        "unknown_finish_reason": "a finish reason other than stop / length / abort",
        "length_mismatch": "a `length` completion whose token count differs from the length the engine reported",
        "truncated": "generation hit max_new_tokens before the end of the turn (kept only with --keep-truncated)",
    }
    if not reported_length:
        del reasons["length_mismatch"]
    return reasons


def ends_with(ids: Sequence[int], suffix: list[int]) -> bool:
    """Whether `ids` ends with the (non-empty) `suffix`."""
    k = len(suffix)
    return bool(k) and len(ids) >= k and [int(i) for i in ids[len(ids) - k:]] == suffix


def sample_issues(prompt: Sequence[int] | np.ndarray, output: Sequence[int] | np.ndarray, finish_reason: str,
                  finish_detail: dict | None, *, prompt_problem: str | None, whole: bool, max_seq_len: int,
                  vocab_size: int, keep_truncated: bool, reported_length: bool = False,
                  may_be_out_of_range: tuple[bool, bool] = (True, True)) -> list[tuple[str, str]]:
    """(code, detail) for each sample-level rule the sample fails, in SAMPLE_CODES' order (`prompt`, `output`: the
    ids, Python ints or a numpy array). `prompt_problem`: what is wrong with the prompt's end (None: it ends as its
    mode's generation prompt); `whole`: the completion ends its turn. `reported_length`: a `length` completion
    whose engine reported another length fails `length_mismatch`. `may_be_out_of_range`: whether the prompt, the
    completion may hold an id outside [0, vocab_size) (False where the validator has already found none: no scan)."""
    issues: list[tuple[str, str]] = []
    if prompt_problem is not None:
        issues.append(("prompt_not_generation_prompt", prompt_problem))
    n = len(output)
    total = len(prompt) + n
    if total > max_seq_len:
        issues.append(("exceeds_max_seq_len", f"prompt_len {len(prompt)} + completion_len {n} = {total} > "
                                              f"max_seq_len {max_seq_len}"))
    out_of_range = []
    for what, seq, may in (("prompt", prompt, may_be_out_of_range[0]), ("completion", output, may_be_out_of_range[1])):
        if not may:
            continue
        ids = np.asarray(seq, dtype=np.int64)
        bad = np.flatnonzero((ids < 0) | (ids >= vocab_size))
        if bad.size:
            out_of_range.append(f"{bad.size} {what} id(s) outside [0, {vocab_size}), first {int(ids[bad[0]])} "
                                f"at {int(bad[0])}")
    if out_of_range:
        issues.append(("id_out_of_range", "; ".join(out_of_range)))
    detail = finish_detail or {}
    if finish_reason == "abort":
        message = detail.get("message")
        issues.append(("aborted", f"finish_reason abort{': ' + str(message) if message else ''}"))
    elif finish_reason not in ("stop", "length"):
        issues.append(("unknown_finish_reason", f"unknown finish_reason {finish_reason!r}"))
    else:
        if reported_length and finish_reason == "length" and detail.get("length") is not None \
                and not _same_length(detail["length"], n):
            issues.append(("length_mismatch", f"completion has {counted(n, 'token')}, the engine reported length "
                                              f"{detail['length']!r}"))
        if not whole and not keep_truncated:
            issues.append(("truncated", f"finish_reason length after {counted(n, 'token')}, no end-of-turn token"))
    return issues


def _same_length(reported, n: int) -> bool:
    try:
        return int(reported) == n
    except (TypeError, ValueError):
        return False
