"""Run inside the SpecForge venv (scripts/trainers/install_specforge.sh), never imported by the suite: SpecForge's
own code reads one of our exports and says what it saw, as JSON on the last line of stdout.

    python specforge_reads.py JSONL TARGET_VOCAB_SIZE DRAFT_VOCAB_SIZE WORK_DIR

JSONL: a `kimi-data export --format specforge` file (SpecForge's pre-tokenized `data.prompts_path`). Its prompt
reader turns it into prompt tasks; `generate_vocab_mapping_file` then builds its vocabulary mapping over those
prompts, in their order, into WORK_DIR.
"""

from __future__ import annotations

import argparse
import json

import torch
from datasets import Dataset
from specforge.data.preprocessing import generate_vocab_mapping_file
from specforge.data.prompt_builder import prepare_prompt_tasks

NO_CUT = 1 << 30    # data.max_length longer than any row: nothing is cut


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("jsonl", "target_vocab_size", "draft_vocab_size", "work"):
        parser.add_argument(name)
    args = parser.parse_args()
    tasks = prepare_prompt_tasks(args.jsonl, None, chat_template=None, max_length=NO_CUT, is_preformatted=False,
                                 train_only_last_turn=False, cache_dir=None, cache_key=None, num_proc=None)
    payloads = [task["payload"] for task in tasks]
    dataset = Dataset.from_list(payloads).with_format("torch")
    path = generate_vocab_mapping_file(dataset, int(args.target_vocab_size), int(args.draft_vocab_size),
                                       cache_dir=args.work)
    mapping = torch.load(path)
    print(json.dumps({"prompts": payloads, "mapping_keys": sorted(mapping),
                      "d2t_dtype": str(mapping["d2t"].dtype), "t2d_dtype": str(mapping["t2d"].dtype),
                      "d2t": mapping["d2t"].tolist(), "t2d_ids": torch.nonzero(mapping["t2d"]).flatten().tolist(),
                      "t2d_len": len(mapping["t2d"])}))


if __name__ == "__main__":
    main()
