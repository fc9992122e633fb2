"""``mooncake.store`` against a live ``mooncake_master`` on 127.0.0.1.

The same module runs against our package (default) and upstream's wheel, which is what
proves the API matches:

    python3 -m pytest python/tests/test_store.py
    MOONCAKE_PY_IMPL=upstream $MOONCAKE_PEER_VENV/bin/python -m pytest python/tests/test_store.py

The master and the fixtures are those of ``store_env.py``. Tests marked "ours only"
cover behaviour where upstream's wheel crashes (calls on a closed or never set-up
store).
"""

from __future__ import annotations

import ctypes
import time
from typing import List

import pytest

from mooncake.store import (
    MooncakeDistributedStore,
    MooncakeHostMemAllocator,
    ReplicaStatus,
    ReplicateConfig,
    SoftPinAction,
)
import mooncake.store as mstore
from store_env import (
    INVALID_PARAMS,
    LEASE_S,
    LOCAL_BUFFER,
    OBJECT_HAS_LEASE,
    OBJECT_NOT_FOUND,
    SEGMENT,
    Keys,
    Master,
    Memory,
    new_store,
    ours_only,
    pattern,
)


# --- module surface ------------------------------------------------------------


def test_module_types_and_defaults() -> None:
    c = ReplicateConfig()
    assert c.replica_num == 1 and c.nof_replica_num == 0 and c.dfs_replica_num == 0
    assert c.with_hard_pin is False and c.prefer_alloc_in_same_node is False
    assert c.preferred_segments == [] and c.preferred_segment == "" and c.preferred_nof_segments == []
    assert c.soft_pin_action == SoftPinAction.PRESERVE and c.soft_pin_ttl_ms is None
    assert c.group_ids is None
    assert hasattr(ReplicateConfig, "group_ids"), "sglang probes the class for group_ids"
    with pytest.raises(AttributeError):
        c.replica_nmu = 2  # a typo is an error, not a silently ignored attribute
    assert str(c) == (
        "ReplicateConfig: { replica_num: 1, nof_replica_num: 0, dfs_replica_num: 0, "
        "soft_pin_action: PRESERVE, soft_pin_ttl_ms: default, with_hard_pin: 0, "
        "preferred_segments: [], preferred_nof_segments: [], prefer_alloc_in_same_node: 0, "
        "data_type: UNKNOWN }"
    )
    c.group_ids, c.preferred_segments = ["a", "b"], ["x"]
    c.soft_pin_action, c.soft_pin_ttl_ms = SoftPinAction.ENABLE, 5
    assert str(c).endswith("soft_pin_action: ENABLE, soft_pin_ttl_ms: 5, with_hard_pin: 0, "
                           "preferred_segments: [x], preferred_nof_segments: [], "
                           "prefer_alloc_in_same_node: 0, data_type: UNKNOWN, group_ids: [a, b] }")
    assert {m: v.value for m, v in SoftPinAction.__members__.items()} == {"PRESERVE": 0, "ENABLE": 1, "DISABLE": 2}
    assert [(m, v.value) for m, v in ReplicaStatus.__members__.items()] == [
        ("UNDEFINED", 0), ("INITIALIZED", 1), ("PROCESSING", 2), ("COMPLETE", 3), ("REMOVED", 4), ("FAILED", 5),
    ]
    assert int(ReplicaStatus.COMPLETE) == 3 and ReplicaStatus(3) == ReplicaStatus.COMPLETE
    assert repr(SoftPinAction.ENABLE) == "<SoftPinAction.ENABLE: 1>" and SoftPinAction.ENABLE.name == "ENABLE"
    assert mstore.COMPLETE == ReplicaStatus.COMPLETE and mstore.KVCACHE.value == 1
    assert repr(mstore.Descriptor()) == "<Descriptor size=0 buffer_address=0 transport_endpoint=>"
    for name in ("BufferHandle", "ReplicaDescriptor", "MemoryDescriptor", "DiskDescriptor", "ObjectDataType"):
        assert hasattr(mstore, name)
    a = MooncakeHostMemAllocator()
    p = a.alloc(1 << 16)
    assert p and p % 4096 == 0
    assert a.free(p) == 0


