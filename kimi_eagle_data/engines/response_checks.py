"""What an HTTP engine checks in a server's answer before it is handed on, and the failed try it raises when a
check fails (`Failure`: its reason is recorded; `retriable` decides whether it is tried again)."""

from __future__ import annotations

from typing import Any

import orjson

from kimi_eagle_data.records import RequestFailure


class Failure(Exception):
    """One failed try of a request: `reason` is recorded, `retriable` decides whether it is tried again."""

    def __init__(self, reason: str, message: str, retriable: bool):
        super().__init__(message)
        self.reason, self.message, self.retriable = reason, message, retriable

    def gave_up(self, request_id: str, attempts: int) -> RequestFailure:
        """The request's answer when this was its last try."""
        return RequestFailure(request_id, self.reason, self.message, attempts)


def check_output_ids(output_ids: Any, *, max_new_tokens: int, vocab_size: int | None,
                     completion_tokens: Any = None, field: str = "output_ids",
                     count_field: str = "meta_info.completion_tokens") -> str | None:
    """Why an answer's token ids (`field`) cannot be stored (None when they can)."""
    if not isinstance(output_ids, list):
        return f"{field} is {type(output_ids).__name__}, expected a list of token ids"
    # The common case at C speed (every id an int in range; bool is an int subclass, so types are compared
    # exactly); the loop below says where an answer is wrong.
    if not output_ids or (set(map(type, output_ids)) == {int} and min(output_ids) >= 0
                          and (vocab_size is None or max(output_ids) < vocab_size)):
        return _count_problem(output_ids, max_new_tokens, completion_tokens, count_field)
    for i, t in enumerate(output_ids):
        # bool is an int subclass: `true` in the JSON is not a token id either.
        if type(t) is not int:
            return f"{field}[{i}] is {type(t).__name__} {str(t)[:40]!r}, expected an int"
        if t < 0 or (vocab_size is not None and t >= vocab_size):
            bound = f"[0, {vocab_size})" if vocab_size is not None else ">= 0"
            return f"{field}[{i}] = {t} is outside the vocabulary {bound}"
    return _count_problem(output_ids, max_new_tokens, completion_tokens, count_field)


def _count_problem(output_ids: list, max_new_tokens: int, completion_tokens: Any, count_field: str) -> str | None:
    if len(output_ids) > max_new_tokens:
        return f"{len(output_ids)} output ids for max_new_tokens {max_new_tokens}"
    if completion_tokens is not None and completion_tokens != len(output_ids):
        return f"{count_field} {completion_tokens!r} but {len(output_ids)} output ids"
    return None


def unembeddable(input_ids: list[int], vocab_size: int | None) -> str | None:
    """Why a prompt cannot be sent (None when it can): an id outside [0, vocab_size) crashes real SGLang
    (scheduler IndexError) and vLLM. prepare rejects such prompts; this guards prepared files made before."""
    if not input_ids:
        return "empty prompt"
    low, high = min(input_ids), max(input_ids)
    if low < 0 or (vocab_size is not None and high >= vocab_size):
        bad = low if low < 0 else high
        return f"prompt id {bad} is outside the model's vocabulary [0, {vocab_size})"
    return None


def storable(finish: Any, rid: str) -> None:
    """Raise a retriable bad_response when `finish` cannot be stored as JSON (an int beyond 64 bits)."""
    try:
        orjson.dumps(finish)
    except TypeError as e:
        raise Failure("bad_response", f"rid {rid}: the finish reason cannot be stored ({e})", True) from e
