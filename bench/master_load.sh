#!/usr/bin/env bash
# Master side-by-side: upstream Mooncake's mooncake_master (the PyPI wheel installed by
# scripts/upstream-peer.sh) against ours (target/release/mooncake_master), in
# one run, on 127.0.0.1 only.
#
# (1) Metadata throughput: each master is driven by `store_bench --mode=master_load`
#     (coro_rpc, upstream's wire format): a fake client mounts a fake 64 GiB segment,
#     then THREADS threads, one connection each, run DURATION seconds of each phase:
#     PutStart+PutEnd of new 1 KiB keys, GetReplicaList and ExistKey of existing keys,
#     and a mix of the three. Each run is made once per PIPELINES value: with 16, every
#     connection keeps rounds of 16 calls in flight (answered in order), which loads the
#     master itself, like a fleet of clients does; the 3x target is judged there. With
#     1, each thread makes one call at a time through our MasterRpcClient: on a small
#     host that table mostly measures the shared load generator and thread wake-ups
#     (both masters pay them alike), so it is printed for reference. Both masters run
#     side by side and the load runs alternate REPEAT times (median per row; a
#     pipelined p50 is the time of a whole round).
#     The ceiling runs in the same rounds: `store_bench --mode=null_master`, a server
#     that answers the load's calls without any work (served like ours: a thread per
#     connection), so its rate is what the load generator, loopback TCP and wake-ups
#     allow on this host. ceil/up is the most any master could get over upstream here.
# (2) Memory: a fresh master of each kind is filled with OBJECTS small objects
#     (`--mode=master_fill`: 31-byte keys, 64-byte values, pipelined batches over
#     THREADS connections); its VmRSS (from /proc/<pid>/status) before and after the
#     fill is printed with the ratio.
#
# Both masters get identical flags and the same load generator, so only the master
# differs. The load generator shares the host's CPUs with the master; compare ratios
# from the same run only.
#
# Environment:
#   DURATION            seconds per load phase (default 5)
#   REPEAT              load runs per master, interleaved; rows report the median (default 3)
#   THREADS             load threads / connections (default 4)
#   PIPELINES           calls in flight per connection, one table each (default "16 1";
#                       the first value's table carries the 3x verdict)
#   OBJECTS             objects for the memory fill (default 1000000)
#   SKIP_BUILD=1        do not run cargo build (store_bench.sh already did)
#   MOONCAKE_PEER_VENV  an existing upstream peer venv (skips the installer)
#   CARGO               cargo binary (default cargo)
#
# Usage: bench/master_load.sh   (from anywhere)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-5}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-4}
PIPELINES=${PIPELINES:-16 1}
HEADLINE=${PIPELINES%% *}
OBJECTS=${OBJECTS:-1000000}

log() { echo "[master_load] $*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/master_load.XXXXXX")
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
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  log "building release binaries"
  (cd "$ROOT" && ${CARGO:-cargo} build --release --bin store_bench --bin mooncake_master)
fi
BENCH="$ROOT/target/release/store_bench"
OURS_MASTER="$ROOT/target/release/mooncake_master"
# The peer (installed on first use; MOONCAKE_PEER_VENV picks where).
PEER=$(bash "$ROOT/scripts/upstream-peer.sh" | tail -1)
M=$("$PEER/bin/python" -c 'import mooncake,os;print(os.path.dirname(mooncake.__file__))')
UP_MASTER="$M/mooncake_master"
for b in "$BENCH" "$OURS_MASTER" "$UP_MASTER"; do
  [ -x "$b" ] || { log "missing $b"; exit 1; }
done

