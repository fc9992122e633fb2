#!/usr/bin/env bash
# Same-host Transfer Engine benchmark: two processes on one host, upstream Mooncake's
# transfer_engine_bench (the PyPI wheel installed by scripts/upstream-peer.sh; TCP, its
# only way between processes here) against ours with the default flags (the same-host
# path: caller memory leased once), ours with the target on the grant path
# (MC_SAME_HOST_NO_LEASE=1: one round trip per batch), memcpy with the same thread
# count, block size and working set (batch x block bytes per thread, which the bench
# moves again every batch; examples/memcpy_bench.rs), and what the kernel allows
# between two processes: process_vm_writev/readv of the same working set into a second
# process, one call per batch (examples/memcpy_bench.rs --process_vm). Rounds are
# interleaved; each row reports the median.
#
# Runs: operation in {write, read} x block size in {64 KiB (batch 32), 4 MiB (batch 4)},
# threads THREADS, buffer 256 MiB, P2PHANDSHAKE metadata on 127.0.0.1.
#
# Environment:
#   DURATION            seconds per run (default 5)
#   ROUNDS              interleaved rounds (default 3)
#   THREADS             initiator threads (default 2)
#   MOONCAKE_PEER_VENV  an existing upstream peer venv (skips the installer)
#   SKIP_BUILD=1        do not run cargo build
#
# Usage: bench/same_host_bench.sh   (from anywhere)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
BUFFER_SIZE=268435456
LOG_TAG=same_host_bench
# shellcheck source=bench/te_common.sh
source "$ROOT/bench/te_common.sh"

if [ -z "${SKIP_BUILD:-}" ]; then
  (cd "$ROOT" && ${CARGO:-cargo} build --release --bin transfer_engine_bench --example memcpy_bench)
fi
OURS="$ROOT/target/release/transfer_engine_bench"
MEMCPY="$ROOT/target/release/examples/memcpy_bench"
PEER=$(bash "$ROOT/scripts/upstream-peer.sh" | tail -1)
M=$("$PEER/bin/python" -c 'import mooncake,os;print(os.path.dirname(mooncake.__file__))')
UPSTREAM="$M/transfer_engine_bench"

median() { printf '%s\n' "$@" | grep -v FAIL | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "FAIL"}'; }

declare -A UP OURS_R GRANT MEM PVM
for round in $(seq "$ROUNDS"); do
  for op in write read; do
    for block in 65536 4194304; do
      if [ "$block" = 65536 ]; then batch=32; else batch=4; fi
      key="$op/$block"
      COMMON=(--protocol=tcp --metadata_server=P2PHANDSHAKE --buffer_size=$BUFFER_SIZE)
      pair "$UPSTREAM" "$UPSTREAM" "$op" "$block" "$batch" "up-$op-$block-$round"
      UP[$key]="${UP[$key]:-} $RESULT"
      COMMON=(--metadata_server=P2PHANDSHAKE --buffer_size=$BUFFER_SIZE)
      pair "$OURS" "$OURS" "$op" "$block" "$batch" "ours-$op-$block-$round"
      OURS_R[$key]="${OURS_R[$key]:-} $RESULT"
      MC_SAME_HOST_NO_LEASE=1 pair "$OURS" "$OURS" "$op" "$block" "$batch" "grant-$op-$block-$round"
      GRANT[$key]="${GRANT[$key]:-} $RESULT"
      # The bench moves the same batch*block bytes per thread every batch: memcpy gets
      # the same working set.
      m=$("$MEMCPY" --threads="$THREADS" --block_size="$block" --buffer_size=$((block * batch)) \
        --duration="$DURATION" | grep -oE '[0-9.]+ GB/s' | grep -oE '^[0-9.]+' || echo FAIL)
      log "round $round $key memcpy: $m GB/s"
      MEM[$key]="${MEM[$key]:-} $m"
      v=$("$MEMCPY" --threads="$THREADS" --block_size="$block" --buffer_size=$((block * batch)) \
        --duration="$DURATION" --process_vm="$op" | grep -oE '[0-9.]+ GB/s' | grep -oE '^[0-9.]+' || echo FAIL)
      log "round $round $key process_vm: $v GB/s"
      PVM[$key]="${PVM[$key]:-} $v"
    done
  done
done

echo
echo "Same host, two processes, P2PHANDSHAKE, threads $THREADS, buffer 256 MiB, ${DURATION}s per run, median of $ROUNDS interleaved rounds ($(nproc) CPUs)"
printf '%-6s %-7s %12s %12s %14s %12s %12s %10s %12s %10s\n' op block upstream ours \
  'ours (grant)' memcpy process_vm ours/up ours/memcpy ours/pvm
for op in write read; do
  for block in 65536 4194304; do
    key="$op/$block"
    # shellcheck disable=SC2086
    up=$(median ${UP[$key]}); ours=$(median ${OURS_R[$key]}); mem=$(median ${MEM[$key]})
    # shellcheck disable=SC2086
    pvm=$(median ${PVM[$key]}); grant=$(median ${GRANT[$key]})
    if [ "$block" = 65536 ]; then bname=64KiB; else bname=4MiB; fi
    printf '%-6s %-7s %12s %12s %14s %12s %12s %10s %12s %10s\n' "$op" "$bname" "$up GB/s" \
      "$ours GB/s" "$grant GB/s" "$mem GB/s" "$pvm GB/s" "$(ratio "$ours" "$up")" "$(ratio "$ours" "$mem")" \
      "$(ratio "$ours" "$pvm")"
  done
done
