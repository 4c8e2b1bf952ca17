"""A `datasets` reader over an emitted kimi-eagle-data dataset (`kimi-data emit` / `build` / `demo` write it).

It is not what emit runs on: emit streams validated rows straight into the Parquet shards. This builder reads
those shards back, config by config, and declares only the splits that have files (a config whose every sample
passed has no `rejected` split). It gives the same rows, in the same order, as
`load_dataset(<dataset dir>, CONFIG)` (tested for every demo config); use it where the card's YAML is not at
hand, e.g. a user-defined config of a workdir, or to point at a workdir instead of its dataset/:

    from kimi_eagle_data.builders.kimi_eagle import KimiEagleData
    b = KimiEagleData(config_name="B4", dataset="runs/demo")     # a workdir, or runs/demo/dataset
    b.download_and_prepare(); ds = b.as_dataset()
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

try:
    from datasets.builder import Key
except ImportError:  # datasets < 4.1 used plain keys
    def Key(shard, i):  # noqa: N802
        return i

from kimi_eagle_data.schema import ROW_SCHEMA, SPLITS, features

BATCH_ROWS = 1024


def split_files(dataset: str | Path, config: str) -> dict[str, list[Path]]:
    """{split: its shards in order} for the splits of `config` that have rows, in the dataset dir `dataset`
    (or in `dataset`/dataset when given a workdir)."""
    root = Path(dataset)
    if not (root / "data").is_dir() and (root / "dataset" / "data").is_dir():
        root = root / "dataset"
    cfg_dir = root / "data" / config
    found = {split: sorted(cfg_dir.glob(f"{split}-*.parquet")) for split in SPLITS}
    found = {split: files for split, files in found.items() if files}
    if not found:
        have = sorted(p.name for p in (root / "data").glob("*") if p.is_dir())
        raise FileNotFoundError(f"no Parquet shards of config {config!r} under {root}/data (configs there: "
                                f"{', '.join(have) or 'none'}); run `kimi-data emit` on the workdir first")
    return found


@dataclass
class KimiEagleConfig(datasets.BuilderConfig):
    dataset: str | None = None    # an emitted dataset dir, or the workdir that holds it


class KimiEagleData(datasets.ArrowBasedBuilder):
    """Config names are the dataset's own (B1-B8 and any user-defined partition), so none is declared here."""

    BUILDER_CONFIG_CLASS = KimiEagleConfig

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(features=features())

    def _split_generators(self, dl_manager):
        if not self.config.dataset:
            raise ValueError("KimiEagleData needs dataset=<an emitted dataset dir or its workdir>")
        return [datasets.SplitGenerator(name=split, gen_kwargs={"files": files})
                for split, files in split_files(self.config.dataset, self.config.name).items()]

    def _generate_tables(self, files: list[Path]):
        for shard, path in enumerate(files):
            for i, batch in enumerate(pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS)):
                yield Key(shard, i), pa.Table.from_batches([batch]).cast(ROW_SCHEMA)
