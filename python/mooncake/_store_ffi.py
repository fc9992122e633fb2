"""ctypes plumbing of :mod:`mooncake.store`: the prototypes of upstream's
``store_c.h`` and of the ``mooncake_store_*`` extensions in ``mooncake_ext.h``, and
the conversions between Python values and C arrays.

Everything here is private; the public API is :mod:`mooncake.store`.
"""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, c_bool, c_char, c_char_p, c_int, c_int64, c_size_t, c_uint64, c_void_p
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _lib

# Upstream's ErrorCode values the Python layer produces itself.
OK = 0
INTERNAL_ERROR = -1
INVALID_PARAMS = -600

_h = c_void_p
_keys = POINTER(c_char_p)
_ptrs = POINTER(c_void_p)
_sizes = POINTER(c_size_t)

#: ``mooncake_store_alloc_fn``: (ctx, size) -> writable memory or NULL.
ALLOC_FN = ctypes.CFUNCTYPE(c_void_p, c_void_p, c_uint64)


class Range(ctypes.Structure):
    """``mooncake_range_t``: one fragment of ``mooncake_store_get_into_ranges``."""

    _fields_ = [("dst_offset", c_uint64), ("src_offset", c_uint64), ("size", c_uint64)]


#: name -> (restype, argtypes) of every Store function this package calls.
STORE_PROTOTYPES: Dict[str, Tuple[Any, Sequence[Any]]] = {
    # store_c.h (upstream's 19)
    "mooncake_store_create": (c_void_p, []),
    "mooncake_store_destroy": (None, [_h]),
    "mooncake_store_setup": (
        c_int,
        [_h, c_char_p, c_char_p, c_uint64, c_uint64, c_char_p, c_char_p, c_char_p],
    ),
    "mooncake_store_init_all": (c_int, [_h, c_char_p, c_char_p, c_uint64]),
    "mooncake_store_health_check": (c_int, [_h]),
    "mooncake_store_put": (c_int, [_h, c_char_p, c_void_p, c_size_t, c_void_p]),
    "mooncake_store_put_from": (c_int, [_h, c_char_p, c_void_p, c_size_t, c_void_p]),
    "mooncake_store_batch_put_from": (
        c_int,
        [_h, _keys, _ptrs, _sizes, c_size_t, c_void_p, POINTER(c_int)],
    ),
    "mooncake_store_get_into": (c_int64, [_h, c_char_p, c_void_p, c_size_t]),
    "mooncake_store_batch_get_into": (
        c_int,
        [_h, _keys, _ptrs, _sizes, c_size_t, POINTER(c_int64)],
    ),
    "mooncake_store_is_exist": (c_int, [_h, c_char_p]),
    "mooncake_store_batch_is_exist": (c_int, [_h, _keys, c_size_t, POINTER(c_int)]),
    "mooncake_store_get_size": (c_int64, [_h, c_char_p]),
    "mooncake_store_get_hostname": (c_int, [_h, c_void_p, c_size_t]),
    "mooncake_store_remove": (c_int, [_h, c_char_p, c_int]),
    "mooncake_store_remove_by_regex": (c_int64, [_h, c_char_p, c_int]),
    "mooncake_store_remove_all": (c_int64, [_h, c_int]),
    "mooncake_store_register_buffer": (c_int, [_h, c_void_p, c_size_t]),
    "mooncake_store_unregister_buffer": (c_int, [_h, c_void_p]),
    # mooncake_ext.h (src/ffi/ext_store/)
    "mooncake_store_put_with_config": (c_int, [_h, c_char_p, c_void_p, c_size_t, c_char_p]),
    "mooncake_store_upsert": (c_int, [_h, c_char_p, c_void_p, c_size_t, c_char_p]),
    "mooncake_store_put_from_with_config": (
        c_int,
        [_h, c_char_p, c_void_p, c_size_t, c_char_p],
    ),
    "mooncake_store_upsert_from": (c_int, [_h, c_char_p, c_void_p, c_size_t, c_char_p]),
    "mooncake_store_batch_put_from_with_config": (
        c_int,
        [_h, _keys, _ptrs, _sizes, c_size_t, c_char_p, POINTER(c_int)],
    ),
    "mooncake_store_batch_upsert_from": (
        c_int,
        [_h, _keys, _ptrs, _sizes, c_size_t, c_char_p, POINTER(c_int)],
    ),
    "mooncake_store_batch_put_from_multi_buffers": (
        c_int,
        [_h, _keys, _ptrs, _sizes, _sizes, c_size_t, c_char_p, POINTER(c_int)],
    ),
    "mooncake_store_batch_get_into_multi_buffers": (
        c_int,
        [_h, _keys, _ptrs, _sizes, _sizes, c_size_t, c_int, POINTER(c_int64)],
    ),
    "mooncake_store_batch_get_buffers": (
        c_int,
        [_h, _keys, c_size_t, _ptrs, POINTER(c_int64)],
    ),
    "mooncake_store_free_buffer": (None, [c_void_p]),
    "mooncake_store_get_with_allocator": (c_int64, [_h, c_char_p, ALLOC_FN, c_void_p]),
    "mooncake_store_batch_remove": (c_int, [_h, _keys, c_size_t, c_int, POINTER(c_int)]),
    "mooncake_store_batch_get_size": (c_int, [_h, _keys, c_size_t, POINTER(c_int64)]),
    "mooncake_store_get_offload_rpc_read_count": (c_int64, [_h]),
    "mooncake_store_start_http_server": (c_int, [_h, c_int]),
    "mooncake_store_mount_file_segment": (
        c_int,
        [_h, c_char_p, c_uint64, c_uint64, c_char_p, c_char_p, POINTER(c_uint64)],
    ),
    "mooncake_store_allocate_and_mount_segment": (
        c_int,
        [_h, c_uint64, c_char_p, c_char_p, POINTER(c_uint64), POINTER(c_uint64)],
    ),
    "mooncake_store_unmount_segment": (c_int, [_h, c_uint64, c_uint64, c_int, c_uint64]),
    "mooncake_store_unmount_local_disk_segment": (c_int, [_h, c_uint64]),
    "mooncake_store_batch_put_session_start": (
        c_int,
        [_h, POINTER(c_char_p), c_size_t, POINTER(c_uint64), c_char_p, POINTER(c_int)],
    ),
    "mooncake_store_batch_put_from_multi_buffer_ranges": (
        c_int,
        [_h, POINTER(c_char_p), c_size_t, POINTER(c_size_t), POINTER(c_uint64), POINTER(c_uint64),
         POINTER(c_uint64), POINTER(c_int64)],
    ),
    "mooncake_store_batch_get_into_multi_buffer_ranges": (
        c_int,
        [_h, POINTER(c_char_p), c_size_t, POINTER(c_size_t), POINTER(c_uint64), POINTER(c_uint64),
         POINTER(c_uint64), POINTER(c_int64)],
    ),
    "mooncake_store_batch_put_session_end": (c_int, [_h, POINTER(c_char_p), c_size_t, POINTER(c_int)]),
    "mooncake_store_batch_put_session_revoke": (c_int, [_h, POINTER(c_char_p), c_size_t, POINTER(c_int)]),
    "mooncake_store_batch_get_session_start": (c_int, [_h, POINTER(c_char_p), c_size_t, POINTER(c_int)]),
    "mooncake_store_batch_get_session_end": (c_int, [_h, POINTER(c_char_p), c_size_t]),
    "mooncake_store_create_copy_task": (
        c_int,
        [_h, c_char_p, POINTER(c_char_p), c_size_t, POINTER(c_uint64)],
    ),
    "mooncake_store_create_move_task": (
        c_int,
        [_h, c_char_p, c_char_p, c_char_p, POINTER(c_uint64)],
    ),
    "mooncake_store_query_task": (c_int64, [_h, c_uint64, c_uint64, c_void_p, c_size_t]),
    "mooncake_store_get_replica_desc": (c_int64, [_h, c_char_p, c_void_p, c_size_t]),
    "mooncake_store_batch_get_replica_desc": (
        c_int64,
        [_h, _keys, c_size_t, c_void_p, c_size_t],
    ),
    "mooncake_store_get_into_ranges": (
        c_int,
        [_h, _ptrs, _sizes, c_size_t, _keys, _sizes, POINTER(Range), POINTER(c_int64)],
    ),
    "mooncake_store_batch_replica_clear": (c_int, [_h, _keys, c_size_t, c_char_p, POINTER(c_int)]),
    "mooncake_store_setup_dummy": (c_int, [_h, c_uint64, c_uint64, c_char_p]),
    "mooncake_store_setup_with_offload": (
        c_int,
        [_h, c_char_p, c_char_p, c_uint64, c_uint64, c_char_p, c_char_p, c_char_p, c_bool, c_char_p, c_char_p],
    ),
    "mooncake_store_alloc_from_mem_pool": (c_uint64, [_h, c_uint64]),
    "mooncake_store_dummy_moves_in_place": (c_int, [_h, c_uint64, c_uint64]),
    "mooncake_store_host_mem_alloc": (c_uint64, [c_uint64]),
    "mooncake_store_host_mem_free": (c_int, [c_uint64]),
    "mooncake_store_setup_on_engine": (
        c_int,
        [_h, c_void_p, c_char_p, c_char_p, c_uint64, c_uint64, c_char_p, c_char_p, c_char_p, c_bool, c_char_p, c_char_p],
    ),
}

