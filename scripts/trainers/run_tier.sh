#!/usr/bin/env bash
# The trainer test tier: installs speculators and SpecForge into their cached venvs if absent (minutes, once; both at
# the same time, they are mostly downloads), then runs the tests marked trainer: each trainer's own code reads our
# K2.5 and K3 exports in its own venv.
#   bash scripts/trainers/run_tier.sh [pytest args...]
#   bash scripts/trainers/run_tier.sh --install-only     the venvs only (CI starts them beside the main suite)
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
log_dir="$(mktemp -d)"
trainers=(speculators specforge)
pids=()
for trainer in "${trainers[@]}"; do
    bash "scripts/trainers/install_${trainer}.sh" >"$log_dir/$trainer.out" 2>"$log_dir/$trainer.err" &
    pids+=("$!")
done
failed=0
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
        echo "error: installing ${trainers[$i]} failed; its output:" >&2
        tail -n 40 "$log_dir/${trainers[$i]}.err" >&2
        failed=1
    else
        grep -h "installed in" "$log_dir/${trainers[$i]}.err" >&2 || true
    fi
done
rm -rf "$log_dir"
[[ $failed == 0 ]] || exit 1
echo "trainers ready after $((SECONDS - started)) s"
if [[ "${1:-}" == "--install-only" ]]; then exit 0; fi
python -m pytest -q -n 0 -m trainer -p no:cacheprovider --durations=0 tests/trainers "$@"
echo "trainer tier done after $((SECONDS - started)) s"
