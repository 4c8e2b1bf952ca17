"""Kimi-K3's facts as plain data: its format's tokens and their roles and generation prompts per mode (the efforts
are render.py's), and the two profiles `kimi-k3` and `tiny-kimi-k3` (model facts: paths, lengths, serve flags).

profiles.py makes both `ModelProfile`s whose `chat_format` is K3's (format.py): the stages ask that format for the
renderer, grammar and validator. Token ids are looked up from a tokenizer by string (`K3TokenIds`); the ids
listed here are K3's (163,584 + offset, as K2's reserved range) for the docs and for checking a real tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Mapping

from kimi_eagle_data.formats.kimi_k3.normalize import K3FormatError
from kimi_eagle_data.formats.kimi_k3.render import CLOSE, END_OF_MSG, IMAGE_PLACEHOLDER, OPEN, SEP

BOS, EOS = "[BOS]", "[EOS]"
# K3's special ids (base vocabulary 163,584); `<|end_of_msg|>` sits where K2's `<|im_end|>` was.
SPECIAL_IDS = {BOS: 163584, EOS: 163585, END_OF_MSG: 163586, OPEN: 163587, CLOSE: 163588, SEP: 163589}
# K2-era special tokens: K3's tokenizer code still registers the `<|im_*|>` family by default, so a K3 vocabulary
# may name them (at other ids than K2's). A K3 completion holding one is its own reject (`legacy_k2_token`): a loss
# mask or parser that matches them on K3 data reads nothing or the wrong thing.
LEGACY_K2_TOKENS = ("<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
                    "<|start_header_id|>", "<|end_header_id|>", "[EOT]", "<|tool_calls_section_begin|>",
                    "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                    "<|tool_call_end|>")
# Special tokens no completion may hold (the image placeholder only where the vocabulary names it).
FORBIDDEN_IN_COMPLETION = (BOS, EOS, IMAGE_PLACEHOLDER)

# What every prompt of a mode ends with (the renderer's generation prompt, as text).
GENERATION_PROMPTS = {
    "thinking": f'{OPEN}message role="assistant"{SEP}{OPEN}think{SEP}',
    "instant": f'{OPEN}message role="assistant"{SEP}{OPEN}response{SEP}',
}


@dataclass(frozen=True)
class K3Profile:
    """A K3 model's facts (profiles.py makes each a `ModelProfile`); its tokens, generation prompts and efforts are
    the format's, above."""

    name: str
    model_path: str
    display_name: str
    vocab_size: int | None                  # the model's embedding size; None: the tokenizer's length
    max_seq_len: int
    max_new_tokens: int
    # Launch flags per engine (parser names as registered in SGLang 0.5.23 and vLLM 0.32.0).
    sglang_flags: tuple[str, ...] = ("--trust-remote-code", "--tool-call-parser", "kimi_k3",
                                     "--reasoning-parser", "kimi_k3")
    vllm_flags: tuple[str, ...] = ("--trust-remote-code", "--tool-call-parser", "kimi_k3",
                                   "--enable-auto-tool-choice", "--reasoning-parser", "kimi_k3")
    card_tags: tuple[str, ...] = ("kimi-k3",)
    is_test_model: bool = False
    shipped_drafter: str = ""               # a small EAGLE-3 drafter shipped for a test model (model_profile.py)


KIMI_K3 = K3Profile(name="kimi-k3", model_path="moonshotai/Kimi-K3", display_name="Kimi-K3", vocab_size=163840,
                    max_seq_len=16384, max_new_tokens=10240)
# The tiny stand-in K3 model (kimi_eagle_data/assets/tiny-kimi-k3/, built by scripts/build_tiny_kimi_k3.py): its
# completions reach ~256 tokens (99th percentile 253 in its training corpus), its prompts stay within 766.
# vLLM renders chat requests through its K3 renderer (the tokenizer's own apply_chat_template, ids per segment) when
# it sees K3's architecture (vllm/config/model.py, `tokenizer_mode` "kimi_k3"); the tiny model is a Llama, so its
# profile names the mode (without it vLLM's chat endpoint looks for a Jinja template and answers 400).
TINY_KIMI_K3 = K3Profile(name="tiny-kimi-k3",
                         model_path=str(resources.files("kimi_eagle_data") / "assets" / "tiny-kimi-k3"),
                         display_name="tiny-kimi-k3", vocab_size=None, max_seq_len=1022, max_new_tokens=256,
                         vllm_flags=(*KIMI_K3.vllm_flags, "--tokenizer-mode", "kimi_k3"), is_test_model=True,
                         shipped_drafter=str(resources.files("kimi_eagle_data") / "assets" / "tiny-kimi-k3-eagle3"))
K3_PROFILES = {p.name: p for p in (KIMI_K3, TINY_KIMI_K3)}


@dataclass(frozen=True)
class K3TokenIds:
    """K3's structural tokens resolved to one tokenizer's ids."""

    open: int
    close: int
    sep: int
    end_of_msg: int
    forbidden: Mapping[int, str]        # id -> token string: BOS, EOS, the image placeholder
    legacy: Mapping[int, str]           # id -> token string: the K2-era tokens the vocabulary names

    @classmethod
    def from_vocab(cls, vocab: Mapping[str, int]) -> "K3TokenIds":
        """From a token string -> id mapping (a tokenizer's `get_vocab()`); K3FormatError when a marker is
        missing, i.e. the tokenizer is not K3's."""
        required = (OPEN, CLOSE, SEP, END_OF_MSG, BOS, EOS)
        missing = [t for t in required if t not in vocab]
        if missing:
            raise K3FormatError(f"the tokenizer lacks Kimi-K3's tokens {missing}; use a K3 tokenizer")
        return cls(open=vocab[OPEN], close=vocab[CLOSE], sep=vocab[SEP], end_of_msg=vocab[END_OF_MSG],
                   forbidden={vocab[t]: t for t in FORBIDDEN_IN_COMPLETION if t in vocab},
                   legacy={vocab[t]: t for t in LEGACY_K2_TOKENS if t in vocab})
