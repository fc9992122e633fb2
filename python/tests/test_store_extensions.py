"""The ``MooncakeDistributedStore`` calls and rules of issue 8 against a live master,
for both implementations: ``setup(config: dict)`` sizes written as strings,
``ReplicateConfig`` assignment checks, ``get_into_ranges``, ``batch_replica_clear``,
``put_from_with_metadata``, ``get_offload_rpc_read_count`` and
``mooncake.async_store``. The master and fixtures are those of ``store_env.py``.
"""

from __future__ import annotations

import time

import pytest

from mooncake.store import MooncakeDistributedStore, ObjectDataType, ReplicateConfig, SoftPinAction
from store_env import (
    INVALID_PARAMS,
    LEASE_S,
    LOCAL_BUFFER,
    OBJECT_NOT_FOUND,
    SEGMENT,
    Keys,
    Master,
    Memory,
    new_store,
    ours_only,
    pattern,
)

# --- setup(config: dict) ---------------------------------------------------------


@pytest.mark.parametrize(
    "segment, buffer",
    [("64MB", "16MB"), ("1GB", "16 mb"), ("0.0625g", "512KB"), (SEGMENT, "1.5M"), (str(SEGMENT), LOCAL_BUFFER),
     (" 64 MB ", "1e6")],
)
def test_setup_dict_sizes_as_strings(master: Master, k: Keys, segment: object, buffer: object) -> None:
    s = MooncakeDistributedStore()
    base = dict(local_hostname="127.0.0.1", metadata_server=master.metadata, master_server_addr=master.addr)
    assert s.setup(dict(base, global_segment_size=segment, local_buffer_size=buffer)) == 0
    assert s.put(k("v"), b"value") == 0 and s.get(k("v")) == b"value"
    assert s.close() == 0


@pytest.mark.parametrize("bad", ["16XB", "-5MB", "MB", "", "abc", True, "1023", "2TB"])
def test_setup_dict_rejects_bad_sizes(master: Master, bad: object) -> None:
    base = dict(local_hostname="127.0.0.1", metadata_server=master.metadata, master_server_addr=master.addr)
    assert MooncakeDistributedStore().setup(dict(base, global_segment_size=SEGMENT, local_buffer_size=bad)) == INVALID_PARAMS


@ours_only
def test_setup_dict_iec_sizes(master: Master) -> None:
    """An extension: upstream returns -600 for KiB/MiB/GiB/TiB."""
    s = MooncakeDistributedStore()
    base = dict(local_hostname="127.0.0.1", metadata_server=master.metadata, master_server_addr=master.addr)
    assert s.setup(dict(base, global_segment_size="64MiB", local_buffer_size="512KiB")) == 0
    assert s.close() == 0


# --- ReplicateConfig assignment checks ----------------------------------------------


@pytest.mark.parametrize("field", ["replica_num", "nof_replica_num", "dfs_replica_num", "soft_pin_ttl_ms"])
def test_replicate_config_integer_fields(field: str) -> None:
    c = ReplicateConfig()
    for bad in (-1, 2**64, 1.5, "3", [1]):
        with pytest.raises(TypeError):
            setattr(c, field, bad)
    setattr(c, field, 2**64 - 1)
    assert getattr(c, field) == 2**64 - 1
    setattr(c, field, True)
    assert getattr(c, field) == 1
    setattr(c, field, SoftPinAction.ENABLE)  # anything with __index__
    assert getattr(c, field) == 1
    if field == "soft_pin_ttl_ms":
        c.soft_pin_ttl_ms = None
        assert c.soft_pin_ttl_ms is None
    else:
        with pytest.raises(TypeError):
            setattr(c, field, None)


def test_replicate_config_other_fields() -> None:
    c = ReplicateConfig()
    for field in ("with_hard_pin", "prefer_alloc_in_same_node"):
        for value, expected in ((2, True), (0, False), (None, False), (0.5, True), (-1, True)):
            setattr(c, field, value)
            assert getattr(c, field) is expected
        for bad in ("yes", [1], SoftPinAction.ENABLE):
            with pytest.raises(TypeError):
                setattr(c, field, bad)
    for bad in (1, "ENABLE", ObjectDataType.KVCACHE):
        with pytest.raises(TypeError):
            c.soft_pin_action = bad
    for bad in (1, SoftPinAction.ENABLE):
        with pytest.raises(TypeError):
            c.data_type = bad
    c.data_type = ObjectDataType.KVCACHE
    for field in ("preferred_segments", "preferred_nof_segments", "group_ids"):
        for bad in ("a", 1, [1]):
            with pytest.raises(TypeError):
                setattr(c, field, bad)
        setattr(c, field, ("a", "b"))
        assert getattr(c, field) == ["a", "b"]
    with pytest.raises(TypeError):
        c.preferred_segments = None
    c.group_ids = None
    with pytest.raises(TypeError):
        c.preferred_segment = 1
    assert c.soft_pin_action == SoftPinAction.PRESERVE and c.data_type == ObjectDataType.KVCACHE


