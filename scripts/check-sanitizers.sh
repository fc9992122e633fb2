#!/usr/bin/env bash
# Runs the C ABI tests (tests/c/ through tests/rust/c_abi.rs) twice more:
#
#   asan      against a libmooncake.so whose Rust code is itself instrumented with
#             AddressSanitizer (nightly `-Zsanitizer=address`; with `-Zbuild-std` when
#             the nightly has rust-src, so the standard library is instrumented too),
#             the C programs built with gcc's -fsanitize=address,undefined (gcc's ASan
#             runtime serves both), leak checking on;
#   valgrind  against the normal debug library, the C programs built without
#             sanitizers and run under valgrind memcheck (leak check on); any error
#             fails the test (suppressions: tests/c/valgrind.supp).
#
# The plain `cargo test` already runs the same programs under ASan with an
# uninstrumented library.
#
# usage: scripts/check-sanitizers.sh [asan] [valgrind]     (default: both)
# env:   MOONCAKE_ASAN_BUILD_STD=0 never uses -Zbuild-std.
# Without a nightly toolchain the asan mode is skipped, and without valgrind the valgrind
# mode (one `SKIP` line each), not failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(asan valgrind)
triple=x86_64-unknown-linux-gnu
target_dir="${CARGO_TARGET_DIR:-$root/target}"
threads="${MOONCAKE_TEST_THREADS:-2}"
status=0

for mode in "${modes[@]}"; do
  case "$mode" in
    asan)
      if ! cargo +nightly --version >/dev/null 2>&1; then
        # -Zsanitizer needs nightly; without one this mode is skipped, not failed.
        echo "SKIP asan: no nightly toolchain (rustup toolchain install nightly)"
        continue
      fi
      build_std=()
      asan_dir="$target_dir/asan"
      sysroot="$(rustc +nightly --print sysroot)"
      if [ "${MOONCAKE_ASAN_BUILD_STD:-1}" != 0 ] && [ -d "$sysroot/lib/rustlib/src/rust/library" ]; then
        build_std=(-Zbuild-std)
        asan_dir="$target_dir/asan-std"
        echo "== asan: nightly with rust-src: std is instrumented too (-Zbuild-std)"
      else
        echo "== asan: nightly without rust-src: the crate and its dependencies are instrumented, std is not"
      fi
      start=$SECONDS
      # --target keeps build scripts and proc macros uninstrumented.
      RUSTFLAGS="-Zsanitizer=address -Cforce-frame-pointers=yes" \
        cargo +nightly build "${build_std[@]}" --lib --target "$triple" --target-dir "$asan_dir"
      lib="$asan_dir/$triple/debug/libmooncake.so"
      echo "== asan: build $((SECONDS - start)) s; $lib"
      syms="$(nm -D "$lib")"
      grep -q ' U __asan_' <<<"$syms" || { echo "check-sanitizers: $lib is not instrumented" >&2; status=1; continue; }
      start=$SECONDS
      MOONCAKE_C_ABI_LIBRARY="$lib" cargo test --test c_abi -- --test-threads="$threads" || status=1
      echo "== asan: tests $((SECONDS - start)) s"
      ;;
    valgrind)
      if ! command -v valgrind >/dev/null; then
        echo "SKIP valgrind: valgrind is not installed (apt-get install valgrind)"
        continue
      fi
      start=$SECONDS
      MOONCAKE_C_ABI_VALGRIND=1 cargo test --test c_abi -- --test-threads="$threads" || status=1
      echo "== valgrind: $((SECONDS - start)) s"
      ;;
    *) echo "check-sanitizers: unknown mode '$mode' (asan, valgrind)" >&2; exit 2 ;;
  esac
done
[ "$status" = 0 ] && echo "check-sanitizers: OK (${modes[*]})" || echo "check-sanitizers: FAILED"
exit "$status"
