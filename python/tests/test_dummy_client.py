"""Dummy clients (``setup_dummy``) against this project's ``mooncake_client``: the
operations upstream's ``test_dummy_client.py`` exercises (bytes, batches, memory from
``alloc_from_mem_pool`` moved in place, ranged reads), several dummy processes at
once, and a dummy process killed mid-work that leaves the real client serving."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import IMPL, impl_env
from mooncake.store import MooncakeDistributedStore, TaskStatus
from store_env import Master, _free_ports, new_store, our_binary, pattern, stop_process

pytestmark = pytest.mark.skipif(IMPL != "ours", reason="this project's mooncake_client (ours only)")


class RealClient:
    """A ``mooncake_client`` process on a free port, killed at the end."""

    def __init__(self, master: Master) -> None:
        self.port = _free_ports(1)[0]
        self.address = f"127.0.0.1:{self.port}"
        self.log = Path(tempfile.mkstemp(prefix="mooncake-client-", suffix=".log")[1])
        args = [
            str(our_binary("mooncake_client")),
            "--host=127.0.0.1",
            f"--port={self.port}",
            f"--metadata_server={master.metadata}",
            f"--master_server_address={master.addr}",
            "--global_segment_size=256MB",
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        stop_process(self.proc, self.log)


def dummy_store(real: RealClient, local_buffer: int = 64 << 20) -> MooncakeDistributedStore:
    deadline = time.time() + 30
    while True:
        s = MooncakeDistributedStore()
        if s.setup_dummy(256 << 20, local_buffer, real.address) == 0:
            return s
        if real.proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"mooncake_client did not serve:\n{real.log.read_text()[-3000:]}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def real(master: Master) -> Iterator[RealClient]:
    r = RealClient(master)
    yield r
    r.stop()


@pytest.fixture(scope="module")
def dummy(real: RealClient) -> Iterator[MooncakeDistributedStore]:
    s = dummy_store(real)
    yield s
    s.close()


def test_bytes_and_queries(dummy, k) -> None:
    data = b"Hello, World!"
    assert dummy.put(k("a"), data) == 0
    assert dummy.get_size(k("a")) == len(data)
    assert dummy.get(k("a")) == data
    assert dummy.put(k("a"), data) == 0
    keys = [k(f"e{i}") for i in range(20)]
    for key in keys[:10]:
        assert dummy.put(key, data) == 0
    assert dummy.batch_is_exist(keys) == [1] * 10 + [0] * 10
    assert dummy.batch_is_exist([]) == []
    assert dummy.is_exist(k("missing")) == 0
    assert dummy.get(k("missing")) == b""
    big = pattern(3 << 20, 5)
    assert dummy.put(k("big"), big) == 0
    assert dummy.get(k("big")) == big
    assert dummy.get_batch([k("big"), k("a")]) == [big, data]
    assert dummy.remove(k("a"), True) == 0
    assert dummy.is_exist(k("a")) == 0
    assert dummy.get_hostname()
    assert dummy.health_check() == 0


def test_copy_tasks_go_through_the_real_client(master, dummy, k) -> None:
    """A dummy queues and queries tasks through its real client, which owns the
    source replica and runs the copy into another client's segment."""
    data = pattern(1 << 20, 9)
    assert dummy.put(k("c"), data) == 0
    other = new_store(master)
    try:
        task_id, rc = dummy.create_copy_task(k("c"), [other.get_hostname()])
        assert rc == 0
        deadline = time.time() + 60
        while True:
            resp, rc = dummy.query_task(task_id)
            assert rc == 0
            if resp.status in (TaskStatus.SUCCESS, TaskStatus.FAILED):
                break
            assert time.time() < deadline, repr(resp)
            time.sleep(0.05)
        assert resp.status == TaskStatus.SUCCESS, repr(resp)
        assert len(other.get_replica_desc(k("c"))) == 2
        assert dummy.create_copy_task(k("missing"), [other.get_hostname()]) == ((0, 0), -704)
        assert dummy.query_task((3, 4)) == (None, -1400)
    finally:
        other.close()


