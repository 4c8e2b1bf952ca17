"""`kimi-data serve --draft MODEL`: the engines' speculative-decoding flags with the profile's numbers, refusals
where a drafter cannot run or would change the samples, and the card naming the drafter an SGLang server reported.
(Each engine's own parser checks the flags in the real-engine tier: tests/real_engines/test_serve_draft.py.)"""

from __future__ import annotations

import json
import shlex

from kimi_eagle_data.cards.card import drafter_line
from kimi_eagle_data.formats.kimi_k2 import KIMI_K25
from tests.engines.test_serve_cli import fake_venv
from tests.helpers.cli import error_lines, run_cli

DRAFT = "lightseekorg/kimi-k2.5-eagle3"


def test_sglang_dry_run_speculates_with_the_profiles_numbers():
    shown = shlex.split(run_cli("serve", "--draft", DRAFT, "--dry-run").stdout)
    i = shown.index("--speculative-algorithm")
    assert shown[i:i + 10] == ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", DRAFT,
                               "--speculative-num-steps", str(KIMI_K25.draft_steps), "--speculative-eagle-topk",
                               str(KIMI_K25.draft_topk), "--speculative-num-draft-tokens", str(KIMI_K25.draft_tokens)]
    assert not any(a.startswith("--speculative-accept-threshold") for a in shown)   # exact acceptance kept
    assert "--speculative-algorithm" not in run_cli("serve", "--dry-run").stdout


def test_vllm_dry_run_passes_one_speculative_config():
    shown = shlex.split(run_cli("serve", "--engine", "vllm", "--draft", DRAFT, "--dry-run").stdout)
    config = json.loads(shown[shown.index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": KIMI_K25.draft_steps}
    # each answer carries its own verify steps, which generate keeps per sample
    assert shown[shown.index("--per-request-spec-decode-metrics") + 1] == "summary"


def test_a_drafter_on_sglang_cpu_or_the_local_engine_is_refused_in_one_line(tmp_path):
    proc = run_cli("serve", "--engine", "sglang", "--device", "cpu", "--draft", DRAFT, "--dry-run", check=False)
    assert proc.returncode == 1, proc.stderr
    assert len(error_lines(proc)) == 1 and "would not be the target's" in proc.stderr
    # and the exact reason it could not serve one anyway: SGLang 0.5.23 on CPU dies at start with a drafter
    assert "copy_all_layer_kv_cache_cpu" in proc.stderr and "_init_kv_copy_and_warmup" in proc.stderr
    # vLLM's CPU backend keeps greedy outputs with an EAGLE-3 drafter (engines/drafter.py): it starts, and says
    # that a run that samples will be refused.
    venv = fake_venv(tmp_path / "venv")
    proc = run_cli("serve", "--engine", "vllm", "--device", "cpu", "--venv", str(venv), "--draft", DRAFT, "--dry-run",
                   check=False)
    assert proc.returncode == 0, proc.stderr
    assert '"method":"eagle3"' in proc.stdout and "VLLM_SERVER_DEV_MODE=1" in proc.stdout
    assert "keeps greedy outputs" in proc.stderr and "refuses a run that samples" in proc.stderr
    proc = run_cli("serve", "--engine", "local", "--draft", DRAFT, "--dry-run", check=False)
    assert proc.returncode == 2 and "--engine sglang or vllm" in proc.stderr


def test_the_card_names_the_drafter_sglang_reported():
    args = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": DRAFT, "speculative_num_steps": 3,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    assert drafter_line(args) == (f"EAGLE3 `{DRAFT}` (steps 3, top-k 1, draft tokens 4); every token accepted by "
                                  "sampling from the target's distribution")
    assert drafter_line({"speculative_algorithm": None}) is None and drafter_line({}) is None
