"""What a format's validator shares with every other: the sample-level rules, written once (docs/token-rules.md).

Whatever the completion grammar, a sample fails these the same way: its prompt does not end with its mode's
generation prompt, it is longer than max_seq_len, it holds an id the model cannot embed, the engine aborted it or
gave an unknown finish reason, or it ran out of tokens before the end of its turn. Kimi-K3's validator
(`kimi_k3/validator.py`) and a format registered from outside (tests/formats/toy_format.py) judge a sample with
`sample_issues` and describe the codes with `sample_reasons`; Kimi-K2.5's validator keeps them among its token
rules (validate/rules.py), with the same codes and meaning. The `ChatFormat` protocol is chat_format.py's.
"""

from __future__ import annotations

from typing import Sequence

SAMPLE_CODES = ("prompt_not_generation_prompt", "exceeds_max_seq_len", "id_out_of_range", "aborted",
                "unknown_finish_reason", "truncated")


def sample_reasons(generation_prompts: str) -> dict[str, str]:
    """The sample-level codes with their descriptions; `generation_prompts` says the format's, as text."""
    return {
        "prompt_not_generation_prompt": f"the prompt ends with neither of the format's generation prompts "
                                        f"({generation_prompts})",
        "exceeds_max_seq_len": "prompt_len + completion_len is larger than max_seq_len",
        "id_out_of_range": "a token id outside [0, vocab_size)",
        "aborted": "the engine aborted the request: a failure, not a sample",
        "unknown_finish_reason": "a finish reason other than stop / length / abort",
        "truncated": "generation hit max_new_tokens before the end of the turn (kept only with --keep-truncated)",
    }


def ends_with(ids: Sequence[int], suffix: list[int]) -> bool:
    """Whether `ids` ends with the (non-empty) `suffix`."""
    k = len(suffix)
    return bool(k) and len(ids) >= k and [int(i) for i in ids[len(ids) - k:]] == suffix


def sample_issues(prompt: Sequence[int], output: Sequence[int], finish_reason: str, finish_detail: dict | None, *,
                  prompt_problem: str | None, whole: bool, max_seq_len: int, vocab_size: int, keep_truncated: bool,
                  end_of_turn: str) -> list[tuple[str, str]]:
    """(code, detail) for each sample-level rule the sample fails, in SAMPLE_CODES' order (`prompt`, `output`: the
    ids as Python ints, as a validator holds them). `prompt_problem`: what is wrong with the prompt's end (None: it
    ends as its mode's generation prompt); `whole`: the completion ends its turn (with `end_of_turn`, the stop
    token's name)."""
    issues: list[tuple[str, str]] = []
    if prompt_problem is not None:
        issues.append(("prompt_not_generation_prompt", prompt_problem))
    if len(prompt) + len(output) > max_seq_len:
        issues.append(("exceeds_max_seq_len", f"prompt_len {len(prompt)} + completion_len {len(output)} > "
                                              f"max_seq_len {max_seq_len}"))
    bad = [i for seq in (prompt, output) for i in seq if not 0 <= i < vocab_size]
    if bad:
        issues.append(("id_out_of_range", f"{len(bad)} id(s) outside [0, {vocab_size}), first {bad[0]}"))
    if finish_reason == "abort":
        issues.append(("aborted", f"finish_reason abort: {(finish_detail or {}).get('message', '')}"))
    elif finish_reason not in ("stop", "length"):
        issues.append(("unknown_finish_reason", f"unknown finish_reason {finish_reason!r}"))
    elif not whole and not keep_truncated:
        issues.append(("truncated", f"finish_reason length after {len(output)} tokens, no {end_of_turn}"))
    return issues