def test_setup_arity_is_checked() -> None:
    s = MooncakeDistributedStore()
    with pytest.raises(TypeError):
        s.setup("127.0.0.1", "P2PHANDSHAKE", 1 << 20)
    with pytest.raises(TypeError):
        s.setup("127.0.0.1", "P2PHANDSHAKE", 1 << 20, 1 << 20, "tcp", "", "127.0.0.1:1", None, bogus_option=1)
    assert s.health_check() == 1


# --- lifecycle -----------------------------------------------------------------


def test_setup_identity_and_health(store: MooncakeDistributedStore) -> None:
    assert store.health_check() == 0
    host, port = store.get_hostname().rsplit(":", 1)
    assert host == "127.0.0.1" and 12300 <= int(port) <= 14300


def test_setup_dict_form(master: Master) -> None:
    base = dict(local_hostname="127.0.0.1", metadata_server=master.metadata, master_server_addr=master.addr)
    assert MooncakeDistributedStore().setup(dict(metadata_server=master.metadata)) == INVALID_PARAMS
    assert MooncakeDistributedStore().setup(dict(base, global_segment_size="1023")) == INVALID_PARAMS
    assert MooncakeDistributedStore().setup(dict(base, global_segment_size="1024 parsecs")) == INVALID_PARAMS
    assert MooncakeDistributedStore().setup(dict(base, global_segment_size=100)) == INVALID_PARAMS
    s = MooncakeDistributedStore()
    assert s.setup(dict(base, global_segment_size=SEGMENT, local_buffer_size=LOCAL_BUFFER, protocol="tcp",
                        rdma_devices="", unknown_key=1)) == 0
    assert s.health_check() == 0
    assert s.put(Keys()("dict"), b"v") == 0
    assert s.close() == 0


def test_setup_with_upstream_keyword_options(master: Master, k: Keys) -> None:
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", master.metadata, SEGMENT, LOCAL_BUFFER, "tcp", "", master.addr, None,
                   enable_ssd_offload=False, ssd_offload_path="", tenant_id="default",
                   enable_client_http_server=False, client_http_port=9300) == 0
    assert s.put(k("a"), b"x") == 0 and s.get(k("a")) == b"x"
    assert s.close() == 0


@ours_only
def test_closed_and_unset_stores_return_codes(master: Master) -> None:
    s = MooncakeDistributedStore()
    assert s.health_check() == 1 and s.get_hostname() == ""
    assert s.put("a", b"b") == INVALID_PARAMS and s.get("a") == b"" and s.get_buffer("a") is None
    assert s.is_exist("a") == INVALID_PARAMS and s.batch_is_exist(["a"]) == [INVALID_PARAMS]
    assert s.get_replica_desc("a") == [] and s.batch_get_replica_desc(["a"]) == {}
    assert s.batch_put_from(["a"], [1], [1]) == [INVALID_PARAMS]
    assert s.remove_all() == INVALID_PARAMS and s.register_buffer(0, 0) == INVALID_PARAMS
    assert s.close() == 0
    s = new_store(master)
    assert s.close() == 0 and s.close() == 0
    assert s.health_check() == 1 and s.put("a", b"b") == INVALID_PARAMS and s.get("a") == b""
    assert s.setup("127.0.0.1", master.metadata, SEGMENT, LOCAL_BUFFER, "tcp", "", master.addr) == 0
    assert s.health_check() == 0
    s.close()


# --- bytes API -----------------------------------------------------------------


def test_put_get_bytes(store: MooncakeDistributedStore, k: Keys) -> None:
    assert store.put(k("a"), b"hello") == 0
    assert store.put(k("a"), b"other") == 0, "an existing key is a success"
    assert store.get(k("a")) == b"hello", "... that keeps the old value"
    assert store.get(k("missing")) == b""
    assert store.put(k("empty"), b"") == INVALID_PARAMS
    big = pattern(300_000, 3)
    assert store.put(k("big"), bytearray(big)) == 0 and store.get(k("big")) == big
    assert store.put(k("mv"), memoryview(b"xabcx")[1:4]) == 0 and store.get(k("mv")) == b"abc"
    assert store.put(k("cfg"), b"c", ReplicateConfig()) == 0 and store.get(k("cfg")) == b"c"
    with pytest.raises(TypeError):
        store.put(k("str"), "not bytes")


