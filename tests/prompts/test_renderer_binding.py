"""A tiny model's tokenizer renders with the package's own modules (tiny-kimi-k3's imports `formats/kimi_k3/render.py`,
tiny-kimi's the K2.5 tool encoder), so run.json binds those modules' hashes beside the tokenizer files' own: a workdir
resumes while they are unchanged and is refused in one line, naming the module, once one changes. The package is a
copy on PYTHONPATH (the real source is never edited), run by `python -m kimi_eagle_data` in a process of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.prompts.tokenizer import open_tokenizer, tokenizer_modules_sha256

ROOT = Path(__file__).resolve().parents[2]


def _package_copy(at: Path) -> Path:
    shutil.copytree(ROOT / "kimi_eagle_data", at / "kimi_eagle_data",
                    ignore=shutil.ignore_patterns("__pycache__", "*-eagle3"))
    return at


def _prepare(package: Path, workdir: Path, profile: str):
    env = {**os.environ, "PYTHONPATH": str(package)}
    return subprocess.run([sys.executable, "-m", "kimi_eagle_data", "prepare", "--workdir", str(workdir),
                           "--profile", profile, "--samples", "--limit", "2", "--no-progress"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=package)


def test_the_tiny_tokenizers_bind_the_modules_they_render_with():
    mods = tokenizer_modules_sha256(open_tokenizer(str(TINY_MODEL_DIR)))
    assert "kimi_eagle_data.formats.kimi_k2.tool_declaration" in mods
    assert all(len(h) == 64 for h in mods.values())
    # A tokenizer whose code imports nothing of the package (a real checkpoint's): nothing more is bound.
    assert tokenizer_modules_sha256(open_tokenizer(str(TINY_MODEL_DIR)), packages=("no_such_package",)) == {}


@pytest.mark.parametrize("profile, module", [
    ("tiny-kimi-k3", "formats/kimi_k3/render.py"),
    ("tiny-kimi", "formats/kimi_k2/tool_declaration.py"),
])
def test_a_changed_renderer_module_refuses_the_workdir_in_one_line(tmp_path, profile, module):
    package = _package_copy(tmp_path / "pkg")
    w = tmp_path / "w"
    first = _prepare(package, w, profile)
    assert first.returncode == 0, first.stderr
    name = "kimi_eagle_data." + module.removesuffix(".py").replace("/", ".")
    bound = json.loads((w / "run.json").read_text(encoding="utf-8"))["tokenizer_modules_sha256"]
    assert name in bound, bound
    again = _prepare(package, w, profile)          # nothing changed: it resumes
    assert again.returncode == 0, again.stderr
    with open(package / "kimi_eagle_data" / module, "a", encoding="utf-8") as f:
        f.write("\n# a later revision of the renderer\n")
    refused = _prepare(package, w, profile)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 1 and len(lines) == 1, refused.stderr
    assert f"tokenizer_modules_sha256['{name}']" in lines[0] and "other rendering code" in lines[0], lines[0]
    assert lines[0].count("tokenizer_modules_sha256") == 1       # only the module that changed is named
