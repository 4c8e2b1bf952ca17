"""`kimi-data demo --profile tiny-kimi-k3` on CPU: the bundled samples of every config through the embedded tiny K3
model. Every config gets train rows, the accounting balances, `check` agrees with every recorded verdict, and both
exports (SpecForge's JSONL, speculators' Arrow dataset) load."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
from datasets import load_from_disk

from kimi_eagle_data.sources.partitions import PARTITIONS


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kimi_eagle_data", *args], capture_output=True, text=True,
                          timeout=600)


def test_k3_demo_every_config_has_rows_check_agrees_exports_load(tmp_path):
    work = tmp_path / "w"
    demo = _cli("demo", "--profile", "tiny-kimi-k3", "--workdir", str(work), "--limit", "2", "--no-progress")
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "accounting" in demo.stdout and "✓" in demo.stdout, demo.stdout[-2000:]
    manifest = json.loads((work / "dataset" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["provenance"]["profile"] == "tiny-kimi-k3"
    train = 0
    for config in PARTITIONS:
        files = sorted((work / "dataset" / "data" / config).glob("train-*.parquet"))
        rows = sum(pq.read_metadata(f).num_rows for f in files)
        assert rows > 0, f"{config} has no train row under tiny-kimi-k3"
        assert manifest["configs"][config]["splits"]["train"]["rows"] == rows
        train += rows
    checked = _cli("check", str(work / "dataset"), "--profile", "tiny-kimi-k3")
    said = " ".join((checked.stdout + checked.stderr).split())
    assert checked.returncode == 0 and "with the verdict they record, 0 with another" in said, said[-2000:]

    sf = tmp_path / "sf.jsonl"
    exported = _cli("export", str(work), "--format", "specforge", "--out", str(sf))
    assert exported.returncode == 0, exported.stderr[-2000:]
    rows = [json.loads(line) for line in sf.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == train and all(len(r["input_ids"]) == len(r["loss_mask"]) and 1 in r["loss_mask"]
                                      for r in rows)
    spec = tmp_path / "spec"
    exported = _cli("export", str(work), "--format", "speculators", "--out", str(spec))
    assert exported.returncode == 0, exported.stderr[-2000:]
    ds = load_from_disk(str(spec))
    assert len(ds) == train and [list(r) for r in ds["input_ids"]] == [r["input_ids"] for r in rows]
