"""K3 token ids are per segment: each segment encoded on its own (markers with special tokens allowed, all other
text with none), the ids concatenated — not the encoding of the joined text. Shown on a tokenizer with K3's
special-token layout over the tiny model's BPE ranks (K3's own ranks are K2's, not in this repository)."""

from __future__ import annotations

import pytest
import tiktoken

from kimi_eagle_data.formats.kimi_k3.render import joined_text, render_segments
from kimi_eagle_data.formats.kimi_k3.segment_ids import segment_ids, text_ids
from tests.formats.kimi_k3.k3_tokens import k3_encoding


@pytest.fixture(scope="module")
def encoding() -> tiktoken.Encoding:
    return k3_encoding()


def joined_ids(encoding, segments) -> list[int]:
    return encoding.encode(joined_text(segments), allowed_special="all")


def test_a_typed_marker_is_text_per_segment_but_a_marker_in_the_joined_text(encoding):
    segments = render_segments([{"role": "user", "content": "what is <|open|>?"}])
    ours, joined = segment_ids(encoding, segments), joined_ids(encoding, segments)
    open_id = encoding.encode("<|open|>", allowed_special="all")[0]
    user_text = text_ids(encoding, "what is <|open|>?", allow_special=False)
    assert open_id not in user_text and len(user_text) > 3
    markers = sum(s == ("<|open|>", True) for s in segments)      # effort message, user message, generation prompt
    assert ours.count(open_id) == markers == joined.count(open_id) - 1 == 4
    assert ours != joined


def test_bpe_never_merges_across_a_segment_boundary(encoding):
    """A name attribute ending in `{` (`name="Bob{"`): per segment `{` and the closing `"` stay two tokens; the
    joined text's pre-tokenizer makes `{"` one piece, which these ranks merge into one token. Same text, other ids."""
    segments = render_segments([{"role": "user", "content": "hi", "name": "Bob{"}], effort=None)
    merged = encoding.encode('{"')
    assert len(merged) == 1
    ours, joined = segment_ids(encoding, segments), joined_ids(encoding, segments)
    assert merged[0] in joined and merged[0] not in ours
    assert encoding.decode(ours) == encoding.decode(joined) == joined_text(segments)


def test_segments_without_a_boundary_effect_give_the_joined_texts_ids(encoding):
    segments = render_segments([{"role": "user", "content": "Hello there"}], effort=None)
    assert segment_ids(encoding, segments) == joined_ids(encoding, segments)


def test_long_runs_are_cut_as_k3s_tokenizer_cuts_them(encoding):
    """A run of more than 25,000 whitespace (or non-whitespace) characters is encoded in pieces of 25,000."""
    spaces = " " * 60_000
    pieces = [" " * 25_000, " " * 25_000, " " * 10_000]
    assert text_ids(encoding, spaces, False) == [i for p in pieces for i in encoding.encode(p)]
    mixed = "ab " * 10 + "x" * 30_000
    assert text_ids(encoding, mixed, False) == (encoding.encode("ab " * 10 + "x" * 24_999)
                                                + encoding.encode("x" * 5_001))
