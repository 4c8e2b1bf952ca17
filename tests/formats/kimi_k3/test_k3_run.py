"""A run under --profile tiny-kimi-k3 on CPU (the embedded tiny K3 model, local engine): build makes train rows,
`check` agrees with every recorded verdict, and the SpecForge export's loss mask starts after K3's generation
prompt and ends on `<|end_of_msg|>` (docs/kimi-k3.md, "Loss mask")."""

from __future__ import annotations

import json
import subprocess
import sys

from kimi_eagle_data.profile import get_profile
from kimi_eagle_data.prompts.tokenizer import open_tokenizer


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kimi_eagle_data", *args], capture_output=True, text=True,
                          timeout=600)


def test_k3_build_check_and_export(tmp_path):
    work = tmp_path / "w"
    built = _cli("build", "B6", "--workdir", str(work), "--profile", "tiny-kimi-k3", "--samples", "--limit", "4",
                 "--engine", "local")
    assert built.returncode == 0, built.stderr[-2000:]
    checked = _cli("check", str(work / "dataset"), "--profile", "tiny-kimi-k3")
    said = " ".join((checked.stdout + checked.stderr).split())
    assert checked.returncode == 0 and "with the verdict they record, 0 with another" in said, said[-2000:]
    out = tmp_path / "sf.jsonl"
    exported = _cli("export", str(work), "--format", "specforge", "--out", str(out))
    assert exported.returncode == 0, exported.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows, "no train row"
    tok = open_tokenizer(get_profile("tiny-kimi-k3").model_path)
    end_of_msg = tok.convert_tokens_to_ids("<|end_of_msg|>")
    gen = tok.encode('<|open|>think<|sep|>')
    for r in rows:
        ids, mask = r["input_ids"], r["loss_mask"]
        first = mask.index(1)
        assert ids[first - len(gen):first] == gen            # the mask starts after the generation prompt
        assert all(mask[first:]) and not any(mask[:first])
        assert ids[-1] == end_of_msg and mask[-1] == 1         # and covers <|end_of_msg|>
