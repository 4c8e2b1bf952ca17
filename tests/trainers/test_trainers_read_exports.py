"""The trainer tier: speculators 0.9.0 and SpecForge 0.2.0, each in its own cached venv (scripts/trainers/), run their
own readers on our exports of the tiny-kimi (K2.5) and tiny-kimi-k3 demo datasets, row for row, and build their own
vocabulary files, which must equal ours. The drivers (speculators_reads.py, specforge_reads.py beside this file) run
in the trainers' venvs; everything they report is compared here with what our dataset holds. The main suite's
restatements of the same readers (tests/helpers/trainer_contracts.py) are checked against the real ones too."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.formats.kimi_k3 import TINY_KIMI_K3
from tests.helpers.cli import REPO, run_cli
from tests.helpers.trainer_contracts import specforge_prepare_prompts, speculators_build_vocab_mappings

pytestmark = pytest.mark.trainer

HERE = Path(__file__).resolve().parent
PROFILES = {"tiny-kimi": TINY_KIMI, "tiny-kimi-k3": TINY_KIMI_K3}
# Draft vocabularies that cut through ids tied on count (asserted below), so the tie-break is exercised: the K2.5
# demo has 861 distinct loss ids, the K3 demo at --limit 2 has 511. PADDED is more than either: the padding is.
CUT = {"tiny-kimi": 512, "tiny-kimi-k3": 256}
PADDED = 1024


def trainer_python(trainer: str) -> Path:
    """The cached venv's python of `trainer`; the tier FAILS (never skips) when it is not installed."""
    script = REPO / "scripts" / "trainers" / f"install_{trainer}.sh"
    venv = Path(subprocess.run(["bash", str(script), "--path"], capture_output=True, text=True, check=True)
                .stdout.strip())
    if not (venv / ".complete").is_file():
        pytest.fail(f"{trainer}'s venv {venv} is not installed; run `bash scripts/trainers/run_tier.sh`",
                    pytrace=False)
    return venv / "bin" / "python"


