"""Loading the model's own tokenizer and chat template, and fingerprinting both for provenance."""

from __future__ import annotations

import hashlib
from functools import lru_cache

import orjson


class TokenizerLoadError(RuntimeError):
    pass


@lru_cache(maxsize=4)
def load_tokenizer(path: str, revision: str | None = None):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=True)
    except (OSError, ValueError) as e:
        reason = " ".join(str(e).split())   # one line, however many the library's message has
        raise TokenizerLoadError(
            f"cannot load tokenizer {path!r}: {reason} Pass --tokenizer DIR (a local model directory) or "
            "make sure the Hub id is in the local cache") from e
    # Length limits are ours (max_seq_len, checked at prepare), not the tokenizer's: silence its warning.
    tok.model_max_length = 1 << 62
    if not tok.chat_template:
        raise TokenizerLoadError(f"tokenizer {path!r} has no chat template; the data path renders prompts "
                                 "only with the model's own template")
    return tok


def render_prompt(tokenizer, messages, tools) -> list[int]:
    """The model's own template, tools passed natively, generation prompt appended."""
    ids = tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True,
                                        tokenize=True, return_dict=False)
    return list(ids)


def tokenizer_fingerprint(tokenizer) -> dict[str, str]:
    """Hashes of the vocabulary (string -> id, incl. added tokens) and of the chat template."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    vocab_hash = hashlib.sha256(orjson.dumps(vocab)).hexdigest()
    template_hash = hashlib.sha256((tokenizer.chat_template or "").encode()).hexdigest()
    return {"tokenizer_sha256": vocab_hash, "chat_template_sha256": template_hash,
            "vocab_size": str(len(tokenizer))}
