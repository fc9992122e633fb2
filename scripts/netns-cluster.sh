#!/usr/bin/env bash
# A cluster on one machine, in network namespaces, and the network faults to apply to
# it. Source it for the functions below; run it (`scripts/netns-cluster.sh selftest`) to
# check every fault on this kernel.
#
# Layout: one bridge namespace holding a bridge, and one namespace per node joined to it
# by a veth link. Nodes get 10.201.<run>.<n>/24: addresses that exist only inside these
# namespaces, never on this machine's own network. Processes run inside with
# `ip netns exec` and are stopped by PID; `nc_down` (run on EXIT once `nc_init` ran)
# kills them and deletes every namespace, also after a failure.
#
# Faults (each undone by `nc_heal`):
#   nc_cut A B           A and B cannot reach each other (both directions dropped)
#   nc_cut_oneway A B    packets from A to B are dropped; B to A still arrive
#   nc_isolate A         A reaches no other node, and none reaches A
#   nc_loss A PCT        PCT % of A's packets, in and out, dropped at random (nftables)
#   nc_rate A RATE       A's link capped at RATE each way (tc tbf, e.g. 100mbit)
#   nc_delay A MS JIT    MS ± JIT ms on A's link each way (tc netem; where the kernel
#                        has no netem, a netfilter queue (iptables NFQUEUE) to
#                        scripts/netns_chaos/delayer.py in A's namespace holds each
#                        packet that long)
#   nc_link_down A / nc_link_up A   A's link down or up (a flapping link)
#   nc_pause PID / nc_resume PID    SIGSTOP / SIGCONT
#
# Processes: `nc_run NODE LOG CMD...` starts CMD in NODE's namespace (output to LOG) and
# sets NC_PID; `nc_stop PID` stops it (TERM, then KILL after 10 s).
#
# Needs root, iproute2, nftables and, for delay without netem, iptables (apt-get
# install iproute2 nftables iptables).

NC_NET=
NC_BRIDGE_NS=
NC_NODES=()
NC_PIDS=()
NC_PID=
NC_NETEM=
NC_DELAYERS=()
NC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Creates the bridge namespace; `nc_down` runs on EXIT from now on.
nc_init() {
  [ "$(id -u)" = 0 ] || { echo "netns-cluster: needs root" >&2; return 1; }
  local tool
  for tool in ip tc nft; do
    command -v "$tool" >/dev/null || {
      echo "netns-cluster: needs $tool (apt-get install iproute2 nftables)" >&2
      return 1
    }
  done
  local run=$(( ($$ + RANDOM) % 250 + 1 ))
  NC_NET="10.201.$run"
  NC_BRIDGE_NS="mcnc${run}br"
  trap nc_down EXIT
  trap 'exit 130' INT TERM
  ip netns add "$NC_BRIDGE_NS"
  ip -n "$NC_BRIDGE_NS" link add br0 type bridge
  ip -n "$NC_BRIDGE_NS" link set br0 up
  ip -n "$NC_BRIDGE_NS" link set lo up
}

# The namespace of node $1.
nc_ns() { echo "${NC_BRIDGE_NS%br}n$1"; }

# The index of node $1 (the order nodes were added in).
nc_index() {
  local i
  for i in "${!NC_NODES[@]}"; do
    [ "${NC_NODES[$i]}" = "$1" ] && { echo "$i"; return; }
  done
  echo "netns-cluster: no node '$1'" >&2
  return 1
}

# The address of node $1.
nc_ip() {
  local i
  i=$(nc_index "$1") || return 1
  echo "$NC_NET.$((i + 10))"
}

