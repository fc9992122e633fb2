#!/usr/bin/env bash
# Network-fault scenarios on a Mooncake Store cluster in network namespaces
# (scripts/netns-cluster.sh), each checked by scripts/netns_chaos/checker.py.
#
#   scripts/netns-chaos.sh [--seconds N] [--minutes M] [--keep DIR]
#                          [--impl ours|upstream|both] [--profile release|debug]
#                          [SCENARIO...]
#
# --minutes M is the campaign: the scenarios again and again, in rounds, until M
# minutes have passed (each round runs every scenario once per implementation), then
# one line of totals. --profile picks our build (default release; CI runs debug, which
# its tests built already).
#
# Each scenario builds a fresh cluster: three etcd members (e1-e3), two masters with HA
# on them (m1, m2), two clients that are also segment owners (c1, c2; our Python store
# client, scripts/netns_chaos/workload.py, with P2PHANDSHAKE for the data path). With
# --impl upstream (or both, the default where the upstream peer is installed:
# scripts/upstream-peer.sh) the same cluster runs upstream 0.3.13's mooncake_master and
# Python client from its PyPI wheel instead. The
# clients put, get and remove 64 KiB values for N seconds (default 30) while the fault
# is applied and undone; then each reads back everything it holds, and the checker
# proves that nothing acknowledged was lost, no read was torn and none was stale
# (eviction cannot explain a miss: the segments are 256 MiB for a few MiB of data).
#
# Scenarios (all by default):
#   leader-paused     the leader master SIGSTOPped for 12 s (past its lease), resumed
#   leader-isolated   the leader master cut off from every node for 12 s
#   leader-etcd-cut   the leader master cut off from the three etcd members for 12 s
#                     (the clients still reach it)
#   standby-cut       the leader master cut off from the standby for 12 s
#   owner-cut         the two clients (each a segment owner) cut off from each other
#                     for 12 s: reads of the other's objects fail cleanly, none hangs
#   owner-master-cut  client c2 (a segment owner) cut off from both masters for 6 s,
#                     within its client TTL; c1 still reaches it
#   etcd-faults       one etcd member (not the leader) cut off for 8 s, then the etcd
#                     leader SIGSTOPped for 10 s
#   flapping          the leader master's link down 2 s, up 2 s, four times
#   loss              5 % packet loss on every link for the whole load
#   delay             50 ± 20 ms on every link each way for the whole load (netem, or a
#                     netfilter queue where the kernel has no netem)
#   none              no fault (the workload and checker alone; not in the default set)
#
# While a scenario runs, scripts/netns_chaos/roles.py samples both masters' /health
# ten times a second, and the checker also proves that no master served while another
# served a view without a break. On ours, scripts/netns_chaos/kv_index.py subscribes to
# both masters' KV events; once all is healed and written its index must hold exactly
# the leader's keys ("kv_index: match").
#
# One line per scenario: operations, acknowledged puts, lost, torn, stale, two
# writers, the longest stretch with no successful operation (of all clients and of
# each), the time from healing to the clients' first success, and the KV index, per
# implementation. Exits 1 when a scenario on ours loses, tears or serves stale data,
# has two writers, a client that does not recover within 60 s of the heal, or a KV
# index that differs; upstream's findings are reported, not failed.
# Needs root, iproute2, nftables, iptables (delay without netem), curl, etcd and
# python3; builds our binaries.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/netns-cluster.sh
source "$ROOT/scripts/netns-cluster.sh"

SECONDS_OF_LOAD=30
MINUTES=
KEEP=
IMPL=
PROFILE=release
SCENARIOS=()
usage() {
  echo "usage: scripts/netns-chaos.sh [--seconds N] [--minutes M] [--keep DIR]" \
    "[--impl ours|upstream|both] [--profile release|debug] [SCENARIO...]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_OF_LOAD=$2; shift 2 ;;
    --minutes) MINUTES=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --impl) IMPL=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    -*) usage ;;
    *) SCENARIOS+=("$1"); shift ;;
  esac
done
[ ${#SCENARIOS[@]} -gt 0 ] ||
  SCENARIOS=(leader-paused leader-isolated leader-etcd-cut standby-cut owner-cut
    owner-master-cut etcd-faults flapping loss delay)
case "$PROFILE" in
  release) BUILD=(--release) ;;
  debug) BUILD=() ;;
  *) usage ;;
esac
command -v etcd >/dev/null || { echo "netns-chaos: needs etcd (apt-get install etcd-server)" >&2; exit 1; }

PEER_VENV=${MOONCAKE_PEER_VENV:-$HOME/.cache/mooncake-peer/venv}
if [ -z "$IMPL" ]; then
  if [ -x "$PEER_VENV/bin/python" ]; then IMPL=both; else IMPL=ours; fi
