"""`probe --dry-run` for a real target (probe/gpu_plan.py): the projection from the target's config.json and the data's
token counts, and every arm's commands. No speculators needed: nothing here trains."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kimi_eagle_data.probe.gpu_plan import Shape, project
from tests.helpers.cli import run_cli

ARMS = {"own": "own", "upstream": "upstream", "own 0.25": "own-0.25", "own 0.5": "own-0.5"}


@pytest.fixture(scope="module")
def k25_config(tmp_path_factory) -> Path:
    """A directory holding a config.json of Kimi-K2.5's shape (its text model: 61 layers, hidden 7168)."""
    d = tmp_path_factory.mktemp("k25")
    (d / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"], "text_config": {
        "num_hidden_layers": 61, "hidden_size": 7168, "vocab_size": 163840}}))
    return d


def _number(pattern: str, text: str) -> int:
    m = re.search(pattern, text)
    assert m, (pattern, text)
    return int(m.group(1).replace(",", ""))


def test_every_arm_has_its_data_its_drafters_and_their_measurement(demo_run, k25_config):
    workdir, _ = demo_run
    out = run_cli("probe", "--workdir", str(workdir), "--dry-run", "--model", str(k25_config), "--seeds", "2").stdout
    lines = out.splitlines()
    assert "61 layers, hidden 7168" in out and "4 arms (own, upstream, own 0.25, own 0.5) x 2 seeds = 8 drafters" in out
    assert any(line.startswith("kimi-data probe --workdir WORKDIR --write-arms probe-arms") for line in lines)
    measure = [line for line in lines if "--drafter" in line]
    assert len(measure) == 1 and "--engine vllm --tp 8" in measure[0]
    for arm, slug in ARMS.items():
        extract = [line for line in lines if line.startswith("python scripts/data_generation_offline.py")
                   and f"--preprocessed-data probe-arms/{slug} " in line]
        assert len(extract) == 1 and f"--output probe-hs/{slug} " in extract[0], arm
        for seed in (0, 1):
            trains = [line for line in lines if line.startswith("torchrun") and
                      f"--save-path probe-drafters/{slug}-seed{seed} " in line]
            assert len(trains) == 1, (arm, seed)
            assert f"--data-path probe-arms/{slug} --hidden-states-path probe-hs/{slug} " in trains[0]
            assert f"--seed {seed} " in trains[0] and "--target-layer-ids 2 30 58 " in trains[0]
            epochs = _number(r"--epochs (\d+)", trains[0])
            drafter = f"{arm}=probe-drafters/{slug}-seed{seed}/{epochs - 1}"
            assert (f"--drafter '{drafter}'" if " " in arm else f"--drafter {drafter}") in measure[0]
    assert sum(line.startswith("torchrun") for line in lines) == 8


def test_the_projection_scales_with_the_token_counts(demo_run, k25_config):
    workdir, _ = demo_run
    outs = [run_cli("probe", "--workdir", str(workdir), "--dry-run", "--model", str(k25_config), "--tokens", str(n),
                    "--prefill-rate", "100000").stdout for n in (10**9, 2 * 10**9)]
    extracted = [_number(r"# extraction: ([\d,]+) tokens", o) for o in outs]
    loss = [_number(r"the own data: [\d,]+ tokens, ([\d,]+) loss tokens", o) for o in outs]
    steps = [_number(r"tokens read\), ([\d,]+) training step", o) for o in outs]
    assert extracted == [int(2.75 * 10**9), int(5.5 * 10**9)]          # own + upstream + ¼ + ½ of the own tokens
    assert abs(loss[1] - 2 * loss[0]) <= 1 and abs(steps[1] - 2 * steps[0]) <= 1
    hours = [float(re.search(r"([\d.]+) h of extraction", o).group(1)) for o in outs]
    assert hours == [round(2.75e9 / 1e5 / 3600, 2), round(5.5e9 / 1e5 / 3600, 2)]
    # bf16 states of 3 auxiliary layers + the last, 7168 wide: 57,344 bytes a token
    assert "# extraction: 2,750,000,000 tokens -> 143.4 TiB of hidden states" in outs[0]


