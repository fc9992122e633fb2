"""The call sequences of the serving integrations that use the Store, replayed without
them installed: SGLang's standalone HiCache (a dummy store over the host pool from
``MooncakeHostMemAllocator``), LMCache's ``setup(dict)`` keys, and SGLang's one
``TransferEngine`` shared by disaggregation and HiCache (``setup(..., engine=...)``).
"""

from __future__ import annotations

import ctypes
import logging
import os
import warnings
from typing import Iterator, Set

import pytest

from mooncake.engine import TransferEngine
from mooncake.store import MooncakeDistributedStore, MooncakeHostMemAllocator, ReplicateConfig
from store_env import LOCAL_BUFFER, OURS, SEGMENT, Master, _free_ports, new_store, pattern

ours_only = pytest.mark.skipif(not OURS, reason="fixed in mooncake-rs (upstream 0.3.13 fails it)")

#: SGLang's DEFAULT_LOCAL_BUFFER_SIZE.
SGLANG_LOCAL_BUFFER = 16 << 20


def _in_place(store: MooncakeDistributedStore, addr: int, size: int) -> int:
    from mooncake import _store_ffi as ffi

    return ffi.L().mooncake_store_dummy_moves_in_place(store._h, addr, size)


# --- SGLang standalone HiCache (a dummy store) ---------------------------------------


@pytest.fixture(scope="module")
def real(master: Master) -> Iterator["RealClient"]:
    from test_dummy_client import RealClient

    r = RealClient(master)
    yield r
    r.stop()


def _dummy(real) -> MooncakeDistributedStore:
    from test_dummy_client import dummy_store

    return dummy_store(real, SGLANG_LOCAL_BUFFER)


