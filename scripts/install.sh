#!/usr/bin/env bash
# Builds libmooncake with cargo and installs it under a prefix, without CMake. The
# layout is the same as `cmake --install` (CMakeLists.txt) and both use the templates
# in cmake/:
#
#   lib/libmooncake.so.<version>           the library (SONAME libmooncake.so.0)
#   lib/libmooncake.so.0                   -> libmooncake.so.<version>
#   lib/libmooncake.so, libtransfer_engine.so, libmooncake_store.so  -> libmooncake.so.0
#   lib/libmooncake.a
#   lib/pkgconfig/mooncake.pc
#   lib/cmake/Mooncake/MooncakeConfig.cmake, MooncakeConfigVersion.cmake
#   include/mooncake/{transfer_engine_c.h,store_c.h,mooncake_ext.h}
#   include/mooncake/{transfer_engine.h,transfer_metadata.h,memory_location.h,
#       transport/transport.h,common/base/status.h}  (upstream's C++ API, header-only)
#   include/mooncake/tent/transfer_engine.h           (upstream's TENT C API)
#   include/{transfer_engine_c.h,store_c.h}          (upstream's names, copies)
#   bin/mooncake_master, transfer_engine_bench, mooncake_http_metadata_server, mooncake_client,
#       mooncake_p2p, store_bench (when it builds)
#
# usage: scripts/install.sh --prefix DIR [--profile release|debug|NAME] [--glibc-2.28]
#                           [--no-build] [--no-bins] [--target-dir DIR]
#   --profile     cargo profile to build and install (default release)
#   --glibc-2.28  build with `cargo zigbuild --target x86_64-unknown-linux-gnu.2.28`
#                 (pip install ziglang cargo-zigbuild), for hosts with glibc 2.28+
#   --no-build    install what is already built
#   --no-bins     library, headers and package files only
#   --target-dir  cargo's target directory (default $CARGO_TARGET_DIR or ./target)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# Upstream's C++ Transfer Engine API: header-only, over the C ABI.
CPP_HEADERS="transfer_engine.h transfer_metadata.h memory_location.h transport/transport.h common/base/status.h"
# Upstream's TENT C API.
TENT_HEADERS="tent/transfer_engine.h"

prefix="" profile=release glibc=0 build=1 bins=1 store_bench=1
target_dir="${CARGO_TARGET_DIR:-$root/target}"
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#*=}"; shift ;;
    --profile) profile="$2"; shift 2 ;;
    --profile=*) profile="${1#*=}"; shift ;;
    --target-dir) target_dir="$2"; shift 2 ;;
    --target-dir=*) target_dir="${1#*=}"; shift ;;
    --glibc-2.28) glibc=1; shift ;;
    --no-build) build=0; shift ;;
    --no-bins) bins=0; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$prefix" ] || { echo "install.sh: --prefix DIR is required" >&2; exit 2; }
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"

version="$(sed -n 's/^version *= *"\([0-9]*\.[0-9]*\.[0-9]*\)".*/\1/p' "$root/Cargo.toml" | sed -n 1p)"
[ -n "$version" ] || { echo "install.sh: no version in Cargo.toml" >&2; exit 1; }
# Must match build.rs (SONAME) and CMakeLists.txt.
soname=libmooncake.so.0
libfile="libmooncake.so.$version"
static_deps="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
static_deps_cmake="gcc_s;util;rt;pthread;m;dl;c"
required_bins=(mooncake_master transfer_engine_bench mooncake_http_metadata_server mooncake_client mooncake_p2p)

case "$profile" in
  debug|dev) profile_args=(--profile dev); profile_dir=debug ;;
  *) profile_args=(--profile "$profile"); profile_dir="$profile" ;;
esac
if [ "$glibc" = 1 ]; then
  build_cmd=(zigbuild --target x86_64-unknown-linux-gnu.2.28)
  artifacts="$target_dir/x86_64-unknown-linux-gnu/$profile_dir"
else
  build_cmd=(build)
  artifacts="$target_dir/$profile_dir"
fi

