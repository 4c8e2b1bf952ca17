"""A format installed from outside the package, as a user adding a model installs one: a small distribution written
here, declaring its format and test model through the `kimi_eagle_data.formats` entry point in its own pyproject,
pip-installed into a venv of its own (over this one's packages; no network), and used by that venv's `kimi-data`
console script: `render`, `build`, `demo`, `check`, `validate`, `inspect` (a Slurm job's: tests/slurm/). The
plug-in's format is Kimi-K2.5's under a name of its own, with one sentence of its own in the card, so the card shows
its object did the work.

Without the plug-in (this process's environment) its workdir is refused in one line naming the profile and how to
load the plug-in, and the same module named by KIMI_DATA_PLUGINS (on PYTHONPATH, not installed) is found too."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CARD_SENTENCE = "Rendered by the plug-in format plug-k2."

PLUGIN_INIT = '''
"""A format plug-in: Kimi-K2.5's format under a name of its own, and a test model speaking it."""
from dataclasses import replace

from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.registry import Declaration

TINY_PLUG = replace(TINY_KIMI, name="tiny-plug", chat_format="plug-k2", shipped_drafter="")
DECLARATION = Declaration(formats={"plug-k2": "toyplug.format:PLUG_FORMAT"}, profiles=(TINY_PLUG,))
'''
PLUGIN_FORMAT = f'''
from dataclasses import replace

from kimi_eagle_data.formats.kimi_k2.format import KimiK2Format


class PlugFormat(KimiK2Format):
    name = "plug-k2"

    def card_text(self):
        text = super().card_text()
        return replace(text, rules=text.rules + " {CARD_SENTENCE}")


PLUG_FORMAT = PlugFormat()
'''
PLUGIN_PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "kimi-data-toyplug"
version = "0.1"

[project.entry-points."kimi_eagle_data.formats"]
toyplug = "toyplug:DECLARATION"

[tool.setuptools]
packages = ["toyplug"]
'''


def write_plugin(root: Path) -> Path:
    (root / "toyplug").mkdir(parents=True)
    (root / "toyplug" / "__init__.py").write_text(textwrap.dedent(PLUGIN_INIT))
    (root / "toyplug" / "format.py").write_text(textwrap.dedent(PLUGIN_FORMAT))
    (root / "pyproject.toml").write_text(textwrap.dedent(PLUGIN_PYPROJECT))
    return root