def test_put_parts_and_batches(store: MooncakeDistributedStore, k: Keys) -> None:
    assert store.put_parts(k("p"), b"ab", bytearray(b"cd"), memoryview(b"ef")) == 0
    assert store.get(k("p")) == b"abcdef"
    assert store.put_parts(k("pc"), b"1", b"2", config=ReplicateConfig()) == 0 and store.get(k("pc")) == b"12"
    assert store.put_batch([k("b1"), k("b2")], [b"1", b"22"]) == 0
    assert store.put_batch([k("b1"), k("b3")], [b"x", b"333"], ReplicateConfig()) == 0
    assert store.put_batch([k("b4")], [b"1", b"2"]) == INVALID_PARAMS
    assert store.put_batch([], []) == 0
    assert store.get_batch([k("b1"), k("b2"), k("b3"), k("none")]) == [b"1", b"22", b"333", b""]


def test_buffer_handles(store: MooncakeDistributedStore, k: Keys) -> None:
    assert store.put(k("h"), b"handle-bytes") == 0 and store.put(k("g"), b"zz") == 0
    h = store.get_buffer(k("h"))
    assert h is not None and h.size() == 12 and len(h) == 12 and h.ptr() != 0
    assert bytes(memoryview(h)) == b"handle-bytes"
    assert ctypes.string_at(h.ptr(), h.size()) == b"handle-bytes"
    assert store.get_buffer(k("none")) is None
    hs = store.batch_get_buffer([k("h"), k("none"), k("g")])
    assert hs[1] is None and bytes(memoryview(hs[0])) == b"handle-bytes" and bytes(memoryview(hs[2])) == b"zz"
    assert bytes(memoryview(hs[0])[:6]) == b"handle"


# --- zero-copy API -------------------------------------------------------------


def test_register_buffer_codes(store: MooncakeDistributedStore, mem: Memory) -> None:
    assert store.register_buffer(mem.addr, mem.size) == 0
    assert store.register_buffer(mem.addr, mem.size) == INVALID_PARAMS, "overlap"
    assert store.register_buffer(mem.addr + 4096, 100) == INVALID_PARAMS, "overlap"
    assert store.register_buffer(0, 100) == INVALID_PARAMS
    assert store.register_buffer(mem.addr, 0) == INVALID_PARAMS
    assert store.unregister_buffer(mem.addr) == 0
    assert store.unregister_buffer(mem.addr) == INVALID_PARAMS
    assert store.unregister_buffer(12345) == INVALID_PARAMS


def test_put_from_get_into(store: MooncakeDistributedStore, k: Keys, mem: Memory) -> None:
    data = pattern(100_000, 7)
    mem.write(0, data)
    assert store.register_buffer(mem.addr, mem.size) == 0
    try:
        assert store.put_from(k("z"), mem.addr, len(data)) == 0
        assert store.put_from(k("z0"), mem.addr, 0) == 0, "size 0 succeeds ..."
        assert store.is_exist(k("z0")) == 0, "... and stores nothing"
        dst = 1 << 20
        assert store.get_into(k("z"), mem.addr + dst, 200_000) == len(data)
        assert mem.read(dst, len(data)) == data
        assert store.get_into(k("z"), mem.addr + dst, 10) == INVALID_PARAMS, "buffer too small"
        assert store.get_into(k("none"), mem.addr + dst, 10) == OBJECT_NOT_FOUND
        cfg = ReplicateConfig()
        cfg.preferred_segment = store.get_hostname()
        assert store.put_from(k("zc"), mem.addr + 10, 500, cfg) == 0
        assert store.get(k("zc")) == data[10:510]
    finally:
        assert store.unregister_buffer(mem.addr) == 0


def test_batch_put_from_batch_get_into(store: MooncakeDistributedStore, k: Keys, mem: Memory) -> None:
    mem.write(0, pattern(4096, 1))
    keys = [k("a"), k("b"), k("a"), k("c")]
    assert store.batch_put_from(keys, [mem.addr, mem.addr + 100, mem.addr + 200, mem.addr], [100, 200, 300, 0]) == [
        0, 0, 0, INVALID_PARAMS,
    ]
    assert store.get_size(k("a")) == 300, "a duplicate key stores the last buffer given"
    assert store.batch_put_from([k("x")], [mem.addr, mem.addr], [1]) == [INVALID_PARAMS]
    assert store.batch_put_from([], [], []) == []
    dst = 1 << 20
    got = store.batch_get_into([k("a"), k("b"), k("none")],
                               [mem.addr + dst, mem.addr + dst + 4096, mem.addr + dst + 8192], [4096, 100, 4096])
    assert got == [300, INVALID_PARAMS, OBJECT_NOT_FOUND]
    assert mem.read(dst, 300) == pattern(4096, 1)[200:500]
    assert store.batch_get_into([k("a"), k("b")], [mem.addr], [1]) == [INVALID_PARAMS, INVALID_PARAMS]
    assert store.batch_get_into([], [], []) == []


