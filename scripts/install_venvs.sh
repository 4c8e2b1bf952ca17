#!/usr/bin/env bash
# Runs the given venv install scripts at the same time (they are mostly downloads) and waits for all of them; on a
# failure, prints the end of that script's output and exits 1, else how long it took. Used by the real-engine and
# trainer tiers.
#   bash scripts/install_venvs.sh INSTALL_SCRIPT...
set -euo pipefail
scripts=("$@")
log_dir="$(mktemp -d)"
pids=()
for script in "${scripts[@]}"; do
    bash "$script" >"$log_dir/$(basename "$script").out" 2>"$log_dir/$(basename "$script").err" &
    pids+=("$!")
done
failed=0
for i in "${!pids[@]}"; do
    name="$(basename "${scripts[$i]}")"
    if ! wait "${pids[$i]}"; then
        echo "error: $name failed; its output:" >&2
        tail -n 40 "$log_dir/$name.err" >&2
        failed=1
    else
        grep -h "installed in" "$log_dir/$name.err" >&2 || true
    fi
done
rm -rf "$log_dir"
[[ $failed == 0 ]] || exit 1
echo "$(basename -s .sh "${scripts[@]}" | paste -sd, -) ready after $SECONDS s"
