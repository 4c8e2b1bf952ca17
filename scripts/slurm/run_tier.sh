#!/usr/bin/env bash
# The Slurm test tier: a one-host Slurm cluster started for it (scripts/slurm/cluster.sh installs slurmctld, slurmd,
# slurm-client and munge with apt-get if absent; needs root), the tests marked slurm run against it, and the cluster
# stopped again, whatever the tests did.
#   bash scripts/slurm/run_tier.sh [pytest args...]
# KIMI_SLURM_DIR: the cluster's configuration, state and logs (default: a new temporary folder, removed after a
# green run; kept, and named, after a red one).
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
own_dir=""
if [[ -z "${KIMI_SLURM_DIR:-}" ]]; then
    KIMI_SLURM_DIR=$(mktemp -d /tmp/kimi-slurm.XXXXXX)
    own_dir=1
fi
export KIMI_SLURM_DIR
finish() {
    local rc=$?
    bash scripts/slurm/cluster.sh stop
    if [[ $rc == 0 && -n "$own_dir" ]]; then rm -rf "$KIMI_SLURM_DIR"; else echo "Slurm's logs: $KIMI_SLURM_DIR/log"; fi
}
trap finish EXIT
eval "$(bash scripts/slurm/cluster.sh start)"
echo "one-host Slurm up after $((SECONDS - started)) s (SLURM_CONF=$SLURM_CONF)"
python -m pytest -q -n 0 -m slurm -p no:cacheprovider --durations=0 tests/slurm "$@"
echo "Slurm tier done after $((SECONDS - started)) s"
