#!/usr/bin/env bash
# Installs SpecForge 0.2.0 into a cached venv of its own for the trainer tier (scripts/trainers/run_tier.sh).
# Prints the venv's path; does nothing if it is complete.
#   bash scripts/trainers/install_specforge.sh           install if absent, print the path
#   bash scripts/trainers/install_specforge.sh --path    print the path only
# SpecForge pins torch==2.11.0 and sglang==0.5.14 (CUDA), so it installs only without its dependencies: beside it,
# CPU torch at the project's pin and what its data code imports (specforge-requirements.txt).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_trainer specforge 0.2.0 "specforge.data.preprocessing, specforge.data.prompt_builder, datasets" "$@"
