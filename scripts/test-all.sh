#!/usr/bin/env bash
# The test command (README "Tests"): every test, on a fresh clone, with no variable set.
#
#   scripts/test-all.sh [--under-load]
#
# --under-load: the cargo and Python suites run while busy processes (one per core,
# started here and killed by PID when those suites end or the run stops) keep every
# core occupied, as on a shared CI machine; the other stages run as usual.
#
#  1. scripts/test-tools.sh installs missing Debian packages (as root, with apt-get)
#     and the upstream 0.3.13 peer (scripts/upstream-peer.sh, from PyPI); a check whose
#     tools cannot be had is skipped with one `SKIP <check>: <why>` line, except under
#     CI (`CI` set), where only a MOONCAKE_SKIP_* the user set may skip a check and any
#     other skip, here or inside a stage, fails the run with its reason.
#  2. scripts/check-style.sh: `cargo fmt --check` and `cargo clippy --all-targets --
#     -D warnings` (the architecture test, layers and import cycles, runs in cargo test).
#  3. cargo test: Rust unit and integration tests (the Transfer Engine and store
#     suites twice: with the same-host path and with MC_DISABLE_SAME_HOST=1), the
#     C ABI tests under
#     AddressSanitizer, the header check, interop against the peer, packaging.
#  4. scripts/build-wheel.sh: the wheel (glibc 2.28, auditwheel-checked);
#     scripts/test-python.sh: the Python package's tests against that wheel installed
#     in a fresh venv with no Rust toolchain on PATH (in-tree without the wheel),
#     over sockets only against our library, and the same modules against upstream's
#     wheel; scripts/netns-chaos.sh, three
#     network-fault scenarios in network namespaces (root); scripts/p2p-go-interop.sh
#     (upstream's Go P2P store and ours on one etcd) where UPSTREAM_P2P_EXAMPLE names
#     upstream's build.
#  5. scripts/test-rdma-vm.sh: the RDMA suite (our engines, upstream interop and the
#     store) on real verbs in a throw-away SoftRoCE VM.
#  6. Release checks: scripts/check-sanitizers.sh (the library itself under ASan, and
#     valgrind) and scripts/check-glibc.sh (the glibc 2.28 build).
#  7. scripts/check-tsan-miri.sh: the concurrent suites under ThreadSanitizer, the pure
#     modules under Miri (nightly).
#  8. scripts/fuzz.sh: every fuzz target for 30 s (cargo-fuzz, nightly).
#  9. scripts/soak.sh --minutes 2: the verified workload with chaos, short.
#
# Knobs (all optional; README "Tests" lists them): MOONCAKE_SKIP_INTEROP,
# MOONCAKE_SKIP_SANITIZERS, MOONCAKE_SKIP_VALGRIND, MOONCAKE_SKIP_GLIBC,
# MOONCAKE_SKIP_PACKAGING, MOONCAKE_SKIP_PYTHON, MOONCAKE_SKIP_WHEEL, MOONCAKE_SKIP_C_TESTS,
# MOONCAKE_SKIP_RDMA_VM, MOONCAKE_SKIP_KV_SERVERS, MOONCAKE_SKIP_TSAN, MOONCAKE_SKIP_MIRI,
# MOONCAKE_SKIP_FUZZ, MOONCAKE_SKIP_SOAK, MOONCAKE_SKIP_NETNS, MOONCAKE_SKIP_STYLE,
# MOONCAKE_PEER_VENV, MOONCAKE_TEST_THREADS,
# UPSTREAM_P2P_EXAMPLE.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
under_load=
case "${1:-}" in
  --under-load) under_load=1 ;;
  "") ;;
  *) echo "usage: scripts/test-all.sh [--under-load]" >&2; exit 2 ;;
esac

# shellcheck source=scripts/test-tools.sh
source scripts/test-tools.sh
tools_install
tools_check

