"""Build the tiny Kimi-format tokenizer: byte-level BPE (vocab 2,048 incl. added tokens), Kimi's pre-tokenizer
regex, Kimi's special tokens by name (same special / non-special flags as Kimi-K2.5), a K2.5-like chat template."""

from __future__ import annotations

from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

TEMPLATE_PATH = Path(__file__).with_name("chat_template.jinja")

# Kimi-K2's tiktoken pat_str (REFERENCE.md), alternatives joined by "|".
KIMI_PAT = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])

# (string, special) in Kimi-K2.5's id order. special=True: dropped by decode(skip_special_tokens=True).
ADDED_TOKENS: list[tuple[str, bool]] = [
    ("[BOS]", True), ("[EOS]", True), ("<|im_end|>", True), ("<|im_user|>", True), ("<|im_assistant|>", True),
    ("<|im_system|>", True),
    ("<|tool_calls_section_begin|>", False), ("<|tool_calls_section_end|>", False), ("<|tool_call_begin|>", False),
    ("<|tool_call_argument_begin|>", False), ("<|tool_call_end|>", False),
    ("<|im_middle|>", True),
    ("<|media_start|>", True), ("<|media_content|>", True), ("<|media_end|>", True), ("<|media_pad|>", True),
    ("<think>", False), ("</think>", False),
    ("[UNK]", True), ("[PAD]", True),
]

VOCAB_SIZE = 2048


def build_tokenizer(texts, vocab_size: int = VOCAB_SIZE):
    """Train the BPE on `texts` (an iterable of strings) and return a PreTrainedTokenizerFast."""
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(KIMI_PAT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(ADDED_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([
        AddedToken(s, special=sp, normalized=False, single_word=False, lstrip=False, rstrip=False)
        for s, sp in ADDED_TOKENS
    ])
    # Mark the special ones as special at the Rust level too (decode(skip_special_tokens=True) drops only these).
    for s, sp in ADDED_TOKENS:
        if sp:
            tok.add_special_tokens([AddedToken(s, special=True, normalized=False)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="[BOS]", eos_token="[EOS]", unk_token="[UNK]", pad_token="[PAD]",
        clean_up_tokenization_spaces=False,
        model_max_length=512,
    )
    fast.chat_template = TEMPLATE_PATH.read_text()
    return fast
