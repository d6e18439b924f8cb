#!/usr/bin/env bash
# Starts NNODES ranks of `mtpserve serve` in the background, one per device: the node-rank loop
# of xLLM deployments, with mtpserve in place of the xLLM binary. Rank 0 serves the HTTP API on
# $PORT and the control service on $MASTER_NODE_ADDR (host:port; port + 1 is the c10d rendezvous).
#
#   NNODES=2 scripts/launch.sh [extra serve flags...]     (extra flags win over the defaults below)
#
# Environment (defaults in brackets):
#   MTPSERVE          the command [the repository's .venv/bin/mtpserve, else mtpserve on PATH];
#                     e.g. "python -m mtpserve.cli"
#   STARTUP_CHECK_S   [3] the script watches the ranks this long and exits 1 as soon as one dies
#   MODEL_PATH        [the embedded models/tiny-dsv3-mtp]      DRAFT_MODEL_PATH [$MODEL_PATH]
#   DEVICE_TYPE       cpu, cuda or npu [cpu]; rank i runs on $DEVICE_TYPE:$((START_DEVICE + i))
#   START_DEVICE      [0]                                       NNODES [2]
#   PORT [8000]   MASTER_NODE_ADDR [127.0.0.1:29500]   NUM_SPECULATIVE_TOKENS [1]
#   MAX_MEMORY_UTILIZATION [0.90]  MAX_TOKENS_PER_BATCH [10000]  MAX_SEQS_PER_BATCH [256]
#   BLOCK_SIZE [128]  ENABLE_PREFIX_CACHE [false]  ENABLE_CHUNKED_PREFILL [false]
#   EP_SIZE [1] (or NNODES: experts spread over the ranks)  DP_SIZE [1] (attention groups; divides NNODES)
#   LOG_DIR [./mtpserve-logs]: rank i logs to $LOG_DIR/rank_$i.log, its pid is in $LOG_DIR/rank_$i.pid
#
# Stop the group with `kill -TERM $(cat $LOG_DIR/rank_0.pid)`: rank 0 shuts the workers down.
# Secrets: pass the API key and cluster token as MTPSERVE_API_KEY / MTPSERVE_CLUSTER_TOKEN in the
# environment (or --api_key_file / --cluster_token_file), not on the command line.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${MTPSERVE:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/mtpserve" ]]; then MTPSERVE="$ROOT/.venv/bin/mtpserve"
  elif command -v mtpserve > /dev/null; then MTPSERVE=mtpserve
  else
    echo "launch.sh: no mtpserve command: neither $ROOT/.venv/bin/mtpserve (run scripts/setup.sh) nor mtpserve on" \
         "PATH; or set MTPSERVE" >&2
    exit 1
  fi
fi
read -r -a MTPSERVE_CMD <<< "$MTPSERVE"
if ! command -v "${MTPSERVE_CMD[0]}" > /dev/null; then
  echo "launch.sh: MTPSERVE=$MTPSERVE: ${MTPSERVE_CMD[0]} is not a command" >&2
  exit 1
fi
STARTUP_CHECK_S=${STARTUP_CHECK_S:-3}
MODEL_PATH=${MODEL_PATH:-$ROOT/models/tiny-dsv3-mtp}
DRAFT_MODEL_PATH=${DRAFT_MODEL_PATH:-$MODEL_PATH}
DEVICE_TYPE=${DEVICE_TYPE:-cpu}
START_DEVICE=${START_DEVICE:-0}
NNODES=${NNODES:-2}
PORT=${PORT:-8000}
MASTER_NODE_ADDR=${MASTER_NODE_ADDR:-127.0.0.1:29500}
NUM_SPECULATIVE_TOKENS=${NUM_SPECULATIVE_TOKENS:-1}
MAX_MEMORY_UTILIZATION=${MAX_MEMORY_UTILIZATION:-0.90}
MAX_TOKENS_PER_BATCH=${MAX_TOKENS_PER_BATCH:-10000}
MAX_SEQS_PER_BATCH=${MAX_SEQS_PER_BATCH:-256}
BLOCK_SIZE=${BLOCK_SIZE:-128}
ENABLE_PREFIX_CACHE=${ENABLE_PREFIX_CACHE:-false}
ENABLE_CHUNKED_PREFILL=${ENABLE_CHUNKED_PREFILL:-false}
EP_SIZE=${EP_SIZE:-1}
DP_SIZE=${DP_SIZE:-1}
LOG_DIR=${LOG_DIR:-./mtpserve-logs}
mkdir -p "$LOG_DIR"
PIDS=()

for (( i=0; i<NNODES; i++ )); do
  if [[ "$DEVICE_TYPE" == cpu ]]; then DEVICE=cpu; else DEVICE="$DEVICE_TYPE:$((START_DEVICE + i))"; fi
  LOG_FILE="$LOG_DIR/rank_$i.log"
  nohup "${MTPSERVE_CMD[@]}" serve --model "$MODEL_PATH" --devices="$DEVICE" --port "$PORT" \
    --master_node_addr="$MASTER_NODE_ADDR" --nnodes="$NNODES" \
    --draft_model "$DRAFT_MODEL_PATH" --draft_devices="$DEVICE" --num_speculative_tokens "$NUM_SPECULATIVE_TOKENS" \
    --max_memory_utilization="$MAX_MEMORY_UTILIZATION" --max_tokens_per_batch="$MAX_TOKENS_PER_BATCH" \
    --max_seqs_per_batch="$MAX_SEQS_PER_BATCH" \
    --enable_mla=true --block_size="$BLOCK_SIZE" --ep_size="$EP_SIZE" --dp_size="$DP_SIZE" \
    --enable_prefix_cache="$ENABLE_PREFIX_CACHE" --enable_chunked_prefill="$ENABLE_CHUNKED_PREFILL" \
    --node_rank="$i" "$@" > "$LOG_FILE" 2>&1 &
  echo $! > "$LOG_DIR/rank_$i.pid"
  PIDS+=("$!")
  echo "rank $i: pid $! on $DEVICE, log $LOG_FILE"
done

# A rank that cannot start (bad flag, missing model, port in use) exits within seconds: report it,
# stop the others and fail, rather than print pids of ranks that are gone.
for (( t=0; t<STARTUP_CHECK_S*10; t++ )); do
  for (( i=0; i<NNODES; i++ )); do
    if ! kill -0 "${PIDS[$i]}" 2> /dev/null; then
      echo "launch.sh: rank $i (pid ${PIDS[$i]}) exited during start-up; last lines of $LOG_DIR/rank_$i.log:" >&2
      tail -n 5 "$LOG_DIR/rank_$i.log" >&2 || true
      for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
      exit 1
    fi
  done
  sleep 0.1
done
