#!/usr/bin/env bash
# Interop of our P2P Store with upstream's Go P2P store on one etcd, both ways.
#
# Upstream's Go store is its example program (mooncake-p2p-store/src/example), built by
# the user with upstream's own build.sh; this script never builds it (upstream's source
# cannot be fetched from the registries a fresh machine reaches, so the test command
# runs this check only where UPSTREAM_P2P_EXAMPLE names a build). The program links
# libtransfer_engine.so: ours is put under that name, so the Go store runs on our
# Transfer Engine. It always asks for RDMA; MC_FORCE_TCP=1 makes our library install
# TCP instead.
#
#   1. Go registers foo/bar (its trainer: 64 MiB of anonymous memory, 64 MiB shards);
#      `mooncake_p2p get` fetches it from the Go node (every byte zero, as the trainer's
#      memory is) and lists it.
#   2. `mooncake_p2p put` publishes a random 64 MiB file as foo/bar (CRC-32C per shard);
#      Go's inferencer fetches it (GetReplica, rewriting our payload with its replica,
#      then DeleteReplica); `mooncake_p2p get` then fetches it again through the payload
#      as Go left it, and the bytes are the file's.
#
# Environment: UPSTREAM_P2P_EXAMPLE (required: the built example binary), CARGO.
# Needs etcd (apt-get install etcd-server). Prints one PASS/FAIL line per case.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${UPSTREAM_P2P_EXAMPLE:-}
if [ -z "$GO" ] || [ ! -x "$GO" ]; then
  echo "SKIP p2p-go-interop: UPSTREAM_P2P_EXAMPLE does not name upstream's built p2p-store-example"
  exit 0
fi
command -v etcd >/dev/null || { echo "FAIL p2p-go-interop: etcd is not installed"; exit 1; }

(cd "$ROOT" && ${CARGO:-cargo} build --release --bin mooncake_p2p --lib) >&2
P2P="$ROOT/target/release/mooncake_p2p"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  # Killed by PID below; bash need not report each as a killed job.
  disown -a 2>/dev/null || true
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/lib"
ln -s "$ROOT/target/release/libmooncake.so" "$WORK/lib/libtransfer_engine.so"
export MC_FORCE_TCP=1
SIZE_MB=64

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts a fresh etcd; sets META.
start_etcd() {
  local port peer
  port=$(free_port)
  peer=$(free_port)
  etcd --data-dir "$WORK/etcd-$1" --listen-client-urls "http://127.0.0.1:$port" \
    --advertise-client-urls "http://127.0.0.1:$port" --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "default=http://127.0.0.1:$peer" >"$WORK/etcd-$1.log" 2>&1 &
  PIDS+=($!)
  META="127.0.0.1:$port"
  for _ in $(seq 1 100); do
    curl -s "http://$META/version" >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "FAIL p2p-go-interop: etcd did not start"
  exit 1
}

# Waits (60 s at most) until file $1 contains $2.
wait_for() {
  for _ in $(seq 1 600); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# Starts upstream's example as $1 (trainer or inferencer) named $2, output to $3.
go_node() {
  local cmd=$1 name=$2 log=$3
  env LD_LIBRARY_PATH="$WORK/lib" "$GO" -cmd "$cmd" -metadata_server "$META" \
    -local_server_name "$name" -file_size_mb "$SIZE_MB" >"$log" 2>&1 &
  PIDS+=($!)
}

status=0

# 1. Go registers, we fetch.
start_etcd 1
go_node trainer 127.0.0.1:12345 "$WORK/trainer.log"
if wait_for "$WORK/trainer.log" "Idle for" &&
  "$P2P" --metadata="$META" --local_server_name=127.0.0.1 --quiet get foo/bar "$WORK/from-go.bin" 2>"$WORK/get1.log" &&
  cmp -s "$WORK/from-go.bin" <(head -c $((SIZE_MB << 20)) /dev/zero) &&
  "$P2P" --metadata="$META" --local_server_name=127.0.0.1 list foo/ >"$WORK/list.txt" 2>/dev/null &&
  grep -q "^foo/bar" "$WORK/list.txt"; then
  echo "PASS go -> ours: fetched upstream's Go object foo/bar ($SIZE_MB MiB) and listed it"
else
  echo "FAIL go -> ours: $(tail -3 "$WORK/trainer.log" "$WORK/get1.log" 2>/dev/null | tr '\n' ' ')"
  status=1
fi

# 2. We register, Go fetches, we fetch again through the payload Go rewrote.
start_etcd 2
head -c $((SIZE_MB << 20)) /dev/urandom >"$WORK/ours.bin"
"$P2P" --metadata="$META" --local_server_name=127.0.0.1 --shard_size=4MB put "$WORK/ours.bin" foo/bar \
  >"$WORK/put.log" 2>&1 &
PIDS+=($!)
inferencer_ok=0
if wait_for "$WORK/put.log" published; then
  go_node inferencer 127.0.0.1:12346 "$WORK/inferencer.log"
  wait_for "$WORK/inferencer.log" "stopped gracefully" && inferencer_ok=1
fi
if [ $inferencer_ok = 1 ] &&
  "$P2P" --metadata="$META" --local_server_name=127.0.0.1 --quiet get foo/bar "$WORK/again.bin" 2>"$WORK/get2.log" &&
  cmp -s "$WORK/ours.bin" "$WORK/again.bin"; then
  echo "PASS ours -> go: upstream's Go inferencer fetched our foo/bar, and after its replica came and went ours still fetches the exact bytes"
else
  echo "FAIL ours -> go: $(tail -3 "$WORK/put.log" "$WORK/inferencer.log" "$WORK/get2.log" 2>/dev/null | tr '\n' ' ')"
  status=1
fi
exit $status
