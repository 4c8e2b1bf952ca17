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
echo "trainer tier done after $SECONDS s"
