"""Run inside the speculators venv (scripts/trainers/install_speculators.sh), never imported by the suite: speculators'
own code reads one of our exports and says what it saw, as JSON on the last line of stdout.

    python speculators_reads.py ARROW_DIR JSONL MODEL_DIR DRAFT_VOCAB_SIZE WORK_DIR

ARROW_DIR: a `kimi-data export --format speculators` directory (copied into WORK_DIR first: speculators' vocabulary
step caches its d2t/t2d files beside the data). JSONL: the same rows exported with `--format specforge`, the
pre-tokenized JSONL speculators' `prepare-data` passes through. MODEL_DIR: the tiny target model (its tokenizer's
remote code imports kimi_eagle_data from PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from datasets import load_from_disk
from speculators.data_generation.preprocessing import (build_speculator_training_dataset, load_and_preprocess_dataset,
                                                       load_raw_dataset)
from speculators.train.cli import parse_vocab_mappings
from speculators.train.data import ArrowDataset
from speculators.train.vocab_mapping import save_token_frequency_distribution

NO_CUT = 1 << 30    # --seq-length longer than any row: nothing is cut


def rows(dataset) -> list[dict]:
    """Each row's input_ids and loss_mask as lists, after checking they are what the trainer indexes: 1-D long
    tensors."""
    out = []
    for i in range(len(dataset)):
        row = dataset[i]
        for name in ("input_ids", "loss_mask"):
            value = row[name]
            assert isinstance(value, torch.Tensor) and value.dtype == torch.long and value.dim() == 1, \
                f"row {i} {name}: {type(value).__name__} {getattr(value, 'dtype', '')}"
        out.append({"input_ids": row["input_ids"].tolist(), "loss_mask": row["loss_mask"].tolist()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("arrow_dir", "jsonl", "model_dir", "draft_vocab_size", "work"):
        parser.add_argument(name)
    args = parser.parse_args()
    work = Path(args.work)
    data = work / "data"
    shutil.copytree(args.arrow_dir, data)
    seen: dict = {}

    # The trainer's dataset: train/data.py ArrowDataset (`load_from_disk`, lengths from the seq_len column).
    arrow = ArrowDataset(max_len=NO_CUT, datapath=str(data), on_missing="raise")
    seen["trainer_rows"] = rows(arrow.data)
    seen["trainer_lengths"] = list(arrow.approx_lengths)

    # prepare-data's pass-through of pre-tokenized rows, on the Arrow rows and on the JSONL as its loader reads it.
    passed = build_speculator_training_dataset(load_from_disk(str(data)).with_format(None), processor=None,
                                               max_length=NO_CUT, num_proc=1)
    seen["passthrough_arrow_rows"] = rows(passed)
    raw, _ = load_raw_dataset(args.jsonl)
    seen["passthrough_jsonl_rows"] = rows(build_speculator_training_dataset(raw, processor=None, max_length=NO_CUT,
                                                                            num_proc=1))

    # The whole of prepare-data's loading on the JSONL (its seeded shuffle, the tokenizer loaded with remote code,
    # the token frequencies it saves).
    prepared_freq = work / "prepared_token_freq.pt"
    prepared, _ = load_and_preprocess_dataset(args.model_dir, [args.jsonl], seq_length=NO_CUT,
                                              build_dataset_num_proc=1, token_freq_path=prepared_freq,
                                              trust_remote_code=True, skip_token_freq=False)
    seen["prepared_rows"] = rows(prepared)
    seen["prepared_token_freq"] = torch.load(prepared_freq, weights_only=True)

    # Its token frequencies over the trainer's dataset, and the d2t/t2d its train CLI builds from our token_freq.pt.
    counted = work / "token_freq.pt"
    save_token_frequency_distribution(arrow.data, counted)
    seen["counted_token_freq"] = torch.load(counted, weights_only=True)
    seen["our_token_freq"] = torch.load(data / "token_freq.pt", weights_only=True)
    draft = int(args.draft_vocab_size)
    d2t, t2d, size = parse_vocab_mappings(argparse.Namespace(
        d2t_path=None, t2d_path=None, data_path=str(data), draft_vocab_size=draft, token_freq_path=None,
        verifier_name_or_path=args.model_dir, trust_remote_code=False))
    assert size == draft and d2t.dtype == torch.long and t2d.dtype == torch.bool, (size, d2t.dtype, t2d.dtype)
    seen["d2t"] = d2t.tolist()
    seen["t2d_ids"] = torch.nonzero(t2d).flatten().tolist()
    seen["target_vocab_size"] = len(t2d)
    for key in ("prepared_token_freq", "counted_token_freq", "our_token_freq"):    # JSON keys are strings
        seen[key] = sorted(seen[key].items())
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