def pip(python: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-build-isolation", "--no-index", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> tuple[Path, Path]:
    """(the plug-in's source folder, the bin folder of a venv holding kimi-eagle-data and the plug-in)."""
    base = tmp_path_factory.mktemp("plugin")
    source = write_plugin(base / "src")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # This venv's packages (torch, transformers, …) seen from the new one, as --system-site-packages would see
    # the system's: a venv made from a venv sees only the base interpreter's.
    [new_site] = (venv / "lib").glob("python*/site-packages")
    (new_site / "_over_the_test_venv.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in site.getsitepackages()))
    pip(venv / "bin" / "python", "-e", str(ROOT))     # the venv's own `kimi-data` console script
    pip(venv / "bin" / "python", str(source))
    return source, venv / "bin"


def kimi_data(bin_dir: Path | None, *args: str, cwd: Path, env: dict[str, str] | None = None):
    """The console script of `bin_dir`'s venv (None: this one's), in a process of its own."""
    script = (bin_dir or Path(sys.executable).parent) / "kimi-data"
    full = {k: v for k, v in os.environ.items() if k != "KIMI_DATA_PLUGINS"}
    full.update({"COLUMNS": "200", **(env or {})})
    return subprocess.run([str(script), *args], capture_output=True, text=True, cwd=cwd, env=full, timeout=600)


def ok(proc) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


ROW = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo?"},
                    {"role": "assistant", "content": "Let me look.", "reasoning_content": "Call it."},
                    {"role": "user", "content": "And Bergen?"}],
       "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
           "type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}}]}


def test_the_console_script_renders_with_the_installed_format(plugin, tmp_path):
    _, bin_dir = plugin
    row = tmp_path / "row.json"
    row.write_text(json.dumps(ROW))
    assert "tiny-plug" in ok(kimi_data(bin_dir, "build", "--help", cwd=tmp_path))      # in --profile's choices
    ours = ok(kimi_data(bin_dir, "render", str(row), "--profile", "tiny-plug", cwd=tmp_path))
    k25 = ok(kimi_data(None, "render", str(row), "--profile", "tiny-kimi", cwd=tmp_path))
    assert ours == k25 and ours.endswith("<|im_assistant|>assistant<|im_middle|><think>\n")
    # Without the plug-in the name is unknown: a usage error of --profile.
    refused = kimi_data(None, "render", str(row), "--profile", "tiny-plug", cwd=tmp_path)
    assert refused.returncode == 2 and "unknown model profile 'tiny-plug'" in refused.stderr


def test_demo_check_validate_and_inspect_run_a_plugin_s_test_model(plugin, tmp_path):
    _, bin_dir = plugin
    w = tmp_path / "w"
    ok(kimi_data(bin_dir, "demo", "--profile", "tiny-plug", "--workdir", str(w), "--limit", "1", "--no-progress",
                 cwd=tmp_path))
    assert json.loads((w / "run.json").read_text())["profile"] == "tiny-plug"
    assert CARD_SENTENCE in (w / "dataset" / "README.md").read_text()      # the plug-in's object wrote the card
    assert "0 with another" in ok(kimi_data(bin_dir, "check", str(w), "--no-progress", cwd=tmp_path))
    ok(kimi_data(bin_dir, "validate", "--workdir", str(w), cwd=tmp_path))
    shown = ok(kimi_data(bin_dir, "inspect", str(w), "B4", "--random", cwd=tmp_path))
    assert "generation prompt" in shown and "end of turn" in shown      # the format's segmenter split it
    # Where the plug-in is not installed, `check DIR`, `validate` and `inspect` name the profile the dataset or
    # workdir was made with, and how to load its plug-in, in one line.
    for args, names in ((("check", str(w), "--no-progress"), "manifest names profile 'tiny-plug'"),
                        (("validate", "--workdir", str(w)), "options.profile: unknown model profile 'tiny-plug'"),
                        (("inspect", str(w), "B4", "--random"), "made with profile 'tiny-plug'")):
        refused = kimi_data(None, *args, cwd=tmp_path)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 1 and len(lines) == 1, (args, refused.stderr)
        assert names in lines[0] and "--profile" not in lines[0], lines[0]
        assert "install the plug-in" in lines[0] and "KIMI_DATA_PLUGINS" in lines[0] \
            and "kimi_eagle_data.formats" in lines[0], lines[0]


def test_build_runs_a_plugin_s_test_model(plugin, tmp_path):
    _, bin_dir = plugin
    w = tmp_path / "w"
    ok(kimi_data(bin_dir, "build", "B6", "--samples", "--profile", "tiny-plug", "--workdir", str(w), "--limit", "2",
                 "--max-new-tokens", "32", "--no-progress", cwd=tmp_path))
    run = json.loads((w / "run.json").read_text())
    assert run["profile"] == "tiny-plug" and (w / "dataset" / "manifest.json").exists()
    assert CARD_SENTENCE in (w / "dataset" / "README.md").read_text()


def test_kimi_data_plugins_names_a_module_that_is_not_installed(plugin, tmp_path):
    source, _ = plugin
    row = tmp_path / "row.json"
    row.write_text(json.dumps(ROW))
    env = {"KIMI_DATA_PLUGINS": "toyplug", "PYTHONPATH": str(source)}
    shown = ok(kimi_data(None, "render", str(row), "--profile", "tiny-plug", cwd=tmp_path, env=env))
    assert shown.endswith("<think>\n")
    # A module that cannot be imported is left out: its profile is unknown, and the message says why.
    broken = kimi_data(None, "render", str(row), "--profile", "tiny-plug", cwd=tmp_path,
                       env={"KIMI_DATA_PLUGINS": "toyplug_missing"})
    assert broken.returncode == 2
    assert "plug-in 'toyplug_missing' (KIMI_DATA_PLUGINS) failed to load: ModuleNotFoundError" in broken.stderr
