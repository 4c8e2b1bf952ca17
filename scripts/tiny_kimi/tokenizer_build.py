"""Build the tiny Kimi-format tokenizer the way Kimi-K2.5 ships its own: `tiktoken.model` (byte-level BPE ranks,
1,792 of them, trained here with Kimi's pre-tokenizer regex), 256 reserved special ids after them at K2.5's
offsets (vocab 2,048), `tokenizer_config.json` with `auto_map` to our class `tokenization_tiny_kimi.py`
(`trust_remote_code`), and the chat template that renders as K2.5's does.

Every file is written by this module (no save_pretrained), so a rebuild is byte-identical."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
# The tokenizer class and the chat template are kept once, where they ship (the model directory is what
# trust_remote_code loads); a build into another directory copies them there.
SHIPPED = HERE.parents[1] / "kimi_eagle_data" / "assets" / "tiny-kimi"
TEMPLATE_PATH = SHIPPED / "chat_template.jinja"
CLASS_PATH = SHIPPED / "tokenization_tiny_kimi.py"

BASE_VOCAB = 1792          # BPE ranks (256 single bytes + merges)
RESERVED = 256             # special ids after the base vocabulary, as K2.5 (163,584 + 256 = 163,840)
VOCAB_SIZE = BASE_VOCAB + RESERVED

# Named reserved ids: (offset from the base vocabulary, string, special) — Kimi-K2.5's layout (its base is
# 163,584). special=True: dropped by decode(skip_special_tokens=True); <think>, </think> and the tool-call tokens
# are not special in K2.5 either. The video placeholder's offset is our best reading of K2.5's config.
NAMED: list[tuple[int, str, bool]] = [
    (0, "[BOS]", True), (1, "[EOS]", True), (2, "<|im_end|>", True), (3, "<|im_user|>", True),
    (4, "<|im_assistant|>", True), (6, "<|start_header_id|>", True), (7, "<|end_header_id|>", True),
    (9, "[EOT]", True), (10, "<|im_system|>", True),
    (11, "<|tool_calls_section_begin|>", False), (12, "<|tool_calls_section_end|>", False),
    (13, "<|tool_call_begin|>", False), (14, "<|tool_call_argument_begin|>", False), (15, "<|tool_call_end|>", False),
    (17, "<|im_middle|>", True),
    (18, "<|media_begin|>", True), (19, "<|media_content|>", True), (20, "<|media_end|>", True),
    (21, "<|media_pad|>", True),
    (22, "<think>", False), (23, "</think>", False),
    (24, "<|kimi_k25_video_placeholder|>", True),
    (254, "[UNK]", True), (255, "[PAD]", True),
]
# K2.5's additional_special_tokens (the role and control tokens).
ADDITIONAL_SPECIAL = ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|start_header_id|>", "<|end_header_id|>",
                      "[EOT]", "<|im_system|>", "<|im_middle|>"]



def train_ranks(texts, base_vocab: int = BASE_VOCAB) -> list[bytes]:
    """Byte-level BPE on `texts` with Kimi's regex; returns token bytes in rank order: the 256 single bytes by
    value, then the merged tokens in the order the trainer created them (tiktoken merges by lowest rank)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_shipped_class().PAT_STR), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=base_vocab, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    sym_to_byte = {c: b for b, c in _byte_level_symbols().items()}
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    merged = [bytes(sym_to_byte[c] for c in s) for s, _ in vocab if len(s) > 1]
    ranks = [bytes([b]) for b in range(256)] + merged
    assert len(ranks) == base_vocab and len(set(ranks)) == base_vocab, (len(ranks), base_vocab)
    return ranks


def _shipped_class():
    """The tokenizer class module the model directory ships: Kimi's pre-tokenizer regex (PAT_STR) and the byte
    alphabet are kept there, once, and the ranks are trained with the same ones."""
    import sys
    sys.path.insert(0, str(SHIPPED))
    import tokenization_tiny_kimi  # noqa: E402
    return tokenization_tiny_kimi


def _byte_level_symbols() -> dict[int, str]:
    # The `tokenizers` ByteLevel alphabet; our class uses the same mapping (byte_symbols there).
    return _shipped_class().byte_symbols()


def tokenizer_config() -> dict:
    base = BASE_VOCAB
    added = {str(base + off): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                               "single_word": False, "special": sp} for off, s, sp in NAMED}
    return {
        "added_tokens_decoder": added,
        "additional_special_tokens": ADDITIONAL_SPECIAL,
        "auto_map": {"AutoTokenizer": ["tokenization_tiny_kimi.TinyKimiTokenizer", None]},
        "bos_token": "[BOS]",
        "clean_up_tokenization_spaces": False,
        "eos_token": "[EOS]",
        "model_max_length": 512,
        "pad_token": "[PAD]",
        "tokenizer_class": "TinyKimiTokenizer",
        "unk_token": "[UNK]",
    }


def write_tokenizer(out: Path, ranks: list[bytes]) -> None:
    """tiktoken.model + tokenizer_config.json + special_tokens_map-free config + class file + chat template."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("tokenizer.json", "special_tokens_map.json"):   # the old fast-tokenizer files
        (out / stale).unlink(missing_ok=True)
    (out / "tiktoken.model").write_bytes(
        b"".join(base64.b64encode(t) + b" " + str(r).encode() + b"\n" for r, t in enumerate(ranks)))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    for src in (CLASS_PATH, TEMPLATE_PATH):
        if (out / src.name).resolve() != src:
            shutil.copyfile(src, out / src.name)


def token_id(name: str) -> int:
    return BASE_VOCAB + next(off for off, s, _ in NAMED if s == name)
