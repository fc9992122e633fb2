#!/usr/bin/env bash
# P2P Store broadcast benchmark: one seed and N receivers (N in N_LIST), each node in
# its own network namespace, joined through a bridge by veth links that `tc` caps at
# RATE in both directions (a node's upload and its download), etcd on the host side of
# the bridge. One object of SIZE_MB MiB is pulled by all receivers at once; the figure
# is the time from starting the receivers until the last one has the whole object
# (process start-up included, bytes verified afterwards), for ours (mooncake_p2p) and,
# when UPSTREAM_P2P_EXAMPLE names a build of upstream's Go P2P store example
# (mooncake-p2p-store/src/example, built with upstream's build.sh; this script never
# builds it), for upstream's Go store running on our library (it links
# libtransfer_engine.so: ours is put under that name). Beside them: the single-source
# bound N x size / RATE (what a store whose receivers all read from the seed cannot
# beat) and the N = 1 time.
#
# Ours: `mooncake_p2p put` on the seed; `mooncake_p2p get --serve` on every receiver
# (each shard it fetched is a source for the others at once). Upstream: its example's
# `-cmd trainer` (registers foo/bar, 64 MiB shards) and `-cmd inferencer` (GetReplica,
# then DeleteReplica). Both over TCP (MC_FORCE_TCP=1: the Go example asks for RDMA, our
# library then installs TCP), the same-host shortcut off (MC_DISABLE_SAME_HOST=1), so
# every byte crosses the capped links.
#
# Environment:
#   N_LIST="1 2 4 8"      receiver counts
#   SIZE_MB=256           object size
#   RATE=250mbit            per-node cap (tc tbf rate syntax)
#   SHARD=1MB             our shard size
#   CONCURRENCY=8         shards one of our receivers fetches at once
#   ROUNDS=1              runs per row and implementation (the median is shown)
#   UPSTREAM_P2P_EXAMPLE  upstream's p2p-store-example binary (optional)
#   LOGS=<dir>            keep every process's log there
#   CARGO                 cargo binary (default cargo)
#
# Needs root, iproute2 (ip, tc) and etcd (apt-get install etcd-server iproute2).
# Usage: bench/p2p_broadcast.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N_LIST=${N_LIST:-"1 2 4 8"}
SIZE_MB=${SIZE_MB:-256}
RATE=${RATE:-250mbit}
SHARD=${SHARD:-1MB}
CONCURRENCY=${CONCURRENCY:-8}
ROUNDS=${ROUNDS:-1}
UPSTREAM=${UPSTREAM_P2P_EXAMPLE:-}

