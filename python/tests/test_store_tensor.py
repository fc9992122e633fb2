"""The tensor methods of ``MooncakeDistributedStore`` against a live master: every
dtype upstream stores, batch, ``_into`` (zero-copy into registered memory), ``_from``,
``pub``, ``upsert`` and tensor-parallel forms, safetensors files, the module's codec
(``_serialize_tensor`` ...), upstream's error values, and tensors written by one
implementation and read by the other (upstream's 0.3.13 wheel and ours, both ways).

Runs with either implementation (``MOONCAKE_PY_IMPL``); needs torch (and
safetensors), which ``scripts/test-python.sh`` installs: without them the module is
skipped with the reason.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/test-python.sh installs it)")
pytest.importorskip("safetensors", reason="safetensors is not installed (scripts/test-python.sh installs it)")

from _tensor_cases import CASES, DTYPES, TP, check_all, make, same, tp_chunk, write_all  # noqa: E402
from conftest import IMPL, impl_env, impl_python  # noqa: E402
from mooncake import store as store_module  # noqa: E402
from mooncake.store import MooncakeDistributedStore, ReplicateConfig  # noqa: E402
from store_env import INVALID_PARAMS, OURS  # noqa: E402

HEADER = 304
FILE_NOT_FOUND = -1100
#: Where ours is better than upstream by design (each test's docstring says how).
ours_only = pytest.mark.skipif(not OURS, reason="upstream behaves differently here (ours only)")


def _write(mem, tensor) -> int:
    """``tensor`` laid out as a tensor object at the start of ``mem``; its size."""
    header, ptr, size, _owner = store_module._serialize_tensor(tensor)
    mem.write(0, header)
    ctypes.memmove(mem.addr + HEADER, ptr, size)
    return HEADER + size


# --- the codec -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_serialize_round_trip_every_dtype(dtype):
    t = make(dtype, (4, 3), 5)
    header, ptr, size, owner = store_module._serialize_tensor(t)
    assert store_module._tensor_metadata_size() == HEADER == len(header)
    assert header[:4] == b"NOOM" and size == t.numel() * t.element_size()
    assert owner.data_ptr() == ptr
    back = store_module._deserialize_tensor(header + ctypes.string_at(ptr, size))
    assert same(back, t)


def test_serialize_header_fields():
    t = make("int32", (2, 3, 4))
    header = store_module._serialize_tensor(t)[0]
    magic, version, hsize, dtype, ndim = (
        int.from_bytes(header[0:4], "little"),
        int.from_bytes(header[4:6], "little"),
        int.from_bytes(header[6:8], "little"),
        int.from_bytes(header[8:12], "little", signed=True),
        int.from_bytes(header[12:16], "little", signed=True),
    )
    assert (magic, version, hsize, dtype, ndim) == (0x4D4F4F4E, 1, HEADER, 6, 3)
    data_offset, data_bytes = int.from_bytes(header[24:32], "little"), int.from_bytes(header[32:40], "little")
    assert (data_offset, data_bytes) == (HEADER, 96)
    dims = [int.from_bytes(header[40 + 8 * i : 48 + 8 * i], "little", signed=True) for i in range(8)]
    assert dims == [2, 3, 4, -1, -1, -1, -1, -1]


def test_serialize_rejects_what_upstream_cannot_store():
    for bad in ("not a tensor", torch.zeros(2, dtype=torch.complex64), torch.zeros([1] * 9)):
        with pytest.raises(ValueError):
            store_module._serialize_tensor(bad)


def test_deserialize_rejects_bad_payloads():
    header, ptr, size, _ = store_module._serialize_tensor(make("float32", (2, 2)))
    good = header + ctypes.string_at(ptr, size)
    for bad in (b"", b"x" * 10, good[:-1], b"\0" * 4 + good[4:], good + b"extra"):
        with pytest.raises(ValueError):
            store_module._deserialize_tensor(bad)


def test_non_contiguous_tensor_is_stored_contiguous():
    t = make("float32", (4, 6)).t()
    header, ptr, size, _owner = store_module._serialize_tensor(t)
    assert same(store_module._deserialize_tensor(header + ctypes.string_at(ptr, size)), t.contiguous())


# --- put and get -----------------------------------------------------------------


@pytest.mark.parametrize("name,dtype,shape", CASES, ids=[c[0] for c in CASES])
def test_put_get_every_case(store, k, name, dtype, shape):
    t = make(dtype, shape, 3)
    assert store.put_tensor(k(name), t) == 0
    assert store.get_size(k(name)) == HEADER + t.numel() * t.element_size()
    assert same(store.get_tensor(k(name)), t)


def test_put_tensor_errors(store, k):
    assert store.put_tensor(k("a"), "not a tensor") == INVALID_PARAMS
    assert store.put_tensor(k("b"), torch.zeros(2, dtype=torch.complex64)) == INVALID_PARAMS
    assert store.is_exist(k("a")) == 0 and store.is_exist(k("b")) == 0
    assert store.get_tensor(k("missing")) is None
    assert store.put(k("bytes"), b"not a tensor object" * 20) == 0
    assert store.get_tensor(k("bytes")) is None


def test_upsert_tensor_replaces(store, k):
    assert store.put_tensor(k("u"), make("float32", (2, 2), 1)) == 0
    assert store.upsert_tensor(k("u"), make("int64", (3,), 2)) == 0
    assert same(store.get_tensor(k("u")), make("int64", (3,), 2))


def test_batch_put_get(store, k):
    keys = [k(f"b{i}") for i in range(4)]
    tensors = [make("float16", (i + 1, 3), i) for i in range(4)]
    tensors[2] = "bad"
    assert store.batch_put_tensor(keys, tensors) == [0, 0, INVALID_PARAMS, 0]
    got = store.batch_get_tensor(keys + [k("missing")])
    assert [g is None for g in got] == [False, False, True, False, True]
    assert same(got[3], tensors[3])
    assert store.batch_put_tensor([], []) == []
    assert store.batch_put_tensor(keys, tensors[:2]) == [INVALID_PARAMS] * 4
    assert store.batch_upsert_tensor(keys[:1], [make("int8", (5,), 9)]) == [0]
    assert same(store.get_tensor(keys[0]), make("int8", (5,), 9))


def test_pub_tensor_configs(store, k):
    cfg = ReplicateConfig()
    cfg.replica_num = 1
    t = make("bfloat16", (8, 8), 4)
    assert store.pub_tensor(k("p"), t, cfg) == 0
    assert same(store.get_tensor(k("p")), t)
    bad = ReplicateConfig()
    bad.replica_num = 1
    bad.preferred_segments = ["a", "b"]
    assert store.pub_tensor(k("q"), t, bad) == INVALID_PARAMS
    assert store.batch_pub_tensor([k("r"), k("s")], [t, t], bad) == [INVALID_PARAMS] * 2
    assert store.batch_pub_tensor([k("r"), k("s")], [t, "bad"], cfg) == [0, INVALID_PARAMS]
    assert store.upsert_pub_tensor(k("r"), make("int32", (2,), 1), cfg) == 0
    assert same(store.get_tensor(k("r")), make("int32", (2,), 1))
    assert store.batch_upsert_pub_tensor([k("r")], [t], cfg) == [0]
    assert same(store.get_tensor(k("r")), t)


# --- zero-copy reads and writes ----------------------------------------------------


def test_get_tensor_into_views_the_buffer(store, k, mem):
    assert store.register_buffer(mem.addr, mem.size) == 0
    try:
        t = make("float64", (16, 16), 2)
        assert store.put_tensor(k("i"), t) == 0
        got = store.get_tensor_into(k("i"), mem.addr, mem.size)
        assert same(got, t)
        assert got.data_ptr() == mem.addr + HEADER
        assert store.get_tensor_into(k("i"), mem.addr, HEADER + 8) is None
        assert store.get_tensor_into(k("missing"), mem.addr, mem.size) is None
        assert store.get_tensor_into(k("i"), 0, mem.size) is None

        half = mem.size // 2
        got = store.batch_get_tensor_into([k("i"), k("missing")], [mem.addr, mem.addr + half], [half, half])
        assert same(got[0], t) and got[1] is None
        assert store.batch_get_tensor_into([k("i")], [mem.addr, mem.addr], [half]) == [INVALID_PARAMS]
        assert store.batch_get_tensor_into([k("i")], [0], [half]) == [INVALID_PARAMS]
    finally:
        store.unregister_buffer(mem.addr)


def test_put_tensor_from_buffer(store, k, mem):
    assert store.register_buffer(mem.addr, mem.size) == 0
    try:
        t = make("uint8", (100,), 6)
        size = _write(mem, t)
        assert store.put_tensor_from(k("f"), mem.addr, size) == 0
        assert same(store.get_tensor(k("f")), t)
        assert store.put_tensor_from(k("g"), mem.addr, size - 1) == INVALID_PARAMS
        assert store.put_tensor_from(k("g"), mem.addr, HEADER - 1) == INVALID_PARAMS
        assert store.put_tensor_from(k("g"), 0, size) == INVALID_PARAMS
        assert (
            store.batch_put_tensor_from([k("g"), k("h")], [mem.addr, mem.addr], [size, size - 1])
            == [INVALID_PARAMS] * 2
        )
        assert store.is_exist(k("g")) == 0
        assert store.batch_put_tensor_from([], [], []) == []
        assert store.batch_put_tensor_from([k("g")], [mem.addr], [size]) == [0]

        t2 = make("int16", (7,), 1)
        size2 = _write(mem, t2)
        assert store.upsert_tensor_from(k("f"), mem.addr, size2) == 0
        assert same(store.get_tensor(k("f")), t2)
        assert store.batch_upsert_tensor_from([k("g")], [mem.addr], [size2]) == [0]
        assert same(store.get_tensor(k("g")), t2)
    finally:
        store.unregister_buffer(mem.addr)


# --- tensor parallelism ----------------------------------------------------------


def test_put_with_tp_writes_one_key_per_rank(store, k):
    name, shape, size, dim = TP
    assert store.put_tensor_with_tp(k(name), make("float32", shape, 7), tp_size=size, split_dim=dim) == 0
    assert store.is_exist(k(name)) == 0
    for rank in range(size):
        assert same(store.get_tensor_with_tp(k(name), tp_rank=rank, tp_size=size, split_dim=dim), tp_chunk(rank))
        assert same(store.get_tensor(f"{k(name)}_tp_{rank}"), tp_chunk(rank))
    # Only equal shards, as upstream.
    assert store.put_tensor_with_tp(k("uneven"), make("float32", (5, 3)), tp_size=2) == INVALID_PARAMS
    assert store.put_tensor_with_tp(k("dim"), make("float32", (4,)), tp_size=2, split_dim=1) == INVALID_PARAMS
    # tp_size 1: the plain key.
    assert store.put_tensor_with_tp(k("one"), make("int8", (3,))) == 0
    assert same(store.get_tensor_with_tp(k("one")), make("int8", (3,)))


def test_batch_tp_forms(store, k, mem):
    keys = [k("x"), k("y"), k("z")]
    tensors = [make("float32", (2, 4), 1), make("int64", (6, 2), 2), make("float32", (3, 3), 3)]
    assert store.batch_put_tensor_with_tp(keys, tensors, tp_size=2) == [0, 0, INVALID_PARAMS]
    got = store.batch_get_tensor_with_tp(keys, tp_rank=1, tp_size=2)
    assert same(got[0], tensors[0][1:]) and same(got[1], tensors[1][3:]) and got[2] is None

    cfg = ReplicateConfig()
    cfg.replica_num = 1
    assert store.pub_tensor_with_tp(k("p"), tensors[1], cfg, tp_size=3) == 0
    assert same(store.get_tensor_with_tp(k("p"), tp_rank=2, tp_size=3), tensors[1][4:])
    assert store.batch_pub_tensor_with_tp([k("q")], [tensors[0]], cfg, tp_size=2, split_dim=1) == [0]
    assert same(store.get_tensor_with_tp(k("q"), tp_rank=1, tp_size=2), tensors[0][:, 2:])

    assert store.register_buffer(mem.addr, mem.size) == 0
    try:
        size = _write(mem, tensors[1])
        assert store.put_tensor_with_tp_from(k("f"), mem.addr, size, tp_size=2) == 0
        assert store.batch_put_tensor_with_tp_from([k("g"), k("h")], [mem.addr, mem.addr], [size, 10], tp_size=2) == [
            0,
            INVALID_PARAMS,
        ]
        half = mem.size // 2
        view = store.get_tensor_with_tp_into(k("f"), mem.addr + half, half, tp_rank=0, tp_size=2)
        assert same(view, tensors[1][:3]) and view.data_ptr() == mem.addr + half + HEADER
        views = store.batch_get_tensor_with_tp_into([k("g")], [mem.addr + half], [half], tp_rank=1, tp_size=2)
        assert same(views[0], tensors[1][3:])
    finally:
        store.unregister_buffer(mem.addr)


# --- safetensors, CUDA-style reads ---------------------------------------------------


def test_safetensors_save_and_load(store, k, tmp_path):
    from safetensors.torch import load_file, save_file

    t = make("float16", (3, 7), 8)
    assert store.put_tensor(k("s"), t) == 0
    path = str(tmp_path / "one.safetensors")
    assert store.save_tensor_to_safetensor(k("s"), path) == 0
    assert same(load_file(path)[k("s")], t)
    assert store.save_tensor_to_safetensor(k("missing"), path) == FILE_NOT_FOUND

    two = str(tmp_path / "two.safetensors")
    save_file({"first": make("int32", (2,), 1), "second": make("int32", (3,), 2)}, two)
    assert same(store.load_tensor_from_safetensor(k("l"), two), make("int32", (2,), 1))
    assert same(store.get_tensor(k("l")), make("int32", (2,), 1))
    second = store.load_tensor_from_safetensor(key="second", file_name=two)
    assert same(second, make("int32", (3,), 2)) and same(store.get_tensor("second"), second)
    assert store.load_tensor_from_safetensor(k("n"), str(tmp_path / "absent.safetensors")) is None
    store.remove("second")


def test_get_tensor_into_destination_checks(store, k):
    t = make("float32", (4, 4), 1)
    assert store.put_tensor(k("c"), t) == 0
    assert store.get_tensor_into_cuda(k("c"), torch.empty(4, 4, dtype=torch.float64)) == INVALID_PARAMS
    assert store.get_tensor_into_cuda(k("missing"), torch.empty(4, 4)) == INVALID_PARAMS
    assert store.batch_get_tensor_into_cuda([k("c")], []) == [INVALID_PARAMS]


@ours_only
def test_get_tensor_into_any_destination(store, k):
    """Upstream reads only into CUDA through a dummy client's CUDA IPC; ours copies
    into any matching tensor."""
    t = make("bfloat16", (4, 8), 2)
    assert store.put_tensor(k("c"), t) == 0
    dst = torch.zeros(4, 8, dtype=torch.bfloat16)
    assert store.get_tensor_into_cuda(k("c"), dst) == t.numel() * 2
    assert same(dst, t)
    assert store.batch_get_tensor_into_cuda([k("c"), k("c")], [dst, torch.zeros(4, 8)]) == [64, INVALID_PARAMS]


@ours_only
def test_zero_dim_tensor_comes_back_zero_dim(store, k):
    """Upstream returns shape (1,) for a 0-dim tensor; ours keeps the shape."""
    t = torch.tensor(3.5)
    assert store.put_tensor(k("0"), t) == 0
    assert same(store.get_tensor(k("0")), t)


@ours_only
def test_closed_store_returns_errors(master, k):
    """A store never set up answers -600 and None (upstream's may crash)."""
    s = MooncakeDistributedStore()
    t = make("float32", (2,))
    assert s.put_tensor(k("a"), t) == INVALID_PARAMS
    assert s.get_tensor(k("a")) is None
    assert s.batch_put_tensor([k("a")], [t]) == [INVALID_PARAMS]
    assert s.batch_get_tensor([k("a")]) == [None]
    assert s.put_tensor_with_tp(k("a"), t, tp_size=2) == INVALID_PARAMS
    assert s.get_tensor_into(k("a"), 4096, 10) is None
    assert s.save_tensor_to_safetensor(k("a")) == INVALID_PARAMS
    assert s.load_tensor_from_safetensor(k("a"), "x") is None


@ours_only
def test_tensors_through_a_dummy_client(master, store, k, mem):
    """A dummy client (``setup_dummy``, this project's ``mooncake_client``) writes
    tensors staged through one copy and reads them as a real client does."""
    from test_dummy_client import RealClient, dummy_store

    real = RealClient(master)
    try:
        dummy = dummy_store(real)
        try:
            t = make("float16", (32, 16), 5)
            assert dummy.put_tensor(k("d"), t) == 0
            assert same(store.get_tensor(k("d")), t)
            assert dummy.batch_put_tensor_with_tp([k("e")], [t], tp_size=2) == [0]
            assert same(dummy.get_tensor_with_tp(k("e"), tp_rank=1, tp_size=2), t[16:])
            assert dummy.upsert_tensor(k("d"), t[:4]) == 0
            assert same(dummy.batch_get_tensor([k("d")])[0], t[:4])
            assert dummy.register_buffer(mem.addr, mem.size) == 0
            got = dummy.get_tensor_into(k("d"), mem.addr, mem.size)
            assert same(got, t[:4]) and got.data_ptr() == mem.addr + HEADER
            dummy.unregister_buffer(mem.addr)
        finally:
            dummy.close()
    finally:
        real.stop()


# --- across implementations ------------------------------------------------------


class _Peer:
    """``_tensor_peer.py`` of implementation ``which`` in a child process."""

    def __init__(self, which: str, master, action: str, prefix: str) -> None:
        python = impl_python(which)
        if python is None:
            pytest.skip(f"no Python for implementation {which!r} (scripts/upstream-peer.sh)")
        script = Path(__file__).with_name("_tensor_peer.py")
        self.proc = subprocess.Popen(
            [python, str(script), master.metadata, master.addr, action, prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=impl_env(which),
            cwd=str(script.parent),
        )

    def result(self) -> list:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"tensor peer exited ({self.proc.wait()})"
        return json.loads(line)["errors"]

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.mark.parametrize("other", ["ours", "upstream"])
def test_tensors_cross_implementations(master, store, k, other):
    """Tensors this implementation writes are read by ``other``, and the other way
    round, on one master."""
    if other == IMPL:
        pytest.skip("same implementation")
    if not os.environ.get("MOONCAKE_TORCH_SITE") and other == "upstream":
        pytest.skip("the other implementation's Python has no torch (MOONCAKE_TORCH_SITE unset)")
    assert write_all(store, k("mine")) == []
    reader = _Peer(other, master, "check", k("mine"))
    try:
        assert reader.result() == []
    finally:
        reader.close()
    writer = _Peer(other, master, "write", k("theirs"))
    try:
        assert writer.result() == []
        assert check_all(store, k("theirs")) == []
    finally:
        writer.close()
