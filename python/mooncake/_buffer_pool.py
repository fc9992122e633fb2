"""``BufferPool``: leases of registered scratch memory for the zero-copy store calls
(``get_into``, ``get_into_ranges``, ``put_from``, ...), with upstream's API, limits and
errors (``RuntimeError`` with upstream's messages).

Upstream carves leases out of the store's local buffer and falls back to registering
short-lived "overflow" buffers when it is full. Here every lease is such a buffer:
page memory aligned to ``alignment``, registered with the store for the lease's life.
The limits are upstream's: at most ``max_bytes`` leased at once (default: twice the
store's local buffer size), at most ``max_regions`` leases.
"""

from __future__ import annotations

import ctypes
import functools
import operator
import threading
import time
import weakref
from typing import Any, Optional

_libc = ctypes.CDLL(None, use_errno=True)
_libc.posix_memalign.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]
_libc.posix_memalign.restype = ctypes.c_int
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None


def _size_arg(value: Any, what: str) -> int:
    """A ``size_t`` argument (``TypeError`` like pybind11 otherwise)."""
    if isinstance(value, float):
        raise TypeError(f"{what} must be an int, not float")
    n = operator.index(value)
    if not 0 <= n < 1 << 64:
        raise TypeError(f"{what} must be in [0, 2**64 - 1], not {n}")
    return n


class BufferLeaseView:
    """The exporter behind :attr:`BufferLease.buffer`: its bytes, and the lease it
    keeps alive. A lease cannot be released while views of it exist."""

    @property
    def buffer(self) -> memoryview:
        """A writable ``memoryview`` (format ``B``) of the leased bytes."""
        return memoryview(self).cast("B")


@functools.lru_cache(maxsize=64)
def _view_type(size: int) -> type:
    return type("BufferLeaseView", (BufferLeaseView, ctypes.c_ubyte * size), {"__module__": "mooncake.store"})


class _Region:
    """One registered allocation backing a lease."""

    __slots__ = ("addr", "size")

    def __init__(self, addr: int, size: int) -> None:
        self.addr, self.size = addr, size


class BufferLease:
    """Registered memory leased from a :class:`BufferPool`: ``ptr`` and ``size`` for
    the zero-copy calls, ``buffer`` as a ``memoryview``. ``release()`` (or leaving a
    ``with`` block) gives it back; it fails while ``buffer`` views are alive."""

    def __init__(self, pool: "BufferPool", region: _Region, size: int) -> None:
        self._pool: Optional[BufferPool] = pool
        self._region = region
        self._size = size
        self._exports = 0
        self._lock = threading.Lock()

    @property
    def ptr(self) -> int:
        """The address of the leased bytes."""
        if self._pool is None:
            raise RuntimeError("buffer lease is closed")
        return self._region.addr

    @property
    def size(self) -> int:
        """The requested size."""
        return self._size

    @property
    def buffer(self) -> memoryview:
        """A writable ``memoryview`` of the ``size`` leased bytes (``BufferError``
        once released, as upstream)."""
        if self._pool is None:
            raise BufferError("buffer lease is closed")
        view = _view_type(self._size).from_address(self._region.addr)
        view.lease = self
        with self._lock:
            self._exports += 1
        weakref.finalize(view, self._unexport)
        return view.buffer

    def _unexport(self) -> None:
        with self._lock:
            self._exports -= 1

    def release(self) -> None:
        """Gives the memory back to the pool (a no-op when already released)."""
        self._release(check_views=True)

    def _release(self, check_views: bool) -> None:
        with self._lock:
            pool = self._pool
            if pool is None:
                return
            if check_views and self._exports:
                raise RuntimeError("cannot release buffer while exported views exist")
            self._pool = None
        pool._give_back(self._region)

    def __enter__(self) -> "BufferLease":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self._release(check_views=False)
        except Exception:
            pass


