"""``BufferPool`` (``from mooncake import BufferPool``) on a live store, for both
implementations: leases, views, limits, waiting, closing, and the leased memory in
zero-copy calls. The master and fixtures are those of ``store_env.py``."""

from __future__ import annotations

import threading
import time

import pytest

from mooncake import BufferPool, RegisteredBufferPool
from mooncake.store import BufferLease, BufferLeaseView, MooncakeDistributedStore
from store_env import LOCAL_BUFFER, Keys, Master, new_store, pattern


def test_lease_pointer_size_and_view(store: MooncakeDistributedStore) -> None:
    pool = BufferPool(store)
    lease = pool.acquire(100)
    assert isinstance(lease, BufferLease) and lease.size == 100 and lease.ptr != 0
    view = lease.buffer
    assert isinstance(view, memoryview) and view.format == "B" and view.nbytes == 100 and not view.readonly
    assert isinstance(view.obj, BufferLeaseView)
    view[:3] = b"abc"
    assert bytes(lease.buffer[:3]) == b"abc"
    with pytest.raises(RuntimeError, match="exported views"):
        lease.release()
    del view
    lease.release()
    lease.release()  # a no-op
    assert lease.size == 100
    with pytest.raises(RuntimeError, match="closed"):
        lease.ptr
    with pytest.raises(BufferError):
        lease.buffer
    with pool.buffer(1 << 20) as lease:
        assert lease.size == 1 << 20
    zero = pool.acquire(0)
    assert zero.size == 0 and len(zero.buffer) == 0
    zero.release()
    pool.close()
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire(1)


def test_limits_waiting_and_close(store: MooncakeDistributedStore) -> None:
    pool = RegisteredBufferPool(store)
    with pytest.raises(RuntimeError, match="exceeds pool capacity"):
        pool.acquire(2 * LOCAL_BUFFER + 1)
    big = pool.acquire(2 * LOCAL_BUFFER)
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(1, block=False)
    with pytest.raises(RuntimeError, match="timed out"):
        pool.acquire(1, timeout=0.1)
    with pytest.raises(RuntimeError, match="non-negative"):
        pool.acquire(1, timeout=-1)
    with pytest.raises(RuntimeError, match="active leases"):
        pool.close()
    threading.Timer(0.2, big.release).start()
    started = time.monotonic()
    waited = pool.acquire(1, timeout=30)
    assert time.monotonic() - started >= 0.1, "waited for the release"
    waited.release()
    pool.close()
    one = BufferPool(store, max_regions=1)
    first = one.acquire(1)
    with pytest.raises(RuntimeError, match="exhausted"):
        one.acquire(1, block=False)
    first.release()
    small = BufferPool(store, max_bytes=1 << 20)
    with pytest.raises(RuntimeError, match="exceeds pool capacity"):
        small.acquire(LOCAL_BUFFER + 1)
    assert small.acquire(LOCAL_BUFFER).size == LOCAL_BUFFER, "max_bytes is at least the local buffer"


def test_constructor_checks(master: Master) -> None:
    with pytest.raises(RuntimeError, match="not initialized"):
        BufferPool(MooncakeDistributedStore())
    s = new_store(master, local_buffer=0)
    try:
        with pytest.raises(RuntimeError, match="local buffer"):
            BufferPool(s)
    finally:
        s.close()
    s = new_store(master)
    try:
        with pytest.raises(RuntimeError, match="power of two"):
            BufferPool(s, alignment=3)
        with pytest.raises(RuntimeError, match="positive"):
            BufferPool(s, alignment=0)
        with pytest.raises(TypeError):
            BufferPool(s).acquire(-1)
        BufferPool(s, prewarm_size=4096, prewarm_count=2).prewarm(4096, 1)
    finally:
        s.close()


def test_leases_serve_zero_copy_calls(store: MooncakeDistributedStore, k: Keys) -> None:
    data = pattern(200, 4)
    assert store.put(k("obj"), data) == 0
    with BufferPool(store).buffer(256) as lease:
        assert store.get_into(k("obj"), lease.ptr, lease.size) == 200
        view = lease.buffer
        assert bytes(view[:200]) == data
        del view
        assert store.get_into_ranges([lease.ptr], [[k("obj")]], [[[0]]], [[[10]]], [[[20]]]) == [[[20]]]
        view = lease.buffer
        assert bytes(view[:20]) == data[10:30]
        view[:5] = b"HELLO"
        del view
        assert store.put_from(k("copy"), lease.ptr, 5) == 0
    assert store.get(k("copy")) == b"HELLO"
