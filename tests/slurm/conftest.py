"""The Slurm tier (-m slurm): a real one-host Slurm cluster, started by scripts/slurm/run_tier.sh
(scripts/slurm/cluster.sh), runs the jobs `kimi-data slurm submit` writes."""

from __future__ import annotations

import subprocess

import pytest


@pytest.fixture(scope="session", autouse=True)
def slurm_cluster():
    """The cluster the tier script started: its controller answers and its node takes jobs. Without one the tier
    fails here, saying how to run it (a skip would pass for a test that never ran)."""
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
        node = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.fail("Slurm's commands are not installed: run the tier with `bash scripts/slurm/run_tier.sh`")
    if "UP" not in ping.stdout or not node.stdout.strip().startswith(("idle", "mix", "alloc")):
        pytest.fail(f"no Slurm cluster answers ({ping.stdout.strip() or ping.stderr.strip()}; node "
                    f"{node.stdout.strip() or node.stderr.strip()}): run `bash scripts/slurm/run_tier.sh`")
