"""Kimi-K3's profiles as the registry (kimi_eagle_data/profile.py) holds them: `kimi-k3` and `tiny-kimi-k3`, built
from K3's facts (facts.py) as `ModelProfile`s whose `chat_format` is K3's (format.py). Everything about K3's tokens
stays in facts.py and the format; the profile names only the markers a tokenizer must round-trip.
"""

from __future__ import annotations

from dataclasses import replace

from kimi_eagle_data.formats.kimi_k3.facts import (FORBIDDEN_IN_COMPLETION, KIMI_K3 as K3_FACTS, SPECIAL_IDS,
                                                   TINY_KIMI_K3 as TINY_K3_FACTS, K3Profile)
from kimi_eagle_data.model_profile import ModelProfile, SamplingDefaults


def model_profile(k3: K3Profile) -> ModelProfile:
    """A K3 profile's facts as a `ModelProfile`."""
    sampling = SamplingDefaults(max_new_tokens=k3.max_new_tokens, temperature=1.0, top_p=0.95)
    return ModelProfile(
        name=k3.name, model_path=k3.model_path, chat_format="kimi-k3",
        special_tokens=tuple(dict.fromkeys((*SPECIAL_IDS, *FORBIDDEN_IN_COMPLETION))),
        sampling=sampling, instant_sampling=replace(sampling, temperature=0.6),
        max_seq_len=k3.max_seq_len, vocab_size=k3.vocab_size, display_name=k3.display_name,
        card_tags=k3.card_tags, sglang_flags=k3.sglang_flags, vllm_flags=k3.vllm_flags,
        is_test_model=k3.is_test_model, shipped_drafter=k3.shipped_drafter)


KIMI_K3, TINY_KIMI_K3 = model_profile(K3_FACTS), model_profile(TINY_K3_FACTS)
