"""speculators' EAGLE-3 model as the probe drives it (trainer tier: needs speculators, the [probe] extra).

The drafts `Eagle3Drafter.propose` makes one token at a time with a KV cache are the drafts speculators' own forward
makes at the same position when its TTT steps are fed those drafts: the probe drafts with speculators' model, not with
an EAGLE-3 of its own. A short CPU training run lowers the loss of its own first batch."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.trainer


@pytest.fixture(scope="module")
def parts():
    from kimi_eagle_data.probe.decode import Target
    from kimi_eagle_data.probe.drafter import DrafterSpec, require_speculators
    from kimi_eagle_data.probe.drafter import aux_layer_ids
    from kimi_eagle_data.probe.stage import load_target
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    require_speculators()
    target = load_target(str(TINY_MODEL_DIR))
    aux = aux_layer_ids(target.config.num_hidden_layers)
    return target, DrafterSpec(str(TINY_MODEL_DIR), tuple(aux)), Target(target, aux)


def test_the_drafts_are_speculators_forward_s(parts):
    from kimi_eagle_data.probe.decode import DraftState
    from kimi_eagle_data.probe.drafter import Eagle3Drafter, new_drafter
    from kimi_eagle_data.probe.hidden_states import target_states

    target, spec, _ = parts
    rng = random.Random(0)
    for seed in range(3):
        model = new_drafter(spec, seed).eval()
        ids = [rng.randrange(1792) for _ in range(rng.randrange(8, 60))]
        aux, _ = target_states(target, ids, spec.aux_layers)
        state = DraftState(ids, aux[:-1])
        k = spec.ttt_steps
        drafts = Eagle3Drafter(model).propose(state, k)
        # speculators' forward over the (token i+1, state i) pairs, its TTT steps fed the drafts after the last one
        n = len(ids) - 1
        tail = torch.tensor([ids[1:] + drafts[:-1]])
        hidden = torch.cat([aux[:-1], torch.zeros(k - 1, aux.shape[1])]).unsqueeze(0)
        with torch.no_grad():
            steps = model(hidden_states=hidden, input_ids=tail, document_ids=torch.zeros_like(tail), ttt_steps=k)
        assert [int(s[0, n - 1]) for s in steps] == drafts


def test_a_short_training_run_lowers_the_loss(parts):
    from kimi_eagle_data.probe.arms import TrainRow
    from kimi_eagle_data.probe.trainers import train

    target, spec, _ = parts
    rng = random.Random(1)
    rows = []
    for i in range(12):
        ids = np.array([rng.randrange(1792) for _ in range(80)])
        rows.append(TrainRow(str(i), "B1", ids, (np.arange(80) >= 20).astype(np.int64)))
    short = train(rows, target, spec, budget=600, seed=0)
    longer = train(rows, target, spec, budget=12_000, seed=0)
    assert longer.steps > short.steps and longer.loss_tokens >= 12_000
    assert longer.last_loss < short.last_loss
