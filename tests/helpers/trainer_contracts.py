"""What the trainers' own loaders do with our exports, restated from their source so that the main suite checks it in
seconds without installing them (speculators pulls CUDA torch and pins datasets<=5.1.0; SpecForge pins sglang and
torch 2.11.0). Each function names the file and commit it was read from; tests/hub/test_publish.py (K2.5's demo) and
tests/formats/kimi_k3/test_k3_demo.py (K3's) use them. The trainer tier (tests/trainers/, scripts/trainers/run_tier.sh) runs
the real speculators 0.9.0 and SpecForge 0.2.0 on the same exports and checks these restatements against them."""

from __future__ import annotations

import json
from collections import Counter
from numbers import Integral
from pathlib import Path
from typing import Any

SPECULATORS = "vllm-project/speculators@c05b95b303f7d4f21e8d7624e0ffa1c2d9b4d73b"
SPECFORGE = "sgl-project/SpecForge@a6b6b0230009d15ec2a97a57384e6f53f0f96946"


def check_speculators_dataset(ds, want: list[dict]) -> None:
    """A `load_from_disk` dataset against speculators' loader contract, row for row against `want` (dicts with
    input_ids and loss_mask). speculators@c05b95b3:
      - src/speculators/data_generation/preprocessing.py `_append_row`: input_ids and loss_mask are
        `torch.tensor(..., dtype=torch.long)`, seq_len a Python int; `build_speculator_training_dataset`
        ends with `dataset.set_format(type="torch")`; scripts/prepare_data.py then `save_to_disk`.
      - src/speculators/train/data.py `ArrowDataset`: `load_from_disk(datapath)`, rows indexed as
        tensors (`.shape[0]`, `.tolist()`, `torch.equal(..., self.data[index]["input_ids"])`), and
        `self.data.with_format(None)["seq_len"]` for lengths."""
    import torch
    from datasets import Sequence, Value

    assert ds.column_names == ["input_ids", "loss_mask", "seq_len"] and len(ds) == len(want)
    assert ds.format["type"] == "torch"
    assert ds.features["input_ids"] == Sequence(Value("int64")) or ds.features["input_ids"].feature == Value("int64")
    assert ds.features["loss_mask"].feature == Value("int64") and ds.features["seq_len"] == Value("int64")
    for i, row in enumerate(ds):      # iterating yields tensors, as the trainer's __getitem__ needs
        assert isinstance(row["input_ids"], torch.Tensor) and row["input_ids"].dtype == torch.long
        assert isinstance(row["loss_mask"], torch.Tensor) and row["loss_mask"].dtype == torch.long
        assert row["input_ids"].shape[0] == int(row["seq_len"]) == len(want[i]["input_ids"])
        assert torch.equal(torch.tensor(want[i]["input_ids"], dtype=torch.long), ds[i]["input_ids"])
        assert row["loss_mask"].tolist() == want[i]["loss_mask"]
    assert list(ds.with_format(None)["seq_len"]) == [len(r["input_ids"]) for r in want]


def speculators_token_freq(dataset) -> dict[int, int]:
    """speculators' own counting, speculators@c05b95b3 src/speculators/train/vocab_mapping.py
    `save_token_frequency_distribution`, over the rows of a `load_from_disk` dataset in torch format."""
    import torch

    token_freq: Counter = Counter()
    for item in dataset:
        input_ids = item["input_ids"]
        loss_mask = item["loss_mask"]
        masked_token_ids = input_ids[loss_mask.to(torch.bool)]
        unique_ids, counts = masked_token_ids.unique(return_counts=True)
        token_freq.update(dict(zip(unique_ids.tolist(), counts.tolist(), strict=True)))
    return dict(token_freq)


def speculators_build_vocab_mappings(token_freq_dict, draft_vocab_size, target_vocab_size):
    """speculators@c05b95b3 src/speculators/train/vocab_mapping.py `build_vocab_mappings_from_distribution`,
    which scripts/train.py `parse_vocab_mappings` runs on `torch.load(token_freq_path, weights_only=True)`."""
    import torch

    sorted_tokens = sorted(token_freq_dict, key=lambda tid: (-token_freq_dict[tid], tid))
    selected_token_ids = sorted_tokens[:min(draft_vocab_size, len(sorted_tokens))]
    if len(selected_token_ids) < draft_vocab_size:
        current_ids = set(selected_token_ids)
        for tid in range(draft_vocab_size):
            if tid not in current_ids:
                selected_token_ids.append(tid)
            if len(selected_token_ids) >= draft_vocab_size:
                break
    selected_token_ids.sort()
    draft_to_target = torch.tensor(selected_token_ids, dtype=torch.long) - torch.arange(draft_vocab_size,
                                                                                        dtype=torch.long)
    target_to_draft = torch.zeros(target_vocab_size, dtype=torch.bool)
    target_to_draft[selected_token_ids] = True
    return draft_to_target, target_to_draft


def _integers(value: Any, field: str, source: str, binary: bool) -> list[int]:
    # SpecForge@a6b6b023 specforge/data/prompt_builder.py `_normalize_integer_sequence`
    if hasattr(value, "tolist"):
        value = value.tolist()
    assert isinstance(value, (list, tuple)), f"{source} field {field} must be a sequence"
    sequence = list(value)
    if len(sequence) == 1 and isinstance(sequence[0], (list, tuple)):
        sequence = list(sequence[0])
    assert not any(isinstance(item, (list, tuple)) for item in sequence), f"{source} {field} must be 1-D"
    for index, item in enumerate(sequence):
        assert isinstance(item, Integral) and not (field == "input_ids" and isinstance(item, bool)), \
            f"{source} field {field}[{index}] must be an integer"
        assert not binary or int(item) in (0, 1), f"{source} field {field}[{index}] must be 0 or 1"
    return [int(item) for item in sequence]


def specforge_prepare_prompts(path: Path, max_length: int, min_loss_tokens: int = 1) -> list[dict]:
    """SpecForge's reading of a pre-tokenized JSONL (`data.prompts_path`), SpecForge@a6b6b023
    specforge/data/prompt_builder.py: `prepare_prompt_tasks` takes a file whose first record holds both input_ids
    and loss_mask as pre-tokenized, reads it with `_iter_records` (one JSON object per line, blank lines skipped)
    and keeps `_prompt_from_record` of each: both fields, 1-D integer lists (no bool ids), a 0/1 mask of the
    same, non-zero length, both cut to max_length, and the row dropped when fewer than min_loss_tokens are 1."""
    prompts = []
    with open(path, encoding="utf-8") as stream:
        for line_number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            source = f"{path}:{line_number}"
            assert isinstance(record, dict), f"{source} must be an object"
            assert "input_ids" in record and "loss_mask" in record, f"{source} must have input_ids and loss_mask"
            input_ids = _integers(record["input_ids"], "input_ids", source, binary=False)
            loss_mask = _integers(record["loss_mask"], "loss_mask", source, binary=True)
            assert len(input_ids) == len(loss_mask), f"{source} has mismatched lengths"
            assert input_ids, f"{source} contains an empty token sequence"
            input_ids, loss_mask = input_ids[:max_length], loss_mask[:max_length]
            if sum(loss_mask) >= min_loss_tokens:
                prompts.append({"payload": {"input_ids": input_ids, "loss_mask": loss_mask}})
    return prompts
