"""`kimi-data demo --profile tiny-kimi-k3` on CPU: the bundled samples of every config through the embedded tiny K3
model. Every config gets train rows, the accounting balances, `check` agrees with every recorded verdict, and both
exports load as their trainers load them: SpecForge's pre-tokenized JSONL through SpecForge's prompt reader,
speculators' Arrow dataset and token_freq.pt through speculators' loader and vocabulary mapping
(tests/helpers/trainer_contracts.py; the trainer tier, tests/trainers/, runs the real ones on the same exports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datasets import load_from_disk

from kimi_eagle_data.sources.partitions import PARTITIONS
from tests.helpers.cli import run_cli
from tests.helpers.trainer_contracts import (check_speculators_dataset, specforge_prepare_prompts,
                                             speculators_build_vocab_mappings, speculators_token_freq)

MAX_LENGTH = 1 << 20       # SpecForge's data.max_length: longer than any demo row, so nothing is cut
ORACLE = Path(__file__).resolve().parents[3] / "scripts" / "specforge_k3_oracle.py"
LIVE_TEMPLATE = """
import importlib.util, json, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("specforge_k3_oracle", sys.argv[1])
oracle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(oracle)
preprocess, template = oracle.load_specforge(Path(sys.argv[2]))
tokenizer = oracle.tiny_k3_tokenizer()
texts = json.loads(Path(sys.argv[3]).read_text(encoding="utf-8"))
print(json.dumps([oracle.specforge_outcome(preprocess, template, tokenizer, {"text": t, "tools": []}, "preformatted")
                  for t in texts]))
"""


def _cli(*args):
    return run_cli(*args, check=False, timeout=600)


def train_rows(work) -> list[dict]:
    """The dataset's train rows in export order (config by config, shard by shard)."""
    dataset = work / "dataset"
    rows = []
    for config in json.loads((dataset / "manifest.json").read_text(encoding="utf-8"))["configs"]:
        for f in sorted((dataset / "data" / config).glob("train-*.parquet")):
            rows += pq.read_table(f, columns=["id", "input_ids", "loss_mask"]).to_pylist()
    return rows


@pytest.fixture(scope="module")
def k3_work(k3_demo_run):
    work, demo = k3_demo_run
    assert demo.returncode == 0, demo.stderr[-2000:]
    return work


