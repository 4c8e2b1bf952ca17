"""Emit writes each token once: validate streams rows straight into the shards, the output does not depend on
--workers, validated/ holds only light columns, and shards roll over by size (the `datasets` builder, which
generates: tests/test_builder.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.schema import LIGHT_SCHEMA, ROW_SCHEMA

from tests.helpers.cli import copy_run, run_cli, tree_hashes


def test_emit_is_byte_identical_across_workers(demo_run, tmp_path):
    workdir, _ = demo_run
    outputs = {}
    for workers in (1, 2):
        w = copy_run(workdir, tmp_path / f"w{workers}")
        run_cli("emit", "--workdir", str(w), "--workers", str(workers))
        outputs[workers] = (tree_hashes(w / "dataset"), tree_hashes(w / "validated"))
    assert outputs[1] == outputs[2]
    # ... and equal to what the demo (default workers, validate + emit inside build) wrote
    assert outputs[1] == (tree_hashes(workdir / "dataset"), tree_hashes(workdir / "validated"))


def test_prepared_prompts_are_streamed_in_id_order(demo_run, tmp_path):
    """prepare writes prompts sorted by id in bounded row groups, so validate reads them beside the
    completions a window at a time; a prepared file from before (selection order, one row group) is
    still read, and the dataset is the same bytes."""
    from kimi_eagle_data.prompts.prepared_file import PREPARED_ROW_GROUP

    workdir, _ = demo_run
    for config in PARTITIONS:
        f = pq.ParquetFile(workdir / "prepared" / f"{config}.parquet")
        ids = f.read(columns=["id"]).column("id").to_pylist()
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert all(f.metadata.row_group(i).num_rows <= PREPARED_ROW_GROUP for i in range(f.num_row_groups))
    w = copy_run(workdir, tmp_path / "legacy")
    for config in PARTITIONS:
        path = w / "prepared" / f"{config}.parquet"
        t = pq.read_table(path)
        pq.write_table(t.take(np.random.default_rng(1).permutation(t.num_rows)), path, compression="zstd")
    assert pq.read_table(w / "prepared" / "B1.parquet").column("id").to_pylist() != \
        pq.read_table(workdir / "prepared" / "B1.parquet").column("id").to_pylist()
    run_cli("emit", "--workdir", str(w))
    assert tree_hashes(w / "dataset") == tree_hashes(workdir / "dataset")


def test_validate_writes_light_columns_only(demo_run, tmp_path):
    workdir, _ = demo_run
    for config in PARTITIONS:
        assert pq.read_schema(workdir / "validated" / f"{config}.parquet").remove_metadata() == LIGHT_SCHEMA
    w = copy_run(workdir, tmp_path / "v")
    run_cli("validate", "B4", "--workdir", str(w), "--workers", "2")
    assert not (w / "dataset").exists()        # no token rows anywhere: emit writes them, once
    assert (w / "validated" / "B4.parquet").read_bytes() == (workdir / "validated" / "B4.parquet").read_bytes()
    proc = run_cli("inspect", str(w), "B4", "--shortest", check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "kimi-data emit" in lines[0], proc.stderr


def test_shards_roll_over_by_token_bytes(tmp_path, monkeypatch):
    from kimi_eagle_data.emit import writer as emit

    monkeypatch.setattr(emit, "SHARD_TARGET_BYTES", 5 * 100)    # 100 tokens per shard
    rows = [{"id": f"r{i}", "input_ids": list(range(40)), "loss_mask": [0] * 10 + [1] * 30} for i in range(7)]
    table = pa.Table.from_pylist([{k: r.get(k) for k in ROW_SCHEMA.names} for r in rows], schema=ROW_SCHEMA)
    shards = emit.ConfigShards(tmp_path / "B9")
    for i in range(0, 7, 2):                     # blocks of 2 rows: a shard closes after 3 blocks (120 tokens)
        shards.write("train", table.slice(i, 2))
    info = shards.finish()
    assert list(info) == ["train"]
    assert info["train"].files == ["train-00000-of-00002.parquet", "train-00001-of-00002.parquet"]
    assert info["train"].rows == 7 and info["train"].tokens == 280      # 7 rows of 40 ids, written above
    back = pa.concat_tables([pq.read_table(tmp_path / "B9" / f) for f in info["train"].files])
    assert back.column("id").to_pylist() == [r["id"] for r in rows]
    assert sorted(p.name for p in (tmp_path / "B9").iterdir()) == info["train"].files   # no temp file left


def test_checkpoint_batches_match_row_reads(demo_run):
    from kimi_eagle_data.store.checkpoint import Checkpoint

    workdir, _ = demo_run
    ckpt = Checkpoint(workdir / "generations.sqlite")
    try:
        one = list(ckpt.completions("B1"))
        batches = list(ckpt.batches("B1", rows=7))
    finally:
        ckpt.close()
    assert [len(b) for b in batches[:-1]] == [7] * (len(batches) - 1)
    ids = [i for b in batches for i in b.ids]
    assert ids == [c.id for c in one]
    flat = [b.values[b.offsets[i]:b.offsets[i + 1]] for b in batches for i in range(len(b))]
    assert all(np.array_equal(a, c.output_ids) for a, c in zip(flat, one))
