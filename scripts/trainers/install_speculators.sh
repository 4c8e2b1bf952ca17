#!/usr/bin/env bash
# Installs speculators 0.9.0 into a cached venv of its own for the trainer tier (scripts/trainers/run_tier.sh), CPU
# torch at the project's pin beside it. Prints the venv's path; does nothing if it is complete.
#   bash scripts/trainers/install_speculators.sh           install if absent, print the path
#   bash scripts/trainers/install_speculators.sh --path    print the path only
# speculators is installed without its dependencies, then those from speculators-requirements.txt (its own list less
# torchvision/torchaudio), everything pinned by speculators-constraints.txt (a working venv's freeze). The tier runs
# this venv's python with the clone on PYTHONPATH, so the tokenizers' remote code imports today's kimi_eagle_data.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PINS="torch==2.13.0 speculators==0.9.0"
dir="$(engine_venv_dir speculators-0.9.0 "$PINS" "$TRAINERS_DIR/speculators-requirements.txt" \
       "$TRAINERS_DIR/speculators-constraints.txt")"
if [[ "${1:-}" == "--path" ]]; then echo "$dir"; exit 0; fi

install_speculators() {
    local venv="$1" pip=("$1/bin/python" -m pip install -q --progress-bar off)
    local constraints="$TRAINERS_DIR/speculators-constraints.txt"
    "${pip[@]}" torch==2.13.0
    "${pip[@]}" --no-deps speculators==0.9.0
    "${pip[@]}" -c "$constraints" -r "$TRAINERS_DIR/speculators-requirements.txt"
    # The import check: every module the tier's driver (tests/trainers/speculators_reads.py) uses.
    "$venv/bin/python" -c "import speculators, speculators.train.cli, speculators.train.data, \
speculators.train.vocab_mapping, speculators.data_generation.preprocessing, tiktoken; \
from importlib.metadata import version; print('speculators', version('speculators'))"
}

build_engine_venv "$dir" install_speculators
