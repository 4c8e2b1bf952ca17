"""The README's production recipe, run as written against the SGLang-protocol stand-in: a pilot
`build --limit N`, `plan`, then the full `build` on the same workdir. The full run must prepare and generate
the full counts, reuse every completion of the pilot (none generated twice) and say so."""

from __future__ import annotations

import json
import sqlite3

import pyarrow.parquet as pq

from kimi_eagle_data.sources.partitions import PARTITIONS

from tests.helpers.cli import run_cli
from tests.helpers.servers import TINY, Server

PILOT_ROWS = 5


def prepared_ids(workdir, config) -> list[str]:
    return pq.read_table(workdir / "prepared" / f"{config}.parquet", columns=["id"]).column("id").to_pylist()


def checkpoint_ids(workdir) -> list[str]:
    db = sqlite3.connect(workdir / "generations.sqlite")
    try:
        return [r[0] for r in db.execute("SELECT id FROM completions")]
    finally:
        db.close()


def test_pilot_then_full_run_on_one_workdir_builds_the_full_dataset(tmp_path):
    config = "B6"
    source_rows = sum(1 for line in PARTITIONS[config].sample_file.read_text().splitlines() if line.strip())
    assert source_rows > PILOT_ROWS
    w = tmp_path / "run1"
    server = Server().start()
    try:
        # pilot, as in the README (the stand-in's model, profile and bundled rows in place of Kimi-K2.5's)
        pilot = run_cli("build", config, "--workdir", str(w), "--engine", "sglang", "--server", server.url,
                        "--limit", str(PILOT_ROWS), "--profile", "tiny-kimi", "--model", TINY, "--samples",
                        "--max-new-tokens", "64", "--no-progress")
        pilot_ids = prepared_ids(w, config)
        assert 0 < len(pilot_ids) <= PILOT_ROWS
        assert f"generate: {len(pilot_ids)} completed" in pilot.stdout
        assert server.served() == len(pilot_ids)

        run_cli("plan", "--workdir", str(w), "--throughput", "20000", "--gpus", "8")

        # the full run, exactly as the README writes it: no --limit, everything else from the workdir
        full = run_cli("build", "--workdir", str(w), "--engine", "sglang", "--server", server.url, "--no-progress")
        served = server.served()
    finally:
        server.kill()

    report = json.loads((w / "prepared" / f"{config}.json").read_text())
    full_ids = prepared_ids(w, config)
    # every source row read and selected (n is far above the bundled rows); each prepared or rejected
    assert report["scanned"] == report["selected"] == source_rows, report
    assert report["prepared"] == len(full_ids) and report["prepared"] + report["rejected_total"] == source_rows
    assert report["limit"] is None
    assert set(pilot_ids) <= set(full_ids) and len(full_ids) > len(pilot_ids)

    # the pilot's completions reused: the server saw each prompt once over both runs, the checkpoint holds each once
    assert served == len(full_ids)
    ckpt = checkpoint_ids(w)
    assert sorted(ckpt) == sorted(full_ids)
    assert f"generate: {len(full_ids) - len(pilot_ids)} completed, 0 failed, {len(pilot_ids)} already done" \
        in full.stdout, full.stdout
    assert (f"reusing {len(pilot_ids)} completed samples from an earlier run (pilot limited to {PILOT_ROWS} rows "
            "per config)") in full.stderr, full.stderr
    assert "--limit" in full.stderr and "reads the full sources" in full.stderr

    # the dataset holds the full count
    validated = json.loads((w / "validated" / f"{config}.json").read_text())
    assert validated["selected"] == source_rows and validated["pending"] == 0 and validated["failed"] == 0
    rows = sum(pq.read_metadata(f).num_rows for f in (w / "dataset" / "data" / config).glob("*.parquet"))
    assert rows == len(full_ids)
