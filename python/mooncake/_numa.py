"""``mooncake.store.bind_to_numa_node``: runs the calling thread on one NUMA node's
CPUs and prefers that node for its future allocations, as upstream does with libnuma
(``numa_run_on_node`` + ``numa_set_preferred``), without libnuma: the CPU list comes
from sysfs and the memory policy is set with the ``set_mempolicy`` system call.
Like upstream it never raises for a bad node or a system without NUMA: it warns and
leaves what it cannot change."""

from __future__ import annotations

import ctypes
import logging
import os
import platform
from pathlib import Path
from typing import Set

log = logging.getLogger("mooncake.store")

_NODES = Path("/sys/devices/system/node")
_MPOL_PREFERRED = 1
_SYS_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237}


def _cpus(cpulist: str) -> Set[int]:
    """CPUs of a sysfs list such as ``0-3,8,10-11``."""
    out: Set[int] = set()
    for part in cpulist.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            out.update(range(int(first), int(last or first) + 1))
    return out


def _prefer_memory(node: int) -> bool:
    number = _SYS_SET_MEMPOLICY.get(platform.machine())
    if number is None:
        return False
    mask = ctypes.c_ulong(1 << node) if node < 64 else None
    if mask is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(number, _MPOL_PREFERRED, ctypes.byref(mask), ctypes.c_ulong(65)) == 0


def bind_to_numa_node(node: int) -> None:
    """Bind the current thread and memory allocation preference to the specified NUMA
    node (best effort: warns where it cannot)."""
    if isinstance(node, bool) or not isinstance(node, int):
        raise TypeError(f"bind_to_numa_node(): node must be int, not {type(node).__name__}")
    if not (_NODES / "node0").is_dir():
        log.warning("NUMA is not available on this system; binding skipped")
        return
    try:
        cpus = _cpus((_NODES / f"node{node}" / "cpulist").read_text())
    except (OSError, ValueError):
        cpus = set()
    if not cpus:
        log.warning("Invalid NUMA node: %d (no CPUs listed for it); binding skipped", node)
        return
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as e:
        log.warning("binding the thread to NUMA node %d failed: %s", node, e)
    if not _prefer_memory(node):
        log.warning("preferring memory of NUMA node %d failed", node)
