"""``MooncakeDistributedStore.get_into_ranges``: argument checks as upstream's
binding makes them (``TypeError``), upstream's result shapes for mismatched lists
(-600 entries), and the flattened call of ``mooncake_store_get_into_ranges``."""

from __future__ import annotations

import ctypes
import operator
from typing import Any, List, Optional, Tuple

from . import _store_ffi as ffi

INVALID = ffi.INVALID_PARAMS
U64_MAX = (1 << 64) - 1

Results = List[List[List[int]]]


def _seq(value: Any, what: str) -> List[Any]:
    """A list from any sequence but a string (pybind11's ``list[...]``)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or not hasattr(value, "__getitem__"):
        raise TypeError(f"get_into_ranges(): {what} must be a list, not {type(value).__name__}")
    return list(value)


def _u64(value: Any, what: str) -> int:
    if isinstance(value, float):
        raise TypeError(f"get_into_ranges(): {what} must hold ints, not float")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"get_into_ranges(): {what} must hold ints, not {type(value).__name__}") from None
    if not 0 <= n <= U64_MAX:
        raise TypeError(f"get_into_ranges(): {what} holds {n}, outside [0, 2**64 - 1]")
    return n


def _offsets(value: Any, what: str) -> List[List[List[int]]]:
    return [[[_u64(v, what) for v in _seq(frags, what)] for frags in _seq(keys, what)] for keys in _seq(value, what)]


def _error_shape(n: int, keys: List[List[bytes]], dst: List[List[List[int]]]) -> Results:
    """Upstream's all-failed result: per buffer its keys (one when its key list is
    missing), per key its fragments (one when missing or empty), all -600."""
    out: Results = []
    for i in range(n):
        key_count = len(keys[i]) if i < len(keys) else 1
        row = []
        for j in range(key_count):
            frags = len(dst[i][j]) if i < len(dst) and j < len(dst[i]) else 1
            row.append([INVALID] * max(frags, 1))
        out.append(row)
    return out


def get_into_ranges(
    handle: Optional[int],
    set_up: bool,
    buffer_ptrs: Any,
    all_keys: Any,
    all_dst_offsets: Any,
    all_src_offsets: Any,
    all_sizes: Any,
) -> Results:
    """Reads ``all_sizes[i][j][k]`` bytes at ``all_src_offsets[i][j][k]`` of object
    ``all_keys[i][j]`` to ``buffer_ptrs[i] + all_dst_offsets[i][j][k]``; see
    :meth:`mooncake.store.MooncakeDistributedStore.get_into_ranges`."""
    ptrs = [_u64(p, "buffer_ptrs") for p in _seq(buffer_ptrs, "buffer_ptrs")]
    keys = [[ffi.key_bytes(k) for k in _seq(ks, "all_keys")] for ks in _seq(all_keys, "all_keys")]
    dst = _offsets(all_dst_offsets, "all_dst_offsets")
    src = _offsets(all_src_offsets, "all_src_offsets")
    sizes = _offsets(all_sizes, "all_sizes")
    n = len(ptrs)
    if not set_up or any(len(x) != n for x in (keys, dst, src, sizes)):
        return _error_shape(n, keys, dst)
    results: Results = []
    slots: List[Tuple[int, int, int]] = []
    key_counts, flat_keys, range_counts, ranges = [], [], [], []
    for i in range(n):
        if not len(keys[i]) == len(dst[i]) == len(src[i]) == len(sizes[i]):
            results.append([[INVALID] for _ in keys[i]])
            key_counts.append(0)
            continue
        row = []
        key_counts.append(len(keys[i]))
        for j, key in enumerate(keys[i]):
            d, s, z = dst[i][j], src[i][j], sizes[i][j]
            row.append([INVALID] * len(d))
            sent = []
            if len(d) == len(s) == len(z):
                sent = [k for k in range(len(d)) if d[k] + z[k] <= U64_MAX]
            flat_keys.append(key)
            range_counts.append(len(sent))
            for k in sent:
                ranges.append((d[k], s[k], z[k]))
                slots.append((i, j, k))
        results.append(row)
    if slots:
        out = (ctypes.c_int64 * len(slots))()
        rc = ffi.L().mooncake_store_get_into_ranges(
            handle,
            ffi.ptr_array(ptrs),
            ffi.size_array(key_counts),
            n,
            ffi.keys_array(flat_keys),
            ffi.size_array(range_counts),
            (ffi.Range * len(ranges))(*ranges),
            out,
        )
        if rc == 0:
            for (i, j, k), value in zip(slots, out):
                results[i][j][k] = value
    return results