@ours_only
def test_sglang_standalone_hicache(real, master: Master, k) -> None:
    """MooncakeHostTensorAllocator.alloc(n), setup_dummy(n, 16 MiB, client), then
    register_buffer of the K and V halves (SGLang raised on -600 here), a warm-up, and
    the pages put and read back in place, larger than the local buffer could stage."""
    page, pages = 1 << 20, 12
    n = 2 * page * pages
    allocator = MooncakeHostMemAllocator()
    base = allocator.alloc(n)
    assert base and base % 4096 == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = _dummy(real)
        k_half, v_half = base, base + n // 2
        assert s.register_buffer(k_half, n // 2) == 0
        assert s.register_buffer(v_half, n // 2) == 0
    try:
        assert _in_place(s, k_half, n // 2) == 1 and _in_place(s, v_half, n // 2) == 1
        warm = k("sglang_mooncake_store_warmup_key")
        assert s.put(warm, bytes(4096)) == 0
        assert s.is_exist(warm) == 1 and s.get(warm) == bytes(4096)
        ptrs = [base + i * page for i in range(2 * pages)]
        for i, p in enumerate(ptrs):
            ctypes.memmove(p, pattern(page, i), page)
        keys = [f"{k(f'h{i}')}_0_{x}" for i in range(pages) for x in ("k", "v")]
        assert s.batch_is_exist(keys) == [0] * len(keys)
        assert s.batch_put_from(keys, ptrs, [page] * len(keys)) == [0] * len(keys)
        assert s.batch_is_exist(keys) == [1] * len(keys)
        ctypes.memset(base, 0, n)
        # 24 MiB in one call: more than the 16 MiB local buffer could stage.
        assert s.batch_get_into(keys, ptrs, [page] * len(keys)) == [page] * len(keys)
        assert all(ctypes.string_at(p, page) == pattern(page, i) for i, p in enumerate(ptrs))
        other = new_store(master)
        try:
            assert other.get(keys[5]) == pattern(page, 5), "the real client stored the bytes"
        finally:
            other.close()
        assert s.unregister_buffer(k_half) == 0 and s.unregister_buffer(v_half) == 0
    finally:
        s.close()
        assert allocator.free(base) == 0


@ours_only
def test_dummy_registers_private_memory_with_one_warning_and_stages_it(real, k) -> None:
    s = _dummy(real)
    a, b = ctypes.create_string_buffer(8192), ctypes.create_string_buffer(8192)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert s.register_buffer(ctypes.addressof(a), 8192) == 0
            assert s.register_buffer(ctypes.addressof(b), 8192) == 0
        staged = [w for w in caught if "staged through the local buffer" in str(w.message)]
        assert len(staged) == 1, [str(w.message) for w in caught]
        assert _in_place(s, ctypes.addressof(a), 8192) == 0
        ctypes.memmove(a, pattern(8192, 1), 8192)
        assert s.put_from(k("p"), ctypes.addressof(a), 8192) == 0
        assert s.get_into(k("p"), ctypes.addressof(b), 8192) == 8192
        assert b.raw == pattern(8192, 1)
        assert s.unregister_buffer(ctypes.addressof(a)) == 0
        assert s.unregister_buffer(ctypes.addressof(a)) != 0, "unregistered once"
        assert s.unregister_buffer(ctypes.addressof(b)) == 0
    finally:
        s.close()


def test_host_allocator_memory_on_a_real_store(store, k) -> None:
    """The allocator's memory works for a real client too, a sub-range included."""
    allocator = MooncakeHostMemAllocator()
    base = allocator.alloc(1 << 20)
    try:
        assert store.register_buffer(base + 4096, 8192) == 0
        ctypes.memmove(base + 4096, pattern(8192, 2), 8192)
        assert store.put_from(k("x"), base + 4096, 8192) == 0
        ctypes.memset(base + 4096, 0, 8192)
        assert store.get_into(k("x"), base + 4096, 8192) == 8192
        assert ctypes.string_at(base + 4096, 8192) == pattern(8192, 2)
        assert store.unregister_buffer(base + 4096) == 0
    finally:
        assert allocator.free(base) == 0
    assert allocator.free(base) == -1


# --- LMCache's setup(dict) --------------------------------------------------------------


def _lmcache_config(master: Master, master_address: str) -> dict:
    """LMCache's MooncakeStoreConnectorConfig.setup_config: its defaults and key names
    (all strings), forwarded to setup() as they are."""
    return {
        "local_hostname": "127.0.0.1",
        "metadata_server": master.metadata,
        "global_segment_size": str(SEGMENT),
        "local_buffer_size": str(LOCAL_BUFFER),
        "protocol": "tcp",
        "device_name": "",
        "master_server_address": master_address,
    }


@ours_only
def test_lmcache_setup_dict_keys(master: Master, k) -> None:
    s = MooncakeDistributedStore()
    try:
        assert s.setup(_lmcache_config(master, master.addr)) == 0
        assert s.put(k("lm"), b"lmcache") == 0 and s.get(k("lm")) == b"lmcache"
    finally:
        s.close()


@ours_only
def test_a_failed_setup_logs_the_master_it_tried(master: Master, caplog) -> None:
    closed = f"127.0.0.1:{_free_ports(1)[0]}"
    s = MooncakeDistributedStore()
    with caplog.at_level(logging.ERROR, logger="mooncake.store"):
        assert s.setup(_lmcache_config(master, closed)) != 0
    assert any(closed in r.getMessage() for r in caplog.records), caplog.text
    from mooncake import _lib

    assert closed in _lib.last_error(), "the C ABI's last error names it too"
    assert s.health_check() == 1


@ours_only
def test_the_dict_form_reads_the_integrations_names() -> None:
    from mooncake._store_setup import DEFAULT_MASTER, dict_setup

    base = {"local_hostname": "h", "metadata_server": "P2PHANDSHAKE"}
    d = dict_setup({**base, "master_server_address": "m:1", "device_name": "mlx5_0"})
    assert (d.master, d.devices) == (b"m:1", b"mlx5_0")
    both = {**base, "master_server_addr": "m:2", "master_server_address": "m:1", "rdma_devices": "a", "device_name": "b"}
    d = dict_setup(both)
    assert (d.master, d.devices) == (b"m:2", b"a"), "upstream's own names win"
    assert dict_setup(base).master == DEFAULT_MASTER.encode()


# --- SGLang's shared TransferEngine -----------------------------------------------------


def _listening_sockets() -> Set[int]:
    """Inodes of the TCP sockets this process listens on."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            mine.add(int(target[8:-1]))
    listening = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[9]) in mine:
                    listening.add(int(fields[9]))
    return listening


@ours_only
def test_sglang_shared_transfer_engine(master: Master, k) -> None:
    """TransferEngine.initialize for disaggregation, then store.setup(session_id, ...,
    engine=te.get_engine()) as SGLang's MooncakeStore does: no second engine or port,
    memory registered once with the engine serves the store, puts and gets work, and
    peers reach the store's segment at the engine's session."""
    te = TransferEngine()
    assert te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    session = f"127.0.0.1:{te.get_rpc_port()}"
    n = 1 << 20
    buf = te.allocate_managed_buffer(n)
    private = ctypes.create_string_buffer(n)
    assert te.register_memory(ctypes.addressof(private), n) == 0
    before = _listening_sockets()
    assert before, "the engine's own ports are seen"
    s = MooncakeDistributedStore()
    rc = s.setup(session, "P2PHANDSHAKE", SEGMENT, SGLANG_LOCAL_BUFFER, "tcp", "", master.addr, te.get_engine())
    assert rc == 0
    try:
        assert _listening_sockets() == before, "no engine of its own"
        assert s.get_hostname() == session
        # SGLang registers its host pool; memory the engine has is not registered twice.
        assert s.register_buffer(buf, n) == 0
        assert s.register_buffer(ctypes.addressof(private), n) == 0
        data = pattern(n // 2, 9)
        te.write_bytes_to_buffer(buf, data, len(data))
        cfg = ReplicateConfig()
        cfg.preferred_segment = session
        assert s.batch_put_from([k("a")], [buf], [len(data)], cfg) == [0]
        (replica,) = s.get_replica_desc(k("a"))
        assert replica.get_memory_descriptor().buffer_descriptor.transport_endpoint == session
        assert s.batch_get_into([k("a")], [ctypes.addressof(private)], [n]) == [len(data)]
        assert private.raw[: len(data)] == data
        peer = MooncakeDistributedStore()
        assert peer.setup("127.0.0.1", "P2PHANDSHAKE", 0, LOCAL_BUFFER, "tcp", "", master.addr) == 0
        try:
            assert peer.get(k("a")) == data, "read from the segment behind the shared engine"
            # Into the shared engine's segment (the module's other clients publish
            # their segments in HTTP metadata, which a P2P peer does not read).
            assert peer.put(k("b"), data[:4096], cfg) == 0
        finally:
            peer.close()
        assert s.get(k("b")) == data[:4096]
        assert s.unregister_buffer(buf) == 0
    finally:
        s.close()
    # The engine lives on with its registrations: still registered, once.
    assert te.register_memory(ctypes.addressof(private), n) != 0
    assert te.unregister_memory(ctypes.addressof(private)) == 0
    assert te.free_managed_buffer(buf, n) == 0


@ours_only
def test_setup_refuses_an_engine_that_is_not_one() -> None:
    s = MooncakeDistributedStore()
    with pytest.raises(RuntimeError, match="initialized mooncake.engine.TransferEngine"):
        s.setup("127.0.0.1", "P2PHANDSHAKE", 0, LOCAL_BUFFER, "tcp", "", "127.0.0.1:1", object())
    with pytest.raises(RuntimeError):
        s.setup("127.0.0.1", "P2PHANDSHAKE", 0, LOCAL_BUFFER, "tcp", "", "127.0.0.1:1", TransferEngine())
    assert s.health_check() == 1
