#!/usr/bin/env bash
# Runs Rust tests under two checkers of the nightly toolchain:
#
#   tsan  the tests of the concurrent parts (TCP lanes, batches, the RPC clients and
#         servers, the master's shards and eviction, store heartbeats, HA replication)
#         under ThreadSanitizer (`-Zsanitizer=thread -Zbuild-std`: std instrumented
#         too, so its synchronisation is seen); any report fails the run
#         (halt_on_error; reports are kept in target/tsan/reports); suppressions,
#         each justified: scripts/tsan.supp;
#   miri  the unit tests of the pure modules with unsafe code or byte-level decoding
#         (struct_pack and coro_rpc, the master's allocator, segment descriptors, the
#         TCP, same-host, RPC-daemon and HA-record headers, base64, the C ABI's
#         argument conversion, batches, the HA changelog) under Miri; any undefined
#         behaviour fails.
#
# The default test set fits CI (a few minutes on 2 cores from a cold target dir);
# --full adds the slower concurrent suites (the RPC daemon, the same-host path, the
# store's clients and, with etcd installed, the HA masters as processes).
#
# usage: scripts/check-tsan-miri.sh [--full] [tsan] [miri]     (default: both)
# env:   MOONCAKE_TEST_THREADS (default 2).
# Build outputs: target/tsan and target/miri. A nightly toolchain lacking rust-src or
# miri gets them from rustup; where that fails the mode is skipped (one `SKIP` line),
# not failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
full=0
modes=()
for arg in "$@"; do
  case "$arg" in
    --full) full=1 ;;
    tsan | miri) modes+=("$arg") ;;
    *) echo "check-tsan-miri: unknown argument '$arg' (--full, tsan, miri)" >&2; exit 2 ;;
  esac