fi
case "$IMPL" in
  ours) IMPLS=(ours) ;;
  upstream) IMPLS=(upstream) ;;
  both) IMPLS=(ours upstream) ;;
  *) echo "netns-chaos: --impl is ours, upstream or both" >&2; exit 2 ;;
esac
if [ "$IMPL" != ours ]; then
  PEER_VENV=$(bash "$ROOT/scripts/upstream-peer.sh" | tail -1)
fi
(cd "$ROOT" && ${CARGO:-cargo} build "${BUILD[@]}" --lib --bin mooncake_master) >&2

# Sets MASTER, PYTHON and the environment for implementation $1.
use_impl() {
  if [ "$1" = ours ]; then
    MASTER="$ROOT/target/$PROFILE/mooncake_master"
    PYTHON=python3
    export MOONCAKE_LIBRARY="$ROOT/target/$PROFILE/libmooncake.so"
    export PYTHONPATH="$ROOT/python"
  else
    MASTER="$(env -u PYTHONPATH "$PEER_VENV/bin/python" -c \
      'import mooncake, os; print(os.path.dirname(mooncake.__file__))')/mooncake_master"
    PYTHON="$PEER_VENV/bin/python"
    unset MOONCAKE_LIBRARY PYTHONPATH
  fi
}

log() { echo "[netns-chaos] $*" >&2; }

# Runs "$@" inside node $1's namespace in the foreground.
in_node() {
  local node=$1
  shift
  ip netns exec "$(nc_ns "$node")" "$@"
}

# Polls "$@" (a command) every 100 ms until it succeeds; fails after $1 seconds.
poll() {
  local secs=$1
  shift
  local deadline=$((SECONDS + secs))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

etcd_healthy() {
  [[ "$(in_node c1 curl -s -m 1 "http://$(nc_ip "$1"):2379/health" 2>/dev/null)" == *'"health":"true"'* ]]
}

# The role master $1 reports on its metrics port ("leader", "standby" or empty).
master_role() {
  local health
  health=$(in_node c1 curl -s -m 1 "http://$(nc_ip "$1"):9003/health" 2>/dev/null || true)
  case "$health" in
    *'"role":"leader"'*) echo leader ;;
    *'"role":"standby"'*) echo standby ;;
    *) echo "" ;;
  esac
}

is_leader() { [ "$(master_role "$1")" = leader ]; }
is_standby() { [ "$(master_role "$1")" = standby ]; }

# Starts the cluster; sets ETCD_LIST, MASTER_PID_m1/m2.
start_cluster() {
  local work=$1 node cluster=""
  for node in e1 e2 e3 m1 m2 c1 c2; do nc_add_node "$node"; done
  for node in e1 e2 e3; do cluster+="${cluster:+,}$node=http://$(nc_ip "$node"):2380"; done
  for node in e1 e2 e3; do
    local ip
    ip=$(nc_ip "$node")
    nc_run "$node" "$work/$node.log" etcd --name "$node" --data-dir "$work/$node.data" \
      --listen-client-urls "http://$ip:2379" --advertise-client-urls "http://$ip:2379" \
      --listen-peer-urls "http://$ip:2380" --initial-advertise-peer-urls "http://$ip:2380" \
      --initial-cluster "$cluster" --initial-cluster-state new --log-level error
    printf -v "ETCD_PID_$node" '%s' "$NC_PID"
  done
  for node in e1 e2 e3; do poll 30 etcd_healthy "$node" || { log "etcd $node is not healthy"; return 1; }; done
  ETCD_LIST="$(nc_ip e1):2379;$(nc_ip e2):2379;$(nc_ip e3):2379"
  for node in m1 m2; do
    nc_run "$node" "$work/$node.log" "$MASTER" --enable_ha=true \
      --etcd_endpoints="$ETCD_LIST" --rpc_address="$(nc_ip "$node")" --port=50051 \
      --metrics_port=9003 --enable_kv_events=true --kv_events_backend_id=pool \
      --kv_events_bind_endpoint="tcp://$(nc_ip "$node"):5557"
    printf -v "MASTER_PID_$node" '%s' "$NC_PID"
    if [ "$node" = m1 ]; then
      poll 30 is_leader m1 || { log "m1 did not lead"; return 1; }
    else
      poll 30 is_standby m2 || { log "m2 did not stand by"; return 1; }
    fi
  done
}

# The etcd member that leads the etcd cluster (each member asked from c1's namespace).
etcd_leader() {
  local node status
  for node in e1 e2 e3; do
    status=$(in_node c1 curl -s -m 1 -X POST -d '{}' \
      "http://$(nc_ip "$node"):2379/v3/maintenance/status" 2>/dev/null) || continue
    python3 -c '
import json, sys
s = json.loads(sys.argv[1])
sys.exit(0 if s["header"]["member_id"] == s["leader"] else 1)' "$status" 2>/dev/null &&
      { echo "$node"; return; }
  done
  return 1
}

