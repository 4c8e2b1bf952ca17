"""Training a drafter with speculators' own `Trainer` (speculators.train.trainer, 0.9.0), as its train.py drives it.

The model is probe/drafter.py's `new_drafter` (the EAGLE-3 defaults of speculators' train config), the data the batches
the CPU loop takes (probe/train.py `planned_batches`: the same rows, packed by speculators' `CollateFn` with
`shift_batch`, to the same loss-token budget), handed to the Trainer as a DataLoader with that batch plan; the Trainer
runs one epoch over it with AdamW at the CPU loop's learning rate, no schedule (the CPU loop has none), the eager
`kl_div` loss and speculators' own gradient clipping and autocast (bf16 on a GPU). Hidden states come from the target
in-process as each batch is drawn (probe/hidden_states.py), on the target's device; the Trainer moves them to its own.
On CPU the Trainer runs through probe/drafter.py `trainer_device` (0.9.0 assumes an accelerator).

The trained drafter comes back on CPU in float32, as the CPU loop's does, for the in-process decoder and
`save_drafter`. The Trainer's own checkpoint (written after the epoch) goes to a temporary folder, removed after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import logging
import shutil
import tempfile
import time
from pathlib import Path

import torch

from kimi_eagle_data.probe.drafter import LEARNING_RATE, DrafterSpec, new_drafter, trainer_device
from kimi_eagle_data.probe.train import SEQ_LEN, Trained, batch_loss_tokens, planned_batches, sample

if TYPE_CHECKING:       # rows with ids and a mask (probe/arms.py); not imported, so that scripts/gpu needs no pyarrow
    from kimi_eagle_data.probe.arms import TrainRow

log = logging.getLogger(__name__)


class _Rows(torch.utils.data.Dataset):
    """The rows as speculators' samples: each one's target states computed when the DataLoader draws it."""

    def __init__(self, rows: list[TrainRow], target, aux_layers, seq_len: int):
        self.rows, self.target, self.aux_layers, self.seq_len = rows, target, aux_layers, seq_len

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        return {k: v.cpu() for k, v in sample(self.rows[i], self.target, self.aux_layers, self.seq_len).items()}


class _LastLoss(logging.Handler):
    """The loss of the Trainer's last logged step (its `speculators.metrics` records)."""

    def __init__(self):
        super().__init__()
        self.loss = float("nan")

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg
        if isinstance(msg, dict) and isinstance(msg.get("train"), dict) and "loss" in msg["train"]:
            self.loss = float(msg["train"]["loss"])


def train_with_trainer(rows: list[TrainRow], target, spec: DrafterSpec, *, budget: int, seed: int,
                       seq_len: int = SEQ_LEN, learning_rate: float = LEARNING_RATE,
                       device: str | None = None) -> Trained:
    """A drafter trained on `rows` to `budget` loss tokens by speculators' Trainer on `device` (default: a GPU where
    torch sees one, else the CPU)."""
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import CollateFn
    from speculators.train.trainer import Trainer, TrainerConfig

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    batches, seen = planned_batches(rows, seq_len, budget, seed)
    model = new_drafter(spec, seed)
    hidden = int(model.config.transformer_layer_config.hidden_size)
    collate = CollateFn(seq_len, hidden, num_target_layers=len(spec.aux_layers), dtype=torch.float32,
                        preprocess=shift_batch)
    loader = torch.utils.data.DataLoader(_Rows(rows, target, spec.aux_layers, seq_len), batch_sampler=batches,
                                         collate_fn=collate, num_workers=0)
    call, _ = Eagle3DraftModel.get_trainer_kwargs(loss_fn="kl_div", loss_implementation="eager",
                                                  ttt_steps=spec.ttt_steps, ttt_step_loss_decay=1.0)
    save = tempfile.mkdtemp(prefix="probe-trainer-")
    config = TrainerConfig(lr=learning_rate, num_epochs=1, save_path=save, train_call_kwargs=call,
                           scheduler_type="none", log_freq=1,
                           hidden_states_dtype=torch.bfloat16 if device != "cpu" else torch.float32)
    metrics = logging.getLogger("speculators.metrics")
    last = _LastLoss()
    level, propagate = metrics.level, metrics.propagate
    metrics.addHandler(last)
    metrics.setLevel(logging.INFO)     # its step records, to this handler only: not the probe's output
    metrics.propagate = False
    notes = logging.getLogger("speculators")
    notes_level = notes.level
    notes.setLevel(logging.ERROR)      # its run notes ("No val loader, skipping validation epoch"): the probe has its own
    t0 = time.perf_counter()
    try:
        with trainer_device(device):
            trainer = Trainer(model, config, loader)
            trainer.run_training()
        # its graceful shutdown turns Ctrl+C into an "interrupted" checkpoint and a normal return: the probe stops
        if (Path(save) / "interrupted").exists():
            raise KeyboardInterrupt
        steps = int(trainer.global_step)
    finally:
        metrics.removeHandler(last)
        metrics.setLevel(level)
        metrics.propagate = propagate
        notes.setLevel(notes_level)
        shutil.rmtree(save, ignore_errors=True)
    trained = trainer.model.to("cpu", torch.float32).eval()
    done = sum(batch_loss_tokens([rows[i] for i in b], seq_len) for b in batches)
    return Trained(trained, steps, done, seen, time.perf_counter() - t0, last.loss)