if [ "$build" = 1 ]; then
  cargo="${CARGO:-cargo}"
  bin_args=()
  if [ "$bins" = 1 ]; then
    for b in "${required_bins[@]}"; do bin_args+=(--bin "$b"); done
  fi
  (cd "$root" && CARGO_TARGET_DIR="$target_dir" \
    "$cargo" "${build_cmd[@]}" "${profile_args[@]}" --lib "${bin_args[@]}")
  if [ "$bins" = 1 ] && [ -f "$root/src/bin/store_bench.rs" ]; then
    (cd "$root" && CARGO_TARGET_DIR="$target_dir" \
      "$cargo" "${build_cmd[@]}" "${profile_args[@]}" --bin store_bench) || {
      store_bench=0
      echo "install.sh: warning: store_bench did not build; not installing it" >&2
    }
  fi
fi

for f in libmooncake.so libmooncake.a; do
  [ -f "$artifacts/$f" ] || { echo "install.sh: $artifacts/$f is missing" >&2; exit 1; }
done

say() { echo "-- Installing: $*"; }
# Copies to a temporary name, then renames: a running process keeps its old mapping.
put() { # put SRC DEST MODE
  local tmp
  tmp="$(dirname "$2")/.$(basename "$2").tmp$$"
  install -m "$3" "$1" "$tmp"
  mv -f "$tmp" "$2"
  say "$2"
}
link() { # link TARGET NAME
  ln -sfn "$1" "$2"
  say "$2 -> $1"
}
subst() { # subst TEMPLATE DEST
  sed -e "s|@MOONCAKE_VERSION@|$version|g" \
      -e "s|@MOONCAKE_SONAME@|$soname|g" \
      -e "s|@MOONCAKE_LIBFILE@|$libfile|g" \
      -e "s|@MOONCAKE_PREFIX@|$prefix|g" \
      -e "s|@MOONCAKE_STATIC_DEPS@|$static_deps|g" \
      -e "s|@MOONCAKE_STATIC_DEPS_CMAKE@|$static_deps_cmake|g" \
      "$1" >"$2.tmp$$"
  mv -f "$2.tmp$$" "$2"
  say "$2"
}

mkdir -p "$prefix/lib/pkgconfig" "$prefix/lib/cmake/Mooncake" "$prefix/include/mooncake"
put "$artifacts/libmooncake.so" "$prefix/lib/$libfile" 755
link "$libfile" "$prefix/lib/$soname"
for name in libmooncake.so libtransfer_engine.so libmooncake_store.so; do
  link "$soname" "$prefix/lib/$name"
done
put "$artifacts/libmooncake.a" "$prefix/lib/libmooncake.a" 644

mkdir -p "$prefix/include/mooncake/transport" "$prefix/include/mooncake/common/base" \
  "$prefix/include/mooncake/tent"
for h in transfer_engine_c.h store_c.h mooncake_ext.h $CPP_HEADERS $TENT_HEADERS; do
  put "$root/include/mooncake/$h" "$prefix/include/mooncake/$h" 644
done
for h in transfer_engine_c.h store_c.h; do
  put "$root/include/mooncake/$h" "$prefix/include/$h" 644
done

subst "$root/cmake/mooncake.pc.in" "$prefix/lib/pkgconfig/mooncake.pc"
subst "$root/cmake/MooncakeConfig.cmake.in" "$prefix/lib/cmake/Mooncake/MooncakeConfig.cmake"
subst "$root/cmake/MooncakeConfigVersion.cmake.in" \
  "$prefix/lib/cmake/Mooncake/MooncakeConfigVersion.cmake"

if [ "$bins" = 1 ]; then
  mkdir -p "$prefix/bin"
  for b in "${required_bins[@]}"; do
    [ -f "$artifacts/$b" ] || { echo "install.sh: $artifacts/$b is missing" >&2; exit 1; }
    put "$artifacts/$b" "$prefix/bin/$b" 755
  done
  if [ "$store_bench" = 1 ] && [ -f "$artifacts/store_bench" ]; then
    put "$artifacts/store_bench" "$prefix/bin/store_bench" 755
  fi
fi
note=""
[ "$glibc" = 1 ] && note=", glibc 2.28 target"
echo "installed mooncake $version ($profile_dir$note) in $prefix"
