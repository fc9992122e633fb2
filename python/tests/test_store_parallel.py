"""The parallelism-aware tensor methods (``*_with_parallelism``) against a live
master, with either implementation (``MOONCAKE_PY_IMPL``): shards named by TP, DP, EP
and PP axes or by writer partitions, the keys and bytes they are stored as, reads of
a shard, of a reshard at another TP size and of the whole tensor, the ``_from`` and
``_into`` and batch forms, and upstream's answers to invalid layouts.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/test-python.sh installs it)")

from _tensor_cases import make, same  # noqa: E402
from mooncake import store as store_module  # noqa: E402
from mooncake.store import ParallelAxis, ReadTarget, TensorParallelism  # noqa: E402
from store_env import INVALID_PARAMS  # noqa: E402

HEADER = 304


@dataclass
class WriterPartition:
    rank: int
    size: int
    split_dim: int


def axis(kind, rank, size, split_dim=None, expert_id=None, stage_id=None) -> ParallelAxis:
    a = ParallelAxis()
    a.kind, a.rank, a.size = kind, rank, size
    a.split_dim, a.expert_id, a.stage_id = split_dim, expert_id, stage_id
    return a


def par(*axes) -> TensorParallelism:
    p = TensorParallelism()
    p.axes = list(axes)
    return p


def target(mode, parallelism=None) -> ReadTarget:
    t = ReadTarget()
    t.mode = mode
    t.parallelism = parallelism
    return t


def tp(rank, size, split_dim=0):
    return par(axis("tp", rank, size, split_dim))


def _serialized(mem, tensor) -> int:
    header, ptr, size, _owner = store_module._serialize_tensor(tensor)
    mem.write(0, header)
    ctypes.memmove(mem.addr + HEADER, ptr, size)
    return HEADER + size


def _axes_of(store, key):
    """The header's (layout_kind, axes) of the object at ``key``."""
    raw = store.get(key)
    kind = struct.unpack_from("<I", raw, 16)[0]
    count = struct.unpack_from("<I", raw, 168)[0]
    return kind, [struct.unpack_from("<iiiiiiq", raw, 176 + 32 * i) for i in range(count)]


def test_single_tp_shards_reshard_and_reassemble(store, k):
    full = make("float32", (4, 8), 1)
    for rank in range(4):
        shard = full[:, rank * 2 : rank * 2 + 2]
        assert store.put_tensor_with_parallelism(k("w"), shard, tp(rank, 4, 1)) == 0
    assert [store.is_exist(f"{k('w')}_tp_{r}") for r in range(4)] == [1] * 4
    assert store.get_size(f"{k('w')}__parallelism_manifest") == 96
    assert _axes_of(store, f"{k('w')}_tp_2") == (1, [(1, 0, 2, 4, 1, 0, 2)])

    assert same(store.get_tensor_with_parallelism(k("w"), target("full", tp(0, 4, 1))), full)
    assert same(store.get_tensor_with_parallelism(k("w"), target("shard", tp(3, 4, 1))), full[:, 6:])
    # Another TP size: resharded from the four stored shards.
    assert same(store.get_tensor_with_parallelism(k("w"), target("shard", tp(1, 2, 1))), full[:, 4:])
    assert same(store.get_tensor_with_parallelism(k("w"), target("shard", tp(5, 8, 1))), full[:, 5:6])
    assert same(store.get_tensor_with_parallelism(k("w"), target("full", tp(0, 2, 1))), full)
    # As stored: the object at the key itself (there is none).
    assert store.get_tensor_with_parallelism(k("w")) is None
    assert store.get_tensor_with_parallelism(k("w"), target("as_stored", tp(0, 4, 1))) is None
    assert store.get_tensor_with_parallelism(k("w"), target("full", tp(0, 3, 1))) is None


def test_several_axes_store_this_ranks_shard(store, k):
    full = make("bfloat16", (6, 4), 2)
    for rank in range(2):
        p = par(axis("tp", rank, 2, 0), axis("dp", 1, 2))
        assert store.put_tensor_with_parallelism(k("m"), full, p) == 0
    key = f"{k('m')}__dp_1of2__tp_1of2_sd0"
    assert same(store.get_tensor(key), full[3:])
    # Header axes keep the caller's order (TP first here); keys use DP, TP, EP, PP.
    assert _axes_of(store, key) == (1, [(1, 0, 1, 2, 0, 0, 3), (0, 1, 1, 2, -1, 0, 0)])
    ask = par(axis("dp", 1, 2), axis("tp", 0, 3, 0))
    assert same(store.get_tensor_with_parallelism(k("m"), target("shard", ask)), full[:2])
    assert same(store.get_tensor_with_parallelism(k("m"), target("full", ask)), full)
    other_dp = par(axis("dp", 0, 2), axis("tp", 0, 2, 0))
    assert store.get_tensor_with_parallelism(k("m"), target("full", other_dp)) is None


