#!/usr/bin/env bash
# Mooncake PG on CPU ("mooncake-cpu") against torch.distributed's Gloo, in one run on
# this host: all-reduce and all-gather latency and bus bandwidth from 8 B to 64 MiB for
# 2, 4 and 8 ranks, and how long the survivors take to go on after one rank is killed
# (bench/pg_bench.py does the work; this script provides torch and our library).
#
# torch (PyPI's, used on CPU) comes from $MOONCAKE_TORCH_SITE, else
# ~/.cache/mooncake-torch/site, installed there on first use as scripts/test-python.sh
# does (about 5 GB).
#
# Environment:
#   RANKS    rank counts (default 2,4,8)
#   SIZES    message sizes in bytes (default 8,1024,65536,1048576,16777216,67108864)
#   PG_SECONDS  time per size and backend, per repetition (default 0.5)
#   CARGO    cargo binary (default cargo)
#
# Usage: bench/pg_bench.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
RANKS=${RANKS:-2,4,8}
SIZES=${SIZES:-8,1024,65536,1048576,16777216,67108864}
SECONDS_PER=${PG_SECONDS:-0.5}

echo "== building the library (release)"
${CARGO:-cargo} build --release --lib

site="${MOONCAKE_TORCH_SITE:-$HOME/.cache/mooncake-torch/site}"
if ! PYTHONPATH="$site" python3 -c 'import torch, numpy' 2>/dev/null; then
  echo "== installing torch into $site"
  rm -rf "$site.part"
  python3 -m pip install -q --no-cache-dir --target "$site.part" torch safetensors numpy
  rm -rf "$site" && mv "$site.part" "$site"
fi

echo "== $(nproc) CPUs; ranks $RANKS; torch $(PYTHONPATH="$site" python3 -c 'import torch; print(torch.__version__)')"
PYTHONPATH="$ROOT/python:$site" MOONCAKE_LIBRARY="$ROOT/target/release/libmooncake.so" \
  python3 bench/pg_bench.py --ranks "$RANKS" --sizes "$SIZES" --seconds "$SECONDS_PER"