# Adds node $1 (letters and digits): its namespace, its link to the bridge, its address.
nc_add_node() {
  local name=$1 i=${#NC_NODES[@]}
  local ns
  ns=$(nc_ns "$name")
  NC_NODES+=("$name")
  ip netns add "$ns"
  ip link add "mcv${i}" netns "$ns" type veth peer name "mcb${i}" netns "$NC_BRIDGE_NS"
  ip -n "$ns" link set "mcv${i}" name eth0
  ip -n "$NC_BRIDGE_NS" link set "mcb${i}" master br0
  ip -n "$NC_BRIDGE_NS" link set "mcb${i}" up
  ip -n "$ns" addr add "$NC_NET.$((i + 10))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip netns exec "$ns" nft -f - <<EOF
add table inet mcfault
add chain inet mcfault input { type filter hook input priority 0; }
add chain inet mcfault output { type filter hook output priority 0; }
EOF
}

# The bridge-side end of node $1's link.
nc_bridge_end() {
  local i
  i=$(nc_index "$1") || return 1
  echo "mcb$i"
}

# Runs "$@" (after node $1 and log file $2) in the node's namespace, in the background;
# sets NC_PID.
nc_run() {
  local node=$1 log=$2
  shift 2
  ip netns exec "$(nc_ns "$node")" "$@" >"$log" 2>&1 &
  NC_PID=$!
  NC_PIDS+=("$NC_PID")
}

# Stops process $1: SIGTERM (and SIGCONT, should it be paused), SIGKILL after 10 s.
nc_stop() {
  local pid=$1 deadline=$((SECONDS + 10))
  kill -TERM "$pid" 2>/dev/null || return 0
  kill -CONT "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.05
  done
  wait "$pid" 2>/dev/null || true
}

nc_pause() { kill -STOP "$1"; }
nc_resume() { kill -CONT "$1"; }

# Adds one nftables rule (the rest of the arguments) to chain $2 of node $1.
nc_rule() {
  local node=$1 chain=$2
  shift 2
  ip netns exec "$(nc_ns "$node")" nft add rule inet mcfault "$chain" "$@"
}

nc_cut_oneway() {
  local to
  to=$(nc_ip "$2")
  nc_rule "$1" output ip daddr "$to" drop
}

nc_cut() {
  nc_cut_oneway "$1" "$2"
  nc_cut_oneway "$2" "$1"
}

nc_isolate() {
  nc_rule "$1" output ip daddr "$NC_NET.0/24" drop
  nc_rule "$1" input ip saddr "$NC_NET.0/24" drop
}

nc_loss() {
  local node=$1 pct=$2
  nc_rule "$node" output numgen random mod 100 lt "$pct" drop
  nc_rule "$node" input numgen random mod 100 lt "$pct" drop
}

nc_rate() {
  local node=$1 rate=$2
  ip netns exec "$(nc_ns "$node")" tc qdisc replace dev eth0 root tbf rate "$rate" \
    burst 256kb latency 50ms
  ip netns exec "$NC_BRIDGE_NS" tc qdisc replace dev "$(nc_bridge_end "$node")" root tbf \
    rate "$rate" burst 256kb latency 50ms
}

# Whether this kernel has netem (sets NC_NETEM to "yes" or the reason it has not).
nc_netem_available() {
  if [ -z "$NC_NETEM" ]; then
    local probe="${NC_BRIDGE_NS%br}probe"
    ip netns add "$probe"
    if ip netns exec "$probe" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
      NC_NETEM=yes
    else
      NC_NETEM="this kernel ($(uname -r)) has no netem qdisc (sch_netem)"
    fi
    ip netns del "$probe"
  fi
  [ "$NC_NETEM" = yes ]
}

nc_delay() {
  local node=$1 ms=$2 jitter=$3
  if nc_netem_available; then
    ip netns exec "$(nc_ns "$node")" tc qdisc replace dev eth0 root netem \
      delay "${ms}ms" "${jitter}ms"
    ip netns exec "$NC_BRIDGE_NS" tc qdisc replace dev "$(nc_bridge_end "$node")" root netem \
      delay "${ms}ms" "${jitter}ms"
    return
  fi
  local ready
  ready=$(mktemp -u /tmp/netns-delayer.XXXXXX)
  nc_run "$node" /dev/null python3 "$NC_DIR/netns_chaos/delayer.py" --queue 0 \
    --delay-ms "$ms" --jitter-ms "$jitter" --ready "$ready"
  NC_DELAYERS+=("$NC_PID")
  local deadline=$((SECONDS + 10))
  until [ -e "$ready" ]; do
    kill -0 "$NC_PID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ] ||
      { echo "netns-cluster: the delayer for $node did not start" >&2; return 1; }
    sleep 0.05
  done
  rm -f "$ready"
  # nftables' own `queue` statement is not built into every kernel that has the queue;
  # iptables' NFQUEUE target (through nftables' xtables compatibility) is.
  ip netns exec "$(nc_ns "$node")" iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0
  ip netns exec "$(nc_ns "$node")" iptables -A INPUT -i eth0 -j NFQUEUE --queue-num 0
}

nc_link_down() { ip -n "$(nc_ns "$1")" link set eth0 down; }

nc_link_up() {
  local node=$1
  ip -n "$(nc_ns "$node")" link set eth0 up
  # The address's route goes with the link; it comes back with it.
  ip -n "$(nc_ns "$node")" route replace "$NC_NET.0/24" dev eth0 2>/dev/null || true
}

# Undoes every fault: rules flushed, qdiscs removed, links up.
nc_heal() {
  local node ns
  for node in "${NC_NODES[@]}"; do
    ns=$(nc_ns "$node")
    ip netns exec "$ns" nft flush table inet mcfault
    ! command -v iptables >/dev/null || ip netns exec "$ns" iptables -F 2>/dev/null || true
    ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
    ip netns exec "$NC_BRIDGE_NS" tc qdisc del dev "$(nc_bridge_end "$node")" root \
      2>/dev/null || true
    nc_link_up "$node"
  done
  local pid
  for pid in "${NC_DELAYERS[@]}"; do nc_stop "$pid"; done
  NC_DELAYERS=()
}

# Kills every process started here and deletes every namespace.
nc_down() {
  local pid node
  for pid in "${NC_PIDS[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "${NC_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for node in "${NC_NODES[@]}"; do ip netns del "$(nc_ns "$node")" 2>/dev/null || true; done
  [ -z "$NC_BRIDGE_NS" ] || ip netns del "$NC_BRIDGE_NS" 2>/dev/null || true
  NC_PIDS=()
  NC_NODES=()
}

# --- selftest: every fault on this kernel ---------------------------------------------

# Whether node $1 can open a TCP connection to node $2's port $3 within 1 s.
nc_reaches() {
  ip netns exec "$(nc_ns "$1")" python3 - "$(nc_ip "$2")" "$3" <<'EOF'
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
except OSError:
    sys.exit(1)
EOF
}

nc_unreachable() { ! nc_reaches "$@"; }

# How many of 100 connections from node $1 to node $2's port $3 succeed.
nc_successes() {
  ip netns exec "$(nc_ns "$1")" python3 - "$(nc_ip "$2")" "$3" <<'EOF'
import socket, sys
ok = 0
for _ in range(100):
    try:
        s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=0.3)
        s.close()
        ok += 1
    except OSError:
        pass
print(ok)
EOF
}

# The milliseconds node $1 takes to connect to node $2's port $3 (the fastest of 5).
nc_connect_ms() {
  ip netns exec "$(nc_ns "$1")" python3 - "$(nc_ip "$2")" "$3" <<'EOF'
import socket, sys, time
best = None
for _ in range(5):
    t = time.monotonic()
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    ms = (time.monotonic() - t) * 1000
    best = ms if best is None else min(best, ms)
print(int(best))
EOF
}

nc_selftest() {
  set -euo pipefail
  nc_init
  local work failures=0
  work=$(mktemp -d)
  for node in a b c; do nc_add_node "$node"; done
  for node in a b c; do
    nc_run "$node" "$work/$node.log" python3 -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000))
