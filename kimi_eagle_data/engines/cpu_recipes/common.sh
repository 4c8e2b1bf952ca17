# Shared by the real-engine install scripts: where a pinned engine venv lives and how it is built.
# A venv is keyed by the hash of its pin files, so changing a pin builds a new one beside the old;
# it counts as present only once its ".complete" marker exists (an interrupted build is redone).
set -euo pipefail

REAL_ENGINES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ENGINES_CACHE="${KIMI_ENGINES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kimi-eagle-data/engines}"
ENGINE_PYTHON="${ENGINE_PYTHON:-python3.11}"

# engine_venv_dir NAME PINS FILE...: the cache folder for NAME pinned by the PINS string and FILE...
# (their bytes hashed: a pin change builds a new venv; comments in the scripts do not).
engine_venv_dir() {
    local name="$1" pins="$2"; shift 2
    local digest
    digest="$( { echo "$pins"; cat "$@"; } | sha256sum | cut -c1-12)"
    echo "$ENGINES_CACHE/$name-$digest"
}

# build_engine_venv DIR INSTALL_FUNCTION: run INSTALL_FUNCTION VENV_TMP, then move it into place.
build_engine_venv() {
    local dir="$1" install="$2"
    if [[ -f "$dir/.complete" ]]; then
        echo "$dir"
        return 0
    fi
    mkdir -p "$(dirname "$dir")"
    rm -rf "$dir"
    local started=$SECONDS
    # Built in place (venvs hold absolute paths); the marker is written last.
    "$ENGINE_PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip >&2
    # pip's notes about this machine's local index folders are noise here; everything else is shown.
    set +e
    "$install" "$dir" 2>&1 | { grep -v "^WARNING: Location 'file:" || true; } >&2
    local rc=${PIPESTATUS[0]}
    set -e
    if [[ $rc != 0 ]]; then
        echo "error: installing $(basename "$dir") failed (exit $rc); rerun to retry from scratch" >&2
        exit "$rc"
    fi
    echo "installed in $((SECONDS - started)) s: $dir ($(du -sh "$dir" | cut -f1))" >&2
    touch "$dir/.complete"
    echo "$dir"
}