def test_multi_buffers(store: MooncakeDistributedStore, k: Keys, mem: Memory) -> None:
    src = pattern(8192, 9)
    mem.write(0, src)
    cfg = ReplicateConfig()
    cfg.group_ids = ["g1", "g2"]
    assert store.batch_put_from_multi_buffers([k("m1"), k("m2")], [[mem.addr, mem.addr + 1000], [mem.addr + 3000]],
                                              [[100, 50], [20]], cfg) == [0, 0]
    assert store.get(k("m1")) == src[:100] + src[1000:1050]
    assert store.batch_put_from_multi_buffers([k("m3"), k("m4")], [[mem.addr], []], [[10], []]) == [0, INVALID_PARAMS]
    assert store.batch_put_from_multi_buffers([k("m5"), k("m6")], [[mem.addr]], [[10]]) == [INVALID_PARAMS] * 2
    assert store.batch_put_from_multi_buffers([k("m7"), k("m8")], [[mem.addr], [mem.addr, mem.addr]],
                                              [[10], [10]]) == [INVALID_PARAMS] * 2
    dst = 1 << 20
    got = store.batch_get_into_multi_buffers(
        [k("m1"), k("m2"), k("none")],
        [[mem.addr + dst, mem.addr + dst + 1000], [mem.addr + dst + 2000, mem.addr + dst + 3000], [mem.addr + dst + 4000]],
        [[100, 50], [10, 10], [5]])
    assert got == [150, 20, OBJECT_NOT_FOUND]
    assert mem.read(dst, 100) == src[:100] and mem.read(dst + 1000, 50) == src[1000:1050]
    assert mem.read(dst + 2000, 10) + mem.read(dst + 3000, 10) == src[3000:3020]
    assert store.batch_get_into_multi_buffers([k("m1")], [[mem.addr + dst]], [[100]]) == [INVALID_PARAMS]
    assert store.batch_get_into_multi_buffers([k("m1"), k("m2")], [[mem.addr + dst], [mem.addr, mem.addr]],
                                              [[150], [20]], True) == [150, 20], "pairs up to the shorter list"
    assert store.batch_get_into_multi_buffers([k("m1")], [], []) == [INVALID_PARAMS]


# --- upsert --------------------------------------------------------------------


def test_upsert_family(store: MooncakeDistributedStore, k: Keys, mem: Memory) -> None:
    assert store.put(k("u"), b"old") == 0
    assert store.upsert(k("u"), b"new") == 0 and store.get(k("u")) == b"new", "same size: in place"
    assert store.upsert(k("u"), b"longer value") == 0 and store.get(k("u")) == b"longer value"
    assert store.upsert(k("fresh"), b"f", ReplicateConfig()) == 0 and store.get(k("fresh")) == b"f"
    assert store.upsert(k("e"), b"") == INVALID_PARAMS
    assert store.upsert_parts(k("u"), b"a", b"b") == 0 and store.get(k("u")) == b"ab"
    assert store.upsert_batch([k("u"), k("u2")], [b"Z", b"YY"]) == 0
    assert store.get_batch([k("u"), k("u2")]) == [b"Z", b"YY"]
    assert store.upsert_batch([k("u")], [b"1", b"2"]) == INVALID_PARAMS
    mem.write(0, pattern(2000, 5))
    assert store.upsert_from(k("u"), mem.addr, 1000) == 0 and store.get_size(k("u")) == 1000
    assert store.upsert_from(k("u0"), mem.addr, 0) == 0
    assert store.batch_upsert_from([k("u"), k("n1"), k("n1")], [mem.addr, mem.addr, mem.addr + 1], [10, 20, 30]) == [0, 0, 0]
    assert store.get(k("u")) == pattern(2000, 5)[:10]
    assert store.get(k("n1")) == pattern(2000, 5)[1:31]


# --- queries, replicas, removal --------------------------------------------------


