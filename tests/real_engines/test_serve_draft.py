"""`kimi-data serve --draft MODEL --dry-run` for SGLang 0.5.23 and vLLM 0.32.0, parsed by each engine's own argument
parser in its venv (no GPU needed to parse): every speculative-decoding flag exists and carries the profile's numbers,
and SGLang's acceptance stays exact (its accept thresholds at 1.0: each token sampled from the target's distribution).

Selected with `-m real_engine` (scripts/real_engines/run_tier.sh); deselected by the default test command."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from kimi_eagle_data.formats.kimi_k2 import KIMI_K25
from tests.helpers.cli import run_cli
from tests.real_engines.servers import CLI_TIMEOUT_S, installed_venv

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(3600)]

DRAFT = "lightseekorg/kimi-k2.5-eagle3"

SGLANG_PARSE = """
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
args = parser.parse_args(sys.argv[1:])
print(json.dumps({k: getattr(args, k) for k in (
    "model_path", "speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
    "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_accept_threshold_single",
    "speculative_accept_threshold_acc")}))
"""

VLLM_PARSE = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
serve = ServeSubcommand()
serve.subparser_init(parser.add_subparsers(dest="subparser"))
args = parser.parse_args(sys.argv[1:])
serve.validate(args)
args.model = args.model_tag
print(json.dumps({"model": args.model_tag, "speculative_config": EngineArgs.from_cli_args(args).speculative_config}))
"""


def parsed(engine: str, program: str, argv: list[str], env: dict[str, str]) -> dict:
    python = str(installed_venv(engine) / "bin" / "python")
    proc = subprocess.run([python, "-c", program, *argv], capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                          env={"PATH": "/usr/bin:/bin", **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_sglangs_parser_takes_the_drafter_flags():
    shown = shlex.split(run_cli("serve", "--draft", DRAFT, "--dry-run").stdout)
    assert shown[:3] == ["python", "-m", "sglang.launch_server"]
    venv = installed_venv("sglang")
    args = parsed("sglang", SGLANG_PARSE, shown[3:],
                  {"SGLANG_USE_CPU_ENGINE": "1", "LD_LIBRARY_PATH": str(venv / "stub-lib")})
    assert args["model_path"] == "moonshotai/Kimi-K2.5"
    assert (args["speculative_algorithm"], args["speculative_draft_model_path"]) == ("EAGLE3", DRAFT)
    assert (args["speculative_num_steps"], args["speculative_eagle_topk"], args["speculative_num_draft_tokens"]) \
        == (KIMI_K25.draft_steps, KIMI_K25.draft_topk, KIMI_K25.draft_tokens)
    assert args["speculative_accept_threshold_single"] == args["speculative_accept_threshold_acc"] == 1.0


def test_vllms_parser_takes_the_speculative_config():
    shown = shlex.split(run_cli("serve", "--engine", "vllm", "--draft", DRAFT, "--dry-run").stdout)
    assert shown[:3] == ["vllm", "serve", "moonshotai/Kimi-K2.5"]
    args = parsed("vllm", VLLM_PARSE, shown[1:], {"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert args["speculative_config"] == {"method": "eagle3", "model": DRAFT,
                                          "num_speculative_tokens": KIMI_K25.draft_steps}
