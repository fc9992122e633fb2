#!/usr/bin/env bash
# Cost curves: how ours behaves as the work grows, measured and drawn (README "Cost
# curves"). Everything runs on 127.0.0.1; each curve is a CSV and an SVG in OUT.
#
# (1) master_objects: a fresh mooncake_master per point is filled with N small objects
#     (`store_bench --mode=master_fill`, 31-byte keys, 64-byte values); its VmRSS per
#     object, then GetReplicaList, ExistKey and PutStart+PutEnd rates over those keys
#     (`store_bench --mode=master_load --filled=N`, THREADS connections, 16 calls in
#     flight each, DURATION s per phase).
# (2) master_connections: one master holding BASE_OBJECTS objects, the same three
#     phases with 1 to 64 connections (16 calls in flight each).
# (3) te_peers: one initiator engine writing 64 KiB x16 batches over TCP to 1 to 256
#     target engines in turn (`examples/te_fanout`): GB/s, the initiator's memory and
#     threads per peer, the targets'.
# (4) conductor_instances and conductor_blocks: the conductor's schedule calls/s on one
#     thread (`conductor_sim --scaling`) with 8 to 1,024 instances (prefix index of
#     FIXED_BLOCKS blocks), and with prefix indexes of 1k to 1M blocks (FIXED_INSTANCES
#     instances).
#
# The plots are drawn by bench/plot_scaling.py with matplotlib, installed from PyPI
# into a venv of its own on first use (MOONCAKE_PLOT_VENV picks where).
#
# Environment:
#   OUT              where the CSVs and SVGs go (default docs/scaling in the repository)
#   CURVES           subset of "master_objects master_connections te_peers conductor"
#   OBJECTS_LIST     (default "10000 100000 1000000 10000000")
#   CONNECTIONS_LIST (default "1 2 4 8 16 32 64")
#   PEERS_LIST       (default "1 2 4 8 16 32 64 128 256")
#   INSTANCES_LIST   (default "8 16 32 64 128 256 512 1024")
#   BLOCKS_LIST      (default "1000 10000 100000 1000000")
#   FIXED_BLOCKS     prefix index of the instances curve (default 100000)
#   FIXED_INSTANCES  instances of the blocks curve (default 16)
#   BASE_OBJECTS     objects in the master of the connections curve (default 100000)
#   THREADS          load connections of the objects curve (default 4)
#   DURATION         seconds per load phase or transfer run (default 3)
#   CALLS            schedule calls per conductor run; a point is the median of three
#                    runs (default 20000)
#   SKIP_BUILD=1     do not run cargo build
#   SKIP_PLOT=1      write the CSVs only
#   CARGO            cargo binary (default cargo)
#
# Usage: bench/scaling.sh   (from anywhere)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/docs/scaling}
CURVES=${CURVES:-master_objects master_connections te_peers conductor}
OBJECTS_LIST=${OBJECTS_LIST:-10000 100000 1000000 10000000}
CONNECTIONS_LIST=${CONNECTIONS_LIST:-1 2 4 8 16 32 64}
PEERS_LIST=${PEERS_LIST:-1 2 4 8 16 32 64 128 256}
INSTANCES_LIST=${INSTANCES_LIST:-8 16 32 64 128 256 512 1024}
BLOCKS_LIST=${BLOCKS_LIST:-1000 10000 100000 1000000}
FIXED_BLOCKS=${FIXED_BLOCKS:-100000}
FIXED_INSTANCES=${FIXED_INSTANCES:-16}
BASE_OBJECTS=${BASE_OBJECTS:-100000}
THREADS=${THREADS:-4}
DURATION=${DURATION:-3}
CALLS=${CALLS:-20000}

LOG_TAG=scaling
# shellcheck source=te_common.sh
source "$ROOT/bench/te_common.sh"

wants() { [[ " $CURVES " == *" $1 "* ]]; }

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  log "building release binaries"
  (cd "$ROOT" && ${CARGO:-cargo} build --release --bin store_bench --bin mooncake_master \
    --bin conductor_sim --example te_fanout)
fi
R="$ROOT/target/release"
mkdir -p "$OUT"