# Starts the role sampler (scripts/netns_chaos/roles.py) in c1's namespace.
start_roles() {
  local work=$1
  nc_run c1 "$work/roles.log" python3 "$ROOT/scripts/netns_chaos/roles.py" \
    --master "m1=$(nc_ip m1):9003" --master "m2=$(nc_ip m2):9003" \
    --out "$work/roles.jsonl" --stop "$work/release"
}

# Starts the KV-event subscriber (scripts/netns_chaos/kv_index.py) of both masters in
# c1's namespace (ours only: upstream's wheel master publishes no KV events).
start_kv_index() {
  local work=$1
  [ "$2" = ours ] || return 0
  nc_run c1 "$work/kv-index.log" python3 "$ROOT/scripts/netns_chaos/kv_index.py" \
    --endpoint "$(nc_ip m1):5557" --endpoint "$(nc_ip m2):5557" \
    --out "$work/kv-index.json" --stop "$work/release"
}

# Whether the subscriber's index holds exactly the leader's keys (writes its
# comparison to $1/kv-index.result).
kv_index_matches() {
  local work=$1 lead
  lead=$(leader) || return 1
  in_node c1 curl -s -m 5 "http://$(nc_ip "$lead"):9003/get_all_keys" >"$work/leader-keys.txt" ||
    return 1
  [ -e "$work/kv-index.json" ] || return 1
  python3 "$ROOT/scripts/netns_chaos/checker.py" kv-index "$work/kv-index.json" \
    "$work/leader-keys.txt" >"$work/kv-index.result"
}

# Starts the two workload clients; sets CLIENT_PIDS.
start_clients() {
  local work=$1 i
  CLIENT_PIDS=()
  for i in 1 2; do
    nc_run "c$i" "$work/c$i.log" "$PYTHON" "$ROOT/scripts/netns_chaos/workload.py" \
      --client "$i" --host "$(nc_ip "c$i")" --metadata P2PHANDSHAKE \
      --master "etcd://$ETCD_LIST" --history "$work/history-c$i.jsonl" \
      --seconds "$SECONDS_OF_LOAD" --healed "$work/healed" --ready "$work/ready-c$i" \
      --go "$work/go" --loaded "$work/loaded-c$i" --release "$work/release"
    CLIENT_PIDS+=("$NC_PID")
  done
  poll 60 test -e "$work/ready-c1" -a -e "$work/ready-c2" || { log "the clients did not set up"; return 1; }
}

# The node name of the leading master.
leader() {
  local node
  for node in m1 m2; do is_leader "$node" && { echo "$node"; return; }; done
  return 1
}

# Starts the clients' load (they wait for $GO).
go() { touch "$GO"; }

# Starts the load and applies scenario $1's fault (and undoes it) while it runs; a
# lasting fault (loss, delay) is in place before the load starts.
apply_fault() {
  local scenario=$1 lead pid
  lead=$(leader) || { log "no leader before the fault"; return 1; }
  case "$scenario" in loss | delay) ;; *) go ;; esac
  local pid_var="MASTER_PID_$lead"
  pid=${!pid_var}
  case "$scenario" in
    leader-paused)
      sleep 5
      log "pausing the leader ($lead, pid $pid) for 12 s"
      nc_pause "$pid"
      sleep 12
      nc_resume "$pid"
      ;;
    leader-isolated)
      sleep 5
      log "cutting the leader ($lead) off from every node for 12 s"
      nc_isolate "$lead"
      sleep 12
      nc_heal
      ;;
    leader-etcd-cut)
      sleep 5
      log "cutting the leader ($lead) off from etcd for 12 s"
      nc_cut "$lead" e1
      nc_cut "$lead" e2
      nc_cut "$lead" e3
      sleep 12
      nc_heal
      ;;
    standby-cut)
      sleep 5
      local standby=m1
      [ "$lead" = m1 ] && standby=m2
      log "cutting the leader ($lead) off from the standby ($standby) for 12 s"
      nc_cut "$lead" "$standby"
      sleep 12
      nc_heal
      ;;
    owner-cut)
      sleep 5
      log "cutting client c1 off from client c2 (each owns a segment) for 12 s"
      nc_cut c1 c2
      sleep 12
      nc_heal
      ;;
    owner-master-cut)
      sleep 5
      log "cutting client c2 (a segment owner) off from both masters for 6 s"
      nc_cut c2 m1
      nc_cut c2 m2
      sleep 6
      nc_heal
      ;;
    etcd-faults)
      sleep 5
      local etcd_lead member
      etcd_lead=$(etcd_leader) || { log "no etcd leader"; return 1; }
      for member in e1 e2 e3; do [ "$member" = "$etcd_lead" ] || break; done
      log "cutting etcd member $member off from every node for 8 s"
      nc_isolate "$member"
      sleep 8
      nc_heal
      poll 30 etcd_healthy "$member" || log "etcd member $member did not come back"
      etcd_lead=$(etcd_leader) || { log "no etcd leader after the cut"; return 1; }
      local etcd_pid_var="ETCD_PID_$etcd_lead"
      log "pausing the etcd leader ($etcd_lead, pid ${!etcd_pid_var}) for 10 s"
      nc_pause "${!etcd_pid_var}"
      sleep 10
      nc_resume "${!etcd_pid_var}"
      ;;
    flapping)
      sleep 5
      log "the leader's ($lead) link down 2 s and up 2 s, four times"
      local round
      for round in 1 2 3 4; do
        nc_link_down "$lead"
        sleep 2
        nc_link_up "$lead"
        sleep 2
      done
      ;;
    loss)
      log "5 % loss on every link"
      local node
      for node in e1 e2 e3 m1 m2 c1 c2; do nc_loss "$node" 5; done
      go
      ;;
    delay)
      log "50 ± 20 ms on every link each way"
      local node
      for node in e1 e2 e3 m1 m2 c1 c2; do nc_delay "$node" 50 20 || return 1; done
      go
      ;;
    none) log "no fault" ;;
    *) log "unknown scenario $scenario"; return 2 ;;
  esac
}

