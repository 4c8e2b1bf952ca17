"""Greedy speculative decoding in-process, and the acceptance length it measures.

Each verify step drafts up to k tokens after the committed text, runs the target once over the last committed token
and the drafts (its KV cache holds everything before), keeps the drafts up to the first one the target's greedy
choice disagrees with, and adds the target's own token there. So the output is plain greedy decoding's, token for
token, whatever the drafter proposes; the drafter only changes how many tokens each target step yields.

Acceptance length = tokens the verify steps yielded / verify steps, pooled over every step of every prompt (not a
mean of per-prompt means), as SGLang reports it per request (completion tokens over verify steps). The first token,
from the prompt's prefill, is no verify step's and is left out of both counts.

The drafter is an interface (`Drafter`): the EAGLE-3 drafter (probe/drafter.py), and in the tests an oracle that
proposes the target's own next tokens (acceptance k+1) and a random one (≈ 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import torch


@dataclass
class DraftState:
    """What a drafter sees before a verify step: the committed ids (prompt and output so far) and the target's
    auxiliary hidden states at every committed position but the last, [len(ids) - 1, layers × hidden] (the last
    token was chosen by the target and not yet run through it)."""

    ids: list[int]
    aux: torch.Tensor


class Drafter(Protocol):
    def propose(self, state: DraftState, k: int) -> list[int]:
        """Up to k token ids (target vocabulary) to follow `state.ids`."""


class Target:
    """A causal LM (transformers) run greedily with its KV cache, reporting the hidden states EAGLE-3 reads.

    `aux_layers`: hidden-state indices as transformers' `output_hidden_states` numbers them (0 the embeddings, i the
    output of decoder layer i-1): what vLLM's hidden-state extraction captures for layer id i, the input of layer i."""

    def __init__(self, model, aux_layers: Sequence[int]):
        import inspect

        from transformers import DynamicCache

        self.model = model
        # transformers renames `past_key_values` to `cache` (5.25 warns; the old name goes in 5.40)
        self._cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.aux_layers = tuple(aux_layers)
        self._cache_type = DynamicCache
        self.cache = None
        self.length = 0

    def start(self) -> None:
        self.cache = self._cache_type()
        self.length = 0

    @torch.no_grad()
    def extend(self, ids: Sequence[int]) -> tuple[list[int], torch.Tensor]:
        """Run `ids` after what the cache holds: the greedy next token after each of them, and the auxiliary hidden
        states at each, [len(ids), layers × hidden]."""
        x = torch.tensor([list(ids)], dtype=torch.long, device=self.model.device)
        positions = torch.arange(self.length, self.length + len(ids), device=x.device).unsqueeze(0)
        out = self.model(input_ids=x, use_cache=True, position_ids=positions, output_hidden_states=True,
                         **{self._cache_arg: self.cache})
        self.cache = out.past_key_values
        self.length += len(ids)
        aux = torch.cat([out.hidden_states[i][0] for i in self.aux_layers], dim=-1)
        return out.logits[0].argmax(-1).tolist(), aux

    def keep(self, n: int) -> None:
        """Forget every cached position from `n` on (drafts the target rejected)."""
        self.cache.crop(n - self.length)           # negative: positions removed from the end (any transformers 5)
        self.length = n


@dataclass
class Decoded:
    output: list[int]                                   # the generated ids (stop token included when reached)
    step_tokens: list[int] = field(default_factory=list)   # tokens each verify step yielded
    step_drafted: list[int] = field(default_factory=list)  # drafts each verify step checked

    @property
    def steps(self) -> int:
        return len(self.step_tokens)

    @property
    def tokens(self) -> int:
        return sum(self.step_tokens)


def greedy(target: Target, prompt: Sequence[int], max_new_tokens: int, stop_ids: Sequence[int] = ()) -> list[int]:
    """Plain greedy decoding, one target step per token: what speculative decoding must reproduce."""
    target.start()
    nxt, _ = target.extend(prompt)
    out = [nxt[-1]]
    while len(out) < max_new_tokens and out[-1] not in stop_ids:
        nxt, _ = target.extend([out[-1]])
        out.append(nxt[-1])
    return out


def speculative(target: Target, drafter: Drafter, prompt: Sequence[int], k: int, max_new_tokens: int,
                stop_ids: Sequence[int] = ()) -> Decoded:
    """Greedy speculative decoding of `prompt` with up to `k` drafts per verify step."""
    stops = set(stop_ids)
    target.start()
    nxt, aux = target.extend(prompt)
    ids = list(prompt) + [nxt[-1]]
    done = Decoded([nxt[-1]])
    while len(done.output) < max_new_tokens and done.output[-1] not in stops:
        room = max_new_tokens - len(done.output)
        drafts = list(drafter.propose(DraftState(ids, aux), min(k, room - 1)))[:max(0, min(k, room - 1))] \
            if room > 1 else []
        base = target.length                      # cached positions: every committed id but the last
        choice, step_aux = target.extend([ids[-1], *drafts])
        accepted = 0
        while accepted < len(drafts) and drafts[accepted] == choice[accepted]:
            accepted += 1
        new = [*drafts[:accepted], choice[accepted]]
        target.keep(base + 1 + accepted)           # the last id and the accepted drafts; the target's token is next
        aux = torch.cat([aux, step_aux[:accepted + 1]])
        for n, t in enumerate(new):               # a stop token ends the output, as an engine stops there
            if t in stops:
                new = new[:n + 1]
                break
        ids += new
        done.output += new
        done.step_tokens.append(len(new))
        done.step_drafted.append(len(drafts))
    return done