log() { echo "[p2p_broadcast] $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces and tc)"
for tool in ip tc etcd; do
  command -v "$tool" >/dev/null || die "needs $tool (apt-get install iproute2 etcd-server)"
done
MAX_N=0
for n in $N_LIST; do [ "$n" -gt "$MAX_N" ] && MAX_N=$n; done

log "building release binaries"
(cd "$ROOT" && ${CARGO:-cargo} build --release --bin mooncake_p2p --lib)
P2P="$ROOT/target/release/mooncake_p2p"

ID=$(( $$ % 10000 ))
BR="mpb$ID"
WORK=$(mktemp -d /dev/shm/mc-p2p-bench.XXXXXX)
PIDS=()
NODES=()

cleanup() {
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true; done
  for node in "${NODES[@]:-}"; do [ -n "$node" ] && ip netns del "$node" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the network: a bridge on the host, node i at 10.77.0.(10+i) -----------------------
ip link add "$BR" type bridge
ip addr add 10.77.0.1/24 dev "$BR"
ip link set "$BR" up
for i in $(seq 0 "$MAX_N"); do
  ns="mpn${ID}x$i"
  host_end="mph${ID}x$i"
  node_end="mpv${ID}x$i"
  ip netns add "$ns"
  NODES+=("$ns")
  ip link add "$host_end" type veth peer name "$node_end"
  ip link set "$node_end" netns "$ns"
  ip link set "$host_end" master "$BR"
  ip link set "$host_end" up
  ip netns exec "$ns" ip addr add "10.77.0.$((10 + i))/24" dev "$node_end"
  ip netns exec "$ns" ip link set "$node_end" up
  ip netns exec "$ns" ip link set lo up
  # The node's download (host side sends into it) and its upload.
  tc qdisc add dev "$host_end" root tbf rate "$RATE" burst 1mb latency 100ms
  ip netns exec "$ns" tc qdisc add dev "$node_end" root tbf rate "$RATE" burst 1mb latency 100ms
done
node_ns() { echo "mpn${ID}x$1"; }
node_ip() { echo "10.77.0.$((10 + $1))"; }

# --- etcd on the host side ---------------------------------------------------------------
ETCD_PORT=$(( 23000 + ID % 1000 ))
etcd --data-dir "$WORK/etcd" --name p2pbench \
  --listen-client-urls "http://10.77.0.1:$ETCD_PORT" \
  --advertise-client-urls "http://10.77.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1000))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1000))" \
  --initial-cluster "p2pbench=http://127.0.0.1:$((ETCD_PORT + 1000))" \
  >"$WORK/etcd.log" 2>&1 &
PIDS+=($!)
disown $!
META="10.77.0.1:$ETCD_PORT"
for _ in $(seq 1 100); do
  curl -s "http://$META/version" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -s "http://$META/version" >/dev/null || die "etcd did not start: $(tail -5 "$WORK/etcd.log")"

OBJECT="$WORK/object.bin"
head -c $(( SIZE_MB << 20 )) /dev/urandom >"$OBJECT"
LIBDIR="$WORK/lib"
mkdir -p "$LIBDIR"
ln -s "$ROOT/target/release/libmooncake.so" "$LIBDIR/libtransfer_engine.so"
export MC_DISABLE_SAME_HOST=1 MC_FORCE_TCP=1

# Runs "$@" in node $1's namespace in the background, output to $2; prints the PID.
in_node() {
  local node=$1 out=$2
  shift 2
  ip netns exec "$(node_ns "$node")" "$@" >"$out" 2>&1 &
  echo $!
}

# Waits until every file in "$@" (after the first argument, a text) contains the text;
# prints the seconds since $T0. One grep per 50 ms and bash's own clock, so the polling
# takes no CPU the nodes could use.
wait_all() {
  local text=$1
  shift
  local deadline=$(( SECONDS + 600 ))
  while [ -n "$(grep -L -e "$text" "$@")" ]; do
    [ "$SECONDS" -lt $deadline ] || die "timed out waiting for '$text' in $*"
    sleep 0.05
  done
  echo "$EPOCHREALTIME - $T0" | bc
}

# Stops the processes "$@" (not children of this shell: they were started in command
# substitutions) and waits until they are gone, so none is still leaving the metadata
# while the next run is timed; a process that has not left after 10 s is killed.
stop_pids() {
  kill "$@" 2>/dev/null || true
  local deadline=$(( SECONDS + 10 )) pid
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$SECONDS" -ge $deadline ]; then
        log "process $pid did not stop within 10 s; killed"
        kill -9 "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.05
    done
  done
}

ours_run() {
  local n=$1 run=$2
  local name="bench/obj-$n-$run" dir="$WORK/ours-$n-$run"
  mkdir -p "$dir"
  local seed
  seed=$(in_node 0 "$dir/seed.log" "$P2P" --metadata="$META" --local_server_name="$(node_ip 0)" \
    --quiet --shard_size="$SHARD" put "$OBJECT" "$name")
  local deadline=$(( $(date +%s) + 60 ))
  until grep -q published "$dir/seed.log"; do
    [ "$(date +%s)" -lt $deadline ] || die "the seed did not publish: $(cat "$dir/seed.log")"
    sleep 0.02
  done
  local pids=() logs=()
  T0=$EPOCHREALTIME
  for i in $(seq 1 "$n"); do
    pids+=("$(in_node "$i" "$dir/r$i.log" "$P2P" --metadata="$META" \
      --local_server_name="$(node_ip "$i")" --quiet --concurrency="$CONCURRENCY" --serve \
      get "$name" "$dir/r$i.bin")")
    logs+=("$dir/r$i.log")
  done
  local secs
  secs=$(wait_all "fetched '" "${logs[@]}")
  stop_pids "${pids[@]}" "$seed"
  for i in $(seq 1 "$n"); do
    cmp -s "$OBJECT" "$dir/r$i.bin" || die "receiver $i of run $n/$run holds other bytes"
    rm -f "$dir/r$i.bin"
  done
  keep_logs "$dir"
  echo "$secs"
}

upstream_run() {
  local n=$1 run=$2 dir="$WORK/up-$n-$run"
  mkdir -p "$dir"
  local env=(env LD_LIBRARY_PATH="$LIBDIR")
  local trainer
  trainer=$(in_node 0 "$dir/trainer.log" "${env[@]}" "$UPSTREAM" -cmd trainer \
    -metadata_server "$META" -local_server_name "$(node_ip 0):12345" -file_size_mb "$SIZE_MB")
  local deadline=$(( $(date +%s) + 60 ))
  until grep -q "Idle for" "$dir/trainer.log"; do
    [ "$(date +%s)" -lt $deadline ] || die "upstream's trainer did not register: $(cat "$dir/trainer.log")"
    sleep 0.02
  done
  local pids=() logs=()
  T0=$EPOCHREALTIME
  for i in $(seq 1 "$n"); do
    pids+=("$(in_node "$i" "$dir/i$i.log" "${env[@]}" "$UPSTREAM" -cmd inferencer \
      -metadata_server "$META" -local_server_name "$(node_ip "$i"):12345" -file_size_mb "$SIZE_MB")")
    logs+=("$dir/i$i.log")
  done
  local secs
  secs=$(wait_all "Object retrieval done" "${logs[@]}")
  stop_pids "${pids[@]}" "$trainer"
  keep_logs "$dir"
  echo "$secs"
}

# Moves a run's logs to $LOGS (when set) or removes them.
keep_logs() {
  if [ -n "${LOGS:-}" ]; then
    mkdir -p "$LOGS"
    mv "$1" "$LOGS/"
  else
    rm -rf "$1"
  fi
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

RATE_BYTES=$(python3 - "$RATE" <<'EOF'
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmg]?)(bit|bps)", sys.argv[1].lower())
v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
print(v / 8 if m.group(3) == "bit" else v)
EOF
)

declare -A OURS UP
for n in $N_LIST; do
  ours=() up=()
  for run in $(seq 1 "$ROUNDS"); do
    log "N=$n round $run: ours"
    ours+=("$(ours_run "$n" "$run")")
    if [ -n "$UPSTREAM" ]; then
      log "N=$n round $run: upstream's Go store"
      up+=("$(upstream_run "$n" "$run")")
    fi
  done
  OURS[$n]=$(echo "${ours[*]}" | median)
  [ -n "$UPSTREAM" ] && UP[$n]=$(echo "${up[*]}" | median)
done

FIRST=${N_LIST%% *}
echo
echo "P2P broadcast: one $SIZE_MB MiB object, 1 seed + N receivers, each node's link capped"
echo "at $RATE up and down (tc tbf), TCP over veth, etcd; seconds until the last receiver"
echo "has every byte, median of $ROUNDS; $(nproc) CPUs"
printf '%-3s %10s %12s %16s %14s %10s\n' N ours "upstream Go" "1-source bound" "ours/ours(N=$FIRST)" "Go/ours"
for n in $N_LIST; do
  bound=$(echo "scale=2; $n * $SIZE_MB * 1048576 / $RATE_BYTES" | bc)
  rel=$(echo "scale=2; ${OURS[$n]} / ${OURS[$FIRST]}" | bc)
  if [ -n "$UPSTREAM" ]; then
    gr=$(echo "scale=2; ${UP[$n]} / ${OURS[$n]}" | bc)
    printf '%-3s %10.2f %12.2f %16.2f %14sx %9sx\n' "$n" "${OURS[$n]}" "${UP[$n]}" "$bound" "$rel" "$gr"
  else
    printf '%-3s %10.2f %12s %16.2f %14sx %10s\n' "$n" "${OURS[$n]}" "-" "$bound" "$rel" "-"
  fi
done
