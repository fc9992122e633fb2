#!/usr/bin/env bash
# Builds and runs every example against an installed Mooncake prefix
# (scripts/install.sh --prefix P, or cmake --install build --prefix P):
#
#   layout      the installed files, SONAME, links, pkg-config and CMake package files
#   pkgconfig   pkgconfig/Makefile: C, C++ and static builds found by pkg-config, run
#   cmake       cmake/CMakeLists.txt: find_package(Mooncake), the same programs, run
#   relink      te_loopback.c linked by upstream's name (-ltransfer_engine), run
#   preload     preload/run.sh: stub libtransfer_engine.so, LD_PRELOAD, symlink swap
#
# The store example needs a master: $MOONCAKE_MASTER (host:port) when set, else it
# starts <prefix>/bin/mooncake_master on a free loopback port.
#
# usage: ffi-examples/run-all.sh <prefix>
# env:   CC, CXX; MOONCAKE_EXAMPLES_WORK=DIR keeps the build products there;
#        MOONCAKE_EXAMPLES_STRICT=1 makes a skipped step (no cmake, no master) a failure.
# Exit status 0 when every step passed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 <prefix>" >&2; exit 2; }
prefix="$(cd "$1" && pwd)" || exit 2
if [ -n "${MOONCAKE_EXAMPLES_WORK:-}" ]; then
  work="$MOONCAKE_EXAMPLES_WORK"
  mkdir -p "$work"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
work="$(cd "$work" && pwd)"
export CC="${CC:-cc}" CXX="${CXX:-c++}"
# Keep the engines' TCP listeners on loopback.
export MC_TCP_BIND_ADDRESS="${MC_TCP_BIND_ADDRESS:-127.0.0.1}"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
master_bin="$prefix/bin/mooncake_master"

passed=0 failed=0 skipped=0
failures=()
# run NAME COMMAND...: runs it with its output in $work/logs/NAME.log.
run() {
  local name="$1" log="$work/logs/$1.log" start=$SECONDS
  shift
  mkdir -p "$work/logs"
  if "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "PASS  $name ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "FAIL  $name ($((SECONDS - start)) s); output:"
    sed 's/^/    | /' "$log"
  fi
}
skip() {
  if [ "${MOONCAKE_EXAMPLES_STRICT:-0}" = 1 ]; then
    failed=$((failed + 1))
    failures+=("$1")
    echo "FAIL  $1 (skipped in strict mode: $2)"
  else
    skipped=$((skipped + 1))
    echo "SKIP  $1 ($2)"
  fi
}

check_layout() {
  local lib="$prefix/lib" f version
  version="$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --modversion mooncake)"
  echo "pkg-config: mooncake $version"
  local real="$lib/libmooncake.so.$version"
  [ -f "$real" ] && [ ! -L "$real" ] || { echo "$real: not a regular file"; return 1; }
  grep -q 'SONAME.*\[libmooncake.so.0\]' <<<"$(readelf -d "$real")" || { echo "SONAME is not libmooncake.so.0"; return 1; }
  [ "$(readlink "$lib/libmooncake.so.0")" = "libmooncake.so.$version" ] || { echo "bad libmooncake.so.0 link"; return 1; }
  for f in libmooncake.so libtransfer_engine.so libmooncake_store.so; do
    [ -L "$lib/$f" ] && [ "$(readlink -f "$lib/$f")" = "$(readlink -f "$real")" ] ||
      { echo "$lib/$f does not link to $real"; return 1; }
  done
  for f in lib/libmooncake.a include/mooncake/transfer_engine_c.h include/mooncake/store_c.h \
           include/mooncake/mooncake_ext.h include/transfer_engine_c.h include/store_c.h \
           include/mooncake/transfer_engine.h include/mooncake/transfer_metadata.h \
           include/mooncake/memory_location.h include/mooncake/transport/transport.h \
           include/mooncake/common/base/status.h include/mooncake/tent/transfer_engine.h \
           lib/pkgconfig/mooncake.pc lib/cmake/Mooncake/MooncakeConfig.cmake \
           lib/cmake/Mooncake/MooncakeConfigVersion.cmake; do
    [ -f "$prefix/$f" ] || { echo "missing $prefix/$f"; return 1; }
  done
  if [ -d "$prefix/bin" ]; then
    for f in mooncake_master transfer_engine_bench mooncake_http_metadata_server; do
      [ -x "$prefix/bin/$f" ] || { echo "missing $prefix/bin/$f"; return 1; }
    done
    [ -x "$prefix/bin/store_bench" ] && echo "store_bench: installed" || echo "store_bench: not installed"
  else
    echo "no bin/: installed without binaries"
  fi
  # The top-level copies are upstream's two names only, identical to include/mooncake/.
  cmp "$prefix/include/transfer_engine_c.h" "$prefix/include/mooncake/transfer_engine_c.h" &&
    cmp "$prefix/include/store_c.h" "$prefix/include/mooncake/store_c.h" || return 1
  echo "layout OK"
}