run_scenario() {
  local scenario=$1 impl=$2 work
  work=$(mktemp -d /tmp/netns-chaos.XXXXXX)
  GO="$work/go"
  nc_init
  local failed=
  if ! start_cluster "$work"; then
    failed="the cluster did not start"
  elif ! start_roles "$work" || ! start_kv_index "$work" "$impl" ||
    ! start_clients "$work"; then
    failed="the clients did not set up"
  else
    apply_fault "$scenario" || failed="the fault could not be applied"
  fi
  if [ -n "$failed" ]; then
    nc_down
    trap - EXIT
    echo "$impl $scenario ERROR: $failed (logs: $work)"
    return 1
  fi
  # The load runs its full time on each client's own clock; a fault that lasts (loss,
  # delay) is undone only after that, so every operation of the load met it.
  poll $((SECONDS_OF_LOAD + 120)) test -e "$work/loaded-c1" -a -e "$work/loaded-c2" ||
    log "a client did not finish its load"
  nc_heal
  touch "$work/healed"
  # Every client reads its keys back before any closes (closing unmounts a segment).
  poll 180 test -e "$work/history-c1.jsonl.done" -a -e "$work/history-c2.jsonl.done" ||
    log "a client did not finish reading back"
  # Nothing is written any more: the subscriber's index must come to hold exactly the
  # leader's keys.
  local kv_index="n/a (no KV events)"
  if [ "$impl" = ours ]; then
    if poll 30 kv_index_matches "$work"; then
      kv_index=match
    else
      kv_index="differs $(cat "$work/kv-index.result" 2>/dev/null)"
    fi
  fi
  touch "$work/release"
  local pid
  for pid in "${CLIENT_PIDS[@]}"; do
    local deadline=$((SECONDS + 180))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  done
  local summary rc=0
  summary=$(python3 "$ROOT/scripts/netns_chaos/checker.py" "$work"/history-c*.jsonl \
    "$work/roles.jsonl") || rc=$?
  [ "$kv_index" != "${kv_index#differs}" ] && rc=1
  [ "$impl" = ours ] || rc=0
  nc_down
  trap - EXIT
  echo "$impl $scenario $summary kv_index: $kv_index"
  if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP"
    mv "$work" "$KEEP/$impl-$scenario"
  else
    rm -rf "$work"
  fi
  return $rc
}

status=0 runs=0 failures=0 rounds=0
campaign_start=$SECONDS
while :; do
  rounds=$((rounds + 1))
  for scenario in "${SCENARIOS[@]}"; do
    for impl in "${IMPLS[@]}"; do
      log "scenario $scenario: $impl${MINUTES:+ (round $rounds)}"
      use_impl "$impl"
      runs=$((runs + 1))
      run_scenario "$scenario" "$impl" || { status=1; failures=$((failures + 1)); }
    done
  done
  [ -n "$MINUTES" ] && [ $((SECONDS - campaign_start)) -lt $((MINUTES * 60)) ] || break
done
[ -z "$MINUTES" ] ||
  echo "campaign: $rounds round(s), $runs scenario runs, $failures failed, $(( (SECONDS - campaign_start) / 60 )) min"
exit $status
