#!/usr/bin/env bash
# GPU checks on a machine with an NVIDIA GPU and its driver (libcuda.so.1): builds the
# library and runs the tests that need real device memory (tests/rust/gpu_real.rs:
# device pointers recognised, copies, TCP transfers staged through host memory on both
# sides, own-segment copies, RDMA registration of GPU memory when a NIC is present),
# plus the fake-GPU and no-RDMA suites as a sanity check. Nothing here needs CUDA at
# build time. Fails when no GPU is visible (a skipped GPU test is not a pass here).
#
#   scripts/device-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "device-check: no NVIDIA GPU visible (nvidia-smi -L)" >&2
  exit 1
fi
nvidia-smi -L
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cargo test --release --test gpu_real --test gpu_fake --test no_rdma -- --test-threads=1 --nocapture 2>&1 | tee "$out"
if grep -q '^SKIPPED .*no CUDA driver' "$out"; then
  echo "device-check: the CUDA driver did not load although a GPU is visible" >&2
  exit 1
fi
echo "device-check: passed"