_declared: Optional[ctypes.CDLL] = None


def L() -> ctypes.CDLL:
    """The library with the Store prototypes declared."""
    global _declared
    cdll = _declared
    if cdll is None:
        cdll = _lib.lib()
        _lib.declare(cdll, STORE_PROTOTYPES)
        _declared = cdll
    return cdll


def last_error() -> str:
    return _lib.last_error()


# --- argument conversion -------------------------------------------------------


def key_bytes(key: Any) -> bytes:
    """A key as the NUL-free bytes C receives (str is UTF-8 encoded)."""
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    raise TypeError(f"key must be str, not {type(key).__name__}")


def text_arg(value: Any, name: str) -> bytes:
    """A str argument as UTF-8 (``TypeError`` for anything else, as pybind11)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be str, not {type(value).__name__}")
    return value.encode("utf-8")


def keys_array(keys: Sequence[Any]) -> "ctypes.Array[c_char_p]":
    encoded = [key_bytes(k) for k in keys]
    return (c_char_p * len(encoded))(*encoded)


def _address(value: Any) -> int:
    if value is None:
        return 0
    if not isinstance(value, int):
        try:
            value = value.__index__()
        except AttributeError:
            raise TypeError(f"buffer address must be int, not {type(value).__name__}") from None
    if value < 0:
        raise TypeError(f"buffer address must not be negative ({value})")
    return value


def _size(value: Any) -> int:
    if not isinstance(value, int):
        try:
            value = value.__index__()
        except AttributeError:
            raise TypeError(f"size must be int, not {type(value).__name__}") from None
    if value < 0:
        raise TypeError(f"size must not be negative ({value})")
    return value


def address(value: Any) -> int:
    """A buffer address argument (int, or anything with ``__index__``)."""
    return _address(value)


def size(value: Any) -> int:
    """A size argument (non-negative int)."""
    return _size(value)


def ptr_array(ptrs: Sequence[Any]) -> "ctypes.Array[c_void_p]":
    return (c_void_p * len(ptrs))(*[_address(p) or None for p in ptrs])


def size_array(sizes: Sequence[Any]) -> "ctypes.Array[c_size_t]":
    return (c_size_t * len(sizes))(*[_size(s) for s in sizes])


def int_results(n: int) -> "ctypes.Array[c_int]":
    return (c_int * n)()


def int64_results(n: int) -> "ctypes.Array[c_int64]":
    return (c_int64 * n)()


class Bytes:
    """A read-only view of a Python buffer as (address, length) for C, kept alive
    (and pinned) as long as this object lives. ``bytes`` are used in place; other
    contiguous buffers in place when writable, else copied once."""

    __slots__ = ("addr", "size", "_keep")

    def __init__(self, value: Any) -> None:
        if isinstance(value, bytes):
            self._keep: Any = value
            self.size = len(value)
            self.addr = ctypes.cast(c_char_p(value), c_void_p).value or 0 if value else 0
            return
        if isinstance(value, str):
            raise TypeError("value must be a bytes-like object (Buffer), not str")
        view = memoryview(value)
        if not view.c_contiguous:
            data = view.tobytes()
            self._keep = data
            self.size = len(data)
            self.addr = ctypes.cast(c_char_p(data), c_void_p).value or 0 if data else 0
            return
        view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        self.size = view.nbytes
        if self.size == 0:
            self._keep, self.addr = view, 0
        elif view.readonly:
            data = view.tobytes()
            self._keep = data
            self.addr = ctypes.cast(c_char_p(data), c_void_p).value or 0
        else:
            arr = (c_char * self.size).from_buffer(view)
            self._keep = (view, arr)
            self.addr = ctypes.addressof(arr)


def concat(parts: Sequence[Any]) -> bytes:
    """The parts (bytes-like objects) joined into one bytes object."""
    for p in parts:
        if isinstance(p, str):
            raise TypeError("parts must be bytes-like objects (Buffer), not str")
    return b"".join(memoryview(p).cast("B") if not isinstance(p, bytes) else p for p in parts)


def hostname(handle: Optional[int]) -> str:
    buf = ctypes.create_string_buffer(1024)
    if handle is None or L().mooncake_store_get_hostname(handle, buf, len(buf)) != 0:
        return ""
    return buf.value.decode("utf-8", "replace")


def read_json(call, initial: int = 4096) -> Tuple[int, Optional[str]]:
    """Runs ``call(buf, len)`` (snprintf-style JSON output): (length, text) on
    success, (negative code, None) on error."""
    size_hint = initial
    for _ in range(4):
        buf = ctypes.create_string_buffer(size_hint)
        n = call(buf, size_hint)
        if n < 0:
            return n, None
        if n < size_hint:
            return n, buf.raw[:n].decode("utf-8", "replace")
        size_hint = n + 1
    return INTERNAL_ERROR, None


def _bytes_constructor() -> Any:
    """CPython's ``PyBytes_FromStringAndSize``, or None on another interpreter."""
    try:
        new = ctypes.pythonapi.PyBytes_FromStringAndSize
    except AttributeError:
        return None
    new.restype = ctypes.py_object
    new.argtypes = [c_void_p, ctypes.c_ssize_t]
    return new


