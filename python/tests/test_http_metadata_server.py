"""``python -m mooncake.http_metadata_server`` (upstream's Python metadata server)
and its ``KVBootstrapServer`` class, for both implementations (upstream's needs
aiohttp in its venv)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Optional, Tuple

import pytest

from conftest import IMPL, REPO, impl_env, impl_python


def request(url: str, method: str, body: Optional[bytes] = None) -> Tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def check_protocol(base: str) -> None:
    url = f"{base}/metadata?key="
    assert request(url + "a", "GET") == (404, b"metadata not found")
    assert request(url + "a", "PUT", b'{"x": 1}') == (200, b"metadata updated")
    assert request(url + "a", "GET") == (200, b'{"x": 1}')
    assert request(url + "a", "PUT", b"[2]") == (200, b"metadata updated"), "plain keys are overwritten"
    assert request(url + "mooncake%2Frpc_meta%2Fn1", "PUT", b"1")[0] == 200
    assert request(url + "mooncake%2Frpc_meta%2Fn1", "PUT", b"1") == (400, b"Duplicate rpc_meta key not allowed")
    assert request(url, "GET")[0] == 400 and request(url + "%20", "PUT", b"x")[0] == 400
    assert request(url + "a", "POST", b"x")[0] == 405
    assert request(url + "a", "DELETE") == (200, b"metadata deleted")
    assert request(url + "a", "DELETE") == (404, b"metadata not found")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_module_runs_as_a_command() -> None:
    python = impl_python(IMPL) or sys.executable
    port = free_port()
    proc = subprocess.Popen(
        [python, "-m", "mooncake.http_metadata_server", "--port", str(port), "--host", "127.0.0.1"],
        env=impl_env(IMPL), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.1)
        check_protocol(f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        assert proc.wait(timeout=15) == 0, "SIGTERM is a clean shutdown"
        if proc.stderr is not None:
            proc.stderr.close()


def test_bootstrap_server_class() -> None:
    if IMPL == "upstream":
        pytest.importorskip("aiohttp")
    from mooncake.http_metadata_server import KVBootstrapServer, KVPoll

    server = KVBootstrapServer(port=free_port(), host="127.0.0.1")
    assert server.poll() == KVPoll.Failed, "not running yet"
    server.run()
    try:
        deadline = time.monotonic() + 30
        while server.poll() != KVPoll.Success or not _listening(server.port):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        check_protocol(f"http://127.0.0.1:{server.port}")
    finally:
        server.close()
    assert server.poll() == KVPoll.Failed
    assert [m.name for m in KVPoll] == ["Failed", "Bootstrapping", "WaitingForInput", "Transferring", "Success"]


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False