def test_replicate_config_checked_values_still_put(store: MooncakeDistributedStore, k: Keys) -> None:
    c = ReplicateConfig()
    c.soft_pin_action, c.soft_pin_ttl_ms = SoftPinAction.ENABLE, 60_000
    c.preferred_segments = (store.get_hostname(),)
    assert store.put(k("ttl"), b"x", c) == 0 and store.get(k("ttl")) == b"x"


# --- get_into_ranges ------------------------------------------------------------------


def _two_objects(store: MooncakeDistributedStore, k: Keys) -> None:
    assert store.put(k("k1"), bytes(range(64))) == 0
    assert store.put(k("k2"), bytes(range(100, 164))) == 0


def test_get_into_ranges_upstream_example(store: MooncakeDistributedStore, k: Keys, mem: Memory) -> None:
    """The example of upstream's API reference, byte for byte."""
    _two_objects(store, k)
    b0, b1 = mem.addr, mem.addr + 4096
    assert store.register_buffer(b0, 32) == 0 and store.register_buffer(b1, 32) == 0
    try:
        r = store.get_into_ranges(
            [b0, b1],
            [[k("k1"), k("k2")], [k("k2"), k("k1")]],
            [[[0, 20], [8]], [[4], [16]]],
            [[[1, 30], [2]], [[0], [10]]],
            [[[4, 3], [5]], [[6], [4]]],
        )
        assert r == [[[4, 3], [5]], [[6], [4]]]
        assert mem.read(0, 4) == bytes(range(1, 5)) and mem.read(20, 3) == bytes(range(30, 33))
        assert mem.read(8, 5) == bytes(range(102, 107))
        assert mem.read(4096 + 4, 6) == bytes(range(100, 106)) and mem.read(4096 + 16, 4) == bytes(range(10, 14))
    finally:
        assert store.unregister_buffer(b0) == 0 and store.unregister_buffer(b1) == 0


def test_get_into_ranges_per_fragment_codes(store: MooncakeDistributedStore, k: Keys, mem: Memory) -> None:
    _two_objects(store, k)
    b, k1 = mem.addr, k("k1")
    assert store.register_buffer(b, 32) == 0
    try:

        def one(dst: int, src: int, size: int, buf: int = b, key: str = k1) -> int:
            return store.get_into_ranges([buf], [[key]], [[[dst]]], [[[src]]], [[[size]]])[0][0][0]

        assert one(28, 60, 4) == 4, "exactly fits buffer and object"
        assert one(30, 0, 4) == INVALID_PARAMS, "past the registered buffer"
        assert one(0, 62, 4) == INVALID_PARAMS, "past the object"
        assert one(0, 0, 64) == INVALID_PARAMS, "the whole object does not fit 32 bytes"
        assert one(0, 0, 0) == 0 and one(0, 100, 0) == INVALID_PARAMS and one(100, 0, 0) == INVALID_PARAMS
        assert one(20, 0, 4, buf=b + 8) == 4, "a pointer inside a registered buffer"
        assert one(0, 0, 4, buf=mem.addr + 8192) == INVALID_PARAMS, "not registered"
        assert one(0, 0, 4, buf=0) == INVALID_PARAMS
        assert one(0, 0, 4, key=k("none")) == OBJECT_NOT_FOUND
        assert one(2**64 - 1, 0, 4) == INVALID_PARAMS
        r = store.get_into_ranges([b], [[k1, k("none"), k1]], [[[0], [4], [8]]], [[[0], [0], [4]]], [[[4], [4], [4]]])
        assert r == [[[4], [OBJECT_NOT_FOUND], [4]]], "a missing key fails only its fragments"
        assert mem.read(0, 4) == bytes(range(4)) and mem.read(8, 4) == bytes(range(4, 8))
    finally:
        assert store.unregister_buffer(b) == 0


