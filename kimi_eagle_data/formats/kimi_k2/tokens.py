"""Kimi-K2.5's tokens resolved to one tokenizer's ids (`K2Tokens`): the profile names them by string, so the same
profile serves the real Kimi-K2.5 tokenizer (163,840 ids) and the embedded tiny one (2,048 ids); no id is
hard-coded."""

from __future__ import annotations

from dataclasses import dataclass

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.formats.kimi_k2.profiles import K2Profile


class TokenLookupError(KimiDataError, ValueError):
    pass


@dataclass(frozen=True)
class K2Tokens:
    """A K2.5 profile's token strings resolved to ids of one concrete tokenizer (the `FormatTokens` of K2.5)."""

    profile: K2Profile
    ids: dict[str, int]           # token string -> id
    forbidden_ids: frozenset[int]

    def __getattr__(self, role: str) -> int:
        # tokens.end_of_turn, tokens.think_close, ... -> id
        structural = self.profile.structural_tokens()
        if role in structural:
            return self.ids[structural[role]]
        raise AttributeError(role)

    def token_name(self, token_id: int) -> str:
        """The profile's name of one of its token ids (for messages)."""
        return next(t for t, i in self.ids.items() if i == token_id)

    @classmethod
    def from_tokenizer(cls, profile: K2Profile, tokenizer) -> "K2Tokens":
        vocab = tokenizer.get_vocab()
        wanted = set(profile.structural_tokens().values()) | set(profile.forbidden_in_completion)
        ids: dict[str, int] = {}
        missing = []
        for tok in sorted(wanted):
            if tok in vocab:
                ids[tok] = vocab[tok]
            elif tok not in profile.optional_tokens:
                missing.append(tok)
        if missing:
            raise TokenLookupError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} lacks the {profile.name} tokens "
                f"{missing}; use a tokenizer of that model or pick another --profile"
            )
        values = list(ids.values())
        if len(set(values)) != len(values):
            raise TokenLookupError(f"tokenizer maps several {profile.name} special tokens to one id: {ids}")
        forbidden = frozenset(ids[t] for t in profile.forbidden_in_completion if t in ids)
        return cls(profile=profile, ids=ids, forbidden_ids=forbidden)
