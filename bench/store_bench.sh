#!/usr/bin/env bash
# Side-by-side Mooncake Store benchmark: upstream Mooncake (the PyPI wheel installed by
# scripts/upstream-peer.sh) against ours, in one run, on 127.0.0.1 only.
#
# (a) Client operations, two-process like upstream's baseline (spec store.md §5.3,
#     Appendix A.2): a master, a separate segment-owner process (1 GiB segment), and a
#     pure client (global_segment_size 0), so every value crosses the Transfer Engine
#     over loopback TCP. Metadata goes through the master's embedded HTTP metadata
#     server (both masters accept the same flags).
#       upstream: upstream master + a wheel process owning the segment
#                 (bench/store_py_bench.py --mode=serve --impl=upstream) + the Python
#                 harness on the wheel's MooncakeDistributedStore;
#       ours:     our master + `store_bench --mode=serve` + the same Python harness on
#                 our libmooncake.so through ctypes (apples to apples), then the native
#                 `store_bench --mode=client` against the same master and owner.
#       dummy:    our master + `mooncake_client` owning the segment + the Python
#                 harness on our library as a dummy client of it (setup_dummy; its
#                 buffers from alloc_from_mem_pool), data through shared memory.
#     Every process runs on this host, so ours moves bytes over the same-host path.
#     Ops: put, get, put_from, get_into, batch_put_from, batch_get_into (x16) at
#     VALUE_SIZES. The stacks run side by side (idle when not measured) and the four
#     clients alternate REPEAT times, after one unreported warm-up run each; the tables show per row the median over the
#     repeats, the ratios ours/upstream and whether the targets are met (2x; at 1 MiB
#     4x for the two-process client and 3x for the dummy client).
#     Then `store_bench --mode=round_trip`: a loopback round trip between two threads
#     blocking in read, the host's cost of one small call without busy-polling.
# (b) bench/master_load.sh: metadata ops/s on each master and VmRSS after a fill.
#
# Environment:
#   REPEAT              client runs per implementation, interleaved; rows report the
#                       median over them (default 5)
#   ROUNDS              rounds per op and size within a run; a run reports its median
#                       round (default 1)
#   OPS                 items per op, size and round (default: 200 at >= 512 KiB, else 2000)
#   VALUE_SIZES         comma-separated (default 4096,1048576)
#   DURATION            master_load seconds per phase (default 5)
#   LOAD_REPEAT         master_load runs per master, interleaved (default 3)
#   THREADS, OBJECTS    passed to master_load.sh (defaults 4, 1000000)
#   PIN_CPUS            e.g. 0: run every process of (a) under `taskset -c $PIN_CPUS`.
#                       On small VMs the latency of small ops depends 3-4x on whether
#                       the processes' threads share a vCPU (cross-vCPU wake-ups are
#                       slow); pinning removes that noise but penalises implementations
#                       that spin while waiting. Off by default.
#   SKIP_MASTER_LOAD=1  only run (a)
#   MOONCAKE_PEER_VENV  an existing upstream peer venv (skips the installer)
#   CARGO               cargo binary (default cargo)
#
# Usage: bench/store_bench.sh   (from anywhere; builds release first)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-1}
REPEAT=${REPEAT:-5}
OPS=${OPS:-0}
VALUE_SIZES=${VALUE_SIZES:-4096,1048576}
export MC_TCP_BIND_ADDRESS=127.0.0.1
PIN=()
[ -n "${PIN_CPUS:-}" ] && PIN=(taskset -c "$PIN_CPUS")

