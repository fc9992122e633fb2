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

LOG_TAG=te_bench
# shellcheck source=bench/te_common.sh
source "$ROOT/bench/te_common.sh"

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
