#!/usr/bin/env bash
# Installs speculators 0.9.0 into a cached venv of its own for the trainer tier (scripts/trainers/run_tier.sh), CPU
# torch at the project's pin beside it. Prints the venv's path; does nothing if it is complete.
#   bash scripts/trainers/install_speculators.sh           install if absent, print the path
#   bash scripts/trainers/install_speculators.sh --path    print the path only
# Its dependencies come from speculators-requirements.txt: its own list less torchvision/torchaudio, builds for
# another torch that none of the code the tier runs imports. The tier runs this venv's python with the clone on
# PYTHONPATH, so the tiny tokenizers' remote code imports today's kimi_eagle_data.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_trainer speculators 0.9.0 "speculators.train.cli, speculators.train.data, speculators.train.vocab_mapping, \
speculators.data_generation.preprocessing, tiktoken" "$@"