def test_get_into_ranges_shapes(store: MooncakeDistributedStore, k: Keys, mem: Memory) -> None:
    _two_objects(store, k)
    b, k1, k2 = mem.addr, k("k1"), k("k2")
    assert store.register_buffer(b, 64) == 0
    try:
        get = store.get_into_ranges
        assert get([], [], [], [], []) == []
        assert get([b], [[]], [[]], [[]], [[]]) == [[]]
        assert get([b], [[k1]], [[[]]], [[[]]], [[[]]]) == [[[]]]
        bad = [[[INVALID_PARAMS]], [[INVALID_PARAMS]]]
        assert get([b, b], [[k1]], [[[0]]], [[[0]]], [[[4]]]) == bad, "top-level lengths differ"
        assert get([b], [], [], [], []) == [[[INVALID_PARAMS]]]
        assert get([b], [[k1], [k2]], [[[0]], [[0]]], [[[0]], [[0]]], [[[4]], [[4]]]) == [[[INVALID_PARAMS]]]
        r = get([b, b], [[k1, k2], [k1]], [[[0]], [[0]]], [[[0]], [[0]]], [[[4]], [[4]]])
        assert r == [[[INVALID_PARAMS], [INVALID_PARAMS]], [[4]]], "a buffer's key lists differ"
        r = get([b], [[k1, k2]], [[[0, 4], [8]]], [[[0], [0]]], [[[4, 4], [4]]])
        assert r == [[[INVALID_PARAMS, INVALID_PARAMS], [4]]], "a key's fragment lists differ"
        assert get((b,), ((k1,),), (((0,),),), (((0,),),), (((4,),),)) == [[[4]]], "any sequences"
        assert get(buffer_ptrs=[b], all_keys=[[k1]], all_dst_offsets=[[[0]]], all_src_offsets=[[[0]]],
                   all_sizes=[[[4]]]) == [[[4]]]
    finally:
        assert store.unregister_buffer(b) == 0


def test_get_into_ranges_argument_types(store: MooncakeDistributedStore, k: Keys) -> None:
    for args in (
        ([-1], [["a"]], [[[0]]], [[[0]]], [[[1]]]),
        ([1], [["a"]], [[[-1]]], [[[0]]], [[[1]]]),
        ([1], [["a"]], [[[0]]], [[[2**64]]], [[[1]]]),
        ([1], [["a"]], [[[0]]], [[[0]]], [[[1.0]]]),
        ([1], ["a"], [[[0]]], [[[0]]], [[[1]]]),
        ([1], [[1]], [[[0]]], [[[0]]], [[[1]]]),
        ([1], [["a"]], [[0]], [[[0]]], [[[1]]]),
    ):
        with pytest.raises(TypeError):
            store.get_into_ranges(*args)


# --- batch_replica_clear -----------------------------------------------------------------


def test_batch_replica_clear(master: Master, store: MooncakeDistributedStore, k: Keys) -> None:
    own = ReplicateConfig()
    own.preferred_segment = store.get_hostname()
    for name in ("a", "b", "c", "leased"):
        assert store.put(k(name), b"value", own) == 0
    other = new_store(master)
    try:
        assert other.put(k("theirs"), b"value", own) == 0, "another client's object on our segment"
        assert store.is_exist(k("leased")) == 1, "grants a read lease"
        cleared = store.batch_replica_clear([k("a"), k("leased"), k("theirs"), k("none"), k("a")])
        assert cleared == [k("a")]
        assert store.is_exist(k("a")) == 0 and other.is_exist(k("theirs")) == 1
        assert store.batch_replica_clear([k("b")], "127.0.0.1:1") == [], "no replica on that segment"
        assert store.batch_replica_clear([k("b"), k("c")], store.get_hostname()) == [k("b"), k("c")]
        time.sleep(LEASE_S + 0.3)
        assert store.batch_replica_clear(keys=[k("leased")], segment_name="") == [k("leased")]
        assert store.batch_replica_clear([]) == []
        for bad in ("abc", [1]):
            with pytest.raises(TypeError):
                store.batch_replica_clear(bad)
    finally:
        assert other.close() == 0


