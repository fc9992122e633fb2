#!/usr/bin/env bash
# Runs every test: Rust unit and integration tests, the C ABI tests under
# AddressSanitizer, the header check, interop against the upstream 0.3.13 peer, and the
# Python package tests (against our library, and the same modules against upstream's
# wheel to prove the API matches), then the release checks (scripts/check-sanitizers.sh,
# scripts/check-glibc.sh; MOONCAKE_SKIP_SANITIZERS=1 / MOONCAKE_SKIP_GLIBC=1 skip them).
# The peer is installed on first use (../shared/peer/install-upstream.sh); set
# MOONCAKE_PEER_VENV to use an existing one, or MOONCAKE_SKIP_INTEROP=1 to skip interop.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${MOONCAKE_SKIP_INTEROP:-}" ] && [ -z "${MOONCAKE_PEER_VENV:-}" ]; then
  shared="${MOONCAKE_SHARED:-../shared}"
  if [ ! -f "$shared/peer/install-upstream.sh" ]; then
    echo "upstream peer installer not found at $shared/peer (set MOONCAKE_SHARED)" >&2
    exit 1
  fi
  MOONCAKE_PEER_VENV="$(bash "$shared/peer/install-upstream.sh" | tail -1)"
  export MOONCAKE_PEER_VENV
fi

cargo build --lib --bins
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --no-fail-fast -- --test-threads="${MOONCAKE_TEST_THREADS:-2}" 2>&1 | tee "$log" || status=$?
bash scripts/test-python.sh 2>&1 | tee -a "$log" || status=$?
# Release checks: the C tests with the Rust library under AddressSanitizer and under
# valgrind, and the glibc 2.28 build (README, "Tests").
if [ -z "${MOONCAKE_SKIP_SANITIZERS:-}" ]; then
  bash scripts/check-sanitizers.sh 2>&1 | tee -a "$log" || status=$?
fi
if [ -z "${MOONCAKE_SKIP_GLIBC:-}" ]; then
  bash scripts/check-glibc.sh 2>&1 | tee -a "$log" || status=$?
fi

count() {
  { grep -E '^test result: |^[0-9]+ (passed|failed|skipped|error)' "$log" || true; } |
    grep -oE "[0-9]+ $1" | awk '{s+=$1} END {print s+0}'
}
echo
echo "summary: $(count passed) passed, $(count failed) failed"
exit "$status"
