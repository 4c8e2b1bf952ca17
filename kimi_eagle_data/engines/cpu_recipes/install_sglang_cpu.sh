#!/usr/bin/env bash
# Installs real SGLang 0.5.23 for CPU into a cached venv of its own (not the project's venv: SGLang pins
# torch 2.14.1, the project tests with 2.13.0). Prints the venv's path; does nothing if it is complete.
#   bash install_sglang_cpu.sh           install if absent, print the path
#   bash install_sglang_cpu.sh --path    print the path only
# It ships in the package (kimi_eagle_data/engines/cpu_recipes/): `kimi-data serve --engine sglang --device cpu` names
# it when the venv is missing, from a clone or a wheel alike (scripts/real_engines/ runs it from a clone).
# Not a recipe SGLang supports: everything is pinned (sglang-cpu-constraints.txt is a working venv's
# freeze). The registry's sglang-kernel is a CUDA build; a stub libcuda.so.1 lets it load and, with
# --attention-backend torch_native, none of its ops run for the tiny model.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PINS="torch==2.14.1 torchvision==0.29.1 sglang==0.5.23 sglang-kernel==0.4.10 sglang-router==0.3.2"
dir="$(engine_venv_dir sglang-0.5.23 "$PINS" "$REAL_ENGINES_DIR/sglang-cpu-requirements.txt" \
       "$REAL_ENGINES_DIR/sglang-cpu-constraints.txt" "$REAL_ENGINES_DIR/libcuda_stub.c")"
if [[ "${1:-}" == "--path" ]]; then echo "$dir"; exit 0; fi

install_sglang() {
    local venv="$1" pip=("$1/bin/python" -m pip install -q --progress-bar off)
    local constraints="$REAL_ENGINES_DIR/sglang-cpu-constraints.txt"
    "${pip[@]}" -c "$constraints" torch==2.14.1 torchvision==0.29.1
    "${pip[@]}" --no-deps sglang==0.5.23 sglang-kernel==0.4.10
    # sglang's declared dependencies minus the CUDA-only ones (flashinfer, flash-attn, cutlass, deep-ep...).
    "${pip[@]}" -c "$constraints" -r "$REAL_ENGINES_DIR/sglang-cpu-requirements.txt" sglang-router==0.3.2
    mkdir -p "$venv/stub-lib"
    gcc -shared -fPIC -O2 -Wl,-soname,libcuda.so.1 -o "$venv/stub-lib/libcuda.so.1" "$REAL_ENGINES_DIR/libcuda_stub.c"
    # The import check: the CPU engine path loads with the stub on the library path.
    SGLANG_USE_CPU_ENGINE=1 LD_LIBRARY_PATH="$venv/stub-lib" "$venv/bin/python" -c \
        "import sglang, sgl_kernel, sglang.srt.entrypoints.http_server; print('sglang', sglang.__version__)"
}

build_engine_venv "$dir" install_sglang
