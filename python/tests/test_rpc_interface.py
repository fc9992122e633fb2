"""``mooncake.engine.RpcInterface`` (``CoroRPCInterface``): data and tensors sent to a
peer's server over coro_rpc. Runs within one implementation, and between ours and
upstream's 0.3.13 wheel both ways (``_rpc_peer.py`` in the other's Python)."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import subprocess
import threading
import time
from typing import List

import pytest

from conftest import IMPL, impl_env, impl_python
from _rpc_peer import FakeTensor, cases, digest

ours_only = pytest.mark.skipif(IMPL != "ours", reason="upstream's wheel differs on purpose (see _rpc_interface)")


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Collector:
    """Callbacks that record what arrives."""

    def __init__(self) -> None:
        self.got: List[tuple] = []
        self.cond = threading.Condition()

    def on_data(self, d) -> None:
        with self.cond:
            self.got.append(("data", d["source"], d["data"]))
            self.cond.notify_all()

    def on_tensor(self, t) -> None:
        with self.cond:
            self.got.append(("tensor", t.dtype, list(t.shape), t.get_data_as_bytes()))
            self.cond.notify_all()

    def wait(self, n: int) -> List[tuple]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.got) >= n, timeout=30), self.got
            return list(self.got)


@pytest.fixture
def server():
    from mooncake.engine import RpcInterface

    rpc = RpcInterface()
    port = _free_port()
    assert rpc.initialize_server(f"127.0.0.1:{port}")
    seen = Collector()
    rpc.set_data_receive_callback(seen.on_data)
    rpc.set_tensor_receive_callback(seen.on_tensor)
    assert rpc.start_server_async()
    yield f"127.0.0.1:{port}", seen, rpc
    rpc.stop_server()


@ours_only
def test_data_and_tensors_reach_the_callbacks(server):
    from mooncake.engine import CoroRPCInterface, RpcInterface

    assert CoroRPCInterface is RpcInterface
    target, seen, srv = server
    client = RpcInterface()
    assert client.send_data(target, b"x") == -1  # not initialized
    assert client.initialize_client()
    for payload in [b"hello", b"a" * 1024, bytes(range(251)) * 9, b""]:
        assert client.send_data(target, payload) == 0
    assert client.send_tensor(target, FakeTensor(bytes(range(24)))) == 0
    header_case = cases()[2][1]
    assert client.send_data(target, header_case) == 0
    got = seen.wait(6)
    assert got[:5] == [
        ("data", "", b"hello"),
        ("data", "", b"a" * 1024),
        ("data", "", bytes(range(251)) * 9),
        ("data", "", b""),
        ("data", "", bytes(range(24))),
    ]
    assert got[5] == ("tensor", "float32", [2, 3], header_case)
    with pytest.raises(TypeError):
        client.send_data(target, "text")
    assert client.send_tensor(target, object()) == -1
    assert not srv.start_server_async()  # already started
    assert not client.start_server_async()  # a client only


@ours_only
def test_failures_are_reported_and_async_sends_work(server):
    from mooncake.engine import RpcInterface, create_rpc_client, create_rpc_server

    target, seen, _ = server
    client = create_rpc_client()
    assert client.send_data(f"127.0.0.1:{_free_port()}", b"nobody") == -1

    async def both():
        loop = asyncio.get_running_loop()
        a = await client.send_data_async(target, b"async", loop)
        b = await client.send_tensor_async(target, FakeTensor(bytes(8)), loop)
        with pytest.raises(RuntimeError, match="Send data failed"):
            await client.send_data_async(f"127.0.0.1:{_free_port()}", b"x", loop)
        return a, b

    assert asyncio.run(both()) == (0, 0)
    got = seen.wait(2)
    assert ("data", "", b"async") in got and ("data", "", bytes(8)) in got
    srv = create_rpc_server()
    assert isinstance(srv, RpcInterface)
    # start_server() blocks until stop_server(), without freezing other threads.
    blocking = RpcInterface()
    port = _free_port()
    blocking.initialize_server(f"127.0.0.1:{port}")
    started = threading.Thread(target=blocking.start_server)
    started.start()
    deadline = time.monotonic() + 30
    while client.send_data(f"127.0.0.1:{port}", b"up") != 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    blocking.stop_server()
    started.join(timeout=30)
    assert not started.is_alive()
    assert not blocking.start_server_async()  # a stopped server does not start again


def _peer(which: str, *args: str) -> subprocess.Popen:
    python = impl_python(which)
    if python is None:
        pytest.skip(f"no {which} Python for the peer")
    script = str(__import__("pathlib").Path(__file__).with_name("_rpc_peer.py"))
    return subprocess.Popen(
        [python, script, *args],
        env=impl_env(which),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


@ours_only
def test_our_client_and_upstreams_server(upstream_peer_server):
    from mooncake.engine import RpcInterface

    target, lines = upstream_peer_server
    client = RpcInterface()
    client.initialize_client()
    sent = cases()
    for kind, payload in sent:
        rc = client.send_data(target, payload) if kind == "data" else client.send_tensor(target, FakeTensor(payload))
        assert rc == 0
    got = [lines() for _ in sent]
    want = [f"GOT data {len(p)} {digest(p)}" for _, p in sent]
    header_case = sent[2][1]
    want[2] = f"GOT tensor:float32 {len(header_case)} {digest(header_case)}"
    assert got == want


@pytest.fixture
def upstream_peer_server():
    proc = _peer("upstream", "server")
    try:
        line = proc.stdout.readline().split()
        assert line and line[0] == "PORT", line
        yield f"127.0.0.1:{line[1]}", lambda: proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait()


@ours_only
def test_upstreams_client_and_our_server(server):
    target, seen, _ = server
    proc = _peer("upstream", "client", target)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    sent = cases()
    assert out.split("\n")[: len(sent)] == ["RC 0"] * len(sent)
    got = seen.wait(len(sent))
    assert [g[-1] for g in got] == [p for _, p in sent]
    assert got[2][:3] == ("tensor", "float32", [2, 3])
    assert hashlib.sha256(got[2][-1]).hexdigest()[:16] == digest(sent[2][1])