@ours_only
def test_ranges_and_clear_before_setup() -> None:
    s = MooncakeDistributedStore()
    assert s.batch_replica_clear(["a"]) == []
    assert s.get_into_ranges([1], [["a", "b"]], [[[0], []]], [[[0], []]], [[[1], []]]) == [
        [[INVALID_PARAMS], [INVALID_PARAMS]]
    ]


# --- put_from_with_metadata, get_offload_rpc_read_count ------------------------------------


def test_put_from_with_metadata(store: MooncakeDistributedStore, k: Keys, mem: Memory) -> None:
    mem.write(0, b"META")
    mem.write(100, pattern(1000, 3))
    assert store.put_from_with_metadata(k("m"), mem.addr + 100, mem.addr, 1000, 4) == 0
    assert store.get(k("m")) == b"META" + pattern(1000, 3)
    assert store.put_from_with_metadata(k("z"), mem.addr + 100, mem.addr, 0, 4) == 0
    assert store.is_exist(k("z")) == 0, "size 0 stores nothing"
    c = ReplicateConfig()
    c.prefer_alloc_in_same_node = True
    assert store.put_from_with_metadata(k("p"), mem.addr + 100, mem.addr, 10, 4, c) == -1
    assert store.get_offload_rpc_read_count() == 0


def test_async_store(master: Master, k: Keys) -> None:
    import asyncio

    from mooncake.async_store import MooncakeDistributedStoreAsync

    s = MooncakeDistributedStoreAsync()
    assert s.setup("127.0.0.1", master.metadata, SEGMENT, LOCAL_BUFFER, "tcp", "", master.addr) == 0

    async def roundtrip() -> bytes:
        assert await s.async_put(k("a"), b"async value") == 0
        return await s.async_get(k("a"))

    try:
        assert asyncio.run(roundtrip()) == b"async value"
        with pytest.raises(AttributeError):
            s.async_no_such_method
        with pytest.raises(AttributeError):
            s.no_such_attribute
    finally:
        assert s.close() == 0


# --- the client HTTP server -----------------------------------------------------------


def _http_get(port: int, path: str) -> tuple:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_client_http_server_reports_health_and_metrics(master: Master, k: Keys) -> None:
    """``setup(..., enable_client_http_server=True, client_http_port=P)`` serves
    upstream's ``/health``, ``/metrics`` and ``/metrics/summary`` for the client."""
    from store_env import _free_ports

    (port,) = _free_ports(1)
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", master.metadata, SEGMENT, LOCAL_BUFFER, "tcp", "", master.addr,
                   enable_client_http_server=True, client_http_port=port) == 0
    assert s.put(k("m"), b"x" * 100) == 0
    assert s.get(k("m")) == b"x" * 100
    assert _http_get(port, "/health") == (200, '{"status":"healthy","code":0}')
    code, text = _http_get(port, "/metrics")
    assert code == 200
    for family, kind in [
        ("mooncake_transfer_read_bytes", "counter"),
        ("mooncake_transfer_write_bytes", "counter"),
        ("mooncake_transfer_get_latency", "histogram"),
        ("mooncake_transfer_put_latency", "histogram"),
        ("mooncake_client_rpc_count", "counter"),
        ("mooncake_client_rpc_latency", "histogram"),
        ("mooncake_transfer_read_operation_count", "counter"),
        ("mooncake_transfer_read_operation_bytes", "counter"),
        ("mooncake_transfer_read_operation_latency", "histogram"),
        ("mooncake_transfer_write_operation_count", "counter"),
        ("mooncake_transfer_write_operation_bytes", "counter"),
        ("mooncake_transfer_write_operation_latency", "histogram"),
    ]:
        assert f"# TYPE {family} {kind}\n" in text, family
    written = [line for line in text.splitlines() if line.startswith("mooncake_transfer_write_bytes{")]
    assert written and int(written[0].split()[-1]) >= 100, written
    assert 'mooncake_transfer_write_operation_count{client_mode="real",op_name="put"} ' in text
    series = "\n".join(line for line in text.splitlines() if "_bucket" not in line)
    # A read asks for the replica list (ours with a read lease: BatchBeginRead).
    reads = ('rpc_name="GetReplicaList"' in text) or ('rpc_name="BatchBeginRead"' in text)
    assert 'rpc_name="PutStart"' in text and reads, series
    code, summary = _http_get(port, "/metrics/summary")
    assert code == 200 and summary.startswith("Client Metrics Summary"), summary
    assert _http_get(port, "/nope")[0] == 404
    assert s.close() == 0