def test_k3_demo_every_config_has_rows_check_agrees(k3_demo_run, k3_work):
    work, demo = k3_demo_run
    assert "accounting" in demo.stdout and "✓" in demo.stdout, demo.stdout[-2000:]
    manifest = json.loads((work / "dataset" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["provenance"]["profile"] == "tiny-kimi-k3"
    for config in PARTITIONS:
        files = sorted((work / "dataset" / "data" / config).glob("train-*.parquet"))
        rows = sum(pq.read_metadata(f).num_rows for f in files)
        assert rows > 0, f"{config} has no train row under tiny-kimi-k3"
        assert manifest["configs"][config]["splits"]["train"]["rows"] == rows
    checked = _cli("check", str(work / "dataset"), "--profile", "tiny-kimi-k3")
    said = " ".join((checked.stdout + checked.stderr).split())
    assert checked.returncode == 0 and "with the verdict they record, 0 with another" in said, said[-2000:]


def test_k3_specforge_export_reads_in_specforges_prompt_reader(k3_work, tmp_path):
    want = train_rows(k3_work)
    sf = tmp_path / "sf.jsonl"
    exported = _cli("export", str(k3_work), "--format", "specforge", "--out", str(sf))
    assert exported.returncode == 0, exported.stderr[-2000:]
    rows = [json.loads(line) for line in sf.read_text(encoding="utf-8").splitlines()]
    assert rows == want and all(1 in r["loss_mask"] for r in rows)
    payloads = [{"input_ids": r["input_ids"], "loss_mask": r["loss_mask"]} for r in rows]
    assert [p["payload"] for p in specforge_prepare_prompts(sf, MAX_LENGTH)] == payloads


def test_k3_speculators_export_loads_and_its_token_freq_counts_the_k3_loss_tokens(k3_work, tmp_path):
    import torch

    from kimi_eagle_data.formats.kimi_k3 import TINY_KIMI_K3
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer

    want = train_rows(k3_work)
    spec = tmp_path / "spec"
    exported = _cli("export", str(k3_work), "--format", "speculators", "--out", str(spec))
    assert exported.returncode == 0, exported.stderr[-2000:]
    ds = load_from_disk(str(spec))
    check_speculators_dataset(ds, want)
    # scripts/train.py parse_vocab_mappings: `data_path / "token_freq.pt"`, `torch.load(..., weights_only=True)`
    freq = torch.load(spec / "token_freq.pt", weights_only=True)
    assert type(freq) is dict and all(type(k) is int and type(v) is int and v > 0 for k, v in freq.items())
    assert freq == speculators_token_freq(ds)
    # K3's stop token is a loss token: counted once per row that ends a turn
    end_of_msg = open_tokenizer(TINY_KIMI_K3.model_path).convert_tokens_to_ids("<|end_of_msg|>")
    assert freq[end_of_msg] == sum(r["input_ids"][-1] == end_of_msg for r in want) > 0
    vocab = pq.ParquetFile(next((k3_work / "dataset" / "token_freq").glob("*.parquet"))).metadata.num_rows
    d2t, t2d = speculators_build_vocab_mappings(freq, 32, vocab)
    assert d2t.shape == (32,) and int(t2d.sum()) == 32 and bool(t2d[end_of_msg])


@pytest.mark.skipif(not os.environ.get("SPECFORGE_SRC"), reason="SPECFORGE_SRC names no SpecForge checkout")
def test_k3_demo_rows_through_specforges_own_kimi_k3_thinking_template(k3_work, tmp_path):
    """The relation tests/formats/kimi_k3/test_k3_specforge.py holds on the golden rows, on the tiny model's own rows:
    SpecForge reading each row's text with `kimi-k3-thinking` masks a thinking row's completion without its
    `<|end_of_msg|>` and an instant row not at all (docs/kimi-k3.md)."""
    from kimi_eagle_data.formats.kimi_k3 import TINY_KIMI_K3
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer

    tokenizer = open_tokenizer(TINY_KIMI_K3.model_path)
    end_of_msg = tokenizer.convert_tokens_to_ids("<|end_of_msg|>")
    rows = []
    for f in sorted((k3_work / "dataset" / "data").glob("*/train-*.parquet")):
        rows += pq.read_table(f, columns=["input_ids", "prompt_len", "mode"]).to_pylist()
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps([tokenizer.decode(r["input_ids"]) for r in rows]), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", LIVE_TEMPLATE, str(ORACLE), os.environ["SPECFORGE_SRC"], str(texts)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = json.loads(proc.stdout.strip().splitlines()[-1])
    agreeing = 0
    for row, text, theirs in zip(rows, json.loads(texts.read_text(encoding="utf-8")), outcomes, strict=True):
        ids, start = row["input_ids"], row["prompt_len"]
        assert ids[-1] == end_of_msg
        if row["mode"] == "instant":
            assert theirs["mask"] == []
        elif tokenizer(text, add_special_tokens=False)["input_ids"] == ids:
            assert theirs["mask"] == [[start, len(ids) - 1]]          # ours = SpecForge's + <|end_of_msg|>
            agreeing += 1
        else:
            whole = tokenizer(text, add_special_tokens=False)["input_ids"]
            masked = [tokenizer.decode(whole[a:b]) for a, b in theirs["mask"]]
            assert masked == [tokenizer.decode(ids[start:]).split("<|end_of_msg|>")[0]]
    assert agreeing > 0 and any(r["mode"] == "instant" for r in rows)