def test_projection_in_minutes_under_an_hour_never_zero_hours():
    p = project(Shape("m", 61, 7168), 1_000_000, 400_000, seeds=2, budget=None, gpus=8)
    from kimi_eagle_data.probe.gpu_plan import gpu_plan

    text = gpu_plan(p, "w", prefill_rate=10_000, train_rate=50_000)
    assert "4.6 min of extraction" in text and "0.00 h" not in text          # 2.75M tokens / 10k tokens/s
    assert p.training_tokens == 1_000_000 and p.steps == 16                  # one pass: 1M / (8192 × 8)


def test_an_unknown_hub_id_is_one_line(demo_run):
    workdir, _ = demo_run
    proc = run_cli("probe", "--workdir", str(workdir), "--dry-run", "--model", "nobody/no-such-model", check=False,
                   env={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot read the config.json of model 'nobody/no-such-model'" in lines[0], proc.stderr


def test_the_projection_options_need_dry_run_and_one_target(demo_run, k25_config):
    workdir, _ = demo_run
    for extra in (["--model", str(k25_config)], ["--profile", "kimi-k2.5"], ["--tokens", "1000"],
                  ["--train-rate", "100"]):
        proc = run_cli("probe", "--workdir", str(workdir), *extra, check=False)
        assert proc.returncode == 2 and extra[0] in proc.stderr and "--dry-run" in proc.stderr
    proc = run_cli("probe", "--workdir", str(workdir), "--dry-run", "--model", str(k25_config), "--profile",
                   "kimi-k3", check=False)
    assert proc.returncode == 2 and "give one" in proc.stderr
    proc = run_cli("probe", "--workdir", str(workdir), "--dry-run", "--profile", "no-such-profile", check=False)
    assert proc.returncode == 2 and "unknown model profile 'no-such-profile'" in proc.stderr


def test_write_arms_writes_each_arm_for_speculators_without_a_held_out_prompt(demo_run, tmp_path):
    from datasets import load_from_disk

    workdir, _ = demo_run
    out = tmp_path / "arms"
    run_cli("probe", "--workdir", str(workdir), "--write-arms", str(out), "--no-progress")
    held = json.loads((out / "held-out.json").read_text())
    held_prompts = {tuple(ids) for pairs in held.values() for _, ids in pairs}
    assert len(held_prompts) >= 8
    sizes = {}
    for slug in ARMS.values():
        ds = load_from_disk(str(out / slug))
        assert ds.format["type"] == "torch" and set(ds.column_names) == {"input_ids", "loss_mask", "seq_len"}
        assert (out / slug / "token_freq.pt").is_file()
        for row in ds:
            ids, mask = row["input_ids"].tolist(), row["loss_mask"].tolist()
            assert len(ids) == len(mask) == int(row["seq_len"]) and any(mask)
            prompt = tuple(ids[:mask.index(1)])
            assert prompt not in held_prompts
        sizes[slug] = len(ds)
    assert sizes["own-0.25"] < sizes["own-0.5"] < sizes["own"]


def test_a_drafter_flag_without_a_drafter_is_one_line(demo_run, tmp_path):
    """--drafter ARM=DIR (measuring saved drafters, trainer tier: test_saved_drafters.py) checked before anything runs."""
    proc = run_cli("probe", "--workdir", str(demo_run[0]), "--drafter", f"own={tmp_path}", check=False)
    assert proc.returncode == 2 and "holds no drafter (no config.json)" in proc.stderr
    proc = run_cli("probe", "--workdir", str(demo_run[0]), "--drafter", "own", check=False)
    assert proc.returncode == 2 and "expected ARM=DIR" in proc.stderr
