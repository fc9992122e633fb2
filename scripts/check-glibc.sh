#!/usr/bin/env bash
# Builds the release library against glibc 2.28 (RHEL 8 era) with
# `cargo zigbuild --target x86_64-unknown-linux-gnu.2.28` and checks it:
#   * no glibc symbol version newer than GLIBC_2.28 (objdump -T);
#   * NEEDED limited to libc, libgcc_s, libm, libdl, libpthread and the loader;
#   * SONAME libmooncake.so.0;
#   * the whole C ABI suite (tests/rust/c_abi.rs: exported symbol set, C programs under
#     AddressSanitizer) passes against that library.
#
# zig and cargo-zigbuild come from PyPI (ziglang, cargo-zigbuild), installed into
# target/zigbuild-venv on first use unless `cargo zigbuild` already works. The host
# target's std is used, so no `rustup target add` is needed.
#
# usage: scripts/check-glibc.sh [--profile release|debug] [--no-test]
# Prints the build time. Artifacts: target/x86_64-unknown-linux-gnu/<profile>/.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

profile=release run_tests=1
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --profile=*) profile="${1#*=}"; shift ;;
    --no-test) run_tests=0; shift ;;
    *) echo "check-glibc.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$profile" in
  debug|dev) profile_args=(--profile dev); profile_dir=debug ;;
  *) profile_args=(--profile "$profile"); profile_dir="$profile" ;;
esac
max_glibc=2.28
triple=x86_64-unknown-linux-gnu
target_dir="${CARGO_TARGET_DIR:-$root/target}"
lib="$target_dir/$triple/$profile_dir/libmooncake.so"

# Versions known to work; override to try others.
ZIGLANG_VERSION="${ZIGLANG_VERSION:-0.17.1}"
CARGO_ZIGBUILD_VERSION="${CARGO_ZIGBUILD_VERSION:-0.24.1}"
have_zig() { command -v zig >/dev/null || python3 -m ziglang version >/dev/null 2>&1; }
if ! { command -v cargo-zigbuild >/dev/null && have_zig; }; then
  venv="$target_dir/zigbuild-venv"
  if [ ! -x "$venv/bin/cargo-zigbuild" ]; then
    echo "== installing ziglang $ZIGLANG_VERSION and cargo-zigbuild $CARGO_ZIGBUILD_VERSION into $venv"
    if ! { python3 -m venv "$venv" && "$venv/bin/python" -m pip install -q \
      "ziglang==$ZIGLANG_VERSION" "cargo-zigbuild==$CARGO_ZIGBUILD_VERSION"; }; then
      rm -rf "$venv"
      echo "SKIP glibc 2.28 build: ziglang/cargo-zigbuild could not be installed from PyPI"
      exit 0
    fi
  fi
  # cargo-zigbuild finds zig through `python3 -m ziglang` with the venv's python first.
  export PATH="$venv/bin:$PATH"
fi
echo "== $(cargo-zigbuild --version | sed -n 1p), zig $(zig version 2>/dev/null || python3 -m ziglang version)"

start=$SECONDS
cargo zigbuild "${profile_args[@]}" --lib --target "$triple.$max_glibc"
build_s=$((SECONDS - start))
echo "== build: ${build_s} s ($profile_dir, $lib)"

fail=0
newest="$(objdump -T "$lib" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1)"
echo "== newest glibc symbol version: GLIBC_$newest"
if [ "$(printf '%s\n%s\n' "$newest" "$max_glibc" | sort -V | tail -1)" != "$max_glibc" ]; then
  echo "FAIL: needs GLIBC_$newest, newer than $max_glibc:"
  objdump -T "$lib" | grep -E "GLIBC_($(echo "$newest" | sed 's/\./\\./g'))" | sed -n '1,20p' || true
  fail=1
fi

needed="$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
echo "== NEEDED: $(echo $needed)"
for n in $needed; do
  case "$n" in
    libc.so.6|libgcc_s.so.1|libm.so.6|libdl.so.2|libpthread.so.0|ld-linux-x86-64.so.2) ;;
    *) echo "FAIL: needs $n"; fail=1 ;;
  esac
done
soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
echo "== SONAME: $soname"
[ "$soname" = libmooncake.so.0 ] || { echo "FAIL: SONAME is '$soname'"; fail=1; }

if [ "$run_tests" = 1 ] && [ "$fail" = 0 ]; then
  echo "== C ABI tests against $lib"
  MOONCAKE_C_ABI_LIBRARY="$lib" cargo test --test c_abi -- --test-threads="${MOONCAKE_TEST_THREADS:-2}" ||
    fail=1
fi

if [ "$fail" = 0 ]; then
  echo "check-glibc: OK (GLIBC_$newest <= $max_glibc, build ${build_s} s)"
else
  echo "check-glibc: FAILED"
fi
exit "$fail"
