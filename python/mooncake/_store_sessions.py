"""Put and get sessions (upstream's ``batch_put_session_start``,
``batch_put_from_multi_buffer_ranges``, ``batch_put_session_end``,
``batch_put_session_revoke``, ``batch_get_session_start``,
``batch_get_into_multi_buffer_ranges``, ``batch_get_session_end``): a base class of
``MooncakeDistributedStore`` over the ``mooncake_store_batch_*session*`` functions.

A session is implicit, keyed by the key. A put session reserves the object's
replicas (one master call for the batch); ranged puts write byte ranges of caller
memory into every replica, any number of times; the end makes the object readable (or
the revoke drops it). A get session caches one replica until its read lease runs out;
ranged gets read byte ranges of it into caller memory. Return values are upstream's:
per key 0 or a code (the ranged calls: bytes moved per key), ``[]`` before ``setup``
(``batch_get_session_end``: -1).
"""

from __future__ import annotations

import ctypes
from ctypes import c_size_t, c_uint64
from typing import Any, List, Optional, Sequence

from . import _store_ffi as ffi
from ._store_types import ReplicateConfig, config_json

_INVALID = -600


def _u64(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
        raise TypeError(f"{name} must hold non-negative ints")
    return value


class SessionMethods:
    """Upstream's session methods (uses the store's ``_h`` and ``_set_up``)."""

    def _keys_call(self, fn: str, keys: Sequence[str]) -> List[int]:
        if not self._set_up:
            return []
        n = len(keys)
        if n == 0:
            return []
        out = ffi.int_results(n)
        rc = getattr(ffi.L(), fn)(self._h, ffi.keys_array(keys), n, out)
        return list(out) if rc == 0 else [rc] * n

    def batch_put_session_start(
        self, keys: Sequence[str], sizes: Sequence[int], config: Optional[ReplicateConfig] = None
    ) -> List[int]:
        """Start a put session: reserve objects without transfer."""
        sizes = [_u64(s, "sizes") for s in sizes]
        if not self._set_up:
            return []
        n = len(keys)
        if n == 0:
            return []
        if len(sizes) != n:
            return [_INVALID] * n
        out = ffi.int_results(n)
        arr = (c_uint64 * n)(*sizes)
        rc = ffi.L().mooncake_store_batch_put_session_start(
            self._h, ffi.keys_array(keys), n, arr, config_json(config or ReplicateConfig()), out
        )
        return list(out) if rc == 0 else [rc] * n

    def _ranges(
        self, fn: str, keys: Sequence[str], ptrs: Sequence[Sequence[int]], sizes: Any, offsets: Any, name: str
    ) -> List[int]:
        if not self._set_up:
            return []
        n = len(keys)
        if not len(ptrs) == len(sizes) == len(offsets) == n:
            return [_INVALID] * n
        counts: List[int] = []
        flat_p: List[int] = []
        flat_s: List[int] = []
        flat_o: List[int] = []
        bad = set()
        for i in range(n):
            p = [_u64(x, "all_buffer_ptrs") for x in ptrs[i]]
            s = [_u64(x, "all_sizes") for x in sizes[i]]
            o = [_u64(x, name) for x in offsets[i]]
            if not len(p) == len(s) == len(o):
                bad.add(i)
                counts.append(0)
                continue
            counts.append(len(p))
            flat_p += p
            flat_s += s
            flat_o += o
        total = len(flat_p)
        out = ffi.int64_results(n) if n else None
        if n == 0:
            return []
        rc = getattr(ffi.L(), fn)(
            self._h,
            ffi.keys_array(keys),
            n,
            (c_size_t * n)(*counts),
            (c_uint64 * total)(*flat_p),
            (c_uint64 * total)(*flat_s),
            (c_uint64 * total)(*flat_o),
            out,
        )
        if rc != 0:
            return [rc] * n
        return [_INVALID if i in bad else int(out[i]) for i in range(n)]

    def batch_put_from_multi_buffer_ranges(
        self,
        keys: Sequence[str],
        all_buffer_ptrs: Sequence[Sequence[int]],
        all_sizes: Sequence[Sequence[int]],
        all_dst_offsets: Sequence[Sequence[int]],
    ) -> List[int]:
        """Ranged put from multiple buffers using a put session."""
        return self._ranges(
            "mooncake_store_batch_put_from_multi_buffer_ranges",
            keys,
            all_buffer_ptrs,
            all_sizes,
            all_dst_offsets,
            "all_dst_offsets",
        )

    def batch_put_session_end(self, keys: Sequence[str]) -> List[int]:
        """Complete a put session and make objects readable."""
        return self._keys_call("mooncake_store_batch_put_session_end", keys)

    def batch_put_session_revoke(self, keys: Sequence[str]) -> List[int]:
        """Revoke an incomplete put session."""
        return self._keys_call("mooncake_store_batch_put_session_revoke", keys)

    def batch_get_session_start(self, keys: Sequence[str]) -> List[int]:
        """Start a get session: query replicas once and cache them."""
        return self._keys_call("mooncake_store_batch_get_session_start", keys)

    def batch_get_into_multi_buffer_ranges(
        self,
        keys: Sequence[str],
        all_buffer_ptrs: Sequence[Sequence[int]],
        all_sizes: Sequence[Sequence[int]],
        all_src_offsets: Sequence[Sequence[int]],
    ) -> List[int]:
        """Ranged get into multiple buffers using a get session."""
        return self._ranges(
            "mooncake_store_batch_get_into_multi_buffer_ranges",
            keys,
            all_buffer_ptrs,
            all_sizes,
            all_src_offsets,
            "all_src_offsets",
        )

    def batch_get_session_end(self, keys: Sequence[str]) -> int:
        """End a get session and drop cached replica metadata."""
        if not self._set_up:
            return -1
        n = len(keys)
        return int(ffi.L().mooncake_store_batch_get_session_end(self._h, ffi.keys_array(keys), n))


del ctypes
