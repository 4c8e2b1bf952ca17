"""Which trainer trains a probe's drafter: speculators' own `Trainer` (probe/speculators_trainer.py), the default
where torch sees a GPU, or the CPU loop (probe/train.py), the default on CPU (speculators 0.9.0's Trainer assumes an
accelerator: docs/probe.md has the measured reason). Both train on the same batches (`train.planned_batches`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from kimi_eagle_data.probe.drafter import LEARNING_RATE, DrafterSpec
from kimi_eagle_data.probe.speculators_trainer import train_with_trainer
from kimi_eagle_data.probe.train import SEQ_LEN, Trained, train_cpu_loop

if TYPE_CHECKING:       # rows with ids and a mask (probe/arms.py); not imported, so that scripts/gpu needs no pyarrow
    from kimi_eagle_data.probe.arms import TrainRow

CPU_LOOP, SPECULATORS = "cpu-loop", "speculators"
TRAINERS = (CPU_LOOP, SPECULATORS)
AUTO = "auto"


def resolve_trainer(name: str = AUTO) -> str:
    """The trainer `name` stands for: `auto` is speculators' Trainer where torch sees a GPU, else the CPU loop."""
    if name == AUTO:
        return SPECULATORS if torch.cuda.is_available() else CPU_LOOP
    if name not in TRAINERS:
        raise ValueError(f"unknown trainer {name!r}; one of {', '.join((AUTO, *TRAINERS))}")
    return name


def train(rows: list[TrainRow], target, spec: DrafterSpec, *, budget: int, seed: int, seq_len: int = SEQ_LEN,
          learning_rate: float = LEARNING_RATE, trainer: str = AUTO) -> Trained:
    """A drafter trained on `rows` until `budget` loss tokens, by `trainer` (`TRAINERS`, or `auto`)."""
    if resolve_trainer(trainer) == SPECULATORS:
        return train_with_trainer(rows, target, spec, budget=budget, seed=seed, seq_len=seq_len,
                                  learning_rate=learning_rate)
    return train_cpu_loop(rows, target, spec, budget=budget, seed=seed, seq_len=seq_len, learning_rate=learning_rate)
