"""`kimi-data probe --dry-run`: the probe for a real target on a GPU node, as speculators documents it (not run here).

Hidden states come from vLLM through speculators' extraction (scripts/launch_vllm.py, then
scripts/data_generation_offline.py), and speculators' own trainer (scripts/train.py) trains the drafter; the data is
this dataset exported for speculators (`kimi-data export --format speculators`). The projected cost: the
hidden-state bytes that extraction writes (every token × (3 auxiliary + the last) layers × hidden size × 2 bytes,
bf16) and, given a prefill rate (tokens/s, e.g. the one `kimi-data plan` measured in the pilot), the hours to extract.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from kimi_eagle_data.probe.drafter import aux_layer_ids

BYTES_PER_VALUE = 2      # bf16, as vLLM writes them


def dataset_tokens(dataset: Path) -> int:
    manifest = json.loads((dataset / "manifest.json").read_text())
    total = 0
    for config, entry in manifest["configs"].items():
        for name in (entry["splits"].get("train") or {}).get("files", []):
            col = pq.read_table(dataset / "data" / config / name, columns=["input_ids"]).column("input_ids")
            total += int(pc.sum(pc.list_value_length(col)).as_py() or 0)
    return total


def _size(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"


def duration(seconds: float) -> str:
    """A projected time as a reader takes it in: minutes under an hour, hours above."""
    if seconds < 3600:
        return f"{seconds / 60:.1f} min" if seconds >= 6 else f"{seconds:.0f} s"
    return f"{seconds / 3600:.2f} h"


def gpu_plan(wd, budget: int, prefill_rate: float | None = None) -> str:
    from transformers import AutoConfig

    model = str(wd.settings()["model"])
    cfg = AutoConfig.from_pretrained(model, trust_remote_code=True)
    cfg = getattr(cfg, "text_config", cfg)
    layers, hidden = int(cfg.num_hidden_layers), int(cfg.hidden_size)
    aux = aux_layer_ids(layers)
    tokens = dataset_tokens(wd.root / "dataset") if (wd.root / "dataset" / "manifest.json").is_file() else 0
    size = tokens * (len(aux) + 1) * hidden * BYTES_PER_VALUE
    hours = (f"{duration(tokens / prefill_rate)} of extraction at {prefill_rate:,.0f} prefill tokens/s"
             if prefill_rate else "hours: tokens / your prefill rate (tokens/s; `kimi-data plan` shows the pilot's)")
    ids = " ".join(map(str, aux))
    return "\n".join([
        f"# probe on a GPU node (not run here): target {model}, {layers} layers, hidden {hidden}",
        f"# projected: {tokens:,} tokens -> {_size(size)} of hidden states ({len(aux)} auxiliary layers "
        f"{aux} + the last, bf16); {hours}",
        f"kimi-data export {wd.root} --format speculators --out probe-data",
        f"python scripts/launch_vllm.py {model} --hidden-states-path probe-hs --target-layer-ids {ids} {layers} "
        "-- --tensor-parallel-size 8 --port 8000 --trust-remote-code &",
        "python scripts/data_generation_offline.py --preprocessed-data probe-data --endpoint http://localhost:8000/v1 "
        "--output probe-hs --concurrency 32 --validate-outputs",
        f"torchrun --standalone --nproc_per_node 8 scripts/train.py --verifier-name-or-path {model} --data-path "
        f"probe-data --hidden-states-path probe-hs --save-path probe-drafter --target-layer-ids {ids} --num-layers 1 "
        "--epochs 1 --on-missing raise",
        f"# then: each arm's drafter served with `kimi-data serve --draft probe-drafter/...`, acceptance from the "
        f"engine's verify steps; {budget:,} loss tokens per arm on CPU",
    ])
