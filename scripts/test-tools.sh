# Sourced by scripts/test-all.sh: makes sure the tools each check needs are there.
#
# As root with apt-get, missing Debian packages are installed (one `apt-get install`).
# A check whose tools still cannot be had is skipped: one `SKIP <check>: <why>` line is
# printed and the check's MOONCAKE_SKIP_* variable is exported. With `CI` set only the
# MOONCAKE_SKIP_* the user set may skip a check: any other skip is printed as
# `FAILED <check>: ...` and recorded in SKIPS_REFUSED, which fails the run (a skipped
# suite hides regressions). Nothing else here fails the run, except a missing cargo
# (nothing can run without it).
#
# Checks and what they need (Debian package in brackets):
#   C tests (cargo test --test c_abi)    cc, c++ [gcc, g++], readelf, nm [binutils]
#   Python tests                         python3 with venv and pip [python3-venv]
#   packaging (cargo test --test packaging)  cmake, make, pkg-config [cmake, make, pkg-config]
#   sanitizers: valgrind mode            valgrind [valgrind]
#   sanitizers: asan mode                a nightly toolchain (skipped inside the script)
#   glibc 2.28 build                     objdump [binutils], ziglang + cargo-zigbuild (PyPI)
#   interop                              the upstream 0.3.13 peer (scripts/upstream-peer.sh)
#   etcd and Redis metadata tests        etcd [etcd-server], redis-server [redis-server]
#   network faults (scripts/netns-chaos.sh)  root, ip [iproute2], nft [nftables],
#                                        iptables [iptables], curl [curl], etcd
#   RDMA suite in the SoftRoCE VM        qemu, a kernel, rdma-core (scripts/rxe-vm.sh --missing)
#                                        and the peer

# "<command> <package>" pairs, per check.
_tools_c="cc:gcc c++:g++ readelf:binutils nm:binutils"
_tools_packaging="cmake:cmake make:make pkg-config:pkg-config"
_tools_valgrind="valgrind:valgrind"
_tools_glibc="objdump:binutils"
_tools_kv="etcd:etcd-server redis-server:redis-server"
_tools_netns="ip:iproute2 nft:nftables iptables:iptables curl:curl etcd:etcd-server"

_python_ok() {
  command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null
}

# The packages of the pairs whose command is missing.
_missing_packages() {
  local pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null || echo "${pair#*:}"
  done
}

# The commands of the pairs that are missing.
_missing_commands() {
  local pair out=()
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null || out+=("${pair%%:*}")
  done
  echo "${out[*]}"
}

# Installs what is missing (as root with apt-get); never fails.
tools_install() {
  # shellcheck disable=SC2086
  local pkgs
  pkgs="$(_missing_packages $_tools_c $_tools_packaging $_tools_valgrind $_tools_glibc $_tools_kv $_tools_netns | sort -u | tr '\n' ' ')"
  _python_ok || pkgs="$pkgs python3 python3-venv python3-pip"
  # The verbs header that verbs_layout compares our struct layouts with.
  [ -e /usr/include/infiniband/verbs.h ] || pkgs="$pkgs libibverbs-dev"
  _apt_install "" $pkgs
  # The VM's packages (a kernel among them, without its recommended firmware) go in
  # their own call: if they cannot be installed, only the RDMA suite is skipped.
  [ -n "${MOONCAKE_SKIP_RDMA_VM:-}" ] ||
    _apt_install --no-install-recommends $(bash scripts/rxe-vm.sh --missing)
}

# apt-get installs the packages given after the option word (as root); never fails.
_apt_install() {
  local option="$1"
  shift
  local pkgs="$*"
  [ -n "$pkgs" ] || return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian packages: $pkgs"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq $option $pkgs >/dev/null; }; then
      echo "== apt-get could not install them all; the checks that need them are skipped"
    fi
  else
    echo "== not root or no apt-get: not installing $pkgs"
  fi
}

# The SKIP lines printed so far (test-all.sh repeats them in its summary).
TOOLS_SKIPPED=()
# Under CI: the checks that would have been skipped, as FAILED lines (they fail the run).
SKIPS_REFUSED=()
# The MOONCAKE_SKIP_* variables the user set before the run (the only skips CI allows).
USER_SKIPS=" "
for _var in ${!MOONCAKE_SKIP_@}; do
  [ -z "${!_var}" ] || USER_SKIPS+="$_var "
done
unset _var

# Whether the user set skip variable $1 (rather than this script).
user_skipped() {
  [[ "$USER_SKIPS" == *" $1 "* ]]
}

