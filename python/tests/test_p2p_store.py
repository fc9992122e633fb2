"""``mooncake.p2p_store.P2PStore`` (mooncake-rs only; upstream's wheel has no P2P
Store in Python): nodes in this process sharing the native HTTP metadata server
(``mooncake_http_metadata_server``, which keeps versioned keys): every buffer kind,
get/put, fetches restricted to named peers, discover_peers, replicate_to through an
agent, errors (unknown names, small buffers, a closed store), close withdrawing
everything.
"""

from __future__ import annotations

import array
import ctypes
import os
import re
import socket
import subprocess
import threading
import time
from typing import Iterator, List

import pytest

if os.environ.get("MOONCAKE_PY_IMPL", "ours") != "ours":
    pytest.skip("the P2P Store's Python API is mooncake-rs's own", allow_module_level=True)

from mooncake import _lib  # noqa: E402
from mooncake.p2p_store import (  # noqa: E402
    ALREADY_HELD,
    CLOSED,
    EXISTS,
    INVALID_ARGUMENT,
    NO_SOURCE,
    NOT_FOUND,
    NOT_HELD,
    Fetched,
    ObjectInfo,
    P2PStore,
    P2PStoreError,
)

SHARD = 64 << 10


@pytest.fixture(scope="module")
def metadata_url() -> Iterator[str]:
    """The native HTTP metadata server on 127.0.0.1, an ephemeral port."""
    binary = _lib.binary_path("mooncake_http_metadata_server")
    if binary is None:
        pytest.skip("mooncake_http_metadata_server is not built (cargo build --bins)")
    proc = subprocess.Popen(
        [str(binary), "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    port = None
    deadline = time.monotonic() + 30
    while port is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on \S+:(\d+)", line)
        if m:
            port = int(m.group(1))
    if port is None:
        proc.kill()
        proc.wait()
        pytest.fail("mooncake_http_metadata_server did not start")
    # Keep draining its log so it never blocks on a full pipe.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}/metadata"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(autouse=True)
def _p2p_env(monkeypatch) -> None:
    # Read when a node is created: no waiting for a source that will not come, and
    # small shards for put.
    monkeypatch.setenv("MC_P2P_NO_SOURCE_RETRIES", "0")
    monkeypatch.setenv("MC_P2P_SHARD_SIZE", str(SHARD))


def free_name() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def nodes(metadata_url) -> Iterator:
    """Factory: ``nodes(n)`` -> n fresh nodes, all closed after the test."""
    made: List[P2PStore] = []

    def make(n: int = 2) -> List[P2PStore]:
        out = [P2PStore(metadata_url, free_name()) for _ in range(n)]
        made.extend(out)
        return out

    yield make
    for node in made:
        node.close()


def pattern(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed + (i >> 9)) & 0xFF for i in range(n))


def unique(tag: str) -> str:
    return f"{tag}/{os.getpid()}-{time.monotonic_ns()}"


def test_bytes_register_and_bytearray_replica(nodes) -> None:
    a, b = nodes(2)
    data = pattern((1 << 20) + 100, 1)
    name = unique("ckpt")
    a.register(name, data, SHARD)
    out = bytearray(len(data))
    got = b.get_replica(name, out)
    assert got == Fetched(kept=0, fetched=len(data))
    assert out == data
    [info] = a.list(name)
    assert isinstance(info, ObjectInfo)
    assert (info.name, info.size, info.max_shard_size, info.size_list) == (name, len(data), SHARD, [len(data)])
    assert info.holders == sorted([a.local_server_name, b.local_server_name])
    # The replica's buffer is pinned until it is let go.
    with pytest.raises(BufferError):
        out.extend(b"x")
    b.delete_replica(name)
    out.extend(b"x")
    # Resuming over the same bytes fetches nothing.
    del out[-1]
    assert b.get_replica(name, out, resume=True) == Fetched(kept=len(data), fetched=0)
    b.delete_replica(name)
    a.unregister(name)
    assert a.list(name) == []


def test_every_buffer_kind(nodes) -> None:
    a, b = nodes(2)
    half = 4 * SHARD
    data = pattern(half * 2 + 7, 2)
    name = unique("kinds")
    # Registered from a bytearray and a read-only memoryview.
    first = bytearray(data[:half])
    second = memoryview(bytes(data[half:]))
    a.register(name, [first, second], SHARD, location="cpu:0")
    assert a.list(name)[0].size_list == [half, len(data) - half]
    # Fetched into a writable memoryview and an array.array ...
    mv = memoryview(bytearray(half))
    arr = array.array("B", bytes(len(data) - half))
    b.get_replica(name, [mv, arr])
    assert bytes(mv) + arr.tobytes() == data
    b.delete_replica(name)
    # ... a raw (address, size) tuple ...
    raw = ctypes.create_string_buffer(len(data))
    b.get_replica(name, (ctypes.addressof(raw), len(data)))
    assert raw.raw == data
    b.delete_replica(name)
    # ... and a list mixing raw tuples and buffers.
    head = ctypes.create_string_buffer(half)
    tail = bytearray(len(data) - half)
    b.get_replica(name, [(ctypes.addressof(head), half), tail])
    assert head.raw + bytes(tail) == data
    b.delete_replica(name)
    # Read-only buffers cannot receive a replica; strs are no buffers.
    with pytest.raises(TypeError):
        b.get_replica(name, bytes(len(data)))
    with pytest.raises(TypeError):
        b.get_replica(name, "x" * len(data))
    with pytest.raises(TypeError):
        b.get_replica(name, [object()])
    a.unregister(name)
    first.extend(b"free again")


def test_numpy_buffers(nodes) -> None:
    np = pytest.importorskip("numpy")
    a, b = nodes(2)
    src = np.arange(300_000, dtype=np.float32)
    name = unique("np")
    a.register(name, src, SHARD)
    dst = np.zeros_like(src)
    b.get_replica(name, dst)
    assert np.array_equal(src, dst)
    with pytest.raises(TypeError):
        b.get_replica(unique("np"), dst[::2])  # not contiguous
    b.delete_replica(name)
    a.unregister(name)


def test_put_get_and_get_from_peers(nodes) -> None:
    a, b, c = nodes(3)
    data = pattern(5 * SHARD + 3, 3)
    key = unique("blob")
    a.put(key, data)
    assert a.size(key) == len(data)
    assert a.get(key) == data  # a's own copy
    assert b.get(key) == data  # fetched, then held by b
    assert b.get(key) == data  # from b's memory
    with pytest.raises(P2PStoreError) as e:
        a.put(key, data)
    assert e.value.code == ALREADY_HELD
    with pytest.raises(P2PStoreError) as e:
        c.put(key, data)
    assert e.value.code == EXISTS
    # a withdraws; only b holds it now.
    a.unregister(key)
    buf = bytearray(len(data))
    with pytest.raises(P2PStoreError) as e:
        c.get_from_peers(key, [a.local_server_name], buf)
    assert e.value.code == NO_SOURCE
    assert "no source" in e.value.message
    got = c.get_from_peers(key, b.local_server_name, buf)
    assert got.fetched + got.kept == len(data)
    assert buf == data
    assert c.discover_peers(key) == sorted([b.local_server_name, c.local_server_name])
    with pytest.raises(ValueError):
        c.get_from_peers(key, [], buf)


def test_discover_peers_and_list(nodes) -> None:
    a, b = nodes(2)
    prefix = unique("disc")
    a.put(prefix + "/one", b"1" * 10)
    b.put(prefix + "/two", b"2" * 20)
    assert a.discover_peers(prefix) == sorted([a.local_server_name, b.local_server_name])
    assert b.discover_peers(prefix + "/one") == [a.local_server_name]
    assert a.discover_peers(unique("nothing")) == []
    listed = {o.name: o for o in b.list(prefix)}
    assert set(listed) == {prefix + "/one", prefix + "/two"}
    assert listed[prefix + "/two"].size == 20
    assert listed[prefix + "/two"].holders == [b.local_server_name]


def test_replicate_to_via_agent(nodes) -> None:
    a, b = nodes(2)
    address = a.start_agent()
    assert re.fullmatch(r"127\.0\.0\.1:\d+", address), address
    with pytest.raises(P2PStoreError) as e:
        a.start_agent("127.0.0.1:0")
    assert e.value.code == INVALID_ARGUMENT
    key = unique("pushed")
    data = pattern(3 * SHARD, 4)
    b.put(key, data)
    b.replicate_to(key, a.local_server_name)
    b.replicate_to(key, a.local_server_name)  # already held: fine
    b.unregister(key)
    assert b.discover_peers(key) == [a.local_server_name]
    assert a.get(key) == data
    # b runs no agent.
    with pytest.raises(P2PStoreError) as e:
        a.replicate_to(key, b.local_server_name)
    assert e.value.code == INVALID_ARGUMENT and "no agent" in e.value.message
    with pytest.raises(P2PStoreError) as e:
        b.replicate_to(unique("missing"), a.local_server_name)
    assert e.value.code == NOT_FOUND


def test_errors(nodes, metadata_url) -> None:
    a, b = nodes(2)
    missing = unique("missing")
    for call in (lambda: a.get(missing), lambda: a.size(missing), lambda: b.get_replica(missing, bytearray(8))):
        with pytest.raises(P2PStoreError) as e:
            call()
        assert e.value.code == NOT_FOUND
        assert missing in e.value.message
        assert isinstance(e.value, RuntimeError)
    with pytest.raises(P2PStoreError) as e:
        a.unregister(missing)
    assert e.value.code == NOT_HELD
    name = unique("small")
    a.register(name, pattern(2 * SHARD, 5), SHARD)
    with pytest.raises(P2PStoreError) as e:
        b.get_replica(name, bytearray(2 * SHARD - 1))
    assert e.value.code == INVALID_ARGUMENT and "mooncake_p2p_get_replica_ex" in e.value.message
    with pytest.raises(P2PStoreError) as e:
        a.get(name)  # held in the caller's memory
    assert e.value.code == ALREADY_HELD
    with pytest.raises(P2PStoreError) as e:
        a.delete_replica(name)  # registered, not a replica
    assert e.value.code == NOT_HELD
    with pytest.raises(P2PStoreError) as e:
        a.register(unique("x"), bytearray(8), 0)
    assert e.value.code == INVALID_ARGUMENT
    with pytest.raises(P2PStoreError) as e:
        a.register(unique("x"), [], SHARD)
    assert e.value.code == INVALID_ARGUMENT
    with pytest.raises(P2PStoreError) as e:
        P2PStore("P2PHANDSHAKE", free_name())
    assert "P2PHANDSHAKE" in e.value.message
    with pytest.raises(TypeError):
        P2PStore(metadata_url)
    with pytest.raises(ValueError):
        a.size("a\0b")
    # A closed store refuses everything.
    a.close()
    assert a.closed
    a.close()  # twice is fine
    for call in (
        lambda: a.get(name),
        lambda: a.put(unique("x"), b"x"),
        lambda: a.list(),
        lambda: a.discover_peers(),
        lambda: a.register(unique("x"), b"x", SHARD),
        lambda: a.start_agent(),
    ):
        with pytest.raises(P2PStoreError) as e:
            call()
        assert e.value.code == CLOSED
    unopened = P2PStore()
    with pytest.raises(P2PStoreError) as e:
        unopened.list()
    assert e.value.code == CLOSED


def test_close_withdraws_everything(metadata_url) -> None:
    name, key = unique("closing"), unique("closing-put")
    registered = bytearray(pattern(3 * SHARD, 6))
    with P2PStore(metadata_url, free_name()) as a, P2PStore(metadata_url, free_name()) as b:
        a.register(name, registered, SHARD)
        a.put(key, b"bytes")
        a.start_agent()
        replica = bytearray(len(registered))
        b.get_replica(name, replica)
        assert b.get(key) == b"bytes"
        with pytest.raises(BufferError):
            registered.extend(b"x")
    # Both closed: nothing of theirs is left, and every buffer is free.
    assert a.closed and b.closed
    registered.extend(b"x")
    replica.extend(b"x")
    with P2PStore(metadata_url, free_name()) as c:
        assert c.list(name) == [] and c.list(key) == []
        with pytest.raises(P2PStoreError) as e:
            c.replicate_to(key, a.local_server_name)
        assert e.value.code == INVALID_ARGUMENT  # a's agent was unpublished


def test_on_a_shared_engine(nodes, metadata_url) -> None:
    from mooncake.engine import TransferEngine

    (a,) = nodes(1)
    name = free_name()
    engine = TransferEngine()
    assert engine.initialize(name, metadata_url, "tcp", "") == 0
    with P2PStore(metadata_url, engine=engine) as b:
        assert b.local_server_name == name
        data = pattern(2 * SHARD + 1, 7)
        key = unique("shared")
        a.put(key, data)
        assert b.get(key) == data
    with pytest.raises(TypeError):
        P2PStore(metadata_url, "127.0.0.1:1", engine=engine)
