"""The tokenizer code our tiny Kimi-format models share: a `PreTrainedTokenizer` on a `tiktoken.Encoding`, as
Moonshot's Kimi tokenizers are (K2.5's `TikTokenTokenizer`, and K3's, which keeps K2's ranks and pre-tokenizer).

The shipped classes (`assets/tiny-kimi/tokenization_tiny_kimi.py`, `assets/tiny-kimi-k3/tokenization_tiny_kimi_k3.py`)
subclass `TiktokenKimiTokenizer` and add their chat rendering; transformers imports them through
`trust_remote_code`, so they reach this module by its absolute name. What it does, as Kimi's tokenizers do:

- BPE ranks come from `tiktoken.model` (one `base64(token bytes) rank` line per token) and a `tiktoken.Encoding`
  built with Kimi's pre-tokenizer regex does the work; it is kept in `.model` (the validator decodes text
  segments through it: `model.decode(ids)` equals `decode(ids, skip_special_tokens=False)`, much faster);
- 256 reserved special ids follow the base vocabulary; the named ones come from `added_tokens_decoder`, an
  unnamed id decodes as `<|reserved_token_{id}|>`;
- `encode(text)` with no other argument encodes with every special-token string allowed (tiktoken
  `allowed_special="all"`), `allow_special_tokens=False` with none; with other arguments it takes transformers'
  generic path.
"""

from __future__ import annotations

import os
from shutil import copyfile

import tiktoken
from tiktoken.load import load_tiktoken_bpe
from transformers import PreTrainedTokenizer

VOCAB_FILES_NAMES = {"vocab_file": "tiktoken.model"}

# Kimi-K2's pre-tokenizer (tiktoken pat_str), alternatives joined by "|"; K2.5's and K3's tokenizers use it too.
PAT_STR = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])


def byte_symbols() -> dict[int, str]:
    """Byte -> a printable character: the byte-level alphabet token strings are written in (printable ASCII and
    Latin-1 bytes stand for themselves, the others are shifted past 255), so every token has a str name."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    out, shift = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + shift)
            shift += 1
    return out


class TiktokenKimiTokenizer(PreTrainedTokenizer):
    """The tiktoken-backed part of a Kimi tokenizer (module docstring); a subclass adds its chat rendering."""

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]
    num_reserved_special_tokens = 256
    pat_str = PAT_STR

    def __init__(self, vocab_file, bos_token="[BOS]", eos_token="[EOS]", unk_token="[UNK]", pad_token="[PAD]",
                 added_tokens_decoder=None, **kwargs):
        if not os.path.isfile(vocab_file):
            raise OSError(f"{type(self).__name__}: BPE ranks file {vocab_file!r} not found")
        named = {int(i): getattr(t, "content", None) or t["content"] for i, t in (added_tokens_decoder or {}).items()}
        self.vocab_file = vocab_file
        ranks = load_tiktoken_bpe(vocab_file)
        base = len(ranks)
        self.special_tokens = {named.get(i, f"<|reserved_token_{i}|>"): i
                               for i in range(base, base + self.num_reserved_special_tokens)}
        self.model = tiktoken.Encoding(name=os.path.basename(vocab_file), pat_str=self.pat_str,
                                       mergeable_ranks=ranks, special_tokens=self.special_tokens)
        self.n_words = self.model.n_vocab
        sym = byte_symbols()
        self.byte_decoder = {c: b for b, c in sym.items()}
        self.decoder = {i: "".join(sym[b] for b in self.model.decode_single_token_bytes(i))
                        for i in range(self.n_words)}
        self.encoder = {s: i for i, s in self.decoder.items()}
        self.unk_id = self.special_tokens[str(unk_token)]
        super().__init__(bos_token=bos_token, eos_token=eos_token, unk_token=unk_token, pad_token=pad_token,
                         added_tokens_decoder=added_tokens_decoder, **kwargs)

    # -- Kimi's fast paths: no other arguments -> tiktoken directly ------------------------------------------

    def encode(self, text, allow_special_tokens: bool = True, **kwargs):
        if kwargs or not isinstance(text, str):
            return super().encode(text, **kwargs)
        if allow_special_tokens:
            return self.model.encode(text, allowed_special="all")
        return self.model.encode(text, disallowed_special=())

    def decode(self, token_ids, **kwargs):
        if kwargs:
            return super().decode(token_ids, **kwargs)
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        return self.model.decode([int(i) for i in token_ids])

    # -- what PreTrainedTokenizer needs --------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self.n_words

    def get_vocab(self) -> dict[str, int]:
        return dict(self.encoder)

    def _tokenize(self, text, **kwargs):
        return [self.decoder[t] for t in self.model.encode(text, allowed_special="all")]

    def _convert_token_to_id(self, token):
        return self.encoder.get(token, self.unk_id)

    def _convert_id_to_token(self, index):
        return self.decoder.get(index)

    def convert_tokens_to_string(self, tokens) -> str:
        return bytes(self.byte_decoder[c] for c in "".join(tokens)).decode("utf-8", "replace")

    @staticmethod
    def clean_up_tokenization(out_string: str) -> str:
        return out_string

    def save_vocabulary(self, save_directory, filename_prefix=None):
        if not os.path.isdir(save_directory):
            raise ValueError(f"vocabulary path ({save_directory}) should be a directory")
        out = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + "tiktoken.model")
        if os.path.abspath(self.vocab_file) != os.path.abspath(out):
            copyfile(self.vocab_file, out)
        return (out,)
