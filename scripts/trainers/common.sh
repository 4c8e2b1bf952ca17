# Shared by the trainer tier's install scripts: the engines' venv builder (kimi_eagle_data/engines/cpu_recipes/
# common.sh: a venv keyed by the hash of its pins, complete once its ".complete" marker exists), with the trainers'
# venvs in a cache folder of their own.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../kimi_eagle_data/engines/cpu_recipes/common.sh"

TRAINERS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ENGINES_CACHE="${KIMI_TRAINERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kimi-eagle-data/trainers}"
TRAINER_TORCH="torch==2.13.0"     # the project's CPU pin

# install_trainer PACKAGE VERSION IMPORTS [--path]: PACKAGE==VERSION without its dependencies, CPU torch at the
# project's pin, then PACKAGE-requirements.txt pinned by PACKAGE-constraints.txt (a working venv's freeze), into the
# cached venv; prints its path (only that with --path). IMPORTS: the modules the tier's driver imports, checked.
install_trainer() {
    local package="$1" version="$2" imports="$3" mode="${4:-}"
    local requirements="$TRAINERS_DIR/$package-requirements.txt" constraints="$TRAINERS_DIR/$package-constraints.txt"
    local dir
    dir="$(engine_venv_dir "$package-$version" "$TRAINER_TORCH $package==$version" "$requirements" "$constraints")"
    if [[ "$mode" == "--path" ]]; then echo "$dir"; return 0; fi
    _install() {
        local venv="$1" pip=("$1/bin/python" -m pip install -q --progress-bar off)
        "${pip[@]}" "$TRAINER_TORCH"
        "${pip[@]}" --no-deps "$package==$version"
        "${pip[@]}" -c "$constraints" -r "$requirements"
        "$venv/bin/python" -c "import $imports; from importlib.metadata import version; \
print('$package', version('$package'))"
    }
    build_engine_venv "$dir" _install
}
