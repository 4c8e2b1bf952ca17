"""prepare under a K3 profile with a "checkpoint" whose tokenizer has its own chat code (fake checkpoints: the tiny
K3 tokenizer's files copied into a directory): the first prompts are rendered by our renderer too, a checkpoint
whose code renders otherwise stops prepare in one line naming the encoder's sha256 and the first differing segment,
and run.json binds the encoder's sha256."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TINY_K3 = ROOT / "kimi_eagle_data" / "assets" / "tiny-kimi-k3"
FILES = ("tiktoken.model", "tokenization_tiny_kimi_k3.py", "tokenizer_config.json")
RENAMES_USER = '''

_ours = TinyKimiK3Tokenizer.chat_segments


def _renamed(self, *args, **kwargs):
    return [type(s)(s.text.replace("user", "human"), s.allow_special) for s in _ours(self, *args, **kwargs)]


TinyKimiK3Tokenizer.chat_segments = _renamed
'''


def _checkpoint(at: Path, extra_code: str = "") -> Path:
    at.mkdir(parents=True)
    for name in FILES:
        shutil.copy(TINY_K3 / name, at / name)
    if extra_code:
        with open(at / "tokenization_tiny_kimi_k3.py", "a", encoding="utf-8") as f:
            f.write(extra_code)
    return at


def _prepare(workdir: Path, tokenizer: Path):
    return subprocess.run([sys.executable, "-m", "kimi_eagle_data", "prepare", "B6", "--workdir", str(workdir),
                           "--profile", "tiny-kimi-k3", "--tokenizer", str(tokenizer), "--samples"],
                          capture_output=True, text=True, timeout=300)


def test_matching_checkpoint_code_prepares_and_binds_its_encoder(tmp_path):
    same = _checkpoint(tmp_path / "same")
    out = _prepare(tmp_path / "w", same)
    assert out.returncode == 0, out.stderr
    run = json.loads((tmp_path / "w" / "run.json").read_text(encoding="utf-8"))
    assert len(run["encoder_sha256"]) == 64
    # Same rendering, another encoder file: the run does not resume under it.
    other = _checkpoint(tmp_path / "other", "\n# another encoder version\n")
    again = _prepare(tmp_path / "w", other)
    assert again.returncode != 0 and "encoder_sha256" in again.stderr, again.stderr


def test_checkpoint_code_that_renders_otherwise_stops_prepare_in_one_line(tmp_path):
    bad = _checkpoint(tmp_path / "bad", RENAMES_USER)
    out = _prepare(tmp_path / "w", bad)
    assert out.returncode == 1, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert "sha256" in lines[0] and "first differing segment" in lines[0]
    assert "checkpoint \"('human', False)\", ours \"('user', False)\"" in lines[0]
    assert not (tmp_path / "w" / "prepared" / "B6.parquet").exists()
