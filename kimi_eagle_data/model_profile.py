"""What a model profile is: the `ModelProfile` record (every fact about a model that is not its chat format's, as
plain data), the modes and the sampling defaults.

A format's own facts (its tokens by string, their roles, its generation prompts) live with the format, in its folder
(Kimi-K2.5's: `formats/kimi_k2/tokens.py`, `K2_TOKENS`; Kimi-K3's: `formats/kimi_k3/facts.py`); a profile holds only
model facts, and the token strings the model's tokenizer must decode back to themselves (`special_tokens`).

This module imports no format: each format folder (formats/) builds its profiles from these types, and the
registry (profile.py) imports those folders and registers their profiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class SamplingDefaults:
    max_new_tokens: int = 10240
    temperature: float = 1.0
    top_p: float = 0.95


# The two ways of calling the model (docs/data-format.md, `mode`): thinking (the chat template's default: the
# generation prompt opens the reasoning, the completion is reasoning, its end, the answer) and instant (the
# generation prompt skips the reasoning, the completion is the answer directly).
THINKING, INSTANT = "thinking", "instant"
MODES = (THINKING, INSTANT)


@dataclass(frozen=True, kw_only=True)
class ModelProfile:
    name: str
    model_path: str                      # what production loads (HF id or directory)
    # The chat format's name: `kimi_eagle_data.formats.format_of(profile)` is what stages ask for everything
    # format-specific (renderer, generation prompts, grammar and validator, stop id, special-token text). A name,
    # not the object: the formats sit above this module (they read profiles and run the validators).
    chat_format: str
    # Every special-token string the format reads by name: each one the tokenizer names must decode back to itself
    # and be that id's added token (prompts/tokenizer.py, `check_profile_tokens`); one it lacks is skipped here
    # (the format's own token lookup names the required ones).
    special_tokens: tuple[str, ...] = ()
    # The model's embedding size: every generated id must be below it (the tokenizer may name a few more).
    # None: the tokenizer's length.
    vocab_size: int | None = None
    sampling: SamplingDefaults = field(default_factory=SamplingDefaults)
    # Sampling defaults in instant mode (max_new_tokens: `sampling`'s).
    instant_sampling: SamplingDefaults = field(default_factory=SamplingDefaults)
    max_seq_len: int = 16384
    # SGLang launch flags specific to this model.
    sglang_flags: tuple[str, ...] = ()
    # vLLM launch flags specific to this model (`kimi-data serve --engine vllm`).
    vllm_flags: tuple[str, ...] = ()
    # A published EAGLE-3 drafter the engine can run while it generates (`kimi-data serve --draft`), and the
    # speculation it is served with: draft steps (tokens proposed per step chain), the tree's top-k per step, and
    # the draft tokens verified per step (SGLang's --speculative-num-steps / -eagle-topk / -num-draft-tokens; vLLM's
    # num_speculative_tokens is the steps).
    draft_model: str = ""
    # The small EAGLE-3 drafter shipped for an embedded test model (a directory in speculators' format, trained by
    # scripts/train_tiny_drafter.py): the demo reports its acceptance on the data it built. Empty: none.
    shipped_drafter: str = ""
    draft_steps: int = 3
    draft_topk: int = 1
    draft_tokens: int = 4
    # How the dataset card names the model, and its Hub tags.
    display_name: str = ""
    card_tags: tuple[str, ...] = ()
    # A test stand-in (the embedded tiny model): its card says "do not train on it".
    is_test_model: bool = False
    # The chat template's own arguments beyond the mode (`thinking`), each with the model's template's default: the
    # format passes them to the template, and a run may set one (Kimi-K2.6's `preserve_thinking`,
    # `--preserve-thinking`). A run cannot set an argument its profile does not name.
    template_options: Mapping[str, Any] = field(default_factory=dict)

    def mode_sampling(self, mode: str) -> SamplingDefaults:
        """The sampling defaults of `mode` (a partition's or the run's settings override them)."""
        return self.instant_sampling if mode == INSTANT else self.sampling


def model_vocab_size(profile: ModelProfile, tokenizer) -> int:
    """The one bound on token ids, used by prepare (prompts), the engines (requests and answers) and the
    validator: the model's embedding size, i.e. the profile's `vocab_size` when it names one (Kimi-K2.5's
    tokenizer names a few ids past the model's 163,840), else the tokenizer's length. An id at or above it
    cannot be embedded: real SGLang and vLLM crash on such a prompt id."""
    return int(profile.vocab_size or len(tokenizer))