# skip_check CHECK WHY: a check that cannot run here. Prints `SKIP CHECK: WHY`; under
# CI prints `FAILED CHECK: ...` instead and records it in SKIPS_REFUSED. Idempotent for
# a line already recorded.
skip_check() {
  local check="$1" why="$2" line
  if [ -n "${CI:-}" ]; then
    line="FAILED $check: it would be skipped, and under CI only a MOONCAKE_SKIP_* may skip a check: $why"
    [[ " ${SKIPS_REFUSED[*]} " == *" $line "* ]] || SKIPS_REFUSED+=("$line")
  else
    line="SKIP $check: $why"
    [[ " ${TOOLS_SKIPPED[*]} " == *" $line "* ]] || TOOLS_SKIPPED+=("$line")
  fi
  echo "$line"
}

# _skip VAR CHECK WHY [--follows USER_VAR]: exports the check's skip variable and
# reports the skip (skip_check); nothing when the user set VAR, and a plain SKIP line
# even under CI when the skip follows from USER_VAR, which the user set.
_skip() {
  local var="$1" check="$2" why="$3"
  user_skipped "$var" && return 0
  export "$var=1"
  if [ "${4:-}" = --follows ] && user_skipped "$5"; then
    echo "SKIP $check: $why"
    TOOLS_SKIPPED+=("SKIP $check: $why")
  else
    skip_check "$check" "$why"
  fi
}

# Decides which checks can run; exports MOONCAKE_SKIP_* for the others.
tools_check() {
  command -v cargo >/dev/null || { echo "cargo (stable Rust) is required: https://rustup.rs" >&2; exit 1; }
  local missing
  # shellcheck disable=SC2086
  missing="$(_missing_commands $_tools_c)"
  if [ -n "$missing" ]; then
    _skip MOONCAKE_SKIP_C_TESTS "C tests" "missing $missing (apt-get install gcc g++ binutils)"
    _skip MOONCAKE_SKIP_PACKAGING "packaging" "it builds C programs: missing $missing"
  fi
  _python_ok || _skip MOONCAKE_SKIP_PYTHON "Python tests" "python3 with venv is missing (apt-get install python3-venv)"
  # shellcheck disable=SC2086
  missing="$(_missing_commands $_tools_packaging)"
  [ -z "$missing" ] || [ -n "${MOONCAKE_SKIP_PACKAGING:-}" ] || _skip MOONCAKE_SKIP_PACKAGING "packaging" "missing $missing (apt-get install cmake make pkg-config)"
  # shellcheck disable=SC2086
  missing="$(_missing_commands $_tools_kv)"
  [ -z "$missing" ] || _skip MOONCAKE_SKIP_KV_SERVERS "etcd and Redis tests" "missing $missing (apt-get install etcd-server redis-server)"
  if [ -z "${MOONCAKE_SKIP_NETNS:-}" ]; then
    # shellcheck disable=SC2086
    missing="$(_missing_commands $_tools_netns)"
    if [ "$(id -u)" != 0 ]; then
      _skip MOONCAKE_SKIP_NETNS "network faults" "network namespaces need root"
    elif [ -n "$missing" ]; then
      _skip MOONCAKE_SKIP_NETNS "network faults" "missing $missing (apt-get install iproute2 nftables iptables curl etcd-server)"
    fi
  fi
  command -v valgrind >/dev/null || _skip MOONCAKE_SKIP_VALGRIND "valgrind" "valgrind is not installed (apt-get install valgrind)"
  if [ -z "${MOONCAKE_SKIP_GLIBC:-}" ]; then
    command -v objdump >/dev/null || _skip MOONCAKE_SKIP_GLIBC "glibc 2.28 build" "objdump is missing (apt-get install binutils)"
    _python_ok || _skip MOONCAKE_SKIP_GLIBC "glibc 2.28 build" "python3 with venv is missing (zig comes from PyPI)"
  fi
  if [ -z "${MOONCAKE_SKIP_RDMA_VM:-}" ]; then
    missing="$(bash scripts/rxe-vm.sh --missing)"
    [ -z "$missing" ] || _skip MOONCAKE_SKIP_RDMA_VM "RDMA suite" "the SoftRoCE VM needs $missing (scripts/rxe-vm.sh --install)"
  fi
  if [ -z "${MOONCAKE_SKIP_INTEROP:-}" ] && [ -z "${MOONCAKE_PEER_VENV:-}" ]; then
    local peer
    if peer="$(bash scripts/upstream-peer.sh | tail -1)" && [ -x "$peer/bin/python" ]; then
      export MOONCAKE_PEER_VENV="$peer"
      echo "== upstream peer: $MOONCAKE_PEER_VENV"
    else
      _skip MOONCAKE_SKIP_INTEROP "interop" "the upstream peer could not be installed (scripts/upstream-peer.sh; needs PyPI)"
    fi
  fi
  if [ -n "${MOONCAKE_SKIP_INTEROP:-}" ] && [ -z "${MOONCAKE_SKIP_RDMA_VM:-}" ]; then
    _skip MOONCAKE_SKIP_RDMA_VM "RDMA suite" "it runs against the upstream peer, which is skipped" \
      --follows MOONCAKE_SKIP_INTEROP
  fi
}
