"""A `datasets` builder over a kimi-eagle-data workdir.

`emit` writes the Hub layout from the same `iter_split_tables`, so the Parquet files, the builder
and `load_dataset(<dataset dir>, "B4")` all see the same rows. The builder is for users who have
the project installed and want a workdir's validated rows without emitting:

    from kimi_eagle_data.builders.kimi_eagle import KimiEagleData
    b = KimiEagleData(config_name="B4", workdir="runs/demo")
    b.download_and_prepare(); ds = b.as_dataset()
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import datasets
import pyarrow as pa

try:
    from datasets.builder import Key
except ImportError:  # datasets < 4.1 used plain keys
    def Key(shard, i):  # noqa: N802
        return i

import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..schema import ROW_SCHEMA, SPLITS, features
from .partitions import PARTITIONS


def iter_split_tables(validated_path: Path, split: str, batch_rows: int = 2048) -> Iterator[pa.Table]:
    """Rows of one split from a `validated/<CFG>.parquet`, in ROW_SCHEMA, batch by batch (flat memory)."""
    pf = pq.ParquetFile(validated_path)
    for batch in pf.iter_batches(batch_size=batch_rows):
        table = pa.Table.from_batches([batch])
        table = table.filter(pc.equal(table["split"], split))
        if table.num_rows:
            yield table.select(ROW_SCHEMA.names).cast(ROW_SCHEMA)


@dataclass
class KimiEagleConfig(datasets.BuilderConfig):
    workdir: str | None = None


class KimiEagleData(datasets.ArrowBasedBuilder):
    BUILDER_CONFIG_CLASS = KimiEagleConfig
    BUILDER_CONFIGS = [KimiEagleConfig(name=cfg, description=p.prompt_rule) for cfg, p in PARTITIONS.items()]

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(features=features())

    def _split_generators(self, dl_manager):
        if not self.config.workdir:
            raise ValueError("KimiEagleData needs workdir=<a kimi-data workdir>")
        path = Path(self.config.workdir) / "validated" / f"{self.config.name}.parquet"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing; run `kimi-data validate --workdir {self.config.workdir}`")
        return [datasets.SplitGenerator(name=split, gen_kwargs={"path": path, "split": split}) for split in SPLITS]

    def _generate_tables(self, path: Path, split: str):
        for i, table in enumerate(iter_split_tables(path, split)):
            yield Key(0, i), table
