"""A format plug-in on Slurm: `kimi-data slurm submit` of a plug-in's test model (tests/formats/test_plugin.py's
`tiny-plug`), its three jobs run by the one-host cluster. Each job calls `kimi-data` by name, so each must find the
plug-in itself: through its entry point when the submit ran from the plug-in's venv (the job scripts put that venv
first on PATH), and through KIMI_DATA_PLUGINS (which the scripts export) when the module is only on PYTHONPATH. The
card then holds the plug-in's own sentence: its format object did the work."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.formats.test_plugin import CARD_SENTENCE, kimi_data, ok, plugin  # noqa: F401 - `plugin` is a fixture
from tests.helpers.servers import wait_for

pytestmark = pytest.mark.slurm

RUN = ["B6", "--samples", "--profile", "tiny-plug", "--limit", "4", "--max-new-tokens", "32", "--nodes", "2",
       "--engine", "local", "--batch-size", "1"]
DEADLINE_S = 600


def job_state(job: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True).stdout
    return next((f.split("=", 1)[1] for f in out.split() if f.startswith("JobState=")), "")


def run_on_slurm(bin_dir: Path | None, workdir: Path, env: dict[str, str] | None = None) -> dict:
    """Submit, wait for the finalize job to end, and give `slurm status --json` (by the same kimi-data)."""
    ok(kimi_data(bin_dir, "slurm", "submit", *RUN, "--workdir", str(workdir), cwd=workdir.parent, env=env))
    jobs = json.loads((workdir / "slurm" / "submit.json").read_text())["jobs"]
    wait_for(lambda: job_state(jobs["finalize"]) not in ("", "PENDING", "RUNNING", "COMPLETING", "CONFIGURING"),
             DEADLINE_S, "the finalize job did not end")
    return json.loads(ok(kimi_data(bin_dir, "slurm", "status", "--workdir", str(workdir), "--json",
                                   cwd=workdir.parent, env=env)))


def assert_made_by_the_plugin(workdir: Path, final: dict) -> None:
    logs = "".join(p.read_text(errors="replace") for p in sorted((workdir / "slurm").rglob("*.log")))
    assert final["done"] == final["total"] > 0 and final["failed"] == 0, (final, logs[-3000:])
    assert {j["job"]: j["state"] for j in final["jobs"]} == {"prepare": "COMPLETED", "finalize": "COMPLETED"}, final
    assert json.loads((workdir / "run.json").read_text())["profile"] == "tiny-plug"
    manifest = json.loads((workdir / "dataset" / "manifest.json").read_text())
    assert manifest["provenance"]["profile"] == "tiny-plug"
    assert CARD_SENTENCE in (workdir / "dataset" / "README.md").read_text()


def test_jobs_find_an_installed_plugin_by_its_entry_point(plugin, tmp_path):  # noqa: F811
    _, bin_dir = plugin
    w = tmp_path / "w"
    final = run_on_slurm(bin_dir, w)
    assert f"export PATH={bin_dir}:" in (w / "slurm" / "prepare.sbatch").read_text()
    assert_made_by_the_plugin(w, final)


def test_jobs_find_a_plugin_module_by_kimi_data_plugins(plugin, tmp_path):  # noqa: F811
    source, _ = plugin
    w = tmp_path / "w"
    env = {"KIMI_DATA_PLUGINS": "toyplug", "PYTHONPATH": os.pathsep.join(filter(None, (
        str(source), os.environ.get("PYTHONPATH"))))}
    final = run_on_slurm(None, w, env)
    for job in ("prepare", "generate", "finalize"):
        assert "export KIMI_DATA_PLUGINS=toyplug" in (w / "slurm" / f"{job}.sbatch").read_text(), job
    assert_made_by_the_plugin(w, final)
