"""The draft vocabulary's counts (dataset/token_freq/<CFG>.parquet, docs/data-format.md): equal to a bincount
over the emitted train rows' input_ids where loss_mask is 1, listed in the manifest, and summarised in the card
(ids covering 90/95/99/99.9% of the loss tokens, and a plot)."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.sources.partitions import PARTITIONS


def emitted_loss_bincount(dataset, config: str, vocab: int) -> np.ndarray:
    """Computed here from the train shards alone (pyarrow + numpy)."""
    total = np.zeros(vocab, dtype=np.int64)
    for shard in sorted((dataset / "data" / config).glob("train-*.parquet")):
        t = pq.read_table(shard, columns=["input_ids", "loss_mask"])
        for ids, mask in zip(t["input_ids"].to_pylist(), t["loss_mask"].to_pylist()):
            ids, mask = np.array(ids), np.array(mask)
            assert len(ids) == len(mask)
            total += np.bincount(ids[mask == 1], minlength=vocab)
    return total


def tiny_vocab_size() -> int:
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    return json.loads((TINY_MODEL_DIR / "config.json").read_text())["vocab_size"]


def test_token_freq_equals_a_bincount_of_the_emitted_loss_tokens(demo_run):
    workdir, _ = demo_run
    dataset = workdir / "dataset"
    vocab = tiny_vocab_size()
    manifest = json.loads((dataset / "manifest.json").read_text())
    for config in PARTITIONS:
        path = dataset / "token_freq" / f"{config}.parquet"
        t = pq.read_table(path)
        assert t.column_names == ["token_id", "count"]
        assert str(t.schema.field("token_id").type) == "int32" and str(t.schema.field("count").type) == "int64"
        assert t["token_id"].to_pylist() == list(range(vocab))         # one row per id of the model, in order
        want = emitted_loss_bincount(dataset, config, vocab)
        assert want.sum() > 0
        assert np.array_equal(t["count"].to_numpy(), want), config
        # the loss tokens are exactly the train rows' completions
        light = pq.read_table(workdir / "validated" / f"{config}.parquet", columns=["split", "completion_len"])
        train = [n for s, n in zip(light["split"].to_pylist(), light["completion_len"].to_pylist()) if s == "train"]
        assert int(want.sum()) == sum(train)
        assert f"token_freq/{config}.parquet" in manifest["files"]


def ids_for(counts: np.ndarray, share: float) -> int:
    """The fewest ids reaching `share` of the total, by walking the sorted counts."""
    need, acc = share * counts.sum(), 0
    for n, c in enumerate(sorted(counts.tolist(), reverse=True), start=1):
        acc += c
        if acc >= need - 1e-9:
            return n
    raise AssertionError("never reached")


def test_card_reports_coverage_per_config_and_overall(demo_run):
    workdir, _ = demo_run
    dataset = workdir / "dataset"
    card = (dataset / "README.md").read_text()
    section = card.split("## Draft vocabulary", 1)[1].split("\n## ", 1)[0]
    assert "| config | loss tokens | distinct ids | 90% | 95% | 99% | 99.9% |" in section
    rows = {m.group(1): [int(x.replace(",", "")) for x in m.group(2).split(" | ")]
            for m in re.finditer(r"^\| (\*\*all\*\*|B\d) \| ([\d, |]+) \|$", section, re.MULTILINE)}
    vocab = tiny_vocab_size()
    counts = {c: emitted_loss_bincount(dataset, c, vocab) for c in PARTITIONS}
    counts["**all**"] = sum(counts.values())
    assert list(rows) == [*PARTITIONS, "**all**"]
    for name, c in counts.items():
        assert rows[name] == [int(c.sum()), int(np.count_nonzero(c)),
                              *(ids_for(c, s) for s in (0.9, 0.95, 0.99, 0.999))], name
    plot = re.search(r"!\[[^]]+\]\((assets/vocab_coverage\.png)\)", section)
    assert plot and (dataset / plot.group(1)).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert card.count("vocab_coverage.png") == 1                     # in its section, not among the others
    assert "assets/vocab_coverage.png" in json.loads((dataset / "manifest.json").read_text())["files"]


@pytest.mark.parametrize("counts, share, want", [([5, 0, 3, 2], 0.5, 1), ([5, 0, 3, 2], 0.8, 2),
                                                 ([5, 0, 3, 2], 0.9, 3), ([1] * 1000, 0.999, 999),
                                                 ([0, 0], 0.9, None)])
def test_ids_to_cover(counts, share, want):
    from kimi_eagle_data.emit.token_freq import ids_to_cover

    assert ids_to_cover(np.array(counts), share) == want


def test_counts_grow_past_the_declared_vocabulary(tmp_path):
    """An id beyond the model's vocabulary (which validation rejects anyway) is counted, never dropped."""
    from kimi_eagle_data.emit.token_freq import TokenCounts, read_counts, write_counts

    c = TokenCounts(4)
    c.add_ids(np.array([1, 1, 3]))
    c.add_ids(np.array([6, 1]))
    assert c.counts.tolist() == [0, 3, 0, 1, 0, 0, 1]
    write_counts(tmp_path / "x.parquet", c.counts)
    assert read_counts(tmp_path / "x.parquet").tolist() == c.counts.tolist()