s.listen(512)
while True:
    s.accept()[0].close()
'
  done
  local deadline=$((SECONDS + 10))
  until nc_reaches a b 7000 && nc_reaches b c 7000 && nc_reaches c a 7000; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "FAIL the nodes never reached each other"; return 1; }
    sleep 0.1
  done
  check() {
    local what=$1
    shift
    if "$@"; then echo "PASS $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
  }
  check "the nodes reach each other" nc_reaches a c 7000
  host_has_no_node_address() { [[ "$(ip -4 addr show)" != *"$NC_NET."* ]]; }
  check "the host's own network has no node address" host_has_no_node_address
  nc_cut a b
  check "cut: a does not reach b" nc_unreachable a b 7000
  check "cut: b does not reach a" nc_unreachable b a 7000
  check "cut: a still reaches c" nc_reaches a c 7000
  nc_heal
  check "healed: a reaches b" nc_reaches a b 7000
  nc_cut_oneway a b
  # A connection needs both directions; the one-way cut shows as b's packets arriving
  # at a and a's never arriving at b: a SYN from b gets no answer back either.
  check "one-way: a does not reach b" nc_unreachable a b 7000
  check "one-way: c still reaches b" nc_reaches c b 7000
  nc_heal
  nc_isolate c
  check "isolated: a does not reach c" nc_unreachable a c 7000
  check "isolated: a reaches b" nc_reaches a b 7000
  nc_heal
  nc_loss b 30
  local got
  got=$(nc_successes a b 7000)
  check "30 % loss: some connections fail, most succeed ($got of 100)" \
    test "$got" -gt 20 -a "$got" -lt 100
  nc_heal
  nc_link_down b
  check "link down: a does not reach b" nc_unreachable a b 7000
  nc_link_up b
  check "link up again: a reaches b" nc_reaches a b 7000
  nc_rate b 10mbit
  check "rate cap: a reaches b" nc_reaches a b 7000
  nc_heal
  nc_netem_available || echo "NOTE delay by a netfilter queue: $NC_NETEM"
  nc_delay b 50 20
  check "delay: a reaches b" nc_reaches a b 7000
  local rtt
  rtt=$(nc_connect_ms a b 7000)
  check "delay 50 ± 20 ms each way: a connection to b takes 60-200 ms ($rtt ms)" \
    test "$rtt" -ge 60 -a "$rtt" -le 200
  nc_heal
  rtt=$(nc_connect_ms a b 7000)
  check "healed: a connection to b takes under 60 ms ($rtt ms)" test "$rtt" -lt 60
  local pid=${NC_PIDS[0]}
  nc_pause "$pid"
  stopped() { [[ "$(cat "/proc/$1/status")" == *$'\nState:\tT'* ]]; }
  check "paused: the process is stopped" stopped "$pid"
  nc_resume "$pid"
  check "resumed: a's server answers again" nc_reaches b a 7000
  nc_down
  no_namespace_left() { [[ "$(ip netns list)" != *"${NC_BRIDGE_NS%br}"* ]]; }
  check "torn down: no namespace left" no_namespace_left
  rm -rf "$work"
  [ "$failures" = 0 ]
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    selftest) nc_selftest ;;
    *) echo "usage: scripts/netns-cluster.sh selftest   (or source it)" >&2; exit 2 ;;
  esac
fi
