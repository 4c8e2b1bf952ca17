"""Token ids back to text, exactly as `tokenizer.decode(ids, skip_special_tokens=False)` gives it, fast: the one decode
of id segments that the completion grammar, the validators and `inspect` read (`SegmentDecoder`). Shared ground: it
knows tokenizers only through their tiktoken core, when they have one."""

from __future__ import annotations


def fast_decoder(tokenizer):
    """The tokenizer's tiktoken core (`.model`, K2.5's TikTokenTokenizer and the tiny tokenizer alike), whose
    `decode(ids)` equals `tokenizer.decode(ids, skip_special_tokens=False)` and is much faster; None otherwise."""
    core = getattr(tokenizer, "model", None)
    try:
        import tiktoken
    except ImportError:
        return None
    return core if isinstance(core, tiktoken.Encoding) else None


def token_byte_table(tokenizer):
    """id -> the bytes the tiktoken core decodes it to (an object array; None for an id it does not name), or
    None without a tiktoken core. `b"".join(table[ids])` is the core's `decode_bytes(ids)` without converting
    the ids to a Python list first (1.6x the core's speed on real completion segments, measured)."""
    import numpy as np

    core = fast_decoder(tokenizer)
    if core is None:
        return None
    table = np.full(core.n_vocab, None, dtype=object)
    for token, rank in core._mergeable_ranks.items():
        table[rank] = token
    for token, rank in core._special_tokens.items():
        table[rank] = token.encode("utf-8")
    return table


class SegmentDecoder:
    """Id segments -> text, exactly as `tokenizer.decode(ids, skip_special_tokens=False)` gives it: the one
    decode of completion segments (the validator, the completion grammar, inspect). Construct once per
    tokenizer: it builds the tiktoken core's byte table when the tokenizer has one."""

    def __init__(self, tokenizer, vocab_size: int):
        self.tokenizer = tokenizer
        self.vocab_size = int(vocab_size)
        self.token_bytes = token_byte_table(tokenizer)

    def decode(self, ids, may_be_out_of_range: bool = False) -> str:
        """`ids` a 1-D integer numpy array. With `may_be_out_of_range`, ids outside [0, vocab_size) are left out
        (a sample with such ids is rejected for them; its text is still shown)."""
        if may_be_out_of_range:
            ids = ids[(ids >= 0) & (ids < self.vocab_size)]
        if ids.size == 0:
            return ""
        if self.token_bytes is not None and ids.min() >= 0:
            # The tiktoken core's bytes of each id, joined and decoded as the core does (errors="replace"):
            # the same text as decode(..., skip_special_tokens=False) (tested), without transformers'
            # per-token Python path through a slow PreTrainedTokenizer.
            try:
                return b"".join(self.token_bytes[ids].tolist()).decode("utf-8", errors="replace")
            except (IndexError, TypeError):
                pass   # an id the core does not name: let the tokenizer say what it decodes to
        # transformers checks a list's elements one by one in Python; an array converts in C. Short segments
        # (ids, arguments) are cheaper as lists.
        return self.tokenizer.decode(ids if ids.size > 64 else ids.tolist(), skip_special_tokens=False)
