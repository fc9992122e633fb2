#!/usr/bin/env bash
# Runs the Python package tests (python/tests) against this repository's library (the
# engine and store modules a second time with MC_DISABLE_SAME_HOST=1), then
# the same modules against upstream's wheel (proving the mooncake.engine and
# mooncake.store APIs match). The upstream run needs the peer venv:
# $MOONCAKE_PEER_VENV, else ~/.cache/mooncake-peer/venv; without it that run is
# skipped with a `SKIP` line (which fails test-all.sh under CI), or not run at all when
# MOONCAKE_SKIP_INTEROP is set.
# pytest (and pyzmq, msgpack) are installed into a venv under target/ if python3 lacks them.
# torch, safetensors and numpy (the tensor tests, test_store_tensor.py) are installed once
# into $MOONCAKE_TORCH_SITE, else ~/.cache/mooncake-torch/site (about 5 GB: PyPI's torch
# brings its CUDA libraries, unused here); MOONCAKE_SKIP_TORCH=1 skips that install (the
# tensor tests then skip), and so does a failed install outside CI (inside CI it fails).
#
# With MOONCAKE_WHEEL naming a wheel (scripts/build-wheel.sh), the first run tests that
# wheel instead, installed into a fresh venv with no cargo or rustc on PATH.
#
#   scripts/test-python.sh [--full]   (--full: upstream's wheel as the SSD-tier owner too)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --lib --bins

# pyzmq and msgpack are the KV-event subscriber of test_kv_events (skipped without them).
py=python3
if ! "$py" -c 'import pytest, zmq, msgpack' 2>/dev/null; then
  venv=target/py-test-venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -c 'import pytest, zmq, msgpack' 2>/dev/null ||
    "$venv/bin/python" -m pip install -q pytest pyzmq msgpack ||
    "$venv/bin/python" -m pip install -q pytest
  py="$venv/bin/python"
fi

status=0
torch_site="${MOONCAKE_TORCH_SITE:-$HOME/.cache/mooncake-torch/site}"
has_torch() { PYTHONPATH="$torch_site" "$py" -c 'import torch, safetensors, numpy' 2>/dev/null; }
if [ -n "${MOONCAKE_SKIP_TORCH:-}" ]; then
  echo "== tensor tests: torch not installed (MOONCAKE_SKIP_TORCH is set)"
  torch_site=""
elif ! has_torch; then
  echo "== installing torch, safetensors, numpy into $torch_site"
  rm -rf "$torch_site.part"
  if "$py" -m pip install -q --no-cache-dir --target "$torch_site.part" torch safetensors numpy; then
    rm -rf "$torch_site" && mv "$torch_site.part" "$torch_site"
  fi
  if ! has_torch; then
    echo "SKIP tensor tests: torch could not be installed into $torch_site"
    [ -z "${CI:-}" ] || status=1
    torch_site=""
  fi
fi
export MOONCAKE_TORCH_SITE="$torch_site"

wheel="${MOONCAKE_WHEEL:-}"
if [ -n "$wheel" ]; then
  # The wheel as a user installs it: a fresh venv, and no Rust toolchain on PATH.
  echo "== python tests: mooncake-rs wheel $(basename "$wheel") in a fresh venv, no cargo on PATH"
  venv="$PWD/target/wheel-test-venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "$wheel" pytest pyzmq msgpack ||
    "$venv/bin/python" -m pip install -q "$wheel" pytest
  no_rust_path="$(printf '%s' "$PATH" | tr ':' '\n' |
    while read -r dir; do [ -e "$dir/cargo" ] || [ -e "$dir/rustc" ] || printf '%s:' "$dir"; done)"
  no_rust_path="$venv/bin:${no_rust_path%:}"
  if PATH="$no_rust_path" command -v cargo >/dev/null; then
    echo "FAILED: cargo is still on PATH for the wheel's tests"
    status=1
  fi
  env -u PYTHONPATH PATH="$no_rust_path" MOONCAKE_PY_IMPL=ours MOONCAKE_PY_INSTALLED=1 \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests || status=$?
else
  echo "== python tests: mooncake-rs"
  env -u PYTHONPATH MOONCAKE_PY_IMPL=ours "$py" -m pytest -q -p no:cacheprovider python/tests || status=$?
fi
# The engine and store suites once more over sockets only (same-host path disabled).
echo "== python tests: mooncake-rs, MC_DISABLE_SAME_HOST=1"
env -u PYTHONPATH MOONCAKE_PY_IMPL=ours MC_DISABLE_SAME_HOST=1 "$py" -m pytest -q -p no:cacheprovider \
  python/tests/test_engine.py python/tests/test_store.py python/tests/test_store_extensions.py \
  python/tests/test_dummy_client.py python/tests/test_serving_integrations.py python/tests/test_store_tensor.py \
  python/tests/test_store_parallel.py python/tests/test_store_segments.py || status=$?

peer="${MOONCAKE_PEER_VENV:-$HOME/.cache/mooncake-peer/venv}"
if [ -x "$peer/bin/python" ]; then
  "$peer/bin/python" -c 'import pytest' 2>/dev/null || "$peer/bin/python" -m pip install -q pytest
  # test_ssd_offload with upstream's owner (90 s of its heartbeats) runs on demand
  # (--full); cargo test's store_interop_offload checks upstream's owner on our master.
  skip=(--ignore=python/tests/test_ssd_offload.py)
  [ "${1:-}" != --full ] || skip=()
  echo "== python tests: upstream wheel ($peer)"
  env -u PYTHONPATH MOONCAKE_PY_IMPL=upstream MOONCAKE_PEER_VENV="$peer" \
    "$peer/bin/python" -m pytest -q -p no:cacheprovider "${skip[@]}" python/tests || status=$?
elif [ -n "${MOONCAKE_SKIP_INTEROP:-}" ]; then
  echo "== python tests: upstream wheel not run (MOONCAKE_SKIP_INTEROP is set)"
else
  echo "SKIP python tests against upstream's wheel: no peer venv at $peer (scripts/upstream-peer.sh)"
fi
exit "$status"
