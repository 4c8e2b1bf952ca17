"""A sample's randomness comes from its own id (engines/local.py's RowSampler): a run of the local engine that was
killed and resumed, or a pilot followed by the full run, emits the rows an uninterrupted run emits, byte for
byte."""

from __future__ import annotations

import shutil
import signal
import subprocess

import pytest

from tests.helpers.cli import popen_cli, run_cli, tree_hashes
from tests.helpers.servers import TINY, wait_for
from tests.helpers.workdirs import completions, prepared_count

# Sampled (the profile's temperature 1.0, top_p 0.95), in batches of 4 so that a resumed or pilot run batches
# every sample with other samples than the uninterrupted run does.
BUILD = ["B6", "--profile", "tiny-kimi", "--model", TINY, "--samples", "--max-new-tokens", "32", "--batch-size", "4",
         "--no-progress"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    w = tmp_path_factory.mktemp("uninterrupted") / "w"
    run_cli("build", *BUILD, "--workdir", str(w))
    return w


def rows(w) -> dict[str, str]:
    """Every Parquet file of the dataset's rows, by hash (rows in id order: equal files, equal rows)."""
    found = tree_hashes(w / "dataset" / "data")
    assert found, f"no rows in {w}"
    return found


def test_a_pilot_then_the_full_run_equals_an_uninterrupted_run(uninterrupted, tmp_path):
    w = tmp_path / "w"
    run_cli("build", *BUILD, "--workdir", str(w), "--limit", "8")
    pilot = set(completions(w))
    assert 0 < len(pilot) < prepared_count(uninterrupted)
    proc = run_cli("build", *BUILD, "--workdir", str(w))
    assert f"reusing {len(pilot)} completed samples" in proc.stderr + proc.stdout, proc.stderr
    assert rows(w) == rows(uninterrupted)


def test_a_killed_and_resumed_run_equals_an_uninterrupted_run(uninterrupted, tmp_path):
    w = tmp_path / "w"
    run_cli("prepare", *BUILD[:-3], "--workdir", str(w))
    n = prepared_count(w)
    proc = popen_cli("generate", "--workdir", str(w), "--batch-size", "4", "--no-progress",
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(lambda: len(completions(w)) >= 4, 300, "generate committed nothing", proc=proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    done = len(completions(w))
    assert 4 <= done < n, (done, n)
    run_cli("build", *BUILD, "--workdir", str(w))
    assert len(completions(w)) == n
    assert rows(w) == rows(uninterrupted)


def test_another_batch_size_samples_the_same_tokens(uninterrupted, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(uninterrupted, w)
    for f in w.glob("generations.sqlite*"):
        f.unlink()
    shutil.rmtree(w / "dataset")
    run_cli("build", *BUILD[:-3], "--batch-size", "1", "--no-progress", "--workdir", str(w))
    assert rows(w) == rows(uninterrupted)
