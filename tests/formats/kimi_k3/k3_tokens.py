"""A tokenizer with Kimi-K3's special-token layout over the tiny model's BPE ranks (K3's own ranks, K2's, are not in
this repository), for the K3 tests: its special tokens, per-segment ids and a decoder."""

from __future__ import annotations

import importlib.util
from functools import lru_cache

import tiktoken
from tiktoken.load import load_tiktoken_bpe

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

# K3's named reserved ids, as offsets from the base vocabulary (K3: 163584 + offset); two K2-era names after them,
# as K3's tokenizer code registers that family too.
K3_SPECIALS = {"[BOS]": 0, "[EOS]": 1, "<|end_of_msg|>": 2, "<|open|>": 3, "<|close|>": 4, "<|sep|>": 5,
               "<|im_end|>": 6, "<|im_user|>": 7}


@lru_cache(maxsize=1)
def k3_encoding() -> tiktoken.Encoding:
    spec = importlib.util.spec_from_file_location("tiny_tokenizer_code", TINY_MODEL_DIR / "tokenization_tiny_kimi.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)      # for K2's pre-tokenizer pattern, which K3 keeps
    ranks = load_tiktoken_bpe(str(TINY_MODEL_DIR / "tiktoken.model"))
    return tiktoken.Encoding("k3-layout-test", pat_str=code.PAT_STR, mergeable_ranks=ranks,
                             special_tokens={name: len(ranks) + at for name, at in K3_SPECIALS.items()})


def k3_vocab() -> dict[str, int]:
    """The special part of the vocabulary, token string -> id (what `K3TokenIds.from_vocab` reads)."""
    encoding = k3_encoding()
    return {name: encoding.encode_single_token(name) for name in K3_SPECIALS}
