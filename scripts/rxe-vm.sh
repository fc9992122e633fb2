#!/usr/bin/env bash
# Runs a command in a throw-away qemu VM that has real RDMA: SoftRoCE (`rdma_rxe`) with
# one RoCE v2 device, rxe0, on the VM's loopback (GID index 1 is ::ffff:127.0.0.1).
#
#   scripts/rxe-vm.sh [--rw DIR]... [--mem MiB] [--cpus N] [--timeout S] -- CMD [ARGS...]
#
# The VM boots this machine's own kernel under TCG (no KVM needed) from a small
# busybox initramfs, mounts this machine's root file system read-only over 9p and
# chroots into it: binaries, libraries, venvs and build trees from here run inside
# unchanged. /tmp inside is a fresh tmpfs (the current directory is mounted through when
# it lies under /tmp); `--rw DIR` (repeatable) mounts DIR writable so results come back,
# and makes a DIR under /tmp visible. CMD runs as root in the current directory with the caller's
# environment; one argument is run as a bash script line. The VM has no network besides
# its loopback. Exit status: CMD's; 124 when the VM timed out; 125 when it could not
# boot (a missing package is named on stderr).
#
# Packages (Debian 12): qemu-system-x86 linux-image-amd64 busybox-static kmod cpio
# rdma-core ibverbs-providers iproute2 (ibverbs-utils and perftest for ibv_devinfo and
# ib_write_bw); `--install` installs them with apt-get (as root) and exits; `--missing`
# prints the ones that are missing (nothing when the VM can run) and exits.
#
# SoftRoCE under TCG moves tens of MB/s: use the VM for correctness, and for ratios
# measured in the same VM run only.
set -euo pipefail

PACKAGES=(qemu-system-x86 linux-image-amd64 busybox-static kmod cpio rdma-core
  ibverbs-providers iproute2 ibverbs-utils perftest)

usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; }

