"""Training a drafter: speculators' model, its loss and its batch layout, and the CPU loop (`train_cpu_loop`), one of
the two trainers probe/trainers.py chooses between (the other: speculators' own `Trainer`, probe/speculators_trainer.py).

Both train on the same batches (`planned_batches`). The loop's step: rows packed into one sequence of `seq_len`
tokens by speculators' own `CollateFn` with `shift_batch` (the (token i+1, state i) alignment), the model's forward
with its TTT steps and the eager `kl_div` loss, AdamW at speculators' default learning rate. Hidden states come from the target for each packed row as it is drawn
(probe/hidden_states.py): nothing is cached, so memory stays flat whatever the data's size.

A run stops at its loss-token budget (tokens with loss_mask 1 after the shift, summed over steps), so arms with
rows of different lengths are trained on the same number of loss tokens; rows are drawn in a seeded order and
drawn again (another epoch, reshuffled) when the budget outlasts them.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from kimi_eagle_data.probe.drafter import LEARNING_RATE, DrafterSpec, loss_config, new_drafter
from kimi_eagle_data.probe.hidden_states import target_states

if TYPE_CHECKING:       # rows with ids and a mask (probe/arms.py); not imported, so that scripts/gpu needs no pyarrow
    from kimi_eagle_data.probe.arms import TrainRow

log = logging.getLogger(__name__)

SEQ_LEN = 512
@dataclass
class Trained:
    model: object
    steps: int
    loss_tokens: int
    rows_seen: int
    seconds: float
    last_loss: float


def sample(row: TrainRow, target, aux_layers: Sequence[int], seq_len: int) -> dict[str, torch.Tensor]:
    ids = list(row.ids[:seq_len + 1])
    aux, last = target_states(target, ids, aux_layers)
    n = len(ids)
    return {"input_ids": torch.tensor(ids, dtype=torch.long), "hidden_states": aux, "verifier_last_hidden_states": last,
            "loss_mask": torch.tensor(list(row.mask[:n]), dtype=torch.long), "lengths": torch.tensor([n]),
            "position_ids": torch.arange(n)}


def _order(n: int, rng: random.Random):
    while True:
        idx = list(range(n))
        rng.shuffle(idx)
        yield from idx


def batch_loss_tokens(rows: list[TrainRow], seq_len: int) -> int:
    """Loss tokens of rows packed into one sequence: each row's mask after the shift (token i+1 beside state i), the
    pack cut at `seq_len`, as speculators' `CollateFn` with `shift_batch` lays them out."""
    masks = [np.asarray(r.mask[1:min(len(r.ids), seq_len + 1)]) for r in rows]
    return int(np.concatenate(masks)[:seq_len].sum()) if masks else 0


def planned_batches(rows: list[TrainRow], seq_len: int, budget: int, seed: int) -> tuple[list[list[int]], int]:
    """The batches that train a drafter on `rows` to `budget` loss tokens, as row indices: rows drawn in a seeded
    order (reshuffled each pass) and packed until a batch holds `seq_len` tokens; a batch without a loss token is
    left out. Also the rows drawn."""
    if not rows or not any(any(r.mask) for r in rows):
        raise ValueError("no row has a loss token")
    order = _order(len(rows), random.Random(seed))
    batches: list[list[int]] = []
    done = drawn = 0
    while done < budget:
        batch, tokens = [], 0
        while tokens < seq_len:
            i = next(order)
            batch.append(i)
            tokens += min(len(rows[i].ids), seq_len + 1) - 1
            drawn += 1
        got = batch_loss_tokens([rows[i] for i in batch], seq_len)
        if got:
            batches.append(batch)
            done += got
    return batches, drawn


def train_cpu_loop(rows: list[TrainRow], target, spec: DrafterSpec, *, budget: int, seed: int,
                   seq_len: int = SEQ_LEN, learning_rate: float = LEARNING_RATE) -> Trained:
    """The CPU loop: one step per planned batch (`planned_batches`)."""
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import CollateFn

    batches, seen = planned_batches(rows, seq_len, budget, seed)
    model = new_drafter(spec, seed)
    model.train()
    hidden = int(model.config.transformer_layer_config.hidden_size)
    collate = CollateFn(seq_len, hidden, num_target_layers=len(spec.aux_layers), dtype=torch.float32,
                        preprocess=shift_batch)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=learning_rate)
    losses = loss_config()
    steps = done = 0
    last = float("nan")
    t0 = time.perf_counter()
    for indices in batches:
        data = collate([sample(rows[i], target, spec.aux_layers, seq_len) for i in indices])
        data = {k: v for k, v in data.items() if isinstance(v, torch.Tensor)}
        mask = data["loss_mask"]
        _, loss, _ = model(hidden_states=data["hidden_states"], input_ids=data["input_ids"],
                           document_ids=data["document_ids"], loss_mask=mask, position_ids=data["position_ids"],
                           verifier_last_hidden_states=data["verifier_last_hidden_states"], ttt_steps=spec.ttt_steps,
                           ttt_step_loss_decay=1.0, loss_config=losses)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        steps += 1
        done += int(mask.sum())
        last = float(loss.detach())
        if steps % 50 == 0:
            log.info("step %d: loss %.3f, %d of %d loss tokens", steps, last, done, budget)
    model.eval()
    return Trained(model, steps, done, seen, time.perf_counter() - t0, last)
