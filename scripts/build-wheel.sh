#!/usr/bin/env bash
# Builds the Python wheel users install without a Rust toolchain:
#   dist/mooncake_rs-<version>-py3-none-manylinux_2_28_x86_64.whl
# holding the `mooncake` package, libmooncake.so and the executables
# (mooncake_master, mooncake_http_metadata_server, transfer_engine_bench,
# mooncake_client, mooncake_p2p, mooncake_conductor; console scripts on PATH).
#
# 1. `cargo zigbuild --release --target x86_64-unknown-linux-gnu.2.28` builds the
#    library and executables against glibc 2.28 (zig from PyPI:
#    scripts/zigbuild-env.sh), debug info stripped;
# 2. every artifact is checked to need no glibc symbol newer than 2.28;
# 3. python/_build/mooncake_build.py packages them (MOONCAKE_ARTIFACT_DIR) with the
#    platform tag manylinux_2_28_x86_64;
# 4. `auditwheel show` (PyPI, in <target dir>/wheel-tools-venv) must find the wheel
#    consistent with that tag.
#
# usage: scripts/build-wheel.sh [--out DIR]   (default dist/)
# Prints the wheel's path as its last line. Exits 1 when a check fails, 0 after a
# `SKIP ...` line when zig cannot be installed from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

out="$root/dist"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    *) echo "build-wheel.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

max_glibc=2.28
platform=manylinux_2_28_x86_64
triple=x86_64-unknown-linux-gnu
target_dir="${CARGO_TARGET_DIR:-$root/target}"
artifacts="$target_dir/$triple/release"
binaries=(mooncake_master mooncake_http_metadata_server transfer_engine_bench
  mooncake_client mooncake_p2p mooncake_conductor)

# shellcheck source=scripts/zigbuild-env.sh
. scripts/zigbuild-env.sh
zigbuild_env "wheel build" || exit 0

start=$SECONDS
bin_args=()
for b in "${binaries[@]}"; do bin_args+=(--bin "$b"); done
# Line tables stay out of the wheel (the library is 5x smaller without them).
CARGO_PROFILE_RELEASE_STRIP=debuginfo cargo zigbuild --release --lib "${bin_args[@]}" \
  --target "$triple.$max_glibc"
echo "== build: $((SECONDS - start)) s ($artifacts)"

fail=0
for f in libmooncake.so "${binaries[@]}"; do
  glibc_at_most "$artifacts/$f" "$max_glibc" || fail=1
done
[ "$fail" = 0 ] || { echo "build-wheel: FAILED (glibc)"; exit 1; }

mkdir -p "$out"
wheel="$(MOONCAKE_ARTIFACT_DIR="$artifacts" MOONCAKE_WHEEL_PLATFORM="$platform" \
  python3 -c 'import sys; sys.path.insert(0, "python/_build"); import mooncake_build as b; print(b.build_wheel(sys.argv[1]))' "$out")"
path="$out/$wheel"
echo "== wheel: $path ($(du -h "$path" | cut -f1))"

tools="$target_dir/wheel-tools-venv"
if [ ! -x "$tools/bin/auditwheel" ]; then
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install -q auditwheel
fi
report="$("$tools/bin/auditwheel" show "$path" 2>&1)" || { echo "$report"; exit 1; }
echo "$report"
flat="${report//$'\n'/ }"
if [[ "$flat" != *"consistent with the following platform tag: \"$platform\""* ]]; then
  echo "build-wheel: FAILED (auditwheel does not confirm $platform)"
  exit 1
fi
echo "build-wheel: OK"
echo "$path"
