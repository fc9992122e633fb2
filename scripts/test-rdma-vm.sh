#!/usr/bin/env bash
# The RDMA suite on real verbs: builds the RDMA-capable tests here, then runs them in a
# throw-away SoftRoCE VM (scripts/rxe-vm.sh; device rxe0) with MOONCAKE_INTEROP_RDMA=rxe0:
#
#  * rdma_real: two of our engines over real verbs, bytes verified, refusals by the NIC;
#  * interop_p2p, interop_http: ours <-> upstream 0.3.13 (python TransferEngine and
#    transfer_engine_bench --protocol=rdma) both ways, P2PHANDSHAKE and HTTP metadata;
#  * store_interop, store_interop_mixed: upstream's store clients on our master, ours on
#    upstream's, and mixed clusters, all over RDMA;
#  * p2p_rdma: the P2P Store with RDMA-only engines: a seed's object fetched by three
#    receivers at once and then from their replicas alone, bytes and NIC counters checked.
#
#   scripts/test-rdma-vm.sh [TEST_BINARY_NAME[:FILTER[,FILTER...]]...]
#
# (default: all of the above, every test). With FILTERs only the tests whose names
# contain one of them run (libtest's filters), e.g. interop_http:http_ours.
#
# Needs the VM packages (scripts/rxe-vm.sh --install) and the upstream peer
# (scripts/upstream-peer.sh). Exit status: 0 when every test passed, 1 when one failed,
# 125 when the VM cannot run here (the reason on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."

tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(rdma_real interop_p2p interop_http store_interop store_interop_mixed p2p_rdma)

cargo build --bins
args=()
declare -A filters=()
for t in "${tests[@]}"; do
  name="${t%%:*}"
  args+=(--test "$name")
  if [ "$name" != "$t" ]; then
    IFS=, read -r -a wanted <<<"${t#*:}"
    filters[$name]="$(printf "'%s' " "${wanted[@]}")"
  fi
done
binaries=$(cargo test --no-run --message-format=json "${args[@]}" 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])
')

results=$(mktemp -d -t rdma-vm.XXXXXX)
trap 'rm -rf "$results"' EXIT
script="$results/run.sh"
{
  echo 'set -u'
  echo "cd '$PWD'"
  echo 'export MOONCAKE_INTEROP_RDMA=rxe0'
  echo "export HOME='$HOME'"
  echo 'status=0'
  while read -r name exe; do
    [ -n "$name" ] || continue
    echo "echo '== $name (over rxe0)'"
    echo "'$exe' --test-threads=1 ${filters[$name]:-} 2>&1 | tee '$results/$name.log' | grep -E '^test |^test result|SKIPPED' || true"
    echo "grep -q '^test result: ok' '$results/$name.log' || status=1"
  done <<<"$binaries"
  echo 'exit $status'
} >"$script"

# The VM's /tmp is its own: the peer venv is mounted through when it lives there.
shares=(--rw "$results")
peer="${MOONCAKE_PEER_VENV:-$HOME/.cache/mooncake-peer/venv}"
case "$peer" in /tmp/*) [ -d "$peer" ] && shares+=(--rw "$peer") ;; esac
status=0
bash scripts/rxe-vm.sh "${shares[@]}" --mem "${MOONCAKE_VM_MEM:-4096}" --timeout 2400 -- bash "$script" || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 125 ]; then
  for log in "$results"/*.log; do
    grep -q '^test result: ok' "$log" && continue
    echo "---- $(basename "$log" .log): failures"
    grep -vE '^\s+[0-9]+: |^\s+at ' "$log" | sed -n '/^failures:/,$p' | sed -n '1,80p'
  done
  status=1
fi
exit "$status"