def test_pool_memory_moves_in_place(dummy, k) -> None:
    spacing, data = 1 << 20, [pattern(2000 * (i + 1), i) for i in range(3)]
    keys = [k(f"p{i}") for i in range(3)]
    base = dummy.alloc_from_mem_pool(3 * spacing)
    assert base != 0
    assert dummy.register_buffer(base, 3 * spacing) == 0
    ptrs = [base + i * spacing for i in range(3)]
    for p, d in zip(ptrs, data):
        ctypes.memmove(p, d, len(d))
    assert dummy.batch_put_from(keys, ptrs, [len(d) for d in data]) == [0, 0, 0]
    for key, d in zip(keys, data):
        assert dummy.get(key) == d
    ctypes.memset(base, 0, 3 * spacing)
    assert dummy.batch_get_into(keys, ptrs, [spacing] * 3) == [len(d) for d in data]
    for p, d in zip(ptrs, data):
        assert ctypes.string_at(p, len(d)) == d
    assert all(r < 0 for r in dummy.batch_get_into(keys[:2], ptrs, [spacing] * 3))
    assert dummy.batch_put_from([], [], []) == []
    assert dummy.put_from(k("one"), ptrs[1], len(data[1])) == 0
    ctypes.memset(base, 0, spacing)
    assert dummy.get_into(k("one"), base, spacing) == len(data[1])
    assert ctypes.string_at(base, len(data[1])) == data[1]
    assert dummy.unregister_buffer(base) == 0


def test_ranged_reads(dummy, k) -> None:
    d1, d2 = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz0123456789"
    assert dummy.put(k("r1"), d1) == 0 and dummy.put(k("r2"), d2) == 0
    b0, b1 = dummy.alloc_from_mem_pool(32), dummy.alloc_from_mem_pool(32)
    assert dummy.register_buffer(b0, 32) == 0 and dummy.register_buffer(b1, 32) == 0
    ctypes.memset(b0, ord("_"), 32)
    ctypes.memset(b1, ord("_"), 32)
    results = dummy.get_into_ranges(
        [b0, b1],
        [[k("r1"), k("r2")], [k("r2"), k("r1")]],
        [[[0, 20], [8]], [[4], [16]]],
        [[[2, 30], [10]], [[0], [12]]],
        [[[4, 3], [6]], [[6], [4]]],
    )
    assert results == [[[4, 3], [6]], [[6], [4]]]
    assert ctypes.string_at(b0, 4) == d1[2:6]
    assert ctypes.string_at(b0 + 8, 6) == d2[10:16]
    assert ctypes.string_at(b0 + 20, 3) == d1[30:33]
    assert ctypes.string_at(b1 + 4, 6) == d2[0:6]
    assert ctypes.string_at(b1 + 16, 4) == d1[12:16]
    assert dummy.get_into_ranges([b0], [[k("r1")]], [[[30]]], [[[0]]], [[[4]]])[0][0][0] < 0
    missing = dummy.get_into_ranges([b0], [[k("nope"), k("r1")]], [[[0], [8]]], [[[0], [0]]], [[[4], [4]]])
    assert missing[0][0][0] < 0 and missing[0][1][0] == 4


_WORKER = textwrap.dedent(
    """
    import sys, time
    from mooncake.store import MooncakeDistributedStore
    address, prefix, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = MooncakeDistributedStore()
    assert s.setup_dummy(64 << 20, 16 << 20, address) == 0
    print("ready", flush=True)
    for i in range(rounds):
        value = (prefix + str(i)).encode() * 1000
        assert s.put(f"{prefix}/{i}", value) == 0, i
        assert s.get(f"{prefix}/{i}") == value, i
    print("done", flush=True)
    if rounds > 1000:
        time.sleep(60)
    """
)


def _worker(real: RealClient, prefix: str, rounds: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, real.address, prefix, str(rounds)],
        env=impl_env("ours"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_several_dummy_processes_share_one_real_client(real, dummy, k) -> None:
    workers = [_worker(real, k(f"w{i}"), 200) for i in range(3)]
    for w in workers:
        out, err = w.communicate(timeout=120)
        assert w.returncode == 0, err[-3000:]
        assert "done" in out
    for i in range(3):
        assert dummy.get(f"{k(f'w{i}')}/199") == (k(f"w{i}") + "199").encode() * 1000


def test_a_killed_dummy_leaves_the_real_client_serving(real, dummy, k) -> None:
    w = _worker(real, k("killed"), 100000)
    assert w.stdout is not None
    assert w.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    w.send_signal(signal.SIGKILL)
    w.wait(timeout=30)
    assert real.proc.poll() is None
    assert dummy.put(k("after"), b"still here") == 0
    assert dummy.get(k("after")) == b"still here"


def test_unreachable_real_client() -> None:
    s = MooncakeDistributedStore()
    port = _free_ports(1)[0]
    assert s.setup_dummy(1 << 20, 1 << 20, f"127.0.0.1:{port}") == -1
    assert s.alloc_from_mem_pool(4096) == 0
    assert s.put("k", b"v") == -600
