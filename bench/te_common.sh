# Shared by the Transfer Engine benchmarks (te_bench.sh, same_host_bench.sh): a work
# directory and child cleanup (log, WORK, PIDS, forget, stop_target; scaling.sh uses
# these too), and running one target/initiator pair of transfer_engine_bench processes
# on 127.0.0.1 (P2PHANDSHAKE) with the flags in the caller's COMMON array and DURATION,
# THREADS. Sourced, not run; the caller sets LOG_TAG first.

log() { echo "[${LOG_TAG:-bench}] $*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/${LOG_TAG:-bench}.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_target BIN LOG: starts a target in the background, sets TARGET_PID and
# TARGET_PORT (its P2P RPC port, parsed from "listening on 127.0.0.1:<port>").
start_target() {
  local bin=$1 logf=$2 deadline
  "$bin" --mode=target "${COMMON[@]}" --local_server_name=127.0.0.1:12345 2>"$logf" &
  TARGET_PID=$!
  PIDS+=("$TARGET_PID")
  deadline=$((SECONDS + 20))
  TARGET_PORT=""
  while [ $SECONDS -lt $deadline ]; do
    TARGET_PORT=$(grep -oE 'listening on 127\.0\.0\.1:[0-9]+' "$logf" 2>/dev/null |
      head -1 | grep -oE '[0-9]+$' || true)
    [ -n "$TARGET_PORT" ] && break
    kill -0 "$TARGET_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$TARGET_PORT" ]; then
    log "target $bin did not announce its port; log:"
    tail -20 "$logf" >&2
    return 1
  fi
  # Upstream logs the line from init, before it allocates and registers its buffer.
  sleep 0.5
}

# forget PID: drops a reaped child from the cleanup list.
forget() {
  local keep=() p
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

stop_target() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  forget "$pid"
}

# pair TARGET_BIN INITIATOR_BIN OP BLOCK BATCH TAG: sets RESULT to the initiator's
# throughput figure (GB/s), or FAIL. Runs in this shell (not in $(...)) so that every
# child PID stays visible to the EXIT trap.
pair() {
  local tbin=$1 ibin=$2 op=$3 block=$4 batch=$5 tag=$6
  local tlog="$WORK/$tag.target.log" ilog="$WORK/$tag.initiator.log" ipid
  RESULT=FAIL
  start_target "$tbin" "$tlog" || return 0
  timeout $((DURATION + 60)) "$ibin" --mode=initiator "${COMMON[@]}" \
    --local_server_name=127.0.0.1:12346 --segment_id="127.0.0.1:$TARGET_PORT" \
    --duration="$DURATION" --threads=$THREADS --operation="$op" \
    --block_size="$block" --batch_size="$batch" --report_unit=GB 2>"$ilog" &
  ipid=$!
  PIDS+=("$ipid")
  wait "$ipid" || log "$tag: initiator exited with status $?"
  forget "$ipid"
  stop_target "$TARGET_PID"
  local line
  line=$(grep -oE 'Test completed: duration [0-9.]+, batch count [0-9]+, throughput [0-9.]+ GB/s' \
    "$ilog" | tail -1 || true)
  if [ -z "$line" ]; then
    log "$tag: no throughput line; initiator log tail:"
    tail -10 "$ilog" >&2
    return 0
  fi
  log "$tag: $line"
  RESULT=$(echo "$line" | grep -oE '[0-9.]+ GB/s$' | grep -oE '^[0-9.]+')
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2fx", a / b; else print "-" }'; }

