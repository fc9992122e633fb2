"""Put and get sessions (upstream's ``pybind_client_test.cpp`` session tests and
``session_ranges_tcp_e2e.py``): reserve, write byte ranges from several buffers,
end; read byte ranges under a get session. Runs with either implementation
(``MOONCAKE_PY_IMPL``) against this project's master and upstream's."""

from __future__ import annotations

import ctypes
import time
from typing import Iterator

import pytest

from mooncake.store import MooncakeDistributedStore
from store_env import Master, new_store, upstream_master_binary

INVALID = -600
NOT_FOUND = -704
EXISTS = -705


@pytest.fixture(scope="module", params=["ours", "upstream"])
def sstore(request) -> Iterator[MooncakeDistributedStore]:
    binary = upstream_master_binary() if request.param == "upstream" else None
    m = Master(binary=binary) if binary else Master()
    s = new_store(m)
    yield s
    s.close()
    m.stop()


def _buf(data: bytes):
    b = ctypes.create_string_buffer(data, len(data))
    return b, ctypes.addressof(b)


def test_sessions_move_ranges_both_ways(sstore, k) -> None:
    s = sstore
    page = 64
    keys = [k(f"s{i}") for i in range(3)]
    layers = [bytes((i * 16 + l) % 251 for _ in range(page)) for l in range(4) for i in range(1)]
    assert s.batch_put_session_start(keys, [page * 4] * 3) == [0, 0, 0]
    assert s.batch_put_session_start(keys[:1], [page * 4]) == [INVALID]  # already one
    assert s.is_exist(keys[0]) == 0  # not readable before the end
    srcs = [[_buf(bytes([i * 4 + l]) * page) for l in range(4)] for i in range(3)]
    # Layer by layer, as a KV cache is written: every call moves one page per key.
    for l in range(4):
        got = s.batch_put_from_multi_buffer_ranges(
            keys, [[srcs[i][l][1]] for i in range(3)], [[page]] * 3, [[l * page]] * 3
        )
        assert got == [page] * 3
    assert s.batch_put_session_end(keys) == [0, 0, 0]
    assert s.batch_put_session_end(keys) == [INVALID] * 3  # ended already
    for i, key in enumerate(keys):
        assert s.get(key) == b"".join(bytes([i * 4 + l]) * page for l in range(4))
    assert s.batch_get_session_start(keys + [k("missing")]) == [0, 0, 0, NOT_FOUND]
    dst, ptr = _buf(bytes(3 * 2 * page))
    got = s.batch_get_into_multi_buffer_ranges(
        keys,
        [[ptr + (2 * i) * page, ptr + (2 * i + 1) * page] for i in range(3)],
        [[page, page]] * 3,
        [[3 * page, 0]] * 3,
    )
    assert got == [2 * page] * 3
    for i in range(3):
        assert dst.raw[2 * i * page : (2 * i + 1) * page] == bytes([i * 4 + 3]) * page
        assert dst.raw[(2 * i + 1) * page : (2 * i + 2) * page] == bytes([i * 4]) * page
    assert s.batch_get_session_end(keys) == 0
    got = s.batch_get_into_multi_buffer_ranges(keys[:1], [[ptr]], [[page]], [[0]])
    assert got == [INVALID]  # no session any more
    del layers, srcs


def test_sessions_refuse_what_upstream_refuses(sstore, k) -> None:
    s = sstore
    key, other = k("a"), k("b")
    src, ptr = _buf(bytes(range(100)))
    assert s.batch_put_session_start([key, other], [100]) == [INVALID, INVALID]
    assert s.batch_put_from_multi_buffer_ranges([key], [[ptr]], [[10]], [[0]]) == [INVALID]  # no session
    assert s.batch_put_session_start([key], [100]) == [0]
    assert s.batch_put_from_multi_buffer_ranges([key], [[ptr]], [[10]], [[91]]) == [INVALID]  # past the end
    assert s.batch_put_from_multi_buffer_ranges([key], [[ptr, ptr]], [[10]], [[0]]) == [INVALID]
    assert s.batch_put_from_multi_buffer_ranges([key], [[ptr]], [[10]], [[0], [0]]) == [INVALID]
    assert s.batch_put_from_multi_buffer_ranges([key], [[ptr]], [[100]], [[0]]) == [100]
    assert s.batch_put_session_revoke([key]) == [0]
    assert s.is_exist(key) == 0
    assert s.batch_put_session_revoke([key]) == [INVALID]
    assert s.put(other, b"x" * 10) == 0
    assert s.batch_put_session_start([other], [10]) == [EXISTS]
    assert s.batch_get_session_start([key]) == [NOT_FOUND]
    assert s.batch_put_session_start([], []) == []
    assert s.batch_get_session_start([]) == []


def test_sessions_before_setup() -> None:
    s = MooncakeDistributedStore()
    assert s.batch_put_session_start(["k"], [1]) == []
    assert s.batch_get_session_start(["k"]) == []
    assert s.batch_put_session_end(["k"]) == []
    assert s.batch_get_into_multi_buffer_ranges(["k"], [[1]], [[1]], [[0]]) == []
    assert s.batch_get_session_end(["k"]) == -1


def test_a_get_session_ends_with_its_lease(k) -> None:
    m = Master(lease_ttl_ms=200)
    s = new_store(m)
    try:
        key = k("lease")
        assert s.put(key, b"v" * 32) == 0
        assert s.batch_get_session_start([key]) == [0]
        dst, ptr = _buf(bytes(32))
        deadline = time.monotonic() + 30
        while (got := s.batch_get_into_multi_buffer_ranges([key], [[ptr]], [[32]], [[0]])) == [32]:
            assert time.monotonic() < deadline, "the lease never ran out"
        assert got == [-707]
        assert s.batch_get_into_multi_buffer_ranges([key], [[ptr]], [[32]], [[0]]) == [INVALID]
    finally:
        s.close()
        m.stop()
