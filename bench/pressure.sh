#!/usr/bin/env bash
# The store as a cache under pressure, upstream's mooncake_master (the PyPI wheel
# installed by scripts/upstream-peer.sh) against ours (target/release/mooncake_master),
# in one run, on 127.0.0.1 only, with the same clients (store_bench --mode=pressure).
#
# Workload: CLIENTS processes, each mounting a SEGMENT segment and looping for DURATION
# seconds over its own KEYS keys of 64 KiB-1 MiB (about 8x the pool with the defaults),
# 45 % put / 45 % get / 10 % remove, every read checked byte for byte. Runs per master:
#   put              puts with `put`
#   put_from         `put_from` on one client, `batch_put_from` (x16) on the other
#   kill             `put`, plus a third owner of 128 MiB that is SIGKILLed KILL_AFTER
#                    seconds in: its segment must stop taking puts at once
# Prints per run and master: puts, failed puts (%, by code), reads, hits, read errors,
# corrupt reads, ops/s; and a summary table of failed-put rates.
#
# Environment:
#   DURATION     seconds per run (default 10)
#   CLIENTS      workload processes (default 2)
#   KEYS         keys per process (default 3000)
#   SEGMENT      segment per process (default 96MiB)
#   KILL_AFTER   seconds before the third owner is killed (default 3)
#   RUNS         which runs (default "put put_from kill")
#   SKIP_BUILD=1 do not run cargo build
#   MOONCAKE_PEER_VENV  where the upstream peer is (installed on first use)
#
# Usage: bench/pressure.sh   (from anywhere)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-2}
KEYS=${KEYS:-3000}
SEGMENT=${SEGMENT:-96MiB}
KILL_AFTER=${KILL_AFTER:-3}
RUNS=${RUNS:-put put_from kill}

log() { echo "[pressure] $*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pressure.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ -z "${SKIP_BUILD:-}" ]; then
  (cd "$ROOT" && "${CARGO:-cargo}" build --release --bin mooncake_master --bin store_bench)
fi
BENCH="$ROOT/target/release/store_bench"
OURS="$ROOT/target/release/mooncake_master"
PEER=$(bash "$ROOT/scripts/upstream-peer.sh" | tail -1)
M=$("$PEER/bin/python" -c 'import mooncake,os;print(os.path.dirname(mooncake.__file__))')
UPSTREAM="$M/mooncake_master"

free_port() {
  python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

# start_master <binary> -> sets MASTER_PID and MASTER_ADDR
start_master() {
  local port metrics
  port=$(free_port)
  metrics=$(free_port)
  "$1" --port="$port" --rpc_address=127.0.0.1 --metrics_port="$metrics" \
    --metrics_host=127.0.0.1 >"$WORK/master.log" 2>&1 &
  MASTER_PID=$!
  PIDS+=("$MASTER_PID")
  MASTER_ADDR=127.0.0.1:$port
  for _ in $(seq 100); do
    (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  log "master $1 did not start"; cat "$WORK/master.log" >&2; exit 1
}

stop_master() {
  kill -TERM "$MASTER_PID" 2>/dev/null || true
  wait "$MASTER_PID" 2>/dev/null || true
}

# client <name> <extra flags...>: one workload process in the background
client() {
  local name=$1; shift
  "$BENCH" --mode=pressure --master_server_addr="$MASTER_ADDR" --key_prefix="$name" \
    --keys="$KEYS" --global_segment_size="$SEGMENT" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  CLIENT_PIDS+=($!)
  PIDS+=($!)
}

# field <line> <key>
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

# run <label> <kind> <master binary>: prints one row per client
run() {
  local label=$1 kind=$2 bin=$3 i op doomed=
  start_master "$bin"
  CLIENT_PIDS=()
  if [ "$kind" = kill ]; then
    client doomed --keys=100 --mix=100,0,0 --global_segment_size=128MiB --duration=600
    doomed=${CLIENT_PIDS[0]}
    CLIENT_PIDS=()
    sleep 1
  fi
  for i in $(seq "$CLIENTS"); do
    op=put
    [ "$kind" = put_from ] && { [ $((i % 2)) = 1 ] && op=put_from || op=batch_put_from; }
    client "c$i" --duration="$DURATION" --put_op="$op"
  done
  if [ -n "$doomed" ]; then
    sleep "$KILL_AFTER"
    kill -KILL "$doomed"
  fi
  for pid in "${CLIENT_PIDS[@]}"; do wait "$pid" || true; done
  [ -z "$doomed" ] || wait "$doomed" 2>/dev/null || true
  stop_master
  local puts=0 failed=0 line
  for i in $(seq "$CLIENTS"); do
    line=$(grep '^PRESSURE ' "$WORK/c$i.out" || true)
    [ -n "$line" ] || { log "client c$i printed no result"; cat "$WORK/c$i.err" >&2; continue; }
    printf '%-9s %-9s c%-2s %8s %8s %8s %8s %8s %7s %8s  %s\n' "$kind" "$label" "$i" \
      "$(field "$line" puts)" "$(field "$line" put_failed)" "$(field "$line" gets)" \
      "$(field "$line" hits)" "$(field "$line" get_errors)" "$(field "$line" corrupt)" \
      "$(field "$line" ops_per_sec)" "$(field "$line" failed_codes)"
    puts=$((puts + $(field "$line" puts)))
    failed=$((failed + $(field "$line" put_failed)))
  done
  SUMMARY+=("$(printf '%-9s %-9s %9d %9d %8.3f%%' "$kind" "$label" "$puts" "$failed" \
    "$(python3 -c "print(100*$failed/max($puts,1))")")")
}

SUMMARY=()
printf '%-9s %-9s %-3s %8s %8s %8s %8s %8s %7s %8s  %s\n' run master cl puts failed gets \
  hits get_err corrupt ops/s failed_codes
for kind in $RUNS; do
  run upstream "$kind" "$UPSTREAM"
  run ours "$kind" "$OURS"
done
echo
printf '%-9s %-9s %9s %9s %9s\n' run master puts failed failed%
for row in "${SUMMARY[@]}"; do echo "$row"; done