def test_exist_size_and_remove(store: MooncakeDistributedStore, k: Keys) -> None:
    assert store.put(k("a"), b"12345") == 0 and store.put(k("b"), b"1") == 0
    assert store.is_exist(k("a")) == 1 and store.is_exist(k("none")) == 0
    assert store.batch_is_exist([k("a"), k("none"), k("b")]) == [1, 0, 1]
    assert store.batch_is_exist([]) == []
    assert store.get_size(k("a")) == 5 and store.get_size(k("none")) == OBJECT_NOT_FOUND
    assert store.remove(k("a")) == OBJECT_HAS_LEASE, "is_exist/get_size granted a read lease"
    assert store.remove(k("a"), True) == 0
    assert store.remove(k("a")) == OBJECT_NOT_FOUND
    assert store.batch_remove([k("b"), k("none")]) == [OBJECT_HAS_LEASE, OBJECT_NOT_FOUND]
    time.sleep(LEASE_S + 0.3)
    assert store.batch_remove([k("b")]) == [0]
    assert store.batch_remove([]) == []
    for name in ("r1", "r2", "q1"):
        assert store.put(k(name), b"x") == 0
    assert store.remove_by_regex("(") == INVALID_PARAMS
    assert store.remove_by_regex(f"^{k('r')}") == 2
    assert store.remove_by_regex(f"^{k('q')}", True) == 1
    assert store.remove_by_regex(f"^{k('r')}") == 0


def test_replica_descriptors(store: MooncakeDistributedStore, k: Keys) -> None:
    assert store.put(k("d"), b"descr") == 0
    reps = store.get_replica_desc(k("d"))
    assert len(reps) == 1
    r = reps[0]
    assert r.status == ReplicaStatus.COMPLETE
    assert r.is_memory_replica() and not r.is_disk_replica() and not r.is_local_disk_replica()
    bd = r.get_memory_descriptor().buffer_descriptor
    assert bd.size == 5 and bd.buffer_address != 0 and bd.transport_endpoint == store.get_hostname()
    with pytest.raises(RuntimeError):
        r.get_disk_descriptor()
    assert store.get_replica_desc(k("none")) == []
    d = store.batch_get_replica_desc([k("d"), k("none")])
    assert list(d) == [k("d")] and d[k("d")][0].get_memory_descriptor().buffer_descriptor.size == 5
    assert store.batch_get_replica_desc([]) == {}


def test_replicate_config_options(store: MooncakeDistributedStore, k: Keys) -> None:
    c = ReplicateConfig()
    c.with_hard_pin = True
    assert store.put(k("hard"), b"x", c) == 0
    c = ReplicateConfig()
    c.replica_num = 0
    assert store.put(k("zero"), b"x", c) == INVALID_PARAMS
    c = ReplicateConfig()
    c.replica_num = 3
    assert store.put(k("three"), b"x", c) == 0
    assert len(store.get_replica_desc(k("three"))) == 1, "best effort: one segment, one replica"
    c = ReplicateConfig()
    c.preferred_segments = ["nowhere:1"]
    assert store.put(k("pref"), b"x", c) == 0, "unknown preferred segments are skipped"
    c = ReplicateConfig()
    c.soft_pin_action = SoftPinAction.ENABLE
    assert store.put(k("soft"), b"x", c) == 0
    assert store.remove(k("hard"), True) == 0


def test_two_clients_share_objects(master: Master, store: MooncakeDistributedStore, k: Keys, mem: Memory) -> None:
    other = new_store(master)
    try:
        cfg = ReplicateConfig()
        cfg.preferred_segment = other.get_hostname()
        data = pattern(200_000, 11)
        assert store.put(k("to-other"), data, cfg) == 0
        reps = store.get_replica_desc(k("to-other"))
        assert reps[0].get_memory_descriptor().buffer_descriptor.transport_endpoint == other.get_hostname()
        assert store.get(k("to-other")) == data, "read back from the other client's segment"
        assert other.get(k("to-other")) == data
        mem.write(0, data)
        assert other.put_from(k("from-other"), mem.addr, len(data)) == 0
        assert store.get_into(k("from-other"), mem.addr + (1 << 20), len(data)) == len(data)
        assert mem.read(1 << 20, len(data)) == data
    finally:
        assert other.close() == 0


# --- the call sequences of the serving integrations -------------------------------