class BufferPool:
    """Leases registered scratch memory for zero-copy calls on a set-up store with a
    local buffer (upstream's ``BufferPool``; ``RegisteredBufferPool`` is the same
    class). ``acquire(size)`` / ``buffer(size)`` return a :class:`BufferLease`; when
    the limits are reached they wait (``block``, ``timeout``) or raise."""

    def __init__(
        self,
        store: Any,
        max_bytes: int = 0,
        min_size_class: int = 64 * 1024,
        max_size_class: Optional[int] = None,
        alignment: int = 8 * 1024 * 1024,
        block_on_exhaustion: bool = True,
        default_timeout: Optional[float] = None,
        max_regions: Optional[int] = None,
        prewarm_size: Optional[int] = None,
        prewarm_count: int = 0,
    ) -> None:
        capacity = store._local_buffer_capacity() if hasattr(store, "_local_buffer_capacity") else None
        if capacity is None:
            raise RuntimeError("MooncakeDistributedStore is not initialized")
        max_bytes = _size_arg(max_bytes, "max_bytes")
        if _size_arg(min_size_class, "min_size_class") == 0 or _size_arg(alignment, "alignment") == 0:
            raise RuntimeError("min_size_class and alignment must be positive")
        if alignment < ctypes.sizeof(ctypes.c_void_p) or alignment & (alignment - 1):
            raise RuntimeError("alignment must be a power of two and at least sizeof(void*)")
        if capacity == 0:
            raise RuntimeError("BufferPool requires a store configured with a local buffer")
        self._store = store
        self._alignment = alignment
        self._block = bool(block_on_exhaustion)
        self._max_bytes = max(max_bytes, capacity) if max_bytes else 2 * capacity
        self._max_size_class = self._max_bytes if max_size_class is None else _size_arg(max_size_class, "max_size_class")
        self._timeout = None if default_timeout is None else float(default_timeout)
        self._max_regions = None if max_regions is None else _size_arg(max_regions, "max_regions")
        self._cond = threading.Condition()
        self._in_use = 0
        self._total = self._reserved = self._reserving = 0
        self._closed = self._closing = False
        if prewarm_size is not None and prewarm_count > 0:
            self.prewarm(prewarm_size, prewarm_count)

    def acquire(self, size: int, block: Optional[bool] = None, timeout: Optional[float] = None) -> BufferLease:
        """A lease of ``size`` bytes. Raises ``RuntimeError`` when the pool is closed,
        the size exceeds ``max_bytes``, or the limits are reached and it may not wait
        (``block=False``) or waited ``timeout`` seconds in vain."""
        size = _size_arg(size, "size")
        should_block = self._block if block is None else bool(block)
        timeout_s = self._timeout if timeout is None else float(timeout)
        if timeout_s is not None and timeout_s < 0:
            raise RuntimeError("timeout must be non-negative")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        need = max(size, 1)
        if need > self._max_bytes:
            raise RuntimeError("requested buffer size exceeds pool capacity")
        with self._cond:
            while True:
                self._raise_if_closed()
                if self._has_room(need):
                    return BufferLease(self, self._allocate(need), size)
                if not should_block:
                    raise RuntimeError("buffer pool is exhausted")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise RuntimeError("timed out waiting for buffer")
                self._cond.wait(left)

    def buffer(self, size: int, block: Optional[bool] = None, timeout: Optional[float] = None) -> BufferLease:
        """:meth:`acquire`, for ``with pool.buffer(n) as lease:``."""
        return self.acquire(size, block, timeout)

    def prewarm(self, size: int, count: int) -> None:
        """Accepted for compatibility; as upstream, it does nothing."""
        _size_arg(size, "size")
        _size_arg(count, "count")

    def close(self) -> None:
        """Closes the pool (idempotent); ``RuntimeError`` while leases are active."""
        with self._cond:
            if self._closed:
                return
            self._closing = True
            while self._reserving:
                self._cond.wait()
            self._closing = False
            if self._in_use:
                self._cond.notify_all()
                raise RuntimeError("cannot close buffer pool with active leases")
            self._closed = True
            self._cond.notify_all()

    def _raise_if_closed(self) -> None:
        if self._closed:
            raise RuntimeError("buffer pool is closed")
        if self._closing:
            raise RuntimeError("buffer pool is closing")

    def _has_room(self, need: int) -> bool:
        if need > self._max_bytes - self._total - self._reserved:
            return False
        return self._max_regions is None or self._in_use + self._reserving < self._max_regions

    def _allocate(self, need: int) -> _Region:
        """Allocates and registers ``need`` bytes (called with the lock held; the
        lock is dropped while the store registers the memory)."""
        self._reserved += need
        self._reserving += 1
        self._cond.release()
        try:
            addr = self._register(need)
        finally:
            self._cond.acquire()
            self._reserved -= need
            self._reserving -= 1
            self._cond.notify_all()
        if self._closing or self._closed:
            self._unregister(_Region(addr, need))
            raise RuntimeError("buffer pool is closing")
        self._total += need
        self._in_use += 1
        return _Region(addr, need)

    def _register(self, size: int) -> int:
        out = ctypes.c_void_p()
        if _libc.posix_memalign(ctypes.byref(out), self._alignment, size) != 0 or not out.value:
            raise MemoryError(f"BufferPool: cannot allocate {size} bytes")
        if self._store.register_buffer(out.value, size) != 0:
            _libc.free(out.value)
            raise RuntimeError("overflow buffer registration failed")
        return out.value

    def _unregister(self, region: _Region) -> None:
        rc = self._store.unregister_buffer(region.addr)
        _libc.free(region.addr)
        if rc != 0:
            raise RuntimeError("overflow buffer unregistration failed")

    def _give_back(self, region: _Region) -> None:
        with self._cond:
            self._total -= region.size
            self._in_use -= 1
            self._cond.notify_all()
        self._unregister(region)


#: Upstream's older names for the same classes.
RegisteredBufferPool = BufferPool
RegisteredBufferLease = BufferLease
RegisteredBufferLeaseView = BufferLeaseView

for _cls in (BufferPool, BufferLease, BufferLeaseView):
    _cls.__module__ = "mooncake.store"
del _cls
