"""``mooncake.engine.TransferEngine``: the whole API, P2PHANDSHAKE and HTTP metadata,
in one process and across processes, with data verified.

The same module runs against upstream's wheel (``MOONCAKE_PY_IMPL=upstream`` with the
peer venv's python), which is what shows the API and return codes match. Tests of
behaviour upstream leaves undefined (a crash) run against ours only.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import signal
import threading
import time
import uuid

import pytest

import mooncake.engine as engine_mod
from mooncake.engine import TransferEngine, TransferNotify, TransferOpcode

from conftest import IMPL, peer_venv

ours_only = pytest.mark.skipif(
    IMPL != "ours", reason="ours only: upstream crashes, blocks or is undefined here"
)
MiB = 1 << 20
DEAD_PEER = "127.0.0.1:1"  # nothing listens on port 1


def new_engine(metadata: str = "P2PHANDSHAKE", hostname: str = "127.0.0.1") -> TransferEngine:
    te = TransferEngine()
    assert te.initialize(hostname, metadata, "tcp", "") == 0
    return te


def session(te: TransferEngine) -> str:
    return f"127.0.0.1:{te.get_rpc_port()}"


class Node:
    """An initialized engine with one registered ctypes buffer."""

    def __init__(self, size: int = 4 * MiB) -> None:
        self.te = new_engine()
        self.session = session(self.te)
        self.buf = ctypes.create_string_buffer(size)
        self.addr = ctypes.addressof(self.buf)
        self.size = size
        assert self.te.register_memory(self.addr, size) == 0

    def put(self, off: int, data: bytes) -> None:
        ctypes.memmove(self.addr + off, data, len(data))

    def get(self, off: int, length: int) -> bytes:
        return ctypes.string_at(self.addr + off, length)

    def close(self) -> None:
        assert self.te.unregister_memory(self.addr) == 0


@pytest.fixture(scope="module")
def pair():
    a, b = Node(), Node()
    yield a, b
    a.close()
    b.close()


def rand(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def wait_notifies(te: TransferEngine, count: int, timeout: float = 10.0) -> list:
    got: list = []
    end = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < end:
        batch = te.get_notifies()
        assert isinstance(batch, list) and all(isinstance(n, TransferNotify) for n in batch)
        got += [(n.name, n.msg) for n in batch]
        if len(got) < count:
            time.sleep(0.02)
    return got


# --- module surface ------------------------------------------------------------------


def test_implementation_is_the_selected_one():
    origin = engine_mod.__file__ or ""
    if IMPL == "upstream":
        assert origin.endswith(".so"), origin
    else:
        assert origin.endswith("engine.py"), origin
        from mooncake import _lib

        assert _lib.lib() is not None and _lib.library_path() is not None


def test_opcode_and_notify_types():
    # (upstream's pybind11 enum does not compare equal to ints; int() is the value)
    assert int(TransferOpcode.Read) == 0 and int(TransferOpcode.Write) == 1
    assert TransferOpcode(1) == TransferOpcode.Write
    assert TransferOpcode.Read.name == "Read"
    assert TransferEngine.TransferOpcode is TransferOpcode
    assert engine_mod.Read == TransferOpcode.Read and engine_mod.Write == TransferOpcode.Write
    assert TransferOpcode.Read != TransferOpcode.Write
    n = TransferNotify("name", "msg")
    assert (n.name, n.msg) == ("name", "msg")
    n.msg = "other"
    assert n.msg == "other"
    empty = TransferNotify()
    assert (empty.name, empty.msg) == ("", "")
    for flag in ("SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_MNNVL", "SUPPORT_MUSA", "SUPPORT_INTRA_NVLINK", "SUPPORT_CUDA"):
        assert isinstance(getattr(engine_mod, flag), bool)


def test_methods_exist():
    for name in (
        "initialize initialize_ext get_rpc_port register_memory unregister_memory "
        "batch_register_memory batch_unregister_memory allocate_managed_buffer "
        "free_managed_buffer write_bytes_to_buffer read_bytes_from_buffer "
        "get_first_buffer_address transfer_sync_write transfer_sync_read transfer_sync "
        "batch_transfer_sync_write batch_transfer_sync_read batch_transfer_sync "
        "batch_transfer_async_write batch_transfer_async_read batch_transfer_async "
        "get_batch_transfer_status transfer_submit_write transfer_check_status "
        "get_notifies send_probe get_local_topology get_engine get_engine_ptr "
        "warmup_efa_segment"
    ).split():
        assert callable(getattr(TransferEngine, name)), name


def test_argument_types_and_positional_only():
    te = TransferEngine()
    with pytest.raises(TypeError):
        te.initialize(arg0="127.0.0.1")  # positional-only
    with pytest.raises(TypeError):
        te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp")  # missing argument
    te = new_engine()
    with pytest.raises(TypeError):
        te.register_memory("not an address", 10)
    with pytest.raises(TypeError):
        te.register_memory(-1, 10)
    with pytest.raises(TypeError):
        te.transfer_sync(DEAD_PEER, 1, 1, 1, "write")
    with pytest.raises(TypeError):
        te.unregister_memory(buffer_addr=1)  # positional-only


# --- lifecycle -----------------------------------------------------------------------


def test_initialize_p2p_and_introspection():
    te = new_engine()
    port = te.get_rpc_port()
    assert 15000 <= port <= 17000
    assert te.get_engine() is not None
    assert type(te.get_engine()).__name__ == "InnerTransferEngine"
    ptr = te.get_engine_ptr()
    assert isinstance(ptr, int) and ptr != 0
    topo = json.loads(te.get_local_topology())
    assert isinstance(topo, dict)  # upstream: {} under MC_FORCE_TCP, else per-NUMA entries
    assert all(isinstance(v, list) for v in topo.values())
    assert isinstance(json.loads(te.get_local_topology("mlx5_0")), dict)
    assert te.warmup_efa_segment("127.0.0.1:1") == 0
    assert te.get_notifies() == []


def test_initialize_failures(http_metadata_server):
    te = TransferEngine()
    dead_http = "http://127.0.0.1:1/metadata"
    assert te.initialize("127.0.0.1", dead_http, "tcp", "") == -1
    assert TransferEngine().initialize("127.0.0.1", "P2PHANDSHAKE", "xgmi", "") == -1


@ours_only
def test_unreachable_etcd_and_redis_fail_cleanly():
    # No "://" means etcd; nothing listens on port 1.
    assert TransferEngine().initialize("127.0.0.1", "127.0.0.1:1", "tcp", "") == -1
    assert TransferEngine().initialize_ext("127.0.0.1", "127.0.0.1:1", "tcp", "", "etcd") == -1
    assert TransferEngine().initialize_ext("127.0.0.1", "127.0.0.1:1", "tcp", "", "redis") == -1


@ours_only
def test_uninitialized_engine_returns_failure_codes():
    te = TransferEngine()
    assert te.get_engine() is None and te.get_engine_ptr() == 0
    assert te.get_rpc_port() == -1
    assert te.register_memory(4096, 10) == -1
    assert te.unregister_memory(4096) == -1
    assert te.allocate_managed_buffer(10) == 0
    assert te.transfer_sync_write(DEAD_PEER, 1, 1, 1) == -1
    assert te.batch_transfer_async_write(DEAD_PEER, [1], [1], [1]) == 0
    assert te.transfer_check_status(1) == -1
    assert te.get_batch_transfer_status([1]) == -1
    assert te.send_probe(DEAD_PEER) == -1
    assert te.get_notifies() == []


@ours_only
def test_inner_engine_handle():
    """get_engine() is the native handle for other ctypes code (the store), and keeps
    the engine alive on its own."""
    from mooncake import _lib

    te = new_engine()
    inner = te.get_engine()
    assert int(inner) == te.get_engine_ptr() == inner.handle
    port = te.get_rpc_port()
    del te
    buf = ctypes.create_string_buffer(64)
    assert _lib.lib().getLocalIpAndPort(inner, buf, len(buf)) == 0
    assert buf.value.decode() == f"127.0.0.1:{port}"
    assert TransferEngine().initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", None) == 0
    te = new_engine()
    assert te.batch_register_memory([4096, 8192], [10]) == -1  # upstream: undefined


# --- memory --------------------------------------------------------------------------


def test_register_memory_codes():
    te = new_engine()
    buf = ctypes.create_string_buffer(64 * 1024)
    base = ctypes.addressof(buf)
    assert te.register_memory(base, 4096) == 0
    assert te.register_memory(base + 100, 100) == -7  # overlap
    assert te.register_memory(base + 8192, 0) == -1  # zero length
    assert te.unregister_memory(base + 1) == -3  # not a registered base
    assert te.unregister_memory(base) == 0
    assert te.unregister_memory(base) == -3
    # batch: all at once, overlap inside the list or with registered regions
    addrs = [base, base + 4096, base + 8192]
    assert te.batch_register_memory(addrs, [4096, 4096, 4096]) == 0
    assert te.batch_register_memory([base + 12288], [4096], "cpu:0") == 0
    assert te.batch_register_memory([base + 100], [10]) == -7
    assert te.batch_register_memory([base + 20000, base + 20010], [100, 100]) == -7
    assert te.batch_register_memory([base + 30000], [0]) == -1
    assert te.batch_register_memory([], []) == 0
    assert te.batch_unregister_memory(addrs + [base + 12288]) == 0
    assert te.batch_unregister_memory([base]) == -3
    assert te.batch_unregister_memory([]) == 0
    assert te.register_memory(buffer_addr=base, capacity=4096, location="cpu:0") == 0
    assert te.unregister_memory(base) == 0


def test_write_and_read_bytes():
    te = new_engine()
    buf = ctypes.create_string_buffer(64)
    base = ctypes.addressof(buf)
    assert te.write_bytes_to_buffer(base, b"\x00binary\xffdata", 12) == 0
    assert buf.raw[:12] == b"\x00binary\xffdata"
    assert te.read_bytes_from_buffer(base, 12) == b"\x00binary\xffdata"
    assert te.read_bytes_from_buffer(base + 1, 6) == b"binary"
    assert te.write_bytes_to_buffer(base, "text", 4) == 0
    assert te.read_bytes_from_buffer(base, 4) == b"text"
    assert te.read_bytes_from_buffer(base, 0) == b""


def test_managed_buffers(pair):
    a, b = pair
    small = a.te.allocate_managed_buffer(4096)
    other = a.te.allocate_managed_buffer(8192)
    mid = a.te.allocate_managed_buffer(3 * MiB)
    assert small and other and mid
    spans = sorted([(small, 8192), (other, 8192), (mid, 4 * MiB)])
    for (lo, n), (hi, _) in zip(spans, spans[1:]):
        assert lo + n <= hi, "managed buffers overlap"
    # already registered (the slab they come from is)
    assert a.te.register_memory(small, 16) == -7
    # usable as transfer endpoints, locally and by the peer
    data = rand(3 * MiB, 7)
    assert a.te.write_bytes_to_buffer(mid, data, len(data)) == 0
    assert b.te.transfer_sync_read(a.session, b.addr, mid, len(data)) == 0
    assert b.get(0, len(data)) == data
    b.put(0, b"into managed memory")
    assert a.te.transfer_sync_read(b.session, small, b.addr, 19) == 0
    assert a.te.read_bytes_from_buffer(small, 19) == b"into managed memory"
    for addr, n in ((small, 4096), (other, 8192), (mid, 3 * MiB)):
        assert a.te.free_managed_buffer(addr, n) == 0
    # freed blocks are reused
    again = a.te.allocate_managed_buffer(4096)
    assert again in (small, other)
    assert a.te.free_managed_buffer(again, 4096) == 0
    # above 256 MiB: a buffer of its own, unregistered when freed
    big = a.te.allocate_managed_buffer(300 * MiB)
    assert big
    assert a.te.write_bytes_to_buffer(big + 300 * MiB - 5, b"tail!", 5) == 0
    assert b.te.transfer_sync_read(a.session, b.addr, big + 300 * MiB - 5, 5) == 0
    assert b.get(0, 5) == b"tail!"
    assert a.te.free_managed_buffer(big, 300 * MiB) == 0


# --- transfers in one process ------------------------------------------------------


def test_transfer_sync_write_and_read(pair):
    a, b = pair
    data = rand(1 * MiB + 123, 1)
    a.put(0, data)
    assert a.te.transfer_sync_write(b.session, a.addr, b.addr + 4096, len(data)) == 0
    assert b.get(4096, len(data)) == data
    b.put(2 * MiB, rand(777, 2))
    assert a.te.transfer_sync_read(b.session, a.addr + 2 * MiB, b.addr + 2 * MiB, 777) == 0
    assert a.get(2 * MiB, 777) == rand(777, 2)
    # generic form, keywords as upstream names them
    b.put(0, b"generic read")
    assert (
        a.te.transfer_sync(
            target_hostname=b.session,
            buffer=a.addr,
            peer_buffer_address=b.addr,
            length=12,
            opcode=TransferOpcode.Read,
            transport_hint="",
        )
        == 0
    )
    assert a.get(0, 12) == b"generic read"
    a.put(100, b"generic write")
    assert a.te.transfer_sync(b.session, a.addr + 100, b.addr + 100, 13, TransferOpcode.Write) == 0
    assert b.get(100, 13) == b"generic write"
    # zero length completes
    assert a.te.transfer_sync_write(b.session, a.addr, b.addr, 0) == 0


def test_transfer_to_own_segment(pair):
    a, _ = pair
    a.put(0, b"loopback copy")
    assert a.te.transfer_sync_write(a.session, a.addr, a.addr + 3 * MiB, 13) == 0
    assert a.get(3 * MiB, 13) == b"loopback copy"


def test_batch_transfer_sync(pair):
    a, b = pair
    blocks = [rand(10_000 + i, 10 + i) for i in range(8)]
    srcs, dsts, lens = [], [], []
    for i, blk in enumerate(blocks):
        a.put(i * 16384, blk)
        srcs.append(a.addr + i * 16384)
        dsts.append(b.addr + 1 * MiB + i * 16384)
        lens.append(len(blk))
    assert a.te.batch_transfer_sync_write(b.session, srcs, dsts, lens) == 0
    for i, blk in enumerate(blocks):
        assert b.get(1 * MiB + i * 16384, len(blk)) == blk
    a.put(0, bytes(len(blocks) * 16384))
    assert a.te.batch_transfer_sync_read(b.session, srcs, dsts, lens) == 0
    for i, blk in enumerate(blocks):
        assert a.get(i * 16384, len(blk)) == blk
    b.put(0, b"one")
    assert a.te.batch_transfer_sync(b.session, [a.addr + 500], [b.addr], [3], TransferOpcode.Read) == 0
    assert a.get(500, 3) == b"one"
    # mismatched lists, empty batch
    assert a.te.batch_transfer_sync_write(b.session, srcs, dsts[:-1], lens) == -1
    assert a.te.batch_transfer_sync_write(b.session, [], [], []) == 0


def test_async_batches_and_status(pair):
    a, b = pair
    data = [rand(50_000, 20 + i) for i in range(4)]
    for i, d in enumerate(data):
        a.put(i * 65536, d)
    ids = [
        a.te.batch_transfer_async_write(
            b.session, [a.addr + i * 65536], [b.addr + 2 * MiB + i * 65536], [len(data[i])]
        )
        for i in range(2)
    ]
    ids.append(
        a.te.batch_transfer_async(
            b.session,
            [a.addr + 2 * 65536, a.addr + 3 * 65536],
            [b.addr + 2 * MiB + 2 * 65536, b.addr + 2 * MiB + 3 * 65536],
            [50_000, 50_000],
            TransferOpcode.Write,
        )
    )
    assert all(isinstance(i, int) and i != 0 for i in ids)
    assert len(set(ids)) == 3
    assert a.te.get_batch_transfer_status(ids) == 0
    for i, d in enumerate(data):
        assert b.get(2 * MiB + i * 65536, len(d)) == d
    # async read back
    a.put(0, bytes(65536))
    bid = a.te.batch_transfer_async_read(b.session, [a.addr], [b.addr + 2 * MiB], [50_000])
    assert bid != 0
    assert a.te.get_batch_transfer_status([bid]) == 0
    assert a.get(0, 50_000) == data[0]
    assert a.te.get_batch_transfer_status([]) == 0
    # mismatched lists
    assert a.te.batch_transfer_async_write(b.session, [a.addr], [], [1]) == 0


def test_submit_and_check_status(pair):
    a, b = pair
    a.put(0, b"submitted write")
    bid = a.te.transfer_submit_write(b.session, a.addr, b.addr + 3 * MiB, 15)
    assert bid != 0
    end = time.monotonic() + 30
    while (rc := a.te.transfer_check_status(bid)) == 0 and time.monotonic() < end:
        time.sleep(0.001)
    assert rc == 1
    assert b.get(3 * MiB, 15) == b"submitted write"
    bid = a.te.transfer_submit_write(
        target_hostname=b.session, buffer=a.addr, peer_buffer_address=b.addr, length=4, transport_hint=""
    )
    assert bid != 0
    while (rc := a.te.transfer_check_status(bid)) == 0:
        time.sleep(0.001)
    assert rc == 1


def test_errors_unknown_segment(pair):
    a, b = pair
    assert a.te.transfer_sync_write(DEAD_PEER, a.addr, b.addr, 8) == -1
    assert a.te.transfer_sync_read(DEAD_PEER, a.addr, b.addr, 8) == -1
    assert a.te.batch_transfer_sync_write(DEAD_PEER, [a.addr], [b.addr], [8]) == -1
    assert a.te.batch_transfer_async_write(DEAD_PEER, [a.addr], [b.addr], [8]) == 0
    assert a.te.transfer_submit_write(DEAD_PEER, a.addr, b.addr, 8) == 0
    assert a.te.get_first_buffer_address(DEAD_PEER) == 0
    assert a.te.send_probe(DEAD_PEER) == -102
    assert a.te.transfer_sync_write("", a.addr, b.addr, 8) == -1


def test_errors_unregistered_remote_address(pair):
    a, b = pair
    outside = b.addr + b.size + 64 * MiB  # not inside any registered buffer of b
    assert a.te.transfer_sync_write(b.session, a.addr, outside, 16) == -1
    assert a.te.transfer_sync_read(b.session, a.addr, outside, 16) == -1
    straddling = b.addr + b.size - 8
    assert a.te.transfer_sync_write(b.session, a.addr, straddling, 16) == -1
    assert a.te.batch_transfer_sync_write(b.session, [a.addr, a.addr], [b.addr, outside], [8, 8]) == -1
    bid = a.te.transfer_submit_write(b.session, a.addr, outside, 16)
    assert bid != 0
    while (rc := a.te.transfer_check_status(bid)) == 0:
        time.sleep(0.001)
    assert rc == -1
    bid = a.te.batch_transfer_async_write(b.session, [a.addr], [outside], [16])
    assert bid != 0
    assert a.te.get_batch_transfer_status([bid]) == -1
    # the engines still work afterwards
    a.put(0, b"still fine")
    assert a.te.transfer_sync_write(b.session, a.addr, b.addr, 10) == 0
    assert b.get(0, 10) == b"still fine"


def test_notifies(pair):
    a, b = pair
    b.te.get_notifies()
    a.put(0, b"with notify")
    notify = TransferNotify("sender-a", "payload 1")
    assert a.te.transfer_sync(b.session, a.addr, b.addr, 11, TransferOpcode.Write, notify) == 0
    assert b.get(0, 11) == b"with notify"
    assert a.te.batch_transfer_sync(
        b.session, [a.addr], [b.addr + 64], [11], TransferOpcode.Write, TransferNotify("sender-a", "payload 2")
    ) == 0
    got = wait_notifies(b.te, 2)
    assert got == [("sender-a", "payload 1"), ("sender-a", "payload 2")]
    assert b.te.get_notifies() == []
    # a failed transfer sends no notify
    outside = b.addr + b.size + 64 * MiB
    assert a.te.transfer_sync(b.session, a.addr, outside, 4, TransferOpcode.Write, TransferNotify("x", "y")) == -1
    time.sleep(0.2)
    assert b.te.get_notifies() == []


def test_probe_and_first_buffer():
    a, b = Node(), Node()
    try:
        assert a.te.send_probe(b.session) == 0
        assert b.te.send_probe(peer_server_name=a.session) == 0
        assert a.te.get_first_buffer_address(b.session) == b.addr
        assert b.te.get_first_buffer_address(a.session) == a.addr
    finally:
        a.close()
        b.close()


def test_threads_transfer_concurrently(pair):
    a, b = pair
    n_threads, per_thread, size = 4, 16, 8192
    errors: list = []

    def worker(t: int) -> None:
        for i in range(per_thread):
            off = (t * per_thread + i) * size
            payload = bytes([(t * 31 + i) & 0xFF]) * size
            a.put(off, payload)
            if a.te.transfer_sync_write(b.session, a.addr + off, b.addr + off, size) != 0:
                errors.append((t, i))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    for t in range(n_threads):
        for i in range(per_thread):
            off = (t * per_thread + i) * size
            assert b.get(off, size) == bytes([(t * 31 + i) & 0xFF]) * size


# --- HTTP metadata -------------------------------------------------------------------


def test_http_metadata(http_metadata_server):
    url = http_metadata_server
    name_a, name_b = f"node-a-{uuid.uuid4().hex[:8]}", f"node-b-{uuid.uuid4().hex[:8]}"
    a = new_engine(url, name_a)
    b = TransferEngine()
    host_port = url[len("http://") :]
    assert b.initialize_ext(name_b, host_port, "tcp", "", "http") == 0
    buf_a, buf_b = ctypes.create_string_buffer(MiB), ctypes.create_string_buffer(MiB)
    pa, pb = ctypes.addressof(buf_a), ctypes.addressof(buf_b)
    assert a.register_memory(pa, MiB) == 0
    assert b.register_memory(pb, MiB) == 0
    data = rand(300_000, 3)
    ctypes.memmove(pa, data, len(data))
    assert a.transfer_sync_write(name_b, pa, pb + 1000, len(data)) == 0
    assert ctypes.string_at(pb + 1000, len(data)) == data
    assert b.transfer_sync_read(name_a, pb, pa + 5, 100) == 0
    assert ctypes.string_at(pb, 100) == data[5:105]
    assert a.get_first_buffer_address(name_b) == pb
    assert a.send_probe(name_b) == 0
    assert a.transfer_sync_write("node-unknown", pa, pb, 1) == -1
    assert a.unregister_memory(pa) == 0
    assert b.unregister_memory(pb) == 0


# --- across processes ------------------------------------------------------------------


def _exercise_peer(peer) -> None:
    """The engine API between this process and a peer process, both directions."""
    me = Node()
    try:
        data = rand(200_000, 5)
        me.put(0, data)
        assert me.te.transfer_sync_write(peer.segment, me.addr, peer.addr + 4096, len(data)) == 0
        assert peer.dump(4096, len(data)) == data
        peer.fill(0, b"from the peer process")
        assert me.te.transfer_sync_read(peer.segment, me.addr + MiB, peer.addr, 21) == 0
        assert me.get(MiB, 21) == b"from the peer process"
        # batch both ways
        srcs = [me.addr + i * 1000 for i in range(5)]
        dsts = [peer.addr + 300_000 + i * 1000 for i in range(5)]
        assert me.te.batch_transfer_sync_write(peer.segment, srcs, dsts, [1000] * 5) == 0
        assert peer.dump(300_000, 5000) == data[:5000]
        bid = me.te.batch_transfer_async_read(peer.segment, [me.addr + 2 * MiB], [peer.addr], [21])
        assert bid != 0 and me.te.get_batch_transfer_status([bid]) == 0
        assert me.get(2 * MiB, 21) == b"from the peer process"
        # the peer initiates
        me.put(3 * MiB, b"pulled by the peer")
        assert peer.cmd(f"read {me.session} 500000 {me.addr + 3 * MiB} 18")["rc"] == 0
        assert peer.dump(500000, 18) == b"pulled by the peer"
        assert peer.cmd(f"write {me.session} 0 {me.addr + 3 * MiB + 100} 21")["rc"] == 0
        assert me.get(3 * MiB + 100, 21) == b"from the peer process"
        triples = json.dumps([[0, me.addr + 3 * MiB + 200, 4], [4, me.addr + 3 * MiB + 300, 4]])
        assert peer.cmd(f"batch_write {me.session} {triples}")["rc"] == 0
        assert me.get(3 * MiB + 200, 4) == b"from" and me.get(3 * MiB + 300, 4) == b" the"
        # notifies both ways
        assert me.te.transfer_sync(
            peer.segment, me.addr, peer.addr, 8, TransferOpcode.Write, TransferNotify("me", "hello peer")
        ) == 0
        end = time.monotonic() + 10
        notes: list = []
        while not notes and time.monotonic() < end:
            notes = peer.cmd("notifies")["notifies"]
            time.sleep(0.02)
        assert notes == [["me", "hello peer"]]
        me.te.get_notifies()
        assert peer.cmd(f"write_notify {me.session} 0 {me.addr + 3 * MiB} 4 peer hello-me")["rc"] == 0
        assert wait_notifies(me.te, 1) == [("peer", "hello-me")]
        # probe, first buffer, error codes
        assert me.te.send_probe(peer.segment) == 0
        assert peer.cmd(f"probe {me.session}")["rc"] == 0
        assert me.te.get_first_buffer_address(peer.segment) == peer.addr
        assert peer.cmd(f"first_buffer {me.session}")["addr"] == me.addr
        outside = peer.addr + peer.size + 64 * MiB
        assert me.te.transfer_sync_write(peer.segment, me.addr, outside, 8) == -1
        assert peer.cmd(f"write {me.session} 0 {me.addr + me.size + 64 * MiB} 8")["rc"] == -1
        assert me.te.transfer_sync_write(peer.segment, me.addr, peer.addr, 8) == 0
    finally:
        me.close()


def test_two_processes(spawn_peer):
    _exercise_peer(spawn_peer(IMPL))


def test_interop_with_the_other_implementation(spawn_peer):
    other = "upstream" if IMPL == "ours" else "ours"
    if other == "upstream" and peer_venv() is None:
        pytest.skip("upstream peer venv not installed (MOONCAKE_PEER_VENV)")
    _exercise_peer(spawn_peer(other))


def _stop(pid: int, timeout: float = 30.0) -> None:
    """SIGSTOP ``pid`` and wait until every thread of it is stopped: kill(2) returns
    before a thread running on another core stops, and that thread may still answer."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # the thread ended
                continue
        if all(state in ("T", "t") for state in states):
            return
        assert time.monotonic() < deadline, f"{pid} not stopped: {states}"
        time.sleep(0.01)


