#!/usr/bin/env bash
# Drop-in demo: a program built and linked for upstream's libtransfer_engine.so runs on
# libmooncake without being rebuilt.
#
#   1. build a stub libtransfer_engine.so (upstream's file name and SONAME; every
#      function fails) and te_loopback.c linked against it (NEEDED libtransfer_engine.so);
#   2. run it on the stub: it must fail;
#   3. LD_PRELOAD=<prefix>/lib/libmooncake.so: libmooncake's symbols win, it must pass;
#   4. symlink swap: a directory where libtransfer_engine.so -> libmooncake, on
#      LD_LIBRARY_PATH instead of the stub's: it must pass (and likewise <prefix>/lib,
#      which ships that link);
#   5. a program linked against both upstream names (libtransfer_engine.so and
#      libmooncake_store.so) maps libmooncake once when both names are links to it.
#
# usage: preload/run.sh <prefix> [workdir]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
prefix="$(cd "${1:?usage: run.sh <prefix> [workdir]}" && pwd)"
work="${2:-$(mktemp -d)}"
mkdir -p "$work/stub" "$work/swap"
CC="${CC:-cc}"

step() { echo "== preload: $*"; }
check_output() { # check_output FILE WANT_PATTERN FORBIDDEN_PATTERN
  grep -q -- "$2" "$1" || { echo "missing '$2' in:"; cat "$1"; return 1; }
  if grep -q -- "$3" "$1"; then echo "unexpected '$3' in:"; cat "$1"; return 1; fi
}

step "building the stub libtransfer_engine.so and an app linked against it"
# Only <prefix>/include: upstream's header name at the top level, as upstream installs it.
"$CC" -std=c11 -Wall -Wextra -Werror -shared -fPIC -Wl,-soname,libtransfer_engine.so \
  -I"$prefix/include" "$here/stub_transfer_engine.c" -o "$work/stub/libtransfer_engine.so"
"$CC" -std=c11 -Wall -Wextra -Werror -I"$prefix/include" "$here/../c/te_loopback.c" \
  -o "$work/app" -L"$work/stub" -ltransfer_engine -ldl
readelf -d "$work/app" | grep NEEDED
grep -q 'NEEDED.*\[libtransfer_engine.so\]' <<<"$(readelf -d "$work/app")"
if grep -q 'NEEDED.*libmooncake' <<<"$(readelf -d "$work/app")"; then
  echo "app must not link libmooncake directly"; exit 1
fi

step "on the stub (must fail)"
if LD_LIBRARY_PATH="$work/stub" "$work/app" >"$work/out" 2>&1; then
  echo "the app passed on the stub library:"; cat "$work/out"; exit 1
fi
check_output "$work/out" "stub libtransfer_engine: createTransferEngine called" "te_loopback: OK"
echo "failed as expected: $(grep -m1 stub "$work/out")"

step "LD_PRELOAD=$prefix/lib/libmooncake.so (must pass)"
LD_PRELOAD="$prefix/lib/libmooncake.so" LD_LIBRARY_PATH="$work/stub" "$work/app" >"$work/out" 2>&1 ||
  { cat "$work/out"; exit 1; }
check_output "$work/out" "te_loopback: OK" "stub libtransfer_engine"
grep backend "$work/out"

step "symlink swap: $work/swap/libtransfer_engine.so -> libmooncake (must pass)"
ln -sfn "$prefix/lib/libmooncake.so.0" "$work/swap/libtransfer_engine.so"
LD_LIBRARY_PATH="$work/swap" "$work/app" >"$work/out" 2>&1 || { cat "$work/out"; exit 1; }
check_output "$work/out" "te_loopback: OK" "stub libtransfer_engine"
grep backend "$work/out"

step "the installed link: LD_LIBRARY_PATH=$prefix/lib (must pass)"
LD_LIBRARY_PATH="$prefix/lib" "$work/app" >"$work/out" 2>&1 || { cat "$work/out"; exit 1; }
check_output "$work/out" "te_loopback: OK" "stub libtransfer_engine"
step "upstream's two names, one library: one_library.c"
# Stand-ins with upstream's SONAMEs, only to link against.
printf 'void *mooncake_store_create(void) { return 0; }\nvoid mooncake_store_destroy(void *s) { (void)s; }\n' \
  >"$work/store_stub.c"
mkdir -p "$work/store_stub"
"$CC" -shared -fPIC -Wl,-soname,libmooncake_store.so "$work/store_stub.c" \
  -o "$work/store_stub/libmooncake_store.so"
"$CC" -std=c11 -Wall -Wextra -Werror -I"$prefix/include" "$here/one_library.c" -o "$work/one_library" \
  -L"$work/stub" -L"$work/store_stub" -ltransfer_engine -lmooncake_store
readelf -d "$work/one_library" | grep NEEDED
LD_LIBRARY_PATH="$prefix/lib" "$work/one_library" >"$work/out" 2>&1 || { cat "$work/out"; exit 1; }
cat "$work/out"
echo "preload demo: OK"
