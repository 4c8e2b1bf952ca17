"""Kimi-K3's facts as data: token ids come from the tokenizer by string, and a tokenizer without K3's markers is
one line naming them."""

from __future__ import annotations

import pytest

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.profile import PROFILES
from kimi_eagle_data.formats.kimi_k3.facts import K3_PROFILES, SPECIAL_IDS, K3TokenIds
from tests.formats.kimi_k3.k3_tokens import k3_vocab


def test_ids_are_read_from_the_vocabulary_legacy_and_forbidden_apart():
    vocab = k3_vocab()
    ids = K3TokenIds.from_vocab(vocab)
    markers = ("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>")
    assert (ids.open, ids.close, ids.sep, ids.end_of_msg) == tuple(vocab[t] for t in markers)
    assert set(ids.legacy.values()) == {"<|im_end|>", "<|im_user|>"}       # the ones this vocabulary names
    assert set(ids.forbidden.values()) == {"[BOS]", "[EOS]"}              # no image placeholder in it


def test_a_tokenizer_without_k3s_markers_is_one_line():
    with pytest.raises(KimiDataError, match=r"lacks Kimi-K3's tokens \['<\|open\|>'"):
        K3TokenIds.from_vocab({"[BOS]": 0, "[EOS]": 1, "<|im_end|>": 2})


def test_k3s_ids_follow_k2s_reserved_range_and_the_profiles_are_commands_profiles():
    assert sorted(SPECIAL_IDS.values()) == list(range(163584, 163590))
    assert set(K3_PROFILES) == {"kimi-k3", "tiny-kimi-k3"} and set(K3_PROFILES) <= set(PROFILES)