_new_bytes = _bytes_constructor()
_read_into = threading.local()


@ALLOC_FN
def _allocate_bytes(_ctx: Any, size: int) -> Optional[int]:
    # A fresh bytes object, referenced only here until the read has filled it, so
    # writing its storage is what C code building a bytes object does.
    value = _new_bytes(None, size)
    _read_into.value = value
    return ctypes.cast(c_char_p(value), c_void_p).value


def get_bytes(h: Any, key: Any) -> Optional[bytes]:
    """The whole object as bytes, read straight into the bytes object (one master
    call, no copy); ``b""`` on any error; None where the interpreter offers no way to
    build bytes in place (the caller then reads into a library buffer)."""
    if _new_bytes is None:
        return None
    _read_into.value = None
    try:
        n = L().mooncake_store_get_with_allocator(h, key_bytes(key), _allocate_bytes, None)
        value = _read_into.value
    finally:
        _read_into.value = None
    if n < 0 or value is None or n != len(value):
        return b""
    return value


def take_buffers(ptrs: "ctypes.Array[c_void_p]", results: "ctypes.Array[c_int64]", convert) -> List[Any]:
    """Converts each successful library buffer with ``convert(addr, size)`` and frees
    every buffer; failed entries become None."""
    out: List[Any] = []
    free = L().mooncake_store_free_buffer
    try:
        for i in range(len(results)):
            n, p = results[i], ptrs[i]
            out.append(convert(p or 0, n) if n >= 0 and (p or n == 0) else None)
    finally:
        for i in range(len(ptrs)):
            if ptrs[i]:
                free(ptrs[i])
    return out
