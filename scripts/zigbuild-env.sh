# Sourced by scripts/check-glibc.sh and scripts/build-wheel.sh: makes
# `cargo zigbuild` work, for builds against an old glibc (2.28).
#
# zig and cargo-zigbuild come from PyPI (ziglang, cargo-zigbuild), installed into
# <target dir>/zigbuild-venv on first use unless `cargo zigbuild` already works. The
# host target's std is used, so no `rustup target add` is needed.
#
# zigbuild_env: puts the tools on PATH; returns 1 (after a `SKIP ...` line naming
# $1, the check) when they cannot be installed.

# Versions known to work; override to try others.
ZIGLANG_VERSION="${ZIGLANG_VERSION:-0.17.1}"
CARGO_ZIGBUILD_VERSION="${CARGO_ZIGBUILD_VERSION:-0.24.1}"

_have_zig() { command -v zig >/dev/null || python3 -m ziglang version >/dev/null 2>&1; }

zigbuild_env() {
  local check="$1" venv
  if command -v cargo-zigbuild >/dev/null && _have_zig; then
    return 0
  fi
  venv="${CARGO_TARGET_DIR:-$PWD/target}/zigbuild-venv"
  if [ ! -x "$venv/bin/cargo-zigbuild" ]; then
    echo "== installing ziglang $ZIGLANG_VERSION and cargo-zigbuild $CARGO_ZIGBUILD_VERSION into $venv"
    if ! { python3 -m venv "$venv" && "$venv/bin/python" -m pip install -q \
      "ziglang==$ZIGLANG_VERSION" "cargo-zigbuild==$CARGO_ZIGBUILD_VERSION"; }; then
      rm -rf "$venv"
      echo "SKIP $check: ziglang/cargo-zigbuild could not be installed from PyPI"
      return 1
    fi
  fi
  # cargo-zigbuild finds zig through `python3 -m ziglang` with the venv's python first.
  export PATH="$venv/bin:$PATH"
  echo "== $(cargo-zigbuild --version | sed -n 1p), zig $(zig version 2>/dev/null || python3 -m ziglang version)"
}

# newest_glibc FILE: the newest GLIBC_x.y symbol version FILE needs.
newest_glibc() {
  objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1
}

# glibc_at_most FILE MAX: whether FILE needs no glibc newer than MAX (lists the
# symbols that are newer when it does).
glibc_at_most() {
  local newest
  newest="$(newest_glibc "$1")"
  if [ "$(printf '%s\n%s\n' "$newest" "$2" | sort -V | tail -1)" != "$2" ]; then
    echo "FAIL: $1 needs GLIBC_$newest, newer than $2:"
    objdump -T "$1" | grep -E "GLIBC_($(echo "$newest" | sed 's/\./\\./g'))" | sed -n '1,20p' || true
    return 1
  fi
  echo "== $(basename "$1"): newest glibc symbol version GLIBC_$newest"
}