# The packages whose files are missing.
missing_packages() {
  local pair
  for pair in qemu-system-x86_64:qemu-system-x86 busybox:busybox-static modprobe:kmod \
    cpio:cpio rdma:iproute2 ibv_devinfo:ibverbs-utils ib_write_bw:perftest; do
    command -v "${pair%%:*}" >/dev/null || echo "${pair#*:}"
  done
  ls /boot/vmlinuz-* >/dev/null 2>&1 || echo linux-image-amd64
  ls /usr/lib/*/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 || echo ibverbs-providers
  # The cache read whole first: `ldconfig -p | grep -q` under pipefail fails whenever
  # grep exits at its first match and ldconfig dies of SIGPIPE.
  local cache
  cache="$(ldconfig -p 2>/dev/null || true)"
  grep -qF 'libibverbs.so.1 ' <<<"$cache" || echo rdma-core
}

rw=() mem=2048 cpus=2 timeout_s=600
while [ $# -gt 0 ]; do
  case "$1" in
    --install)
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq && apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
      exit $?
      ;;
    --missing) missing_packages | sort -u | tr '\n' ' ' | sed 's/ $//'; exit 0 ;;
    --rw) rw+=("$(realpath "$2")"); shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { usage >&2; exit 2; }
# /tmp inside is a fresh tmpfs: a working directory under /tmp is mounted writable.
case "$PWD" in /tmp/*) rw+=("$PWD") ;; esac

missing=()
for tool in qemu-system-x86_64 busybox modprobe cpio rdma; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
kernel_version=$(ls /lib/modules 2>/dev/null | sort -V | tail -n1 || true)
kernel=/boot/vmlinuz-$kernel_version
[ -n "$kernel_version" ] && [ -r "$kernel" ] || missing+=("a kernel under /boot")
if [ ${#missing[@]} -gt 0 ]; then
  echo "rxe-vm: missing ${missing[*]} (scripts/rxe-vm.sh --install)" >&2
  exit 125
fi

work=$(mktemp -d -t rxe-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/initramfs
mkdir -p "$root"/{bin,modules,host,proc,sys,dev}
cp "$(command -v busybox)" "$root/bin/busybox"

# Kernel modules, each after the modules it depends on.
: >"$root/modules/order"
for module in virtio_pci 9pnet_virtio 9p crc32_generic ib_uverbs rdma_rxe; do
  modprobe -S "$kernel_version" --show-depends "$module" 2>/dev/null |
    awk '$1 == "insmod" { print $2 }' | while read -r path; do
      file=$(basename "$path")
      if ! grep -qx "$file" "$root/modules/order"; then
        cp "$path" "$root/modules/$file"
        echo "$file" >>"$root/modules/order"
      fi
    done
done

# What to run, where, with which environment, and which folders are writable.
if [ $# -eq 1 ]; then printf '%s' "$1" >"$root/command"; else printf '%q ' "$@" >"$root/command"; fi
pwd >"$root/workdir"
env -u TMPDIR -u LD_PRELOAD -0 >"$root/environment" || true
printf '%s\n' "${rw[@]+"${rw[@]}"}" >"$root/writable"

cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
while read -r ko; do
  case "$ko" in
    *.ko.xz) xz -dc "/modules/$ko" >/module.ko && insmod /module.ko ;;
    *.ko.zst) zstd -dc "/modules/$ko" >/module.ko 2>/dev/null && insmod /module.ko ;;
    *) insmod "/modules/$ko" ;;
  esac 2>/dev/null
done </modules/order
# The host's root, read-only; multidevs=remap keeps inode numbers of /proc, /sys apart.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose hostroot /host ||
  { echo "RXE-VM-NO-ROOT"; poweroff -f; }
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
mount -t tmpfs tmp /host/tmp
mount -t tmpfs run /host/run 2>/dev/null
mkdir -p /host/dev/shm 2>/dev/null && mount -t tmpfs shm /host/dev/shm 2>/dev/null
n=0
while read -r dir; do
  [ -n "$dir" ] || continue
  case "$dir" in /tmp/*) mkdir -p "/host$dir" ;; esac
  mount -t 9p -o trans=virtio,version=9p2000.L,rw,cache=none "rw$n" "/host$dir" ||
    echo "rxe-vm: cannot mount $dir writable"
  n=$((n + 1))
done </writable
chroot /host ip link set lo up
chroot /host rdma link add rxe0 type rxe netdev lo || echo "rxe-vm: rdma link add failed"
cp /command /workdir /environment /host/tmp/
echo "RXE-VM-START"
chroot /host /bin/bash -c 'cd "$(cat /tmp/workdir)" &&
  while IFS= read -r -d "" kv; do export "$kv" 2>/dev/null; done </tmp/environment;
  export TMPDIR=/tmp; eval "$(cat /tmp/command)"'
echo "RXE-VM-STATUS=$?"
sync
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1 >"$work/initramfs.gz")

shares=(-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
  -device "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot")
n=0
for dir in "${rw[@]+"${rw[@]}"}"; do
  shares+=(-fsdev "local,id=rw$n,path=$dir,security_model=none,multidevs=remap"
    -device "virtio-9p-pci,fsdev=rw$n,mount_tag=rw$n")
  n=$((n + 1))
done

set +e
timeout "$timeout_s" qemu-system-x86_64 -accel tcg,thread=multi -m "$mem" -smp "$cpus" \
  -kernel "$kernel" -initrd "$work/initramfs.gz" -nographic -no-reboot -nic none \
  "${shares[@]}" -append "console=ttyS0 panic=-1 rdinit=/init loglevel=3 quiet" \
  </dev/null 2>&1 | tr -d '\r' | sed -n '/RXE-VM-START/,$p' | sed '1d' >"$work/output"
qemu_status=${PIPESTATUS[0]}
set -e
status=$(sed -n 's/^.*RXE-VM-STATUS=\([0-9]*\).*$/\1/p' "$work/output" | tail -n1)
grep -v -e 'RXE-VM-STATUS=' -e 'reboot: Power down' "$work/output" || true
[ -z "$status" ] || exit "$status"
if [ "$qemu_status" = 124 ]; then
  echo "rxe-vm: timed out after ${timeout_s}s" >&2
  exit 124
fi
echo "rxe-vm: the VM did not reach the command (qemu exit $qemu_status)" >&2
exit 125
