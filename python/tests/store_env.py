"""The live store environment of the Store tests: a ``mooncake_master`` on 127.0.0.1
(ours from ``target/``, or the one ``MOONCAKE_TEST_MASTER`` names: ``upstream`` for
the wheel's, or a path), store clients, unique keys, page-aligned memory, and the
module-scoped fixtures ``master`` and ``store`` and per-test ``k`` and ``mem``
(registered for every test module by ``conftest.py``).

The master runs with ``--default_kv_lease_ttl=500`` so leases end quickly.
"""

from __future__ import annotations

import ctypes
import glob
import os
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

import pytest

from conftest import IMPL, INSTALLED, REPO, peer_venv
from mooncake.store import MooncakeDistributedStore, MooncakeHostMemAllocator

OURS = IMPL == "ours"
ours_only = pytest.mark.skipif(not OURS, reason="upstream's wheel crashes on this (ours only)")

INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
OBJECT_HAS_LEASE = -706
LEASE_S = 0.5
SEGMENT = 64 << 20
LOCAL_BUFFER = 16 << 20


# --- the master ----------------------------------------------------------------


def _free_ports(n: int) -> List[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _master_binary() -> Path:
    choice = os.environ.get("MOONCAKE_TEST_MASTER", "ours")
    if choice == "upstream":
        return upstream_master_binary()
    if choice != "ours":
        return Path(choice)
    return our_binary("mooncake_master")


def our_binary(name: str) -> Path:
    """This repository's executable `name`: bundled in the package, else the newer of
    the release and debug builds; skips the test when there is none. Testing the
    installed package, only its bundled one."""
    if INSTALLED:
        from mooncake._lib import binary_path

        found = binary_path(name)
        if found is None:
            pytest.fail(f"{name} is not bundled in the installed package")
        return found
    bundled = REPO / "python" / "mooncake" / "lib" / name
    built = [REPO / "target" / p / name for p in ("release", "debug")]
    built = sorted((b for b in built if b.is_file()), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in [bundled, *built]:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    pytest.skip(f"{name} not built: run `cargo build --bin {name}`")


def stop_process(proc: subprocess.Popen, log: Path) -> None:
    """Terminates `proc` (killed after 10 s) and removes its log."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    try:
        log.unlink()
    except OSError:
        pass


def _wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mooncake_master exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"mooncake_master did not listen on {port}:\n{log.read_text()[-3000:]}")


def upstream_master_binary() -> Path:
    """Upstream's mooncake_master from the peer venv; skips the test without one."""
    venv = peer_venv()
    found = glob.glob(str(venv / "lib" / "python*" / "site-packages" / "mooncake" / "mooncake_master")) if venv else []
    if not found:
        pytest.skip("upstream mooncake_master not found (no peer venv: scripts/upstream-peer.sh)")
    return Path(found[0])


class Master:
    """Our mooncake_master on 127.0.0.1 (ports chosen by the system) with its HTTP
    metadata server (``binary``: another master, e.g. upstream's); ``extra`` flags are
    appended, and ``lease_ttl_ms`` (None: the master's default) is the read lease."""

    def __init__(
        self,
        extra: Sequence[str] = (),
        lease_ttl_ms: Optional[int] = int(LEASE_S * 1000),
        log_prefix: str = "mooncake-master-",
        binary: Optional[Path] = None,
    ) -> None:
        binary = binary or _master_binary()
        self.rpc_port, self.metrics_port, self.http_port = _free_ports(3)
        self.log = Path(tempfile.mkstemp(prefix=log_prefix, suffix=".log")[1])
        args = [
            str(binary),
            f"--port={self.rpc_port}",
            "--rpc_address=127.0.0.1",
            f"--metrics_port={self.metrics_port}",
            "--metrics_host=127.0.0.1",
            "--enable_http_metadata_server=true",
            "--http_metadata_server_host=127.0.0.1",
            f"--http_metadata_server_port={self.http_port}",
        ]
        if lease_ttl_ms is not None:
            args.append(f"--default_kv_lease_ttl={lease_ttl_ms}")
        args.extend(extra)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            _wait_port(self.rpc_port, self.proc, self.log)
            _wait_port(self.http_port, self.proc, self.log)
        except Exception:
            self.stop()
            raise
        self.addr = f"127.0.0.1:{self.rpc_port}"
        self.metadata = f"http://127.0.0.1:{self.http_port}/metadata"

    def stop(self) -> None:
        stop_process(self.proc, self.log)


@pytest.fixture(scope="module")
def master() -> Iterator[Master]:
    m = Master()
    yield m
    m.stop()


def new_store(master: Master, segment: int = SEGMENT, local_buffer: int = LOCAL_BUFFER) -> MooncakeDistributedStore:
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", master.metadata, segment, local_buffer, "tcp", "", master.addr)
    assert rc == 0, f"setup failed: {rc}"
    return s


@pytest.fixture(scope="module")
def store(master: Master) -> Iterator[MooncakeDistributedStore]:
    s = new_store(master)
    yield s
    s.close()


@pytest.fixture
def k() -> "Keys":
    return Keys()


class Keys:
    """Unique keys per test: ``k("a")`` -> ``"<test-id>/a"``."""

    def __init__(self) -> None:
        self.prefix = f"t{uuid.uuid4().hex[:12]}"

    def __call__(self, name: str) -> str:
        return f"{self.prefix}/{name}"


class Memory:
    """Page-aligned memory from MooncakeHostMemAllocator, freed at the end."""

    def __init__(self, size: int) -> None:
        self.alloc = MooncakeHostMemAllocator()
        self.size = size
        self.addr = self.alloc.alloc(size)
        assert self.addr and self.addr % 4096 == 0
        ctypes.memset(self.addr, 0, size)

    def write(self, off: int, data: bytes) -> None:
        ctypes.memmove(self.addr + off, data, len(data))

    def read(self, off: int, n: int) -> bytes:
        return ctypes.string_at(self.addr + off, n)

    def free(self) -> None:
        assert self.alloc.free(self.addr) == 0


@pytest.fixture
def mem() -> Iterator[Memory]:
    m = Memory(4 << 20)
    yield m
    m.free()


def pattern(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed) % 251 for i in range(n))
