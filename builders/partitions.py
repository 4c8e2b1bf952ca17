"""The built-in partitions (dataset configs) B1-B8 of SPEC §2, as plain data.

Each partition names its upstream Hub dataset, the adapter that turns an upstream row into a
prompt (`kimi_eagle_data.adapters.ADAPTERS`), the default prompt count, and the bundled sample
file (rows written by this project in the upstream's exact schema, used by the demo and tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True)
class Partition:
    config: str            # dataset config name, e.g. "B4"
    name: str              # short name, e.g. "mixturethoughts"
    upstream: str          # Hub id of the source dataset
    upstream_config: str | None
    upstream_split: str
    adapter: str           # key into kimi_eagle_data.adapters.ADAPTERS
    default_n: int
    license: str
    prompt_rule: str       # one line for the dataset card

    @property
    def sample_file(self) -> Path:
        return SAMPLES_DIR / f"{self.config}-{self.name}.jsonl"


SAMPLES_DIR = Path(str(resources.files(__package__) / "samples"))

PARTITIONS: dict[str, Partition] = {
    p.config: p
    for p in (
        Partition("B1", "glaive", "glaiveai/glaive-function-calling-v2", None, "train", "glaive",
                  10_000, "apache-2.0",
                  "system tools parsed into tools=; first USER turn"),
        Partition("B2", "opencodeinstruct", "nvidia/OpenCodeInstruct", None, "train", "input_field",
                  14_000, "cc-by-4.0", "`input` as one user turn"),
        Partition("B3", "opencodereasoning", "nvidia/OpenCodeReasoning", "split_0", "split_0",
                  "input_field", 8_000, "cc-by-4.0", "`input` as one user turn, dedup by `input`"),
        Partition("B4", "mixturethoughts", "open-r1/Mixture-of-Thoughts", "math", "train", "messages",
                  12_000, "apache-2.0", "the user message"),
        Partition("B5", "openthoughts", "open-thoughts/OpenThoughts-114k", None, "train", "openthoughts",
                  10_000, "apache-2.0", "first human turn; Sky-T1 system prompt dropped"),
        Partition("B6", "ultrachat", "HuggingFaceH4/ultrachat_200k", None, "train_sft", "messages",
                  14_000, "mit", "first user turn"),
        Partition("B7", "sharegpt", "Aeala/ShareGPT_Vicuna_unfiltered", None, "train", "sharegpt",
                  12_000, "apache-2.0", "first human turn (rows starting with gpt skipped)"),
        Partition("B8", "sweagent", "nebius/SWE-agent-trajectories", None, "train", "sweagent",
                  8_000, "cc-by-4.0", "system + first user message"),
    )
}


def get_partition(config: str) -> Partition:
    try:
        return PARTITIONS[config]
    except KeyError:
        raise ValueError(f"unknown config {config!r}; known: {', '.join(PARTITIONS)}") from None