def test_dp_ep_pp_name_whole_tensors(store, k):
    t = make("int32", (3, 2), 3)
    ep = par(axis("ep", 0, 2, expert_id=3))
    assert store.put_tensor_with_parallelism(k("e"), t, ep) == 0
    assert same(store.get_tensor(f"{k('e')}__ep_0of2_eid3"), t)
    assert _axes_of(store, f"{k('e')}__ep_0of2_eid3") == (1, [(2, 0, 0, 2, -1, 3, 0)])
    assert same(store.get_tensor_with_parallelism(k("e"), target("shard", ep)), t)
    assert store.get_tensor_with_parallelism(k("e"), target("full", ep)) is None
    pp = par(axis("pp", 1, 2, stage_id=7), axis("tp", 0, 1, 1))
    assert store.put_tensor_with_parallelism(k("p"), t, pp) == 0
    assert same(store.get_tensor(f"{k('p')}__tp_0of1_sd1__pp_1of2_sid7"), t)


def test_writer_partitions(store, k):
    full = make("int64", (6, 5), 4)
    for rank in range(3):
        assert store.put_tensor_with_parallelism(k("p"), full, writer_partition=WriterPartition(rank, 3, 0)) == 0
    assert same(store.get_tensor(f"{k('p')}__writer_1of3_sd0"), full[2:4])
    assert store.get_size(f"{k('p')}__writer_manifest") == 96
    assert same(store.get_tensor_with_parallelism(k("p"), target("full")), full)
    assert same(store.get_tensor_with_parallelism(k("p"), target("shard", tp(2, 3, 0))), full[4:])
    # Without its manifest's partitions, a full read is the object at the key.
    assert store.put_tensor(k("plain"), full) == 0
    assert same(store.get_tensor_with_parallelism(k("plain"), target("full")), full)


def test_invalid_layouts(store, k):
    t = make("float32", (4, 4))
    bad = [
        par(),
        par(axis("tp", 0, 2)),
        par(axis("dp", 0, 2, 0)),
        par(axis("ep", 0, 2)),
        par(axis("pp", 0, 2)),
        par(axis("tp", 0, 2, 0), axis("tp", 1, 2, 0)),
        par(axis("xp", 0, 2)),
        par(axis("tp", 2, 2, 0)),
        par(axis("tp", 0, 3, 0), axis("dp", 0, 1)),
    ]
    for p in bad:
        assert store.put_tensor_with_parallelism(k("x"), t, p) == INVALID_PARAMS
    assert (
        store.put_tensor_with_parallelism(k("x"), t, tp(0, 2), writer_partition=WriterPartition(0, 2, 0))
        == INVALID_PARAMS
    )
    assert store.put_tensor_with_parallelism(k("x"), t, writer_partition=WriterPartition(0, 3, 0)) == INVALID_PARAMS
    assert store.put_tensor_with_parallelism(k("x"), t, writer_partition=WriterPartition(2, 2, 0)) == INVALID_PARAMS
    assert store.put_tensor_with_parallelism(k("x"), "not a tensor") == INVALID_PARAMS
    with pytest.raises(RuntimeError):
        ReadTarget().mode = "sideways"
    r = ReadTarget()
    r.mode = "FULL"
    assert r.mode == "full"


def test_plain_forms_and_manifest_rules(store, k):
    t = make("float16", (2, 4), 5)
    assert store.put_tensor_with_parallelism(k("d"), t) == 0
    assert same(store.get_tensor_with_parallelism(k("d")), t)
    # put keeps the first manifest, upsert replaces it.
    m = f"{k('u')}__parallelism_manifest"
    assert store.put_tensor_with_parallelism(k("u"), t, tp(0, 2, 1)) == 0
    first = store.get(m)
    assert store.put_tensor_with_parallelism(k("u"), t[:, :2], tp(0, 2, 1)) == 0
    assert store.get(m) == first
    assert store.upsert_tensor_with_parallelism(k("u"), t[:, :2], tp(0, 2, 1)) == 0
    assert store.get(m) != first
    assert struct.unpack_from("<IHHiiiii", store.get(m)) == (0x574D414E, 1, 96, 11, 2, 1, 2, 0)


