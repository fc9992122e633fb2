#!/usr/bin/env bash
# Builds the release library against glibc 2.28 (RHEL 8 era) with
# `cargo zigbuild --target x86_64-unknown-linux-gnu.2.28` and checks it:
#   * no glibc symbol version newer than GLIBC_2.28 (objdump -T);
#   * NEEDED limited to libc, libgcc_s, libm, libdl, libpthread and the loader;
#   * SONAME libmooncake.so.0;
#   * the whole C ABI suite (tests/rust/c_abi.rs: exported symbol set, C programs under
#     AddressSanitizer) passes against that library.
#
# zig and cargo-zigbuild come from PyPI (scripts/zigbuild-env.sh).
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

# shellcheck source=scripts/zigbuild-env.sh
. scripts/zigbuild-env.sh
zigbuild_env "glibc 2.28 build" || exit 0

start=$SECONDS
# Stripped as scripts/build-wheel.sh builds it, so one build serves both.
CARGO_PROFILE_RELEASE_STRIP=debuginfo cargo zigbuild "${profile_args[@]}" --lib \
  --target "$triple.$max_glibc"
build_s=$((SECONDS - start))
echo "== build: ${build_s} s ($profile_dir, $lib)"

fail=0
glibc_at_most "$lib" "$max_glibc" || fail=1

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
  echo "check-glibc: OK (GLIBC_$(newest_glibc "$lib") <= $max_glibc, build ${build_s} s)"
else
  echo "check-glibc: FAILED"
fi
exit "$fail"
