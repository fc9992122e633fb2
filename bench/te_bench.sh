#!/usr/bin/env bash
# Side-by-side Transfer Engine benchmark: upstream Mooncake's transfer_engine_bench (the
# PyPI wheel installed by scripts/upstream-peer.sh) against ours
# (target/release/transfer_engine_bench), in one run, on one host.
#
# Everything is on 127.0.0.1, P2PHANDSHAKE metadata (no external service), TCP transport.
# For operation in {write, read} and block size in {64 KiB, 1 MiB} it runs an upstream
# target + upstream initiator, then our target + our initiator, with identical flags
# (threads 2, batch 32 at 64 KiB / 8 at 1 MiB, buffer 256 MiB, DURATION seconds), plus the
# raw single-stream TCP ceiling at 1 MiB (examples/tcp_ceiling.rs), and two interop pairs
# at 64 KiB write (our initiator -> upstream target, upstream initiator -> our target).
#
# Target and initiator are always separate processes, so our engine's same-host memcpy
# fast path (which only applies to an engine's own segment, see MC_DISABLE_LOCAL_COPY)
# never kicks in: every byte crosses a real loopback TCP socket, as upstream's do.
#
# Environment:
#   DURATION            seconds per initiator run (default 5)
#   MOONCAKE_PEER_VENV  an existing upstream peer venv (skips the installer)
#   CARGO               cargo binary (default cargo)
#
# Usage: bench/te_bench.sh            (from anywhere; builds release first)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-5}
BUFFER_SIZE=268435456
THREADS=2

log() { echo "[te_bench] $*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/te_bench.XXXXXX")
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

# --- build ours -------------------------------------------------------------------------
log "building release binaries"
(cd "$ROOT" && ${CARGO:-cargo} build --release --bin transfer_engine_bench --example tcp_ceiling)
OURS="$ROOT/target/release/transfer_engine_bench"
CEILING="$ROOT/target/release/examples/tcp_ceiling"

# --- locate upstream --------------------------------------------------------------------
# The peer (installed on first use; MOONCAKE_PEER_VENV picks where).
PEER=$(bash "$ROOT/scripts/upstream-peer.sh" | tail -1)
M=$("$PEER/bin/python" -c 'import mooncake,os;print(os.path.dirname(mooncake.__file__))')
UPSTREAM="$M/transfer_engine_bench"
[ -x "$UPSTREAM" ] || { log "no upstream bench at $UPSTREAM"; exit 1; }
log "upstream: $UPSTREAM"
log "ours:     $OURS"

COMMON=(--protocol=tcp --metadata_server=P2PHANDSHAKE --buffer_size=$BUFFER_SIZE)

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

# --- raw ceiling ------------------------------------------------------------------------
log "raw TCP ceiling, 1 MiB blocks, ${DURATION}s"
CEIL=$("$CEILING" --block_size=1048576 --duration="$DURATION" | grep -oE '[0-9.]+ GB/s' |
  grep -oE '^[0-9.]+' || echo FAIL)

# --- same-implementation pairs -----------------------------------------------------------
ROWS=()
for op in write read; do
  for block in 65536 1048576; do
    if [ "$block" = 65536 ]; then batch=32; bname="64KiB"; else batch=8; bname="1MiB"; fi
    log "$op $bname x$batch: upstream -> upstream"
    pair "$UPSTREAM" "$UPSTREAM" "$op" "$block" "$batch" "up-$op-$bname"
    up=$RESULT
    log "$op $bname x$batch: ours -> ours"
    pair "$OURS" "$OURS" "$op" "$block" "$batch" "ours-$op-$bname"
    ours=$RESULT
    ROWS+=("$op|$bname|$batch|$up|$ours")
  done
done

# --- interop ----------------------------------------------------------------------------
log "interop: our initiator -> upstream target (write 64KiB x32)"
pair "$UPSTREAM" "$OURS" write 65536 32 "x-ours-to-up"
x1=$RESULT
log "interop: upstream initiator -> our target (write 64KiB x32)"
pair "$OURS" "$UPSTREAM" write 65536 32 "x-up-to-ours"
x2=$RESULT

# --- report -----------------------------------------------------------------------------
echo
echo "Transfer Engine TCP loopback, P2PHANDSHAKE, threads $THREADS, buffer 256 MiB, ${DURATION}s per run ($(nproc) CPUs)"
printf '%-6s %-6s %-5s %12s %12s %12s %15s\n' op block batch "upstream" "ours" "ours/up" "ours/raw(1MiB)"
for row in "${ROWS[@]}"; do
  IFS='|' read -r op bname batch up ours <<<"$row"
  printf '%-6s %-6s %-5s %12s %12s %12s %15s\n' "$op" "$bname" "$batch" "$up GB/s" "$ours GB/s" \
    "$(ratio "$ours" "$up")" "$(ratio "$ours" "$CEIL")"
done
printf 'raw tcp single stream (1 MiB writes): %s GB/s\n' "$CEIL"
printf 'interop write 64KiB x32: ours->upstream target %s GB/s, upstream->ours target %s GB/s\n' \
  "$x1" "$x2"
fail=0
for row in "${ROWS[@]}"; do case "$row" in *FAIL*) fail=1 ;; esac; done
case "$x1$x2$CEIL" in *FAIL*) fail=1 ;; esac
exit $fail
