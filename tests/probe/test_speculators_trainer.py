"""speculators' own Trainer as the probe drives it (probe/speculators_trainer.py; trainer tier: needs speculators).

On CPU it runs through probe/drafter.py `trainer_device` (speculators 0.9.0's Trainer assumes an accelerator; the
test below shows that it fails without it). It trains on the batches the CPU loop takes, so the two trainers differ
only where speculators' Trainer does more (its gradient clipping at norm 1): on the demo's own arm their drafters'
acceptance on the same held-out prompts is within TOLERANCE of each other."""

from __future__ import annotations

import random

import numpy as np
import pytest

pytestmark = pytest.mark.trainer

TOLERANCE = 0.08        # acceptance (tokens per verify step), absolute: twice the +0.039 scripts/gpu measured


@pytest.fixture(scope="module")
def parts():
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
    from kimi_eagle_data.probe.drafter import DrafterSpec, aux_layer_ids, require_speculators
    from kimi_eagle_data.probe.stage import load_target

    require_speculators()
    target = load_target(str(TINY_MODEL_DIR))
    return target, DrafterSpec(str(TINY_MODEL_DIR), tuple(aux_layer_ids(target.config.num_hidden_layers)))


def _random_rows(n: int = 12):
    from kimi_eagle_data.probe.arms import TrainRow

    rng = random.Random(1)
    return [TrainRow(str(i), "B1", np.array([rng.randrange(1792) for _ in range(80)]),
                     (np.arange(80) >= 20).astype(np.int64)) for i in range(n)]


def test_without_an_accelerator_speculators_trainer_needs_the_cpu_device(parts):
    """The measured reason docs/probe.md gives: 0.9.0's Trainer moves the model to local rank 0, an accelerator."""
    import tempfile

    import torch
    from speculators.train.trainer import Trainer, TrainerConfig

    from kimi_eagle_data.probe.drafter import new_drafter

    if torch.accelerator.is_available():
        pytest.fail("this test measures a machine without an accelerator; the trainer tier runs on CPU")
    _, spec = parts
    config = TrainerConfig(lr=1e-3, num_epochs=1, save_path=tempfile.mkdtemp(), scheduler_type="none")
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
        Trainer(new_drafter(spec, 0), config, torch.utils.data.DataLoader([]))


def test_it_trains_the_cpu_loop_s_batches_and_lowers_the_loss(parts):
    from kimi_eagle_data.probe.trainers import train

    target, spec = parts
    rows = _random_rows()
    loop = train(rows, target, spec, budget=600, seed=0, trainer="cpu-loop")
    short = train(rows, target, spec, budget=600, seed=0, trainer="speculators")
    longer = train(rows, target, spec, budget=6_000, seed=0, trainer="speculators")
    assert (short.steps, short.loss_tokens, short.rows_seen) == (loop.steps, loop.loss_tokens, loop.rows_seen)
    assert longer.steps > short.steps and longer.loss_tokens >= 6_000
    assert longer.last_loss < short.last_loss


def test_its_acceptance_on_the_demo_is_the_cpu_loop_s(parts, demo_run):
    from kimi_eagle_data.cli.options import saved_options
    from kimi_eagle_data.probe.decode import Target
    from kimi_eagle_data.probe.drafter import Eagle3Drafter
    from kimi_eagle_data.probe.split import HELD_OUT
    from kimi_eagle_data.probe.stage import MAX_NEW_TOKENS, ProbeOptions, _arms, acceptance_per_prompt, split_rows
    from kimi_eagle_data.probe.trainers import train
    from kimi_eagle_data.runs import open_run
    from kimi_eagle_data.settings import RunSettings

    target, spec = parts
    workdir, _ = demo_run
    _, saved = saved_options(workdir)
    ctx = open_run(RunSettings(workdir=str(workdir), progress=False, workers=1, **saved), create=False)
    try:
        split = split_rows(ctx, None, [], HELD_OUT, 0, MAX_NEW_TOKENS)
        own = _arms(ctx, ProbeOptions(curve=False, history=False), split.kept, split.firsts)["own"]
        stop = (ctx.tokens.end_of_turn,)
    finally:
        ctx.lock.release()
    prompts = {c: [(r.id, r.prompt_ids) for r in rs[:2]] for c, rs in split.held.items()}   # 16 prompts
    got = {}
    for trainer in ("cpu-loop", "speculators"):
        trained = train(own, target, spec, budget=3_000, seed=0, trainer=trainer)
        per = acceptance_per_prompt(Target(target, spec.aux_layers), Eagle3Drafter(trained.model), prompts, 3,
                                    MAX_NEW_TOKENS, stop)
        pooled = [p for ps in per.values() for p in ps]
        got[trainer] = sum(p["tokens"] for p in pooled) / sum(p["steps"] for p in pooled)
    assert got["cpu-loop"] > 1.0 and abs(got["speculators"] - got["cpu-loop"]) <= TOLERANCE, got
