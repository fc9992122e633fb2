#!/usr/bin/env bash
# Side-by-side RDMA benchmark in the SoftRoCE VM (scripts/rxe-vm.sh, device rxe0):
# upstream Mooncake 0.3.13's transfer_engine_bench (scripts/upstream-peer.sh) against
# ours (target/release/transfer_engine_bench), both --protocol=rdma --device_name=rxe0,
# P2PHANDSHAKE, target and initiator in separate processes. Configurations: write and
# read x {64 KiB x16, 1 MiB x8} x threads {1, 2}; each is run ROUNDS times, upstream and
# ours interleaved (up, ours, up, ours, ...), and the median is reported. The ceiling on
# the same device: perftest ib_write_bw / ib_read_bw (one QP, same message size).
#
# SoftRoCE under TCG emulation moves far less than a real NIC, and its cost is in the
# emulated kernel: treat the figures as ratios measured in one VM run, not as line rates.
#
# Environment: DURATION (seconds per run, default 5), ROUNDS (default 3), VM_MEM (MiB,
# default 4096), VM_CPUS (default 2), MOONCAKE_PEER_VENV.
#
# Usage: bench/rdma_bench.sh        (builds release first; needs scripts/rxe-vm.sh --install)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}

if [ "${1:-}" != --inside ]; then
  log() { echo "[rdma_bench] $*" >&2; }
  log "building release binaries"
  (cd "$ROOT" && ${CARGO:-cargo} build --release --bin transfer_engine_bench)
  PEER=$(bash "$ROOT/scripts/upstream-peer.sh" | tail -1)
  M=$("$PEER/bin/python" -c 'import mooncake,os;print(os.path.dirname(mooncake.__file__))')
  [ -x "$M/transfer_engine_bench" ] || { log "no upstream bench in $M"; exit 1; }
  export UPSTREAM_BENCH="$M/transfer_engine_bench" OURS_BENCH="$ROOT/target/release/transfer_engine_bench"
  export DURATION ROUNDS
  out=$(mktemp -d -t rdma_bench.XXXXXX)
  trap 'rm -rf "$out"' EXIT
  export RESULTS_DIR="$out"
  log "running in the SoftRoCE VM (${ROUNDS} rounds x 16 configurations x ${DURATION}s)"
  exec_status=0
  shares=(--rw "$out")
  for dir in "$ROOT" "$PEER"; do
    case "$dir" in /tmp/*) shares+=(--rw "$dir") ;; esac
  done
  bash "$ROOT/scripts/rxe-vm.sh" "${shares[@]}" --mem "${VM_MEM:-4096}" --cpus "${VM_CPUS:-2}" \
    --timeout 7200 -- bash "$ROOT/bench/rdma_bench.sh" --inside || exec_status=$?
  exit "$exec_status"
fi

# ---- inside the VM --------------------------------------------------------------------
log() { echo "[rdma_bench] $*" >&2; }
WORK=$RESULTS_DIR
COMMON=(--protocol=rdma --device_name=rxe0 --metadata_server=P2PHANDSHAKE --buffer_size=268435456)

# pair BIN OP BLOCK BATCH THREADS TAG: sets RESULT (GB/s, or FAIL).
pair() {
  local bin=$1 op=$2 block=$3 batch=$4 threads=$5 tag=$6 tlog ilog tpid port i
  tlog="$WORK/$tag.target.log" ilog="$WORK/$tag.initiator.log"
  RESULT=FAIL
  "$bin" --mode=target "${COMMON[@]}" --local_server_name=127.0.0.1:12345 2>"$tlog" &
  tpid=$!
  port=""
  for i in $(seq 300); do
    port=$(grep -m1 -oE 'listening on 127\.0\.0\.1:[0-9]+' "$tlog" | grep -oE '[0-9]+$' || true)
    [ -n "$port" ] && break
    sleep 0.1
  done
  sleep 1
  if [ -n "$port" ]; then
    timeout $((DURATION + 120)) "$bin" --mode=initiator "${COMMON[@]}" \
      --local_server_name=127.0.0.1:12346 --segment_id="127.0.0.1:$port" \
      --duration="$DURATION" --threads="$threads" --operation="$op" \
      --block_size="$block" --batch_size="$batch" --report_unit=GB --report_precision=4 \
      2>"$ilog" || true
    RESULT=$(grep -oE 'throughput [0-9.]+ GB/s' "$ilog" | tail -1 | grep -oE '[0-9.]+' || echo FAIL)
  fi
  kill -TERM "$tpid" 2>/dev/null || true
  for i in $(seq 50); do kill -0 "$tpid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$tpid" 2>/dev/null || true
  wait "$tpid" 2>/dev/null || true
  [ "$RESULT" != FAIL ] || { log "$tag failed:"; tail -5 "$ilog" "$tlog" >&2; }
}

median() { tr ' ' '\n' | grep -v '^$' | grep -v FAIL | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "FAIL"; else print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2fx", a / b; else print "-" }'; }

# perftest OP SIZE: GB/s of ib_<op>_bw on rxe0 (one QP), or FAIL.
perftest() {
  local tool=ib_$1_bw size=$2 spid out
  "$tool" -d rxe0 -x 1 -s "$size" -D "$DURATION" -F >/dev/null 2>&1 &
  spid=$!
  sleep 1
  out=$(timeout $((DURATION + 60)) "$tool" -d rxe0 -x 1 -s "$size" -D "$DURATION" -F 127.0.0.1 2>/dev/null || true)
  wait "$spid" 2>/dev/null || true
  # The last data line: #bytes #iterations BW-peak[MB/s] BW-average[MB/s] MsgRate.
  echo "$out" | awk -v s="$size" '$1 == s { v = $4 } END { if (v == "") print "FAIL"; else printf "%.4f", v * 1.048576 / 1000 }'
}

ROWS=()
for op in write read; do
  for shape in 65536:16:64KiB 1048576:8:1MiB; do
    IFS=: read -r block batch bname <<<"$shape"
    ceiling=$(perftest "$op" "$block")
    for threads in 1 2; do
      ups="" ours=""
      for r in $(seq "$ROUNDS"); do
        pair "$UPSTREAM_BENCH" "$op" "$block" "$batch" "$threads" "up-$op-$bname-$threads-$r"
        ups="$ups $RESULT"
        pair "$OURS_BENCH" "$op" "$block" "$batch" "$threads" "ours-$op-$bname-$threads-$r"
        ours="$ours $RESULT"
      done
      up=$(echo "$ups" | median) our=$(echo "$ours" | median)
      log "$op $bname x$batch threads $threads: upstream [$ups ] ours [$ours ] perftest $ceiling"
      ROWS+=("$op|$bname|$batch|$threads|$up|$our|$ceiling")
    done
  done
done

echo
echo "RDMA over SoftRoCE (rxe0 on lo, qemu TCG, $(nproc) vCPUs), P2PHANDSHAKE, median of $ROUNDS interleaved rounds, ${DURATION}s each (GB/s)"
printf '%-6s %-6s %-5s %-7s %10s %10s %9s %10s %12s\n' op block batch threads upstream ours ours/up perftest ours/perftest
fail=0
for row in "${ROWS[@]}"; do
  IFS='|' read -r op bname batch threads up our ceil <<<"$row"
  printf '%-6s %-6s %-5s %-7s %10s %10s %9s %10s %12s\n' "$op" "$bname" "$batch" "$threads" "$up" "$our" \
    "$(ratio "$our" "$up")" "$ceil" "$(ratio "$our" "$ceil")"
  case "$up$our" in *FAIL*) fail=1 ;; esac
done
exit $fail