def test_sglang_hicache_sequence(master: Master, k: Keys) -> None:
    """What sglang's MooncakeStore does: setup with the engine argument, a warm-up
    put/is_exist/get, register the host KV pool, then batch_is_exist + put of the missing
    pages with group ids (single and multi-buffer layouts), gets, remove_all."""
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", master.metadata, SEGMENT, 16 * 1024 * 1024, "tcp", "", master.addr, None) == 0
    warm_key, warm_value = k("sglang_mooncake_store_warmup_key"), bytes(4 * 1024)
    assert s.put(warm_key, warm_value) == 0
    assert s.is_exist(warm_key) == 1
    assert s.get(warm_key) == warm_value
    page, pages = 4096, 8
    pool = MooncakeHostMemAllocator()
    base = pool.alloc(2 * page * pages)
    try:
        for i in range(2 * pages):
            ctypes.memmove(base + i * page, pattern(page, i), page)
        assert s.register_buffer(base, 2 * page * pages) == 0
        # MHA layout: "<hash>_<rank>_k" / "_v" per page, one buffer each.
        hashes = [k(f"h{i}") for i in range(pages)]
        kv_keys = [f"{h}_0_{x}" for h in hashes for x in ("k", "v")]
        ptrs = [base + i * page for i in range(2 * pages)]
        sizes = [page] * (2 * pages)
        assert s.batch_is_exist(kv_keys[:4]) == [0, 0, 0, 0]
        cfg = ReplicateConfig()
        cfg.group_ids = [f"sglang-hicache:{h}" for h in hashes for _ in range(2)][:4]
        assert s.batch_put_from(kv_keys[:4], ptrs[:4], sizes[:4], cfg) == [0] * 4
        exist = s.batch_is_exist(kv_keys)
        assert exist == [1] * 4 + [0] * (2 * pages - 4)
        missing = [i for i, e in enumerate(exist) if e != 1]
        assert s.batch_put_from([kv_keys[i] for i in missing], [ptrs[i] for i in missing], [sizes[i] for i in missing]) == [0] * len(missing)
        # MLA layout with several buffers per object (layer-first pools).
        mla_keys = [f"{h}__k" for h in hashes[:3]]
        cfg = ReplicateConfig()
        cfg.group_ids = [f"sglang-hicache:{h}" for h in hashes[:3]]
        assert s.batch_put_from_multi_buffers(mla_keys, [[ptrs[i], ptrs[i + 8]] for i in range(3)],
                                              [[page, page]] * 3, cfg) == [0, 0, 0]
        # Prefetch into the other half of the pool.
        ctypes.memset(base, 0, page * pages)
        got = s.batch_get_into(kv_keys[:pages], ptrs[:pages], sizes[:pages])
        assert got == [page] * pages
        assert all(ctypes.string_at(ptrs[i], page) == pattern(page, i) for i in range(pages))
        ctypes.memset(base, 0, page * 3)
        got = s.batch_get_into_multi_buffers(mla_keys, [[ptrs[i], ptrs[i + 8]] for i in range(3)], [[page, page]] * 3)
        assert got == [2 * page] * 3
        assert all(ctypes.string_at(ptrs[i], page) == pattern(page, i) for i in range(3))
        assert s.remove_all() >= 0
        assert s.unregister_buffer(base) == 0
    finally:
        assert pool.free(base) == 0
        s.close()


def test_vllm_store_connector_sequence(master: Master, k: Keys) -> None:
    """vLLM's MooncakeStoreConnector worker: setup, register the KV tensors, lookup
    with batch_is_exist, save with batch_put_from_multi_buffers (one buffer per layer,
    preferred_segment = own hostname), load with batch_get_into_multi_buffers, tier
    classification with batch_get_replica_desc."""
    s = new_store(master)
    layers, block = 4, 2048
    kv = MooncakeHostMemAllocator()
    base = kv.alloc(layers * 8 * block)
    try:
        assert s.register_buffer(base, layers * 8 * block) == 0
        for layer in range(layers):
            for blk in range(8):
                ctypes.memmove(base + (layer * 8 + blk) * block, pattern(block, layer * 8 + blk), block)
        keys = [k(f"model@tp0@{blk}") for blk in range(4)]
        addrs = [[base + (layer * 8 + blk) * block for layer in range(layers)] for blk in range(4)]
        sizes = [[block] * layers for _ in range(4)]
        assert s.batch_is_exist(keys) == [0] * 4
        cfg = ReplicateConfig()
        cfg.replica_num = 1
        cfg.preferred_segment = s.get_hostname()
        assert s.batch_put_from_multi_buffers(keys, addrs, sizes, cfg) == [0] * 4
        assert s.batch_is_exist(keys) == [1] * 4
        dst = [[base + (layer * 8 + 4 + blk) * block for layer in range(layers)] for blk in range(4)]
        assert s.batch_get_into_multi_buffers(keys, dst, sizes) == [layers * block] * 4
        for blk in range(4):
            for layer in range(layers):
                assert ctypes.string_at(dst[blk][layer], block) == pattern(block, layer * 8 + blk)
        tiers = s.batch_get_replica_desc(keys + [k("missing")])
        assert set(tiers) == set(keys)
        for key in keys:
            r = tiers[key][0]
            assert r.is_memory_replica() and not r.is_disk_replica()
            assert r.get_memory_descriptor().buffer_descriptor.transport_endpoint == s.get_hostname()
        assert s.unregister_buffer(base) == 0
    finally:
        assert kv.free(base) == 0
        s.close()


