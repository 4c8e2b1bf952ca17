#!/usr/bin/env bash
# Launch SGLang (or vLLM: ENGINE=vllm) for Kimi-K2.5 on one 8-GPU node and generate this node's shard.
#
#   scripts/launch_node.sh SHARD_INDEX NUM_SHARDS WORKDIR [extra kimi-data build args...]
#
# Single node:  scripts/launch_node.sh 0 1 /data/kimi-eagle
# Four nodes sharing /data (one command per node, SHARD_INDEX 0..3):
#               scripts/launch_node.sh 2 4 /data/kimi-eagle
# Each node writes its own checkpoint file (generations.shard-i-of-N.sqlite) in the shared workdir;
# when all are done, any node runs `kimi-data build --workdir /data/kimi-eagle` again to validate and
# emit the merged dataset (it reads every shard's checkpoint). Nodes without a shared filesystem use
# their own workdirs and merge with `kimi-data build --workdir A --merge B --merge C ...`.
#
# Environment: ENGINE (sglang; or vllm), PORT (30000), TP (8), CONTEXT_LENGTH (32768), MEM_FRACTION (sglang:
# 0.85; vllm: vLLM's default), CONCURRENCY (256), MODEL (moonshotai/Kimi-K2.5).
set -euo pipefail
if [ $# -lt 3 ]; then sed -n '2,15p' "$0"; exit 2; fi
SHARD=$1; NSHARDS=$2; WORKDIR=$3; shift 3
ENGINE=${ENGINE:-sglang}; PORT=${PORT:-30000}; TP=${TP:-8}; CONTEXT_LENGTH=${CONTEXT_LENGTH:-32768}
CONCURRENCY=${CONCURRENCY:-256}; MODEL=${MODEL:-moonshotai/Kimi-K2.5}
case "$ENGINE" in
  sglang) HEALTH=/health_generate; MEM_FRACTION=${MEM_FRACTION:-0.85} ;;
  vllm) HEALTH=/health; MEM_FRACTION=${MEM_FRACTION:-} ;;
  *) echo "ENGINE must be sglang or vllm, not $ENGINE"; exit 2 ;;
esac
LOG="$WORKDIR/$ENGINE-shard-$SHARD.log"
mkdir -p "$WORKDIR"

kimi-data serve --engine "$ENGINE" --model "$MODEL" --tp "$TP" --port "$PORT" --context-length "$CONTEXT_LENGTH" \
  ${MEM_FRACTION:+--mem-fraction-static "$MEM_FRACTION"} >"$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
echo "$ENGINE starting (log: $LOG); waiting for health ..."
until curl -sf "http://127.0.0.1:$PORT$HEALTH" >/dev/null; do
  kill -0 $SERVER 2>/dev/null || { echo "$ENGINE exited; see $LOG"; exit 1; }
  sleep 10
done

# prepare is deterministic, so every node computes the same prompt set and ids.
# One process writes a workdir at a time (shards' generates share it): nodes prepare one after another, and a node
# that finds a shard already generating there uses the prompts that node prepared (same arguments).
exec 9>"$WORKDIR/.launch.lock"
flock 9
if flock -n "$WORKDIR/.lock" true; then
  kimi-data prepare --workdir "$WORKDIR" --model "$MODEL" "$@"
else
  echo "another node is generating in $WORKDIR; using the prompts it prepared"
fi
exec 9>&-
kimi-data generate --workdir "$WORKDIR" --engine "$ENGINE" --server "http://127.0.0.1:$PORT" \
  --shard "$SHARD/$NSHARDS" --concurrency "$CONCURRENCY"
echo "shard $SHARD/$NSHARDS done; when every shard is done: kimi-data build --workdir $WORKDIR"