# Line tables only in the debug builds of this run (cargo test, Python, the sanitizers,
# the soak): panics and sanitizer reports still name file and line, and building takes
# about a quarter less time than with full debug information.
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
cargo build --lib --bins
log="$(mktemp)"
stage_log="$(mktemp)"
BUSY_PIDS=()
# stop_load: kills the busy processes of --under-load, by PID.
stop_load() {
  [ ${#BUSY_PIDS[@]} -gt 0 ] || return 0
  kill "${BUSY_PIDS[@]}" 2>/dev/null || true
  wait "${BUSY_PIDS[@]}" 2>/dev/null || true
  BUSY_PIDS=()
}
trap 'stop_load; rm -f "$log" "$stage_log"' EXIT
# start_load: one busy process per core (--under-load).
start_load() {
  local i
  for i in $(seq "$(nproc)"); do
    sh -c 'while :; do :; done' &
    BUSY_PIDS+=("$!")
  done
  echo "== under load: ${#BUSY_PIDS[@]} busy processes (PIDs ${BUSY_PIDS[*]}) occupy the cores"
}
status=0
STAGES=()
FAILED_STAGES=()

# stage NAME COMMAND...: runs one stage with its output in the log, and records its
# duration and, when it fails, its name and exit code (125: the stage could not run
# here, which its caller reports as a skip). A `SKIP <check>: <why>` line the stage
# printed goes through skip_check (a failure under CI). Returns the command's code.
stage() {
  local name="$1" begun=$SECONDS code=0 line
  shift
  "$@" 2>&1 | tee "$stage_log" || code=$?
  cat "$stage_log" >>"$log"
  while IFS= read -r line; do
    line="${line#SKIP }"
    skip_check "${line%%: *}" "${line#*: }" >/dev/null
  done < <(grep -E '^SKIP [^:]+: ' "$stage_log" || true)
  local result="exit $code"
  [ "$code" != 0 ] || result=ok
  [ "$code" != 125 ] || result="could not run here (exit 125)"
  STAGES+=("$(printf '%-28s %5d s  %s' "$name" $((SECONDS - begun)) "$result")")
  if [ "$code" != 0 ] && [ "$code" != 125 ]; then
    status=$code
    FAILED_STAGES+=("FAILED $name: exited $code (its failures are above)")
  fi
  return "$code"
}

if [ -z "${MOONCAKE_SKIP_STYLE:-}" ]; then
  stage "style (fmt, clippy)" bash scripts/check-style.sh || true
fi
threads="${MOONCAKE_TEST_THREADS:-2}"
[ -z "$under_load" ] || start_load
stage "cargo test" cargo test --no-fail-fast -- --test-threads="$threads" || true
# Engines on one host copy directly between processes by default; the Transfer
# Engine and store suites once more over sockets only.
echo "== the Transfer Engine and store suites with MC_DISABLE_SAME_HOST=1"
stage "cargo test, sockets only" env MC_DISABLE_SAME_HOST=1 cargo test --no-fail-fast \
  --test te_loopback --test te_metadata --test metadata_backends --test store_client \
  --test store_faults --test store_pressure -- --test-threads="$threads" || true
if [ -z "${MOONCAKE_SKIP_PYTHON:-}" ]; then
  # The wheel users install (glibc 2.28, no Rust needed): its Python tests run in a
  # fresh venv without cargo on PATH, in the python stage.
  if [ -z "${MOONCAKE_SKIP_WHEEL:-}" ] && stage "wheel" bash scripts/build-wheel.sh; then
    wheel="$(tail -1 "$stage_log")"
    if [ "${wheel%.whl}" != "$wheel" ] && [ -f "$wheel" ]; then
      export MOONCAKE_WHEEL="$wheel"
    fi
  fi
  stage "python" bash scripts/test-python.sh || true
fi
stop_load
if [ -z "${MOONCAKE_SKIP_NETNS:-}" ]; then
  # Three network-fault scenarios on ours (the campaign: scripts/netns-chaos.sh
  # --minutes N): a paused HA leader, a leader cut off from etcd, delay on every link.
  stage "network faults" bash scripts/netns-chaos.sh --impl ours --profile debug \
    --seconds 20 leader-paused leader-etcd-cut delay || true
fi
# Upstream's Go P2P store and ours on one etcd, both ways. It needs upstream's example
# program built from upstream's source, which no registry a fresh machine reaches
# carries: it runs where UPSTREAM_P2P_EXAMPLE names that build, and is otherwise listed
# as not run (the payload bytes that program writes are checked in cargo test:
# src/p2p/payload.rs).
NOT_RUN=()
if [ -n "${UPSTREAM_P2P_EXAMPLE:-}" ]; then
  stage "p2p go interop" bash scripts/p2p-go-interop.sh || true
else
  NOT_RUN+=("NOT RUN p2p go interop: UPSTREAM_P2P_EXAMPLE names no build of upstream's Go p2p-store-example (upstream's source is on no registry this machine reaches; scripts/p2p-go-interop.sh)")
fi
if [ -z "${MOONCAKE_SKIP_RDMA_VM:-}" ]; then
  vm=0
  # Every direction over real verbs, with P2P names and with our HTTP metadata
  # server, the store's data path with upstream's clients, and the P2P Store. On demand
  # (scripts/test-rdma-vm.sh with no argument, 13 minutes): upstream's HTTP metadata
  # server too, the store's lease, death, restart and eviction cases (they run over
  # TCP in cargo test) and store_interop_mixed (mixed clusters over RDMA).
  stage "rdma vm" bash scripts/test-rdma-vm.sh rdma_real interop_p2p interop_http:http_ours \
    store_interop:basic_ops,replication p2p_rdma || vm=$?
  if [ "$vm" = 125 ]; then
    skip_check "RDMA suite" "the SoftRoCE VM could not boot here (see above)"
  fi
fi
if [ -z "${MOONCAKE_SKIP_SANITIZERS:-}" ]; then
  modes=(asan)
  [ -n "${MOONCAKE_SKIP_VALGRIND:-}" ] || modes+=(valgrind)
  stage "asan, valgrind" bash scripts/check-sanitizers.sh "${modes[@]}" || true
fi
if [ -z "${MOONCAKE_SKIP_GLIBC:-}" ]; then
  stage "glibc 2.28" bash scripts/check-glibc.sh || true
fi
checkers=()
[ -n "${MOONCAKE_SKIP_TSAN:-}" ] || checkers+=(tsan)
[ -n "${MOONCAKE_SKIP_MIRI:-}" ] || checkers+=(miri)
if [ ${#checkers[@]} -gt 0 ]; then
  stage "${checkers[*]}" bash scripts/check-tsan-miri.sh "${checkers[@]}" || true
fi
if [ -z "${MOONCAKE_SKIP_FUZZ:-}" ]; then
  stage "fuzz" bash scripts/fuzz.sh || true
fi
if [ -z "${MOONCAKE_SKIP_SOAK:-}" ]; then
  # The debug build `cargo test` made; the soak checks correctness, not speed.
  stage "soak" bash scripts/soak.sh --minutes 2 --profile debug || true
fi

count() {
  { grep -E '^test result: |^[0-9]+ (passed|failed|skipped|error)' "$log" || true; } |
    grep -oE "[0-9]+ $1" | awk '{s+=$1} END {print s+0}'
}
echo
echo "stage                        duration  result"
for line in "${STAGES[@]}"; do echo "$line"; done
echo
for line in "${TOOLS_SKIPPED[@]}" "${NOT_RUN[@]}" "${SKIPS_REFUSED[@]}" "${FAILED_STAGES[@]}"; do echo "$line"; done
[ ${#SKIPS_REFUSED[@]} = 0 ] || [ "$status" != 0 ] || status=1
echo "summary: $(count passed) passed, $(count failed) failed, ${#FAILED_STAGES[@]} stage(s) failed, ${#SKIPS_REFUSED[@]} skip(s) refused under CI ($((SECONDS - started)) s)"
exit "$status"
