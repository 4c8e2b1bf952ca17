#!/usr/bin/env bash
# Installs SpecForge 0.2.0 into a cached venv of its own for the trainer tier (scripts/trainers/run_tier.sh).
# Prints the venv's path; does nothing if it is complete.
#   bash scripts/trainers/install_specforge.sh           install if absent, print the path
#   bash scripts/trainers/install_specforge.sh --path    print the path only
# SpecForge pins torch==2.11.0 and sglang==0.5.14 (CUDA), so it installs only with --no-deps: beside it, CPU torch at
# the project's pin and what its data code imports (specforge-requirements.txt), pinned by specforge-constraints.txt
# (a working venv's freeze).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PINS="torch==2.13.0 specforge==0.2.0"
dir="$(engine_venv_dir specforge-0.2.0 "$PINS" "$TRAINERS_DIR/specforge-requirements.txt" \
       "$TRAINERS_DIR/specforge-constraints.txt")"
if [[ "${1:-}" == "--path" ]]; then echo "$dir"; exit 0; fi

install_specforge() {
    local venv="$1" pip=("$1/bin/python" -m pip install -q --progress-bar off)
    "${pip[@]}" torch==2.13.0
    "${pip[@]}" --no-deps specforge==0.2.0
    "${pip[@]}" -c "$TRAINERS_DIR/specforge-constraints.txt" -r "$TRAINERS_DIR/specforge-requirements.txt"
    # The import check: every module the tier's driver (tests/trainers/specforge_reads.py) uses.
    "$venv/bin/python" -c "import specforge.data.preprocessing, specforge.data.prompt_builder, datasets; \
from importlib.metadata import version; print('specforge', version('specforge'))"
}

build_engine_venv "$dir" install_specforge
