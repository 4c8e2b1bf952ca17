"""Token ids of Kimi-K3 segments: each segment encoded on its own, the ids concatenated.

K3's tokenizer never encodes a prompt's joined text. A segment with `allow_special` (a marker) is encoded with
every special-token string allowed; any other segment (names, attribute values, message text) with none, so a
`<|open|>` typed by a user is ordinary text. Because BPE never merges across a segment boundary, the ids of a
prompt are in general not those of its joined text, even where that text holds no special-token string.

Like K3's tokenizer (and K2's), a long text is cut before encoding: into windows of 400,000 characters, and each
window before any run of more than 25,000 whitespace or non-whitespace characters (tiktoken's regex engine gives
out on longer runs); each piece is encoded on its own.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Protocol

_WINDOW_CHARS = 400_000
_MAX_RUN_CHARS = 25_000


class TiktokenLike(Protocol):
    """What encodes text here: a `tiktoken.Encoding` (the `.model` of K3's tokenizer and of our tiny ones)."""

    def encode(self, text: str, *, allowed_special=..., disallowed_special=...) -> list[int]: ...


def _pieces(window: str) -> Iterator[str]:
    """`window` cut before the character that would make a run of one kind (whitespace or not) too long."""
    start, run, in_space = 0, 0, window[:1].isspace()
    for i, char in enumerate(window):
        if char.isspace() != in_space:
            in_space, run = not in_space, 1
            continue
        run += 1
        if run > _MAX_RUN_CHARS:
            yield window[start:i]
            start, run = i, 1
    yield window[start:]


def text_ids(encoding: TiktokenLike, text: str, allow_special: bool) -> list[int]:
    """One segment's ids."""
    ids: list[int] = []
    for at in range(0, len(text), _WINDOW_CHARS):
        for piece in _pieces(text[at:at + _WINDOW_CHARS]):
            if allow_special:
                ids.extend(encoding.encode(piece, allowed_special="all"))
            else:
                ids.extend(encoding.encode(piece, disallowed_special=()))
    return ids


def segment_ids(encoding: TiktokenLike, segments: Iterable[tuple[str, bool]]) -> list[int]:
    """A prompt's ids: every `(text, allow_special)` segment encoded on its own, concatenated."""
    ids: list[int] = []
    for text, allow_special in segments:
        ids.extend(text_ids(encoding, text, allow_special))
    return ids


def encode_segments(tokenizer, segments: Iterable[tuple[str, bool]]) -> list[int]:
    """A prompt's ids through a transformers tokenizer: its tiktoken core where it has one (`.model`, as Kimi's
    tokenizers), else each segment through the tokenizer, special-token strings split unless the segment allows
    them."""
    core = getattr(tokenizer, "model", None)
    if core is not None and hasattr(core, "encode_ordinary"):
        return segment_ids(core, segments)
    ids: list[int] = []
    for text, allow_special in segments:
        ids += tokenizer(text, add_special_tokens=False, split_special_tokens=not allow_special)["input_ids"]
    return ids