done
[ ${#modes[@]} -gt 0 ] || modes=(tsan miri)
triple=x86_64-unknown-linux-gnu
threads="${MOONCAKE_TEST_THREADS:-2}"
status=0

# Integration tests run under TSan. Left out: c_abi and packaging (C programs and an
# uninstrumented loader), store_faults (builds its child through a nested plain cargo),
# store_pressure, wire_upstream, interop_*, store_interop* and dummy_client (their
# concurrency is in child processes or the upstream peer, not in this process),
# rdma_*/gpu_* (fakes of single-threaded drivers, or real hardware).
tsan_tests=(te_loopback tcp_target master_service master_rpc_server wire_e2e)
tsan_full_tests=(rpc_daemon same_host store_client metadata_http te_metadata master_ha)
# Unit tests left out under TSan, single-threaded and slow there: a panic's backtrace
# is symbolised through the instrumented binary (80 s; Miri runs this test), and
# a 3 MB process_vm_readv copy byte-checked (16 s).
tsan_skip=(--skip ffi::boundary::tests::panics_become_the_failure_value
  --skip te::transport::same_host::copy::tests::copies_within_this_process_both_ways)
# Left out in the CI set only: single-threaded decoder property tests (Miri and the
# fuzz targets cover them).
tsan_ci_skip=(--skip te::transport::same_host::wire --skip metadata::descriptor
  --skip te::rpc::frame --skip wire::struct_pack_tests --skip wire::codec_tests)

# Unit-test paths run under Miri (module prefixes). Everything else does I/O Miri
# cannot emulate (sockets, memfd and shared mappings, process_vm_*, FFI): the dummy
# client's wire tests, for one, pass memfds.
miri_filters=(
  wire::struct_pack_tests wire::codec_tests wire::coro_rpc
  master::allocator master::ha::record
  metadata::descriptor
  te::transport::tcp::wire te::transport::same_host::wire te::rpc::frame
  util::base64
  ffi::boundary ffi::handles ffi::ext_store::support ffi::te_types
  ffi::store::support::tests::config_conversion_follows_upstream
  te::batch master::objects master::entries master::entry_memory master::ha::changelog
)

# Left out of the default (CI) Miri set, which would otherwise take over 10 minutes:
# the property tests that feed decoders arbitrary bytes (a codec's alone takes 4
# minutes under Miri; decoders hold no unsafe code, and the fuzz targets run the same
# inputs and more), the property test of every master message, and struct_pack's width
# test (a 70,000-string vector). --full runs them all. (cargo test's --skip matches
# substrings.)
miri_ci_skip=(--skip arbitrary_bytes_never_panic --skip decoder_never_panics
  --skip decode_is_total --skip decode_total
  --skip wire::codec_tests::roundtrip_every_message
  --skip wire::struct_pack_tests::width_selection)

# Succeeds when nightly has `component`, adding it through rustup if needed.
nightly_has() {
  local component="$1" check="$2"
  eval "$check" >/dev/null 2>&1 && return 0
  rustup component add "$component" --toolchain nightly >/dev/null 2>&1 || return 1
  eval "$check" >/dev/null 2>&1
}

has_rust_src='[ -d "$(rustc +nightly --print sysroot)/lib/rustlib/src/rust/library" ]'

for mode in "${modes[@]}"; do
  if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "SKIP $mode: no nightly toolchain (rustup toolchain install nightly)"
    continue
  fi
  case "$mode" in
    tsan)
      if ! nightly_has rust-src "$has_rust_src"; then
        # Without an instrumented std every lock and channel looks like a race.
        echo "SKIP tsan: nightly has no rust-src for -Zbuild-std (rustup component add rust-src --toolchain nightly)"
        continue
      fi
      tests=("${tsan_tests[@]}")
      skip=("${tsan_skip[@]}")
      if [ "$full" = 1 ]; then tests+=("${tsan_full_tests[@]}"); else skip+=("${tsan_ci_skip[@]}"); fi
      args=(--lib)
      for t in "${tests[@]}"; do args+=(--test "$t"); done
      start=$SECONDS
      # --target keeps build scripts and proc macros uninstrumented.
      export RUSTFLAGS="-Zsanitizer=thread"
      # Reports go to files, so those of the instrumented binaries the tests spawn
      # (the masters of master_ha) count too.
      reports="$root/target/tsan/reports"
      rm -rf "$reports"
      mkdir -p "$reports"
      export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp:log_path=$reports/tsan"
      tsan=(cargo +nightly test -Zbuild-std --target "$triple" --target-dir "$root/target/tsan")
      "${tsan[@]}" --no-run "${args[@]}" || { status=1; unset RUSTFLAGS TSAN_OPTIONS; continue; }
      echo "== tsan: build $((SECONDS - start)) s (${tests[*]} and the unit tests)"
      start=$SECONDS
      "${tsan[@]}" --no-fail-fast "${args[@]}" -- --test-threads="$threads" "${skip[@]}" || status=1
      unset RUSTFLAGS TSAN_OPTIONS
      found=("$reports"/tsan.*)
      if [ -e "${found[0]}" ]; then
        cat "${found[@]}"
        echo "check-tsan-miri: ${#found[@]} process(es) with ThreadSanitizer reports (above; kept in $reports)"
        status=1
      fi
      echo "== tsan: tests $((SECONDS - start)) s"
      ;;
    miri)
      if ! nightly_has miri "cargo +nightly miri --version" || ! nightly_has rust-src "$has_rust_src"; then
        echo "SKIP miri: nightly has no miri (rustup component add miri rust-src --toolchain nightly)"
        continue
      fi
      # Permissive provenance: parking_lot_core's word lock keeps pointers in a usize
      # (an integer-to-pointer cast Miri would otherwise warn about on every run).
      # Isolation off: proptest looks up the working directory (for its regression
      # files) and descriptors carry wall-clock timestamps; no test here touches the
      # network or writes files.
      # Property tests take 4 cases (Miri is ~1000x slower), 256 with --full.
      export MIRIFLAGS="-Zmiri-permissive-provenance -Zmiri-disable-isolation"
      export PROPTEST_CASES=4
      [ "$full" = 0 ] || PROPTEST_CASES=256
      start=$SECONDS
      miri=(cargo +nightly miri test --target-dir "$root/target/miri" --lib)
      "${miri[@]}" --no-run || { status=1; unset MIRIFLAGS PROPTEST_CASES; continue; }
      echo "== miri: build $((SECONDS - start)) s"
      start=$SECONDS
      skip=()
      [ "$full" = 1 ] || skip=("${miri_ci_skip[@]}")
      "${miri[@]}" -- --test-threads=1 "${miri_filters[@]}" "${skip[@]}" || status=1
      unset MIRIFLAGS PROPTEST_CASES
      echo "== miri: tests $((SECONDS - start)) s"
      ;;
  esac
done
[ "$status" = 0 ] && echo "check-tsan-miri: OK (${modes[*]})" || echo "check-tsan-miri: FAILED"
exit "$status"
