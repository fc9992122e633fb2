#!/usr/bin/env bash
# Master failover, upstream's mooncake_master (the PyPI wheel installed by
# scripts/upstream-peer.sh) against ours (target/release/mooncake_master), in one run:
# two masters with --enable_ha on a fresh etcd, an upstream Python client addressing
# them as etcd://..., OBJECTS puts of SIZE bytes, SIGKILL of the leader; prints the
# failover time and the acknowledged objects lost, per round (bench/ha_failover.py).
#
# Environment:
#   ROUNDS       rounds (default 3)
#   OBJECTS      puts before the kill (default 100)
#   SIZE         bytes per object (default 65536)
#   SKIP_BUILD=1 do not run cargo build
#   MOONCAKE_PEER_VENV  where the upstream peer is (installed on first use)
# Needs etcd on PATH (scripts/test-tools.sh installs it).
#
# Usage: bench/ha_failover.sh   (from anywhere)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v etcd >/dev/null || { echo "ha_failover: etcd is not on PATH" >&2; exit 1; }
if [ -z "${SKIP_BUILD:-}" ]; then
  (cd "$ROOT" && "${CARGO:-cargo}" build --release --bin mooncake_master)
fi
PEER=$(bash "$ROOT/scripts/upstream-peer.sh" | tail -1)
M=$("$PEER/bin/python" -c 'import mooncake,os;print(os.path.dirname(mooncake.__file__))')
exec "$PEER/bin/python" -u "$ROOT/bench/ha_failover.py" \
  --ours "$ROOT/target/release/mooncake_master" --upstream "$M/mooncake_master" \
  --rounds "${ROUNDS:-3}" --objects "${OBJECTS:-100}" --size "${SIZE:-65536}"