def test_from_buffers(store, k, mem):
    assert store.register_buffer(mem.addr, mem.size) == 0
    try:
        full = make("uint8", (8, 3), 6)
        size = _serialized(mem, full)
        # A TP layout from a whole tensor's buffer stores every TP shard (no manifest).
        assert store.put_tensor_with_parallelism_from(k("f"), mem.addr, size, tp(1, 4, 0)) == 0
        assert [store.is_exist(f"{k('f')}_tp_{r}") for r in range(4)] == [1] * 4
        assert store.is_exist(f"{k('f')}__parallelism_manifest") == 0
        assert same(store.get_tensor_with_parallelism(k("f"), target("full", tp(0, 4, 0))), full)
        assert same(store.get_tensor_with_parallelism(k("f"), target("shard", tp(0, 2, 0))), full[:4])

        wp = WriterPartition(1, 2, 0)
        assert store.put_tensor_with_parallelism_from(k("g"), mem.addr, size, writer_partition=wp) == 0
        assert same(store.get_tensor(f"{k('g')}__writer_1of2_sd0"), full[4:])
        assert store.put_tensor_with_parallelism_from(k("h"), mem.addr, size) == 0
        assert same(store.get_tensor(k("h")), full)
        assert store.put_tensor_with_parallelism_from(k("i"), mem.addr, size - 1, tp(0, 2, 0)) == INVALID_PARAMS
        assert store.upsert_tensor_with_parallelism_from(k("h"), mem.addr, size, par(axis("dp", 0, 2))) == 0
        assert same(store.get_tensor(f"{k('h')}__dp_0of2"), full)

        results = store.batch_put_tensor_with_parallelism_from(
            [k("b0"), k("b1")], [mem.addr, mem.addr], [size, size], [tp(0, 2, 0), None]
        )
        assert results == [0, 0]
        assert same(store.get_tensor(k("b1")), full)
        assert store.batch_put_tensor_with_parallelism_from([k("b2")], [mem.addr], [size, size]) == [INVALID_PARAMS]
    finally:
        store.unregister_buffer(mem.addr)


def test_into_buffers(store, k, mem):
    assert store.register_buffer(mem.addr, mem.size) == 0
    try:
        full = make("float64", (4, 6), 7)
        for rank in range(2):
            assert store.put_tensor_with_parallelism(k("t"), full[rank * 2 : rank * 2 + 2], tp(rank, 2)) == 0
        view = store.get_tensor_with_parallelism_into(k("t"), mem.addr, mem.size, target("full", tp(0, 2)))
        assert same(view, full) and view.data_ptr() == mem.addr + HEADER
        assert store.get_tensor_with_parallelism_into(k("t"), mem.addr, HEADER + 8, target("full", tp(0, 2))) is None
        half = mem.size // 2
        views = store.batch_get_tensor_with_parallelism_into(
            [k("t"), f"{k('t')}_tp_1"],
            [mem.addr, mem.addr + half],
            [half, half],
            [target("shard", tp(3, 4)), None],
        )
        assert same(views[0], full[3:]) and same(views[1], full[2:])
        assert store.batch_get_tensor_with_parallelism_into([k("t")], [mem.addr], []) == [None]
    finally:
        store.unregister_buffer(mem.addr)


def test_batch_forms(store, k):
    full = make("int16", (4, 4), 8)
    keys = [k("a"), k("b"), k("c")]
    layouts = [tp(0, 2), None, par(axis("dp", 1, 2))]
    assert store.batch_put_tensor_with_parallelism(keys, [full[:2], full, full], layouts) == [0, 0, 0]
    got = store.batch_get_tensor_with_parallelism(
        keys, [target("shard", tp(0, 2)), None, target("shard", par(axis("dp", 1, 2)))]
    )
    assert same(got[0], full[:2]) and same(got[1], full) and same(got[2], full)
    parts = [WriterPartition(r, 2, 1) for r in range(2)]
    assert store.batch_put_tensor_with_parallelism([k("w"), k("w")], [full, full], writer_partitions=parts) == [0, 0]
    assert same(store.get_tensor_with_parallelism(k("w"), target("full")), full)
    assert store.batch_upsert_tensor_with_parallelism([k("b")], [full[:1]]) == [0]
    assert same(store.get_tensor(k("b")), full[:1])
    n2 = [k("x"), k("y")]
    assert store.batch_put_tensor_with_parallelism(n2, [full]) == [INVALID_PARAMS] * 2
    assert store.batch_put_tensor_with_parallelism(n2, [full, full], [tp(0, 2)]) == [INVALID_PARAMS] * 2
    assert (
        store.batch_put_tensor_with_parallelism(n2, [full, full], [None, None], writer_partitions=parts)
        == [INVALID_PARAMS] * 2
    )
    assert store.batch_get_tensor_with_parallelism(n2, [None]) == [None, None]
    assert store.batch_put_tensor_with_parallelism([], []) == []