# needed BINARY SONAME: the binary's NEEDED entries include SONAME.
needed() {
  readelf -d "$1" | grep NEEDED
  grep -q "NEEDED.*\[$2\]" <<<"$(readelf -d "$1")"
}

run_store() { # run_store BINARY
  if [ -n "${MOONCAKE_MASTER:-}" ]; then
    "$1"
  else
    "$1" "$master_bin"
  fi
}

has_master() { [ -n "${MOONCAKE_MASTER:-}" ] || [ -x "$master_bin" ]; }

echo "== examples against $prefix (work dir $work)"
run layout check_layout

# pkg-config
pk="$work/pkgconfig"
mkdir -p "$pk"
run pkgconfig-build make -C "$here/pkgconfig" OUT="$pk" CC="$CC" CXX="$CXX"
if [ -x "$pk/te_loopback" ]; then
  run pkgconfig-needed needed "$pk/te_loopback" libmooncake.so.0
  run pkgconfig-te_loopback "$pk/te_loopback"
  run pkgconfig-te_loopback_static "$pk/te_loopback_static"
  run pkgconfig-te_raii "$pk/te_raii"
  run pkgconfig-te_cpp_api-same_host "$pk/te_cpp_api"
  run pkgconfig-te_cpp_api-tcp env MC_DISABLE_SAME_HOST=1 "$pk/te_cpp_api"
  run pkgconfig-tent_loopback "$pk/tent_loopback"
  if has_master; then run pkgconfig-store_roundtrip run_store "$pk/store_roundtrip"
  else skip pkgconfig-store_roundtrip "no master: set MOONCAKE_MASTER"; fi
fi

# CMake find_package
if command -v cmake >/dev/null; then
  cm="$work/cmake"
  run cmake-build sh -c "cmake -S '$here/cmake' -B '$cm' -DCMAKE_PREFIX_PATH='$prefix' -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build '$cm'"
  if [ -x "$cm/te_loopback" ]; then
    run cmake-te_loopback "$cm/te_loopback"
    run cmake-te_loopback_static "$cm/te_loopback_static"
    run cmake-te_raii "$cm/te_raii"
    run cmake-te_cpp_api "$cm/te_cpp_api"
    run cmake-tent_loopback "$cm/tent_loopback"
    if has_master; then run cmake-store_roundtrip run_store "$cm/store_roundtrip"
    else skip cmake-store_roundtrip "no master: set MOONCAKE_MASTER"; fi
  fi
else
  skip cmake "cmake is not installed"
fi

# Relinking an upstream program by upstream's library name: the SONAME makes the
# binary need libmooncake.so.0, whichever link name it was linked by.
relink() {
  "$CC" -std=c11 -Wall -Wextra -Werror -I"$prefix/include" "$here/c/te_loopback.c" \
    -o "$work/relinked" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -ltransfer_engine -ldl &&
    needed "$work/relinked" libmooncake.so.0 && "$work/relinked"
}
run relink relink

run preload bash "$here/preload/run.sh" "$prefix" "$work/preload"

echo "== run-all: $passed passed, $failed failed, $skipped skipped${failures:+ (failed: ${failures[*]})}"
[ "$failed" = 0 ]
