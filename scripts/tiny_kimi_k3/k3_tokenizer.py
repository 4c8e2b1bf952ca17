"""Build the tiny Kimi-K3-format tokenizer the way Kimi-K3 ships its own: `tiktoken.model` (the BPE ranks),
256 reserved special ids after them at K3's offsets, `tokenizer_config.json` with `auto_map` to our class
`tokenization_tiny_kimi_k3.py` (`trust_remote_code`), and no chat template (K3 ships none: its tokenizer code
renders the chat).

The ranks are tiny-kimi's, byte for byte: Kimi-K3 keeps Kimi-K2's BPE ranks and pre-tokenizer, so the two tiny
tokenizers share theirs as the real ones do (and tiny-kimi's weights are a warm start for the words).
Every file is written here (no save_pretrained), so a rebuild is byte-identical."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
ASSETS = HERE.parents[1] / "kimi_eagle_data" / "assets"
SHIPPED = ASSETS / "tiny-kimi-k3"
CLASS_PATH = SHIPPED / "tokenization_tiny_kimi_k3.py"
RANKS_PATH = ASSETS / "tiny-kimi" / "tiktoken.model"

BASE_VOCAB = 1792          # tiny-kimi's ranks
RESERVED = 256             # as K3 (163,584 + 256)
VOCAB_SIZE = BASE_VOCAB + RESERVED

# Named reserved ids: (offset from the base vocabulary, string, special). K3's markers at their offsets (K3's
# base is 163,584: [BOS] 163584 ... <|sep|> 163589); the media tokens where K2.5 has them (K3's config names
# <|media_pad|> 163605 = +21 as its media_placeholder_token_id); [UNK] and [PAD] last. The `<|im_*|>` strings K3's
# tokenizer code still names (its default additional_special_tokens) keep K2.5's offsets where K3 left them free;
# `<|im_end|>`, `<|im_user|>` and `<|im_assistant|>`, whose K2.5 offsets K3's markers took, sit at +30..+32 (our
# choice: their ids in K3's own config were not found). The `special` flags follow public copies of K3's
# tokenizer_config.json (`<|open|>`, `<|close|>`, `<|sep|>` not special, `<|end_of_msg|>` special); transformers
# skips only the named and additional special tokens in decode(skip_special_tokens=True), so the markers stay. `<|kimi_image_placeholder|>`, the encoder's image marker, is not a
# token (in K3 either): a marker segment holding it encodes as ordinary text.
NAMED: list[tuple[int, str, bool]] = [
    (0, "[BOS]", True), (1, "[EOS]", True), (2, "<|end_of_msg|>", True),
    (3, "<|open|>", False), (4, "<|close|>", False), (5, "<|sep|>", False),
    (6, "<|start_header_id|>", True), (7, "<|end_header_id|>", True), (9, "[EOT]", True),
    (10, "<|im_system|>", True), (17, "<|im_middle|>", True),
    (18, "<|media_begin|>", True), (19, "<|media_content|>", True), (20, "<|media_end|>", True),
    (21, "<|media_pad|>", True),
    (30, "<|im_end|>", True), (31, "<|im_user|>", True), (32, "<|im_assistant|>", True),
    (254, "[UNK]", True), (255, "[PAD]", True),
]
MARKERS = ("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>")
# K3's tokenizer code's default additional_special_tokens (the K2-era role and control tokens).
ADDITIONAL_SPECIAL = ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|start_header_id|>", "<|end_header_id|>",
                      "[EOT]", "<|im_system|>", "<|im_middle|>"]


def tokenizer_config() -> dict:
    added = {str(BASE_VOCAB + off): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                     "single_word": False, "special": sp} for off, s, sp in NAMED}
    return {
        "added_tokens_decoder": added,
        "additional_special_tokens": ADDITIONAL_SPECIAL,
        "auto_map": {"AutoTokenizer": ["tokenization_tiny_kimi_k3.TinyKimiK3Tokenizer", None]},
        "bos_token": "[BOS]",
        "clean_up_tokenization_spaces": False,
        "eos_token": "[EOS]",
        "model_max_length": 1024,
        "pad_token": "[PAD]",
        "tokenizer_class": "TinyKimiK3Tokenizer",
        "unk_token": "[UNK]",
    }


def write_tokenizer(out: Path) -> None:
    """tiktoken.model (tiny-kimi's ranks) + tokenizer_config.json + the class file."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(RANKS_PATH, out / "tiktoken.model")
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    if (out / CLASS_PATH.name).resolve() != CLASS_PATH:
        shutil.copyfile(CLASS_PATH, out / CLASS_PATH.name)


def token_id(name: str) -> int:
    return BASE_VOCAB + next(off for off, s, _ in NAMED if s == name)
