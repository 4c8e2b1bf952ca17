"""`kimi-data probe --write-arms DIR`: each arm's training rows as speculators' trainer reads them, for a GPU node.

Each arm goes to DIR/ARM (`own`, `upstream`, `own-0.25`, ...) in the layout `kimi-data export --format speculators`
writes (hub/export.py: a torch-format `save_to_disk` dataset with `input_ids`, `loss_mask`, `seq_len`, and
`token_freq.pt`, the token counts speculators builds its draft vocabulary from), and the held-out prompts that
`kimi-data probe --drafter ARM=DIR` measures on go to DIR/held-out.json ({config: [[id, prompt ids], ...]}): the same
seeded split, so the rows written never include a held-out prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from kimi_eagle_data.probe.arms import TrainRow
from kimi_eagle_data.probe.gpu_plan import arm_slug
from kimi_eagle_data.hub.export import torch_bytes

HELD_OUT_FILE = "held-out.json"
TOKEN_FREQ = "token_freq.pt"


def write_arm(rows: list[TrainRow], out: Path) -> dict[str, Any]:
    from datasets import Dataset, disable_progress_bars


    disable_progress_bars()      # the probe prints what it wrote

    ds = Dataset.from_dict({"input_ids": [r.ids.tolist() for r in rows], "loss_mask": [r.mask.tolist() for r in rows],
                            "seq_len": [len(r.ids) for r in rows]})
    ds.set_format("torch")       # speculators' trainer compares rows with torch.equal (docs/probe.md)
    ds.save_to_disk(str(out))
    counts = np.bincount(np.concatenate([r.ids for r in rows])) if rows else np.zeros(0, dtype=np.int64)
    seen = np.flatnonzero(counts)
    (out / TOKEN_FREQ).write_bytes(torch_bytes(dict(zip(seen.tolist(), counts[seen].tolist()))))
    return {"rows": len(rows), "tokens": int(sum(len(r.ids) for r in rows)),
            "loss_tokens": int(sum(r.loss_tokens for r in rows)), "dir": str(out)}


def write_arms(out: Path, arms: dict[str, list[TrainRow]], held: dict[str, list[tuple[str, list[int]]]]
               ) -> dict[str, Any]:
    """Every arm under `out` and the held-out prompts beside them; what was written, per arm."""
    out.mkdir(parents=True, exist_ok=True)
    written = {arm: write_arm(rows, out / arm_slug(arm)) for arm, rows in arms.items()}
    held_file = out / HELD_OUT_FILE
    held_file.write_text(json.dumps({c: [[pid, list(map(int, ids))] for pid, ids in pairs]
                                     for c, pairs in held.items()}) + "\n", encoding="utf-8")
    return {"arms": written, "held_out_file": str(held_file)}
