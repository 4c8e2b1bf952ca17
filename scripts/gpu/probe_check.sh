#!/usr/bin/env bash
# The probe's GPU check (scripts/gpu/probe_check.py; docs/probe.md): speculators' own Trainer trains the demo's own
# arm on the GPU, the CPU loop the same arm on CPU, and both drafters' in-process acceptance on the same held-out
# prompts is printed as a table. Under 8 minutes (timeout 470 s). Needs, carried beside the tree (.probe-gpu, made here):
#   python scripts/gpu/probe_check.py --make-bundle --workdir DEMO    # the arm's rows and held-out prompts
#   pip download speculators==0.9.0 --no-deps -d .probe-gpu/wheels    # speculators' wheel, no dependencies
# Usage: bash scripts/gpu/probe_check.sh [--device cpu] [--budget N] [--seed S] [--prompts N]
# (PYTHON: the interpreter, default python3; TIMEOUT_S: the limit, default 470 s, e.g. longer on a loaded CPU)
set -euo pipefail
cd "$(dirname "$0")/../.."
exec timeout "${TIMEOUT_S:-470}" "${PYTHON:-python3}" scripts/gpu/probe_check.py "$@"