def test_lmcache_connector_sequence(master: Master, k: Keys) -> None:
    """LMCache's MooncakestoreConnector: setup, register the CPU buffer, put_from with
    preferred_segment = get_hostname(), put_parts (metadata + data), exists, batch_get_into,
    batch_get_buffer with memoryview slicing, unregister, close."""
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", master.metadata, SEGMENT, LOCAL_BUFFER, "tcp", "", master.addr) == 0
    cpu = MooncakeHostMemAllocator()
    size = 1 << 20
    buf = cpu.alloc(size)
    try:
        assert s.register_buffer(buf, size) == 0
        cfg = ReplicateConfig()
        cfg.replica_num = 1
        cfg.preferred_segment = s.get_hostname()
        chunk = pattern(65536, 4)
        ctypes.memmove(buf, chunk, len(chunk))
        keys = [k(f"chunk{i}") for i in range(3)]
        for key in keys:
            assert s.put_from(key, buf, len(chunk), cfg) == 0
        assert s.is_exist(keys[0]) == 1 and s.is_exist(k("absent")) == 0
        ptrs = [buf + 65536 * (i + 1) for i in range(3)]
        assert s.batch_get_into(keys, ptrs, [65536] * 3) == [65536] * 3
        assert all(ctypes.string_at(p, 65536) == chunk for p in ptrs)
        metadata = bytes(range(28))
        assert s.put_parts(k("legacy"), metadata, chunk[:1000], config=cfg) == 0
        handles = s.batch_get_buffer([k("legacy"), k("absent")])
        assert handles[1] is None
        view = memoryview(handles[0])
        assert bytes(view[:28]) == metadata and bytes(view[28:]) == chunk[:1000]
        assert s.unregister_buffer(buf) == 0
    finally:
        assert cpu.free(buf) == 0
    assert s.close() == 0


def test_concurrent_callers(store: MooncakeDistributedStore, k: Keys) -> None:
    """One store used from several threads at once (the calls release the GIL)."""
    import threading

    errors: List[str] = []

    def worker(t: int) -> None:
        for i in range(20):
            key, value = k(f"c{t}-{i}"), pattern(1000 + i, t)
            if store.put(key, value) != 0:
                errors.append(f"put {key}")
            elif store.get(key) != value:
                errors.append(f"get {key}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.batch_is_exist([k(f"c{t}-19") for t in range(4)]) == [1] * 4


@ours_only
def test_objects_larger_than_the_local_buffer(master: Master, k: Keys) -> None:
    """Zero-copy puts over the 16 MiB transfer slice; bytes getters do not stage
    through the local buffer here, so they work for any object size."""
    s = new_store(master, segment=96 << 20, local_buffer=1 << 20)
    m = Memory(48 << 20)
    try:
        data = pattern(251, 1) * ((20 << 20) // 251)
        m.write(0, data)
        assert s.put(k("staged"), data) == INVALID_PARAMS, "larger than the local buffer"
        assert s.put_from(k("big"), m.addr, len(data)) == 0
        assert s.get(k("big")) == data
        assert bytes(memoryview(s.get_buffer(k("big")))) == data
        assert s.get_into(k("big"), m.addr + (24 << 20), 24 << 20) == len(data)
        assert m.read(24 << 20, len(data)) == data
    finally:
        m.free()
        s.close()
