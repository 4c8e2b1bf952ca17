"""`plan` prices the dataset's disk from a shard's first rows written again, not from every row: on a finished
run's own workdir (393M tokens in the rehearsal) writing each shard again took most of plan's time. The projection
stays exact for the shard itself (its own bytes at its own tokens) and its per-token cost close to the whole
shard's."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kimi_eagle_data.emit.writer import PARQUET_OPTIONS
from kimi_eagle_data.reports import pilot
from kimi_eagle_data.store.workdir import Workdir, dataset_config_dir

ROWS, GROUP = 2000, 100


def write_shard(root):
    rng = np.random.default_rng(0)
    lens = rng.integers(50, 400, ROWS)
    prompt = lens // 4
    ids = [rng.integers(300, 1700, n).astype(np.int32) for n in lens]
    table = pa.table({"source": ["x"] * ROWS, "finish_reason": ["stop"] * ROWS,
                      "input_ids": pa.array(ids, pa.list_(pa.int32())),
                      "prompt_len": pa.array(prompt, pa.int32()), "completion_len": pa.array(lens - prompt, pa.int32()),
                      "messages": [" ".join(map(str, i[:40])) for i in ids]})
    d = dataset_config_dir(Workdir(root).dataset, "U1")
    d.mkdir(parents=True)
    path = d / "train-00000-of-00001.parquet"
    pq.write_table(table, path, row_group_size=GROUP, **PARQUET_OPTIONS)
    return path, int(lens.sum())


def test_disk_cost_writes_only_the_first_row_groups_again(tmp_path, monkeypatch):
    path, tokens = write_shard(tmp_path)
    whole, _ = pilot.disk_cost(Workdir(tmp_path), "U1")

    written = []
    real_write = pq.write_table
    monkeypatch.setattr(pilot, "MEASURED_ROWS", 200)
    monkeypatch.setattr(pq, "write_table", lambda t, *a, **k: (written.append(t.num_rows), real_write(t, *a, **k)))
    sampled, _ = pilot.disk_cost(Workdir(tmp_path), "U1")

    assert written and max(written) <= 200 and sum(written) <= 500          # not the shard's 2,000 rows
    shard_bytes = pilot.chunk_bytes(pq.read_metadata(path))
    assert abs(sampled.bytes(tokens) - shard_bytes) < 1e-6 * shard_bytes      # the shard itself, exactly
    assert abs(sampled.per_token - whole.per_token) < 0.1 * whole.per_token
