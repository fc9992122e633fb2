"""Segments mounted and unmounted at run time (upstream's ``mount_segment``,
``allocate_and_mount_segment``, ``unmount_segment``, ``unmount_and_free_segment``):
a base class of ``MooncakeDistributedStore``, over the ``mooncake_store_*_segment``
functions. Segment ids are upstream's strings, ``"<first>-<second>"`` in decimal.

Return values are upstream's: the mount calls answer a dict with ``ret`` (0, or -1
on any failure, the cause logged) and ``segment_ids``; the unmount calls 0, -1 for an
id this client did not mount that way, or the master's code. Each mount is one
segment (upstream may split one larger than the transport can register at once).
"""

from __future__ import annotations

import ctypes
import logging
import os
from typing import Any, Dict, List, Sequence

from . import _store_ffi as ffi

log = logging.getLogger("mooncake.store")

_FAILED = -1


def _id_text(ids: "ctypes.Array[ctypes.c_uint64]") -> str:
    return f"{ids[0]}-{ids[1]}"


def _parse_id(text: str):
    """(first, second) of ``"<first>-<second>"``, or None (upstream's StringToUuid)."""
    first, dash, second = text.partition("-")
    if not dash or not first.isdigit() or not second.isdigit():
        return None
    a, b = int(first), int(second)
    return (a, b) if a < 1 << 64 and b < 1 << 64 else None


def _text(value: Any, name: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be str, not {type(value).__name__}")
    return value.encode()


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"{name} must be a non-negative int")
    return value


class SegmentMethods:
    """Upstream's run-time segment methods (uses the store's ``_h`` and ``_set_up``)."""

    def mount_segment(
        self, path: str, size: int, offset: int = 0, protocol: str = "tcp", location: str = ""
    ) -> Dict[str, Any]:
        """Maps ``size`` bytes of the file at ``path`` from ``offset`` (a multiple of
        the page size, the range inside the file) and mounts them as a segment of this
        client: objects placed there are the file's bytes. ``{"ret": 0,
        "segment_ids": [id]}`` (no id for size 0), or ``ret`` -1."""
        args = (os.fsencode(path), _count(offset, "offset"), _count(size, "size"))
        proto, loc = _text(protocol, "protocol"), _text(location, "location")
        result: Dict[str, Any] = {"ret": _FAILED, "segment_ids": []}
        if not self._set_up:
            return result
        ids = (ctypes.c_uint64 * 2)()
        rc = ffi.L().mooncake_store_mount_file_segment(self._h, args[0], args[1], args[2], proto, loc, ids)
        if rc < 0:
            log.error("mount_segment(%r): %s", path, ffi.last_error())
            return result
        result.update(ret=0, segment_ids=[_id_text(ids)] if rc > 0 else [])
        return result

    def allocate_and_mount_segment(self, size: int, protocol: str = "tcp", location: str = "") -> Dict[str, Any]:
        """Maps ``size`` bytes (rounded up to a multiple of 16 MiB) of memory and
        mounts them as a segment of this client. ``{"ret": 0, "segment_ids": [id],
        "allocated_size": n}``, or ``ret`` -1 (size 0, no memory, ...)."""
        n = _count(size, "size")
        proto, loc = _text(protocol, "protocol"), _text(location, "location")
        result: Dict[str, Any] = {"ret": _FAILED, "segment_ids": [], "allocated_size": 0}
        if not self._set_up:
            return result
        ids, allocated = (ctypes.c_uint64 * 2)(), ctypes.c_uint64()
        rc = ffi.L().mooncake_store_allocate_and_mount_segment(self._h, n, proto, loc, ids, ctypes.byref(allocated))
        if rc != 0:
            log.error("allocate_and_mount_segment(%d): %s", n, ffi.last_error())
            return result
        result.update(ret=0, segment_ids=[_id_text(ids)], allocated_size=allocated.value)
        return result

    def unmount_segment(self, segment_ids: Sequence[str], grace_period_seconds: int = 0) -> int:
        """Unmounts segments ``mount_segment`` mounted: at once (their objects dropped,
        the file unmapped), or after ``grace_period_seconds`` (nothing new is placed in
        them meanwhile). 0, or the first failure (-1 for an id not mounted by
        ``mount_segment`` of this client); the other ids are still unmounted."""
        return self._unmount(segment_ids, grace_period_seconds, allocated=False)

    def unmount_and_free_segment(self, segment_ids: Sequence[str], grace_period_seconds: int = 0) -> int:
        """``unmount_segment`` for segments ``allocate_and_mount_segment`` mounted;
        their memory is freed."""
        return self._unmount(segment_ids, grace_period_seconds, allocated=True)

    def _unmount(self, segment_ids: Sequence[str], grace: int, allocated: bool) -> int:
        if isinstance(segment_ids, (str, bytes)):
            raise TypeError("segment_ids must be a list of str")
        texts: List[str] = list(segment_ids)
        for t in texts:
            _text(t, "segment_ids")
        grace = _count(grace, "grace_period_seconds")
        if not self._set_up:
            return _FAILED
        first_error = 0
        for text in texts:
            parsed = _parse_id(text)
            rc = (
                _FAILED
                if parsed is None
                else ffi.L().mooncake_store_unmount_segment(self._h, parsed[0], parsed[1], int(allocated), grace)
            )
            if rc != 0:
                log.error("unmount of segment %r: %s", text, ffi.last_error() if parsed else "not a segment id")
                first_error = first_error or rc
        return first_error

    def unmount_local_disk_segment(self, grace_period_seconds: int = 0) -> int:
        """Unmounts this client's SSD tier at the master (its copies are no longer
        read from there, nothing more is offloaded to it), then waits
        ``grace_period_seconds``: 0 (also without an SSD tier), or -1."""
        grace = _count(grace_period_seconds, "grace_period_seconds")
        if not self._set_up:
            return _FAILED
        rc = ffi.L().mooncake_store_unmount_local_disk_segment(self._h, grace)
        if rc != 0:
            log.error("unmount_local_disk_segment: %s", ffi.last_error())
            return _FAILED
        return 0