# --- helpers ------------------------------------------------------------------------------
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_for FILE PATTERN PID SECONDS: until FILE holds PATTERN, while PID lives.
wait_for() {
  local deadline=$((SECONDS + $4))
  while [ $SECONDS -lt $deadline ]; do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# start_master: a fresh master of ours; sets MASTER_PID and MASTER_ADDR.
start_master() {
  local rpc metrics
  rpc=$(free_port)
  metrics=$(free_port)
  "$R/mooncake_master" --port="$rpc" --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 \
    --metrics_port="$metrics" >"$WORK/master.log" 2>&1 &
  MASTER_PID=$!
  PIDS+=("$MASTER_PID")
  MASTER_ADDR="127.0.0.1:$rpc"
  for _ in $(seq 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$rpc") 2>/dev/null && return 0
    kill -0 "$MASTER_PID" 2>/dev/null || break
    sleep 0.1
  done
  log "the master did not come up:"
  tail -20 "$WORK/master.log" >&2
  return 1
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# fill N: fills the running master with N objects under prefix "scale"; the filling
# client stays up (holding the objects' segment) as FILL_PID.
fill() {
  "$R/store_bench" --mode=master_fill --master_server_addr="$MASTER_ADDR" \
    --objects="$1" --key_prefix=scale --threads=4 >"$WORK/fill.out" 2>"$WORK/fill.log" &
  FILL_PID=$!
  PIDS+=("$FILL_PID")
  if ! wait_for "$WORK/fill.out" '^filled' "$FILL_PID" 1800; then
    log "filling $1 objects failed:"
    tail -20 "$WORK/fill.log" >&2
    return 1
  fi
}

# load THREADS FILLED: the three phases against the master; prints "get exist put" ops/s.
load() {
  "$R/store_bench" --mode=master_load --master_server_addr="$MASTER_ADDR" \
    --threads="$1" --pipeline=16 --duration="$DURATION" --prefill=0 --filled="$2" \
    --key_prefix=scale --phases=get_replica_list,exist_key,put_start_end \
    >"$WORK/load.out" 2>"$WORK/load.log" || {
    log "master_load failed:"
    tail -20 "$WORK/load.log" >&2
    return 1
  }
  awk '$1 == "ROW" { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                     ops[f["op"]] = f["ops"]; err += f["errors"] }
       END { if (err > 0) { print "errors: " err > "/dev/stderr"; exit 1 }
             printf "%.0f %.0f %.0f\n", ops["get_replica_list"], ops["exist_key"], ops["put_start_end"] }' \
    "$WORK/load.out"
}

# --- (1) master ops/s and memory per object -----------------------------------------------
if wants master_objects; then
  csv="$OUT/master_objects.csv"
  echo "objects,rss_mb,bytes_per_object,get_replica_list,exist_key,put_start_end" >"$csv"
  for n in $OBJECTS_LIST; do
    log "master_objects: $n objects"
    start_master
    rss0=$(rss_kb "$MASTER_PID")
    fill "$n"
    rss1=$(rss_kb "$MASTER_PID")
    res=$(load "$THREADS" "$n")
    read -r get exist put <<<"$res"
    awk -v n="$n" -v a="$rss0" -v b="$rss1" -v g="$get" -v e="$exist" -v p="$put" \
      'BEGIN { printf "%d,%.1f,%.1f,%s,%s,%s\n", n, b / 1024, (b - a) * 1024 / n, g, e, p }' >>"$csv"
    stop_target "$FILL_PID"
    stop_target "$MASTER_PID"
  done
  cat "$csv"
fi

# --- (2) master ops/s and client connections ----------------------------------------------
if wants master_connections; then
  csv="$OUT/master_connections.csv"
  echo "connections,get_replica_list,exist_key,put_start_end" >"$csv"
  start_master
  fill "$BASE_OBJECTS"
  for c in $CONNECTIONS_LIST; do
    log "master_connections: $c connections"
    res=$(load "$c" "$BASE_OBJECTS")
    read -r get exist put <<<"$res"
    echo "$c,$get,$exist,$put" >>"$csv"
  done
  stop_target "$FILL_PID"
  stop_target "$MASTER_PID"
  cat "$csv"
fi

# --- (3) Transfer Engine and peers --------------------------------------------------------
if wants te_peers; then
  csv="$OUT/te_peers.csv"
  echo "peers,gbps,init_rss_mb,init_per_peer_kb,init_threads,targets_rss_mb,targets_per_peer_kb,targets_threads" >"$csv"
  for p in $PEERS_LIST; do
    log "te_peers: $p peers"
    line=$(timeout $((DURATION + 300)) "$R/examples/te_fanout" --peers="$p" \
      --duration="$DURATION" 2>"$WORK/fanout.log" | grep '^FANOUT') || {
      log "te_fanout with $p peers failed:"
      tail -20 "$WORK/fanout.log" >&2
      exit 1
    }
    echo "$line" | awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); f[i] = kv[2] }
      printf "%s", f[2]; for (i = 3; i <= NF; i++) printf ",%s", f[i]; print "" }' >>"$csv"
  done
  cat "$csv"
fi

# --- (4) the conductor's scheduling rate --------------------------------------------------
if wants conductor; then
  # point INSTANCES BLOCKS: the median of three conductor_sim processes (by calls/s),
  # one process per run, so RSS is the point's own.
  point() {
    local run
    for run in 1 2 3; do
      "$R/conductor_sim" --scaling="$1x$2" --bench_calls="$CALLS" 2>>"$WORK/conductor.log"
    done | awk '$1 == "SCALING" { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
           print f["calls_per_s"], f["instances"] "," f["blocks"] "," f["calls_per_s"] "," f["us_per_call"] "," f["rss_mb"] }' |
      sort -n | awk 'NR == 2 { print $2 }'
  }
  for curve in instances blocks; do
    csv="$OUT/conductor_$curve.csv"
    echo "instances,blocks,calls_per_s,us_per_call,rss_mb" >"$csv"
    if [ "$curve" = instances ]; then
      for i in $INSTANCES_LIST; do log "conductor: $i instances"; point "$i" "$FIXED_BLOCKS" >>"$csv"; done
    else
      for b in $BLOCKS_LIST; do log "conductor: $b blocks"; point "$FIXED_INSTANCES" "$b" >>"$csv"; done
    fi
    cat "$csv"
  done
fi

# --- plots --------------------------------------------------------------------------------
if [ "${SKIP_PLOT:-0}" != 1 ]; then
  VENV=${MOONCAKE_PLOT_VENV:-$HOME/.cache/mooncake-plot/venv}
  if ! "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
    log "installing matplotlib into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet 'matplotlib>=3.7,<4'
  fi
  "$VENV/bin/python" "$ROOT/bench/plot_scaling.py" "$OUT"
fi
log "done: $OUT"