# --- helpers ------------------------------------------------------------------------------
free_port() {
  "$PEER/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
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

forget() {
  local keep=() p
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

stop_pid() {
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  forget "$pid"
}

# start_master KIND TAG: starts a master, sets MASTER_PID and MASTER_ADDR.
start_master() {
  local kind=$1 tag=$2 bin rpc metrics
  if [ "$kind" = ours ]; then bin=$OURS_MASTER; else bin=$UP_MASTER; fi
  rpc=$(free_port)
  metrics=$(free_port)
  "$bin" --port="$rpc" --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 \
    --metrics_port="$metrics" >"$WORK/$tag.master.log" 2>&1 &
  MASTER_PID=$!
  PIDS+=("$MASTER_PID")
  MASTER_ADDR="127.0.0.1:$rpc"
  if ! wait_port "$rpc" "$MASTER_PID" 30; then
    log "$tag: master did not come up; log:"
    tail -20 "$WORK/$tag.master.log" >&2
    return 1
  fi
}

# cpu_ticks PID: user + system clock ticks the process has used so far.
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2fx", a / b; else print "-" }'; }

# field ROWFILE OP KEY: the median KEY= value of OP's ROW lines (or "-").
field() {
  awk -v op="$2" -v key="$3" '
    $1 == "ROW" { delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                  if (f["op"] == op) v[n++] = f[key] + 0 }
    END {
      if (n == 0) { print "-"; exit }
      for (i = 1; i < n; i++) for (j = i; j > 0 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      printf "%.1f\n", (n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2)
    }' "$1"
}

# --- (1) metadata throughput --------------------------------------------------------------
# Both masters stay up and the load runs alternate REPEAT times, so drifts of the host hit
# both alike; each row reports the median over the repeats.
declare -A ADDR MPID CPU_TICKS OPS_DONE
LOAD_PIDS=()
for kind in upstream ours; do
  for pl in $PIPELINES; do : >"$WORK/$kind.load.$pl.rows"; done
  ADDR[$kind]=""
  CPU_TICKS[$kind]=0
  OPS_DONE[$kind]=0
  if start_master "$kind" "$kind-load"; then
    ADDR[$kind]=$MASTER_ADDR
    MPID[$kind]=$MASTER_PID
    LOAD_PIDS+=("$MASTER_PID")
  fi
done
# The ceiling: `store_bench --mode=null_master` answers the load's calls without any
# work (mounts and pings go on to a master of ours behind it), served like ours.
for pl in $PIPELINES; do : >"$WORK/null.load.$pl.rows"; done
ADDR[null]=""
CPU_TICKS[null]=0
OPS_DONE[null]=0
if start_master ours null-backing; then
  LOAD_PIDS+=("$MASTER_PID")
  null_port=$(free_port)
  "$BENCH" --mode=null_master --master_server_addr="$MASTER_ADDR" \
    --listen="127.0.0.1:$null_port" >"$WORK/null.master.log" 2>&1 &
  null_pid=$!
  PIDS+=("$null_pid")
  LOAD_PIDS+=("$null_pid")
  if wait_port "$null_port" "$null_pid" 30; then
    ADDR[null]="127.0.0.1:$null_port"
    MPID[null]=$null_pid
  else
    log "null master did not come up; log:"
    tail -20 "$WORK/null.master.log" >&2
  fi
fi
for rep in $(seq "$REPEAT"); do
  for kind in upstream ours null; do
    [ -n "${ADDR[$kind]}" ] || continue
    for pl in $PIPELINES; do
      log "$kind master: master_load run $rep of $REPEAT ($THREADS threads, $pl in flight each, ${DURATION}s per phase)"
      out="$WORK/$kind.load.$pl.$rep.out"
      t0=$(cpu_ticks "${MPID[$kind]}")
      timeout $((4 * DURATION + 120)) "$BENCH" --mode=master_load \
        --master_server_addr="${ADDR[$kind]}" --threads="$THREADS" --duration="$DURATION" \
        --pipeline="$pl" >"$out" 2>"$WORK/$kind.load.$pl.$rep.log" &
      lpid=$!
      PIDS+=("$lpid")
      rc=0
      wait "$lpid" || rc=$?
      forget "$lpid"
      if [ $rc -ne 0 ]; then
        log "$kind: master_load failed ($rc); log tail:"
        tail -10 "$WORK/$kind.load.$pl.$rep.log" >&2
      fi
      t1=$(cpu_ticks "${MPID[$kind]}")
      CPU_TICKS[$kind]=$((CPU_TICKS[$kind] + t1 - t0))
      OPS_DONE[$kind]=$(awk -v d="$DURATION" -v acc="${OPS_DONE[$kind]}" '
        $1 == "ROW" { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "ops") acc += kv[2] * d } }
        END { printf "%d", acc }' "$out")
      grep '^ROW ' "$out" >>"$WORK/$kind.load.$pl.rows" || true
    done
  done
done
for pid in "${LOAD_PIDS[@]}"; do stop_pid "$pid"; done

# --- (2) memory after a fill --------------------------------------------------------------
declare -A RSS0 RSS1 FILLED
for kind in upstream ours; do
  RSS0[$kind]=0
  RSS1[$kind]=0
  FILLED[$kind]=0
  log "$kind master: filling $OBJECTS objects"
  start_master "$kind" "$kind-fill" || continue
  sleep 0.5
  RSS0[$kind]=$(rss_kb "$MASTER_PID")
  "$BENCH" --mode=master_fill --master_server_addr="$MASTER_ADDR" --objects="$OBJECTS" \
    --threads="$THREADS" --hold >"$WORK/$kind.fill.out" 2>"$WORK/$kind.fill.log" &
  fpid=$!
  PIDS+=("$fpid")
  deadline=$((SECONDS + 900))
  while [ $SECONDS -lt $deadline ]; do
    grep -q '^filled ' "$WORK/$kind.fill.out" 2>/dev/null && break
    kill -0 "$fpid" 2>/dev/null || break
    sleep 0.2
  done
  line=$(grep '^filled ' "$WORK/$kind.fill.out" 2>/dev/null || true)
  if [ -n "$line" ]; then
    log "$kind: $line"
    FILLED[$kind]=$(echo "$line" | awk '{print $2}')
    sleep 1
    RSS1[$kind]=$(rss_kb "$MASTER_PID")
  else
    log "$kind: the fill did not finish; log tail:"
    tail -10 "$WORK/$kind.fill.log" >&2
  fi
  stop_pid "$fpid"
  stop_pid "$MASTER_PID"
done

# --- report -------------------------------------------------------------------------------
echo
fail=0
for pl in $PIPELINES; do
  echo "Master metadata throughput: store_bench --mode=master_load, $THREADS connections x" \
    "$pl call(s) in flight, ${DURATION}s per phase, median of $REPEAT interleaved runs," \
    "127.0.0.1 ($(nproc) CPUs)"
  [ "$pl" = "$HEADLINE" ] || echo "(reference: bound by the shared load generator and wake-ups)"
  printf '%-18s %14s %14s %9s %11s %11s %8s %13s %9s %9s\n' op "upstream op/s" "ours op/s" \
    "ours/up" "up p50 us" "ours p50 us" "target" "ceiling op/s" "ours/ceil" "ceil/up"
  for op in put_start_end get_replica_list exist_key mixed; do
    rows_up="$WORK/upstream.load.$pl.rows"
    rows_ours="$WORK/ours.load.$pl.rows"
    up=$(field "$rows_up" "$op" ops)
    ours=$(field "$rows_ours" "$op" ops)
    ceil=$(field "$WORK/null.load.$pl.rows" "$op" ops)
    r=$(ratio "$ours" "$up")
    verdict=$(awk -v a="$ours" -v b="$up" 'BEGIN { if (a+0 > 0 && b+0 > 0) print (a / b >= 3 ? "ok" : "BELOW"); else print "FAIL" }')
    [ "$verdict" = FAIL ] && fail=1
    [ "$pl" = "$HEADLINE" ] && verdict="$verdict(3x)" || verdict="-"
    printf '%-18s %14s %14s %9s %11s %11s %8s %13s %9s %9s\n' "$op" "$up" "$ours" "$r" \
      "$(field "$rows_up" "$op" p50)" "$(field "$rows_ours" "$op" p50)" "$verdict" \
      "$ceil" "$(ratio "$ours" "$ceil")" "$(ratio "$ceil" "$up")"
  done
  echo
done
HZ=$(getconf CLK_TCK)
cpu_us() { awk -v t="$1" -v n="$2" -v hz="$HZ" 'BEGIN { if (n > 0) printf "%.1f", t / hz * 1e6 / n; else print "-" }'; }
cu=$(cpu_us "${CPU_TICKS[upstream]}" "${OPS_DONE[upstream]}")
co=$(cpu_us "${CPU_TICKS[ours]}" "${OPS_DONE[ours]}")
echo "master CPU per op (user+sys over all runs; a put is PutStart+PutEnd): upstream $cu us," \
  "ours $co us, upstream/ours $(ratio "$cu" "$co")"
echo
echo "Master memory: VmRSS after filling $OBJECTS objects (31 B keys, 64 B values)"
printf '%-9s %10s %12s %12s %12s %14s\n' master filled "RSS idle MB" "RSS full MB" "delta MB" \
  "bytes/object"
for kind in upstream ours; do
  awk -v k="$kind" -v n="${FILLED[$kind]}" -v a="${RSS0[$kind]}" -v b="${RSS1[$kind]}" 'BEGIN {
    d = b - a; printf "%-9s %10d %12.1f %12.1f %12.1f %14s\n", k, n, a / 1024, b / 1024, d / 1024,
      (n > 0 ? sprintf("%.0f", d * 1024 / n) : "-") }'
done
rr=$(ratio "${RSS1[ours]}" "${RSS1[upstream]}")
rd=$(ratio "$((RSS1[ours] - RSS0[ours]))" "$((RSS1[upstream] - RSS0[upstream]))")
verdict=$(awk -v a="${RSS1[ours]}" -v b="${RSS1[upstream]}" 'BEGIN { if (a+0 > 0 && b+0 > 0) print (a / b <= 0.5 ? "ok" : "ABOVE"); else print "FAIL" }')
echo "ours/upstream RSS when full: $rr (delta: $rd); target <= 0.5x: $verdict"
[ "$verdict" = FAIL ] && fail=1
[ "${FILLED[upstream]}" = "$OBJECTS" ] && [ "${FILLED[ours]}" = "$OBJECTS" ] || fail=1
exit $fail
