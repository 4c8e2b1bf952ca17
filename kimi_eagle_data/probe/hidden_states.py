"""The target's hidden states that EAGLE-3 trains on, computed in-process for a model transformers loads.

speculators' layout, as its vLLM hidden-state extraction writes it: for layer id i the hidden state entering decoder
layer i (transformers' `output_hidden_states[i]`; 0 is the embeddings), for the auxiliary layers (low, mid, high)
concatenated, and the last layer's output before the final norm as `verifier_last_hidden_states` (the drafter applies
the target's norm and lm_head to it for the KL target). Which layers: probe/drafter.py `aux_layer_ids`.
"""

from __future__ import annotations

from typing import Sequence

import torch


def final_norm(model) -> torch.nn.Module:
    return model.get_decoder().norm


@torch.no_grad()
def target_states(model, ids: Sequence[int], aux_layers: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(auxiliary states [L, len(aux_layers) × hidden], last layer before the final norm [L, hidden]) of one row."""
    captured: list[torch.Tensor] = []
    hook = final_norm(model).register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
    try:
        out = model(input_ids=torch.tensor([list(ids)], dtype=torch.long, device=model.device),
                    output_hidden_states=True, use_cache=False)
    finally:
        hook.remove()
    aux = torch.cat([out.hidden_states[i][0] for i in aux_layers], dim=-1)
    return aux, captured[-1][0]