def test_transfer_deadline(spawn_peer, monkeypatch):
    """A peer that stops answering: transfer_sync gives up after MC_TRANSFER_TIMEOUT
    (5 s, the minimum; 1 is raised to 5) and returns -1. (Ours leases its memory to
    same-host peers, which then read it without asking, stopped or not: the peer here
    is kept on the path where it must answer.)"""
    monkeypatch.setenv("MC_TRANSFER_TIMEOUT", "1")
    peer = spawn_peer(IMPL, extra_env={"MC_SAME_HOST_NO_LEASE": "1"})
    me = Node()
    try:
        assert me.te.transfer_sync_write(peer.segment, me.addr, peer.addr, 64) == 0
        _stop(peer.proc.pid)
        ticks = [0]
        stop = threading.Event()

        def ticker() -> None:  # runs only if the wait releases the GIL
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.01)

        thread = threading.Thread(target=ticker)
        thread.start()
        try:
            start = time.monotonic()
            # a read: the data must come from the stopped process
            rc = me.te.transfer_sync_read(peer.segment, me.addr, peer.addr, 256 * 1024)
            elapsed = time.monotonic() - start
        finally:
            os.kill(peer.proc.pid, signal.SIGCONT)
            stop.set()
            thread.join()
        assert rc == -1
        assert 4.5 <= elapsed < 30, elapsed
        assert ticks[0] > 100, "other Python threads did not run during the wait"
        assert peer.cmd("probe " + me.session)["rc"] == 0
    finally:
        me.close()
