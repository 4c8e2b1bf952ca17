# Shared by the trainer tier's install scripts: the engines' venv builder (kimi_eagle_data/engines/cpu_recipes/
# common.sh: a venv keyed by the hash of its pins, complete once its ".complete" marker exists), with the trainers'
# venvs in a cache folder of their own.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../kimi_eagle_data/engines/cpu_recipes/common.sh"

TRAINERS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ENGINES_CACHE="${KIMI_TRAINERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kimi-eagle-data/trainers}"