log() { echo "[store_bench] $*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/store_bench.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build ours, locate upstream ----------------------------------------------------------
log "building release binaries"
(cd "$ROOT" && ${CARGO:-cargo} build --release --bin store_bench --bin mooncake_master \
  --bin mooncake_client --lib)
BENCH="$ROOT/target/release/store_bench"
OURS_MASTER="$ROOT/target/release/mooncake_master"
OURS_CLIENT="$ROOT/target/release/mooncake_client"
OURS_LIB="$ROOT/target/release/libmooncake.so"
PYBENCH="$ROOT/bench/store_py_bench.py"
# The peer (installed on first use; MOONCAKE_PEER_VENV picks where).
PEER=$(bash "$ROOT/scripts/upstream-peer.sh" | tail -1)
PY="$PEER/bin/python"
M=$("$PY" -c 'import mooncake,os;print(os.path.dirname(mooncake.__file__))')
UP_MASTER="$M/mooncake_master"
for b in "$BENCH" "$OURS_MASTER" "$OURS_CLIENT" "$OURS_LIB" "$UP_MASTER"; do
  [ -e "$b" ] || { log "missing $b"; exit 1; }
done
log "upstream: $UP_MASTER ($PY)"
log "ours:     $OURS_MASTER, $BENCH, $OURS_LIB"

# --- helpers ------------------------------------------------------------------------------
free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT PID SECONDS: until 127.0.0.1:PORT accepts, PID is alive, and the deadline.
wait_port() {
  local port=$1 pid=$2 deadline=$((SECONDS + $3))
  while [ $SECONDS -lt $deadline ]; do
    kill -0 "$pid" 2>/dev/null || return 1
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

# wait_line FILE PATTERN PID SECONDS: until FILE has a line matching PATTERN.
wait_line() {
  local file=$1 pattern=$2 pid=$3 deadline=$((SECONDS + $4))
  while [ $SECONDS -lt $deadline ]; do
    grep -qE "$pattern" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

forget() {
  local keep=() p
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

stop_pid() {
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  forget "$pid"
}

# start_master KIND: a master with its HTTP metadata server; sets MASTER_PID,
# MASTER_ADDR, METADATA.
start_master() {
  local kind=$1 bin rpc metrics http
  MASTER_PID=""
  if [ "$kind" = upstream ]; then bin=$UP_MASTER; else bin=$OURS_MASTER; fi
  rpc=$(free_port)
  metrics=$(free_port)
  http=$(free_port)
  "${PIN[@]}" "$bin" --port="$rpc" --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 \
    --metrics_port="$metrics" --enable_http_metadata_server=true \
    --http_metadata_server_port="$http" --http_metadata_server_host=127.0.0.1 \
    >"$WORK/$kind.master.log" 2>&1 &
  MASTER_PID=$!
  PIDS+=("$MASTER_PID")
  MASTER_ADDR="127.0.0.1:$rpc"
  METADATA="http://127.0.0.1:$http/metadata"
  if ! wait_port "$rpc" "$MASTER_PID" 30 || ! wait_port "$http" "$MASTER_PID" 30; then
    log "$kind: master did not come up; log:"
    tail -20 "$WORK/$kind.master.log" >&2
    return 1
  fi
}

# start_stack KIND: master and a segment owner; sets MASTER_PID, MASTER_ADDR,
# METADATA, SERVE_PID.
start_stack() {
  local kind=$1
  SERVE_PID=""
  start_master "$kind" || return 1
  local common=(--master_server_addr="$MASTER_ADDR" --metadata_server="$METADATA"
    --global_segment_size=1073741824 --local_buffer_size=16777216)
  if [ "$kind" = ours ]; then
    "${PIN[@]}" "$BENCH" --mode=serve "${common[@]}" >"$WORK/$kind.serve.log" 2>&1 &
  else
    "${PIN[@]}" "$PY" "$PYBENCH" --mode=serve --impl=upstream "${common[@]}" >"$WORK/$kind.serve.log" 2>&1 &
  fi
  SERVE_PID=$!
  PIDS+=("$SERVE_PID")
  if ! wait_line "$WORK/$kind.serve.log" 'serving segment' "$SERVE_PID" 60; then
    log "$kind: segment owner did not come up; log:"
    tail -20 "$WORK/$kind.serve.log" >&2
    return 1
  fi
  log "$kind: master $MASTER_ADDR, $(grep -oE 'serving segment .*' "$WORK/$kind.serve.log")"
}

# start_real_client: our master and a mooncake_client owning the 1 GiB segment, which
# dummy clients forward to; sets MASTER_PID, MASTER_ADDR, METADATA, SERVE_PID,
# DUMMY_ADDR.
start_real_client() {
  SERVE_PID=""
  start_master dummy || return 1
  local port
  port=$(free_port)
  "${PIN[@]}" "$OURS_CLIENT" --host=127.0.0.1 --port="$port" --metadata_server="$METADATA" \
    --master_server_address="$MASTER_ADDR" --global_segment_size=1GB \
    >"$WORK/dummy.serve.log" 2>&1 &
  SERVE_PID=$!
  PIDS+=("$SERVE_PID")
  DUMMY_ADDR="127.0.0.1:$port"
  if ! wait_line "$WORK/dummy.serve.log" 'serving dummy clients' "$SERVE_PID" 60; then
    log "dummy: mooncake_client did not come up; log:"
    tail -20 "$WORK/dummy.serve.log" >&2
    return 1
  fi
  log "dummy: master $MASTER_ADDR, mooncake_client $DUMMY_ADDR"
}

CLIENT_FLAGS=(--value_sizes="$VALUE_SIZES" --rounds="$ROUNDS" --ops="$OPS")
[ "$OPS" = 0 ] && CLIENT_FLAGS=(--value_sizes="$VALUE_SIZES" --rounds="$ROUNDS")
CLIENT_TIMEOUT=$((300 + 300 * ROUNDS))

# run_client TAG REP CMD...: runs a benchmark client; its ROW lines are appended to
# $WORK/TAG.rows.
run_client() {
  local tag=$1 rep=$2 pid rc=0 out="$WORK/$1.$2.out" errlog="$WORK/$1.$2.log"
  shift 2
  log "$tag: run $rep of $REPEAT"
  timeout "$CLIENT_TIMEOUT" "${PIN[@]}" "$@" --master_server_addr="$MASTER_ADDR" \
    --metadata_server="$METADATA" "${CLIENT_FLAGS[@]}" >"$out" 2>"$errlog" &
  pid=$!
  PIDS+=("$pid")
  wait "$pid" || rc=$?
  forget "$pid"
  if [ $rc -ne 0 ]; then
    log "$tag: exited with status $rc; log tail:"
    tail -10 "$errlog" >&2
  fi
  grep '^ROW ' "$out" >>"$WORK/$tag.rows" || true
  grep -E '^(warning|\[WARN)' "$errlog" | sed -n '1,5p' >&2 || true
}

# field ROWFILE OP SIZE KEY: the median KEY= value of the matching ROW lines (or "-");
# for errors, the sum.
field() {
  awk -v op="$2" -v size="$3" -v key="$4" '
    $1 == "ROW" { delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                  if (f["op"] == op && f["size"] == size) { v[n++] = f[key] + 0; sum += f[key] } }
    END {
      if (n == 0) { print "-"; exit }
      if (key == "errors") { print sum; exit }
      for (i = 1; i < n; i++) for (j = i; j > 0 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      printf "%.1f\n", (n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2)
    }' "$1"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2fx", a / b; else print "-" }'; }

# --- (a) client operations ----------------------------------------------------------------
# Both stacks stay up and the clients alternate (upstream, ours via Python, ours native)
# REPEAT times, so slow drifts of the host (other load, vCPU wake-up latency) hit every
# implementation alike; each row reports the median over the repeats.
for tag in up-py ours-py ours-rust ours-dummy; do : >"$WORK/$tag.rows"; done
UP_OK=0
OURS_OK=0
DUMMY_OK=0
start_stack upstream && UP_OK=1
UP_MASTER_ADDR=${MASTER_ADDR:-}
UP_METADATA=${METADATA:-}
UP_PIDS=("${SERVE_PID:-}" "${MASTER_PID:-}")
start_stack ours && OURS_OK=1
OURS_MASTER_ADDR=${MASTER_ADDR:-}
OURS_METADATA=${METADATA:-}
OURS_PIDS=("${SERVE_PID:-}" "${MASTER_PID:-}")
start_real_client && DUMMY_OK=1
DUMMY_MASTER_ADDR=${MASTER_ADDR:-}
DUMMY_METADATA=${METADATA:-}
DUMMY_PIDS=("${SERVE_PID:-}" "${MASTER_PID:-}")
# Round 0 of each client warms its stack up (the segment's pages are first touched,
# at several hundred us per MiB on a VM, as objects land on them) and is not reported.
for rep in $(seq 0 "$REPEAT"); do
  pre=""
  [ "$rep" = 0 ] && pre="warmup-"
  if [ $UP_OK = 1 ]; then
    MASTER_ADDR=$UP_MASTER_ADDR METADATA=$UP_METADATA
    run_client "${pre}up-py" "$rep" "$PY" "$PYBENCH" --mode=client --impl=upstream
  fi
  if [ $OURS_OK = 1 ]; then
    MASTER_ADDR=$OURS_MASTER_ADDR METADATA=$OURS_METADATA
    run_client "${pre}ours-py" "$rep" "$PY" "$PYBENCH" --mode=client --impl=ours --lib="$OURS_LIB"
    run_client "${pre}ours-rust" "$rep" "$BENCH" --mode=client
  fi
  if [ $DUMMY_OK = 1 ]; then
    MASTER_ADDR=$DUMMY_MASTER_ADDR METADATA=$DUMMY_METADATA
    run_client "${pre}ours-dummy" "$rep" "$PY" "$PYBENCH" --mode=client --impl=ours \
      --lib="$OURS_LIB" --dummy="$DUMMY_ADDR"
  fi
done
for pid in "${UP_PIDS[@]}" "${OURS_PIDS[@]}" "${DUMMY_PIDS[@]}"; do stop_pid "$pid"; done
# The small-call ceiling of this host: a loopback round trip between two threads that
# block in read (a 4 KiB get is one master call and a copy, a put two calls).
ROUND_TRIP=$("${PIN[@]}" "$BENCH" --mode=round_trip 2>/dev/null | grep '^ROUND_TRIP' || echo "ROUND_TRIP failed")

echo
echo "Store client ops, two processes on this host (1 GiB segment in a separate owner process," \
  "pure client; upstream over loopback TCP, ours over the same-host path), HTTP metadata," \
  "batch 16, $(nproc) CPUs"
echo "median of $REPEAT interleaved runs per implementation ($ROUNDS round(s) each); ops/s =" \
  "items/s; p50 in us per call (a batch call is one sample)${PIN_CPUS:+; all pinned to CPU(s) $PIN_CPUS}"
printf '%-15s %8s %11s %11s %8s %11s %8s %9s %9s %9s %7s\n' op size "up(py)" "ours(py)" \
  "py/up" "ours(rust)" "rust/up" "p50 up" "p50 py" "p50 rust" "2x?"
fail=0
IFS=',' read -r -a SIZES <<<"$VALUE_SIZES"
for size_spec in "${SIZES[@]}"; do
  size=$(awk -v s="$size_spec" 'BEGIN { n = s + 0; u = toupper(substr(s, length(n "") + 1, 1));
    if (u == "K") n *= 1024; else if (u == "M") n *= 1048576; else if (u == "G") n *= 1073741824;
    printf "%d", n }')
  for op in put get put_from get_into batch_put_from batch_get_into; do
    up=$(field "$WORK/up-py.rows" "$op" "$size" ops)
    py=$(field "$WORK/ours-py.rows" "$op" "$size" ops)
    rs=$(field "$WORK/ours-rust.rows" "$op" "$size" ops)
    verdict=$(awk -v a="$py" -v b="$up" 'BEGIN { if (a+0 > 0 && b+0 > 0) print (a / b >= 2 ? "ok" : "BELOW"); else print "FAIL" }')
    [ "$verdict" = FAIL ] && fail=1
    for f in up-py ours-py ours-rust ours-dummy; do
      e=$(field "$WORK/$f.rows" "$op" "$size" errors)
      [ "$e" = - ] || [ "$e" = 0 ] || { log "$f $op $size: $e errors"; fail=1; }
    done
    printf '%-15s %8s %11s %11s %8s %11s %8s %9s %9s %9s %7s\n' "$op" "$size" "$up" "$py" \
      "$(ratio "$py" "$up")" "$rs" "$(ratio "$rs" "$up")" \
      "$(field "$WORK/up-py.rows" "$op" "$size" p50)" \
      "$(field "$WORK/ours-py.rows" "$op" "$size" p50)" \
      "$(field "$WORK/ours-rust.rows" "$op" "$size" p50)" "$verdict"
  done
done
echo "(2x? compares ours via the same Python harness against upstream; rust = native Rust API)"
echo "Loopback round trip, 64 B between two threads blocking in read (store_bench" \
  "--mode=round_trip, us): $ROUND_TRIP"

# Same-host targets (issue 11): a client and the segment owner in different processes
# of this host, 1 MiB values: ours (same harness) >= 4x upstream; a dummy client
# forwarding to mooncake_client (which owns the segment) >= 3x upstream's real client.
echo
echo "Same host, 1 MiB: ours two-process (same-host path) and ours as a dummy client of" \
  "mooncake_client, against upstream's real client (ops/s, medians as above)"
printf '%-15s %11s %11s %8s %6s %11s %8s %6s\n' op "up(py)" "ours(py)" "py/up" "4x?" \
  "dummy(py)" "dummy/up" "3x?"
for op in put get put_from get_into batch_put_from batch_get_into; do
  up=$(field "$WORK/up-py.rows" "$op" 1048576 ops)
  py=$(field "$WORK/ours-py.rows" "$op" 1048576 ops)
  dm=$(field "$WORK/ours-dummy.rows" "$op" 1048576 ops)
  printf '%-15s %11s %11s %8s %6s %11s %8s %6s\n' "$op" "$up" "$py" "$(ratio "$py" "$up")" \
    "$(awk -v a="$py" -v b="$up" 'BEGIN { if (a+0 > 0 && b+0 > 0) print (a / b >= 4 ? "ok" : "BELOW"); else print "-" }')" \
    "$dm" "$(ratio "$dm" "$up")" \
    "$(awk -v a="$dm" -v b="$up" 'BEGIN { if (a+0 > 0 && b+0 > 0) print (a / b >= 3 ? "ok" : "BELOW"); else print "-" }')"
done

# --- (b) master load and memory -----------------------------------------------------------
if [ "${SKIP_MASTER_LOAD:-0}" != 1 ]; then
  echo
  MOONCAKE_PEER_VENV="$PEER" SKIP_BUILD=1 REPEAT="${LOAD_REPEAT:-3}" \
    bash "$ROOT/bench/master_load.sh" ||
    fail=1
fi
exit $fail
