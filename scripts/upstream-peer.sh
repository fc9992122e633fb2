#!/usr/bin/env bash
# Installs upstream Mooncake 0.3.13 (PyPI package mooncake-transfer-engine-non-cuda, the
# non-CUDA build) into a virtualenv: the real peer the interop tests and the side-by-side
# benchmarks run against. Only published binaries are installed; nothing of upstream is
# built. Idempotent; prints the venv path on the last line of stdout.
#
#   MOONCAKE_PEER_VENV     where the venv goes (default ~/.cache/mooncake-peer/venv)
#   MOONCAKE_PEER_VERSION  the wheel version (default 0.3.13.post1)
#
# Needs network access to PyPI (and, as root, to Debian's mirrors for the shared
# libraries the wheel's binaries link against: libibverbs1, ibverbs-providers, librdmacm1,
# libnuma1, libgoogle-glog0v6, libjsoncpp25, libcurl4; no RDMA hardware is needed).
# Exits non-zero with one line on stderr when the peer cannot be installed.
set -euo pipefail

venv="${MOONCAKE_PEER_VENV:-$HOME/.cache/mooncake-peer/venv}"
version="${MOONCAKE_PEER_VERSION:-0.3.13.post1}"

fail() {
  echo "upstream-peer: $*" >&2
  exit 1
}

missing_libs() {
  local lib cache
  # Read whole before matching: `ldconfig -p | grep -q` under pipefail fails when grep
  # exits at its first match and ldconfig dies of SIGPIPE.
  cache="$(ldconfig -p 2>/dev/null || true)"
  for lib in libibverbs.so.1 libnuma.so.1 libglog.so libjsoncpp.so libcurl.so.4 librdmacm.so.1; do
    grep -qF "$lib" <<<"$cache" || echo "$lib"
  done
}

if [ -n "$(missing_libs)" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || fail "apt-get update failed"
    apt-get install -y -qq libibverbs1 ibverbs-providers librdmacm1 libnuma1 \
      libgoogle-glog0v6 libjsoncpp25 libcurl4 >/dev/null ||
      fail "apt-get could not install the peer's shared libraries"
  else
    fail "missing shared libraries ($(missing_libs | tr '\n' ' ')); install them or run as root with apt-get"
  fi
fi

imports_ok() {
  "$venv/bin/python" -c 'import mooncake.store, mooncake.engine' >/dev/null 2>&1
}

if ! imports_ok; then
  if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" >&2 || fail "python3 -m venv failed (install python3-venv)"
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "mooncake-transfer-engine-non-cuda==$version" >&2 ||
    fail "pip could not install mooncake-transfer-engine-non-cuda==$version"
  imports_ok || fail "the installed wheel does not import (see: $venv/bin/python -c 'import mooncake.store')"
fi
echo "$venv"