def run_in(trainer: str, driver: str, *args: str | Path) -> dict:
    """`driver` (beside this file) under the trainer's own python, the clone on PYTHONPATH (the tiny tokenizers'
    remote code imports kimi_eagle_data); its JSON report."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run([str(trainer_python(trainer)), str(HERE / driver), *map(str, args)], capture_output=True,
                          text=True, timeout=600, env=env, cwd=args[-1])
    assert proc.returncode == 0, f"{driver} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=sorted(PROFILES))
def demo(request):
    """(profile name, the demo's workdir): the session's K2.5 or K3 demo."""
    work, proc = request.getfixturevalue("demo_run" if request.param == "tiny-kimi" else "k3_demo_run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return request.param, work


def train_rows(work: Path) -> list[dict]:
    """The dataset's train rows in export order (config by config, shard by shard)."""
    dataset = work / "dataset"
    rows = []
    for config in json.loads((dataset / "manifest.json").read_text(encoding="utf-8"))["configs"]:
        for f in sorted((dataset / "data" / config).glob("train-*.parquet")):
            rows += pq.read_table(f, columns=["input_ids", "loss_mask"]).to_pylist()
    return rows


def loss_counts(rows: list[dict]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for r in rows:
        for token, m in zip(r["input_ids"], r["loss_mask"], strict=True):
            if m:
                counts[token] = counts.get(token, 0) + 1
    return counts


def vocab_size(work: Path) -> int:
    return pq.ParquetFile(next((work / "dataset" / "token_freq").glob("*.parquet"))).metadata.num_rows


def export(work: Path, fmt: str, out: Path, *extra: str) -> Path:
    run_cli("export", str(work), "--format", fmt, "--out", str(out), *extra, timeout=600)
    return out


def assert_cut_inside_a_tie(counts: dict[int, int], chosen: list[int]) -> None:
    """Some ids at the cut's count were left out: which ones is the tie-break's choice."""
    cut = min(counts[i] for i in chosen)
    assert sum(c == cut for c in counts.values()) > sum(counts[i] == cut for i in chosen)


def test_speculators_reads_our_exports_row_for_row_and_maps_the_vocabulary_as_we_count(demo, tmp_path):
    profile, work = demo
    want = train_rows(work)
    arrow = export(work, "speculators", tmp_path / "speculators")
    jsonl = export(work, "specforge", tmp_path / "sf" / "train.jsonl")
    (tmp_path / "run").mkdir()
    draft = CUT[profile]
    seen = run_in("speculators", "speculators_reads.py", arrow, jsonl, PROFILES[profile].model_path, draft,
                  tmp_path / "run")

    # Its trainer's dataset and prepare-data's pass-through keep every row as it is, in order.
    assert seen["trainer_rows"] == want
    assert seen["trainer_lengths"] == [len(r["input_ids"]) for r in want]
    assert seen["passthrough_arrow_rows"] == want
    assert seen["passthrough_jsonl_rows"] == want
    # prepare-data proper shuffles (its --seed) and keeps every row.
    key = lambda r: (r["input_ids"], r["loss_mask"])    # noqa: E731
    assert sorted(seen["prepared_rows"], key=key) == sorted(want, key=key) and seen["prepared_rows"] != want

    # Its token frequencies, counted by its own code over our rows and over its prepared rows, are our file's.
    counts = loss_counts(want)
    ours = dict(seen["our_token_freq"])
    assert ours == counts
    assert dict(seen["counted_token_freq"]) == ours and dict(seen["prepared_token_freq"]) == ours

    # Its train CLI's d2t/t2d from our token_freq.pt: the `draft` most frequent ids, ties to the lower id.
    vocab = vocab_size(work)
    assert seen["target_vocab_size"] == vocab
    by_count = sorted(counts, key=lambda tid: (-counts[tid], tid))[:draft]
    assert seen["t2d_ids"] == sorted(by_count)
    assert seen["d2t"] == (np.array(seen["t2d_ids"]) - np.arange(draft)).tolist()
    assert_cut_inside_a_tie(counts, seen["t2d_ids"])
    # The main suite's restatement builds the same.
    d2t, t2d = speculators_build_vocab_mappings(ours, draft, vocab)
    assert d2t.tolist() == seen["d2t"] and t2d.nonzero().flatten().tolist() == seen["t2d_ids"]


@pytest.mark.parametrize("draft,shuffle", [("cut", False), ("cut", True), ("padded", False)],
                         ids=["cut-in-order", "cut-shuffled", "padded"])
def test_specforge_reads_our_jsonl_row_for_row_and_builds_our_vocab_mapping(demo, tmp_path, draft, shuffle):
    import torch

    profile, work = demo
    size = CUT[profile] if draft == "cut" else PADDED
    jsonl = export(work, "specforge", tmp_path / "sf" / "train.jsonl", "--draft-vocab-size", str(size),
                   *(["--shuffle", "--seed", "7"] if shuffle else []))
    rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    want = train_rows(work)
    payloads = [{"input_ids": r["input_ids"], "loss_mask": r["loss_mask"]} for r in rows]
    if shuffle:
        assert payloads != want and sorted(payloads, key=str) == sorted(want, key=str)
    else:
        assert payloads == want
    vocab = vocab_size(work)
    (tmp_path / "run").mkdir()
    seen = run_in("specforge", "specforge_reads.py", jsonl, vocab, size, tmp_path / "run")

    # Its prompt reader takes every line as it is, in order; the main suite's restatement reads the same.
    assert seen["prompts"] == payloads
    assert [p["payload"] for p in specforge_prepare_prompts(jsonl, 1 << 30)] == payloads

    # Its generate_vocab_mapping_file over those prompts builds exactly our vocab_mapping.pt, ties at the cut
    # (broken by the first row that holds each id, in the file's order) and padding included.
    assert seen["mapping_keys"] == ["d2t", "t2d"]
    assert (seen["d2t_dtype"], seen["t2d_dtype"], seen["t2d_len"]) == ("torch.int64", "torch.bool", vocab)
    mapping = torch.load(jsonl.parent / "vocab_mapping.pt")
    assert mapping["d2t"].tolist() == seen["d2t"]
    assert mapping["t2d"].nonzero().flatten().tolist() == seen["t2d_ids"] and len(mapping["t2d"]) == vocab
    counts = loss_counts(want)
    if draft == "cut":
        assert_cut_inside_a_tie(counts, seen["t2d_ids"])
        # ... which the lowest-id rule (speculators') would not have chosen.
        assert sorted(sorted(counts, key=lambda tid: (-counts[tid], tid))[:size]) != seen["t2d_ids"]
    else:
        assert len(counts) < size and set(counts) < set(seen["t2d_ids"])
