#!/usr/bin/env bash
# The style gate of the test command: `cargo fmt --check` (the crate and fuzz/) and
# `cargo clippy --all-targets -- -D warnings` on stable. A missing rustfmt or clippy is
# added through rustup; where neither the component nor rustup is there, the check is
# skipped with one `SKIP style: <why>` line (a failure under CI).
#
#   scripts/check-style.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# has_component NAME: succeeds when `cargo NAME` runs, adding it through rustup if needed.
has_component() {
  local name="$1" component="$2"
  cargo "$name" --version >/dev/null 2>&1 && return 0
  command -v rustup >/dev/null || return 1
  rustup component add "$component" >/dev/null 2>&1 || return 1
  cargo "$name" --version >/dev/null 2>&1
}

if ! has_component fmt rustfmt || ! has_component clippy clippy; then
  echo "SKIP style: rustfmt or clippy is missing and rustup could not add it (rustup component add rustfmt clippy)"
  exit 0
fi
echo "== cargo fmt --check"
cargo fmt --all --check
(cd fuzz && cargo fmt --all --check)
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
echo "style: fmt and clippy clean"
