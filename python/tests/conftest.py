"""Shared pytest fixtures for the Python package tests.

Implementation under test: ``MOONCAKE_PY_IMPL`` = ``ours`` (default: the package in
``python/`` over ``libmooncake.so``) or ``upstream`` (upstream's wheel; run pytest with
the peer venv's python and PYTHONPATH unset, e.g.
``MOONCAKE_PY_IMPL=upstream $MOONCAKE_PEER_VENV/bin/python -m pytest python/tests``).

``MOONCAKE_PY_INSTALLED=1`` (with ``ours``) tests the package installed in the running
interpreter (e.g. from the wheel of ``scripts/build-wheel.sh``) instead of ``python/``:
its bundled library and executables, nothing from this checkout's ``target/``.

The peer venv is ``$MOONCAKE_PEER_VENV``, else ``~/.cache/mooncake-peer/venv``; tests
that need it skip when it is absent. ``$MOONCAKE_TORCH_SITE`` (set by
``scripts/test-python.sh``) is a directory holding torch, safetensors and numpy,
added to the path of the tests and of the child processes they start (the tensor
tests skip without torch). Everything binds or targets 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"
PEER_ENGINE_SCRIPT = REPO / "tests" / "interop" / "peer_engine.py"

IMPL = os.environ.get("MOONCAKE_PY_IMPL", "ours")
if IMPL not in ("ours", "upstream"):
    raise RuntimeError(f"MOONCAKE_PY_IMPL must be 'ours' or 'upstream', not {IMPL!r}")

# Loopback-only engines: advertise 127.0.0.1, and keep upstream on TCP.
os.environ.setdefault("MC_TCP_BIND_ADDRESS", "127.0.0.1")
os.environ.setdefault("MC_FORCE_TCP", "1")

TORCH_SITE = os.environ.get("MOONCAKE_TORCH_SITE", "")
if TORCH_SITE and TORCH_SITE not in sys.path:
    sys.path.append(TORCH_SITE)

#: Testing the installed package (MOONCAKE_PY_INSTALLED=1), not the checkout's.
INSTALLED = IMPL == "ours" and os.environ.get("MOONCAKE_PY_INSTALLED") == "1"

if IMPL == "ours" and not INSTALLED:
    if str(PYTHON_DIR) not in sys.path:
        sys.path.insert(0, str(PYTHON_DIR))
else:
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != PYTHON_DIR]


def _load_our_loader():
    """python/mooncake/_lib.py loaded standalone (works in either mode); the installed
    package's own when testing the installed package."""
    if INSTALLED:
        import mooncake._lib as installed

        return installed
    spec = importlib.util.spec_from_file_location("_mooncake_rs_lib", PYTHON_DIR / "mooncake" / "_lib.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


_our_lib = _load_our_loader()


def our_library() -> Optional[Path]:
    """The libmooncake.so our package would load (None if there is none)."""
    return _our_lib.find_library()


def peer_venv() -> Optional[Path]:
    env = os.environ.get("MOONCAKE_PEER_VENV")
    path = Path(env) if env else Path.home() / ".cache" / "mooncake-peer" / "venv"
    return path if (path / "bin" / "python").exists() else None


def pytest_report_header(config) -> List[str]:
    lines = [f"mooncake implementation: {IMPL}" + (" (installed package)" if INSTALLED else "")]
    if IMPL == "ours":
        lines.append(f"libmooncake: {our_library()}")
    lines.append(f"peer venv: {peer_venv()}")
    return lines


@pytest.fixture(scope="session")
def impl() -> str:
    """``"ours"`` or ``"upstream"``."""
    return IMPL


@pytest.fixture(scope="session", autouse=True)
def _library_present() -> None:
    if IMPL == "ours" and our_library() is None:
        pytest.exit(
            "libmooncake.so not found: run `cargo build --lib` or set MOONCAKE_LIBRARY",
            returncode=2,
        )
    if INSTALLED:
        import mooncake

        package = Path(mooncake.__file__).resolve().parent
        library = our_library()
        if PYTHON_DIR in package.parents or library is None or package not in library.parents:
            pytest.exit(
                f"MOONCAKE_PY_INSTALLED=1: the package at {package} with library {library} "
                "is not an installed package with its bundled library",
                returncode=2,
            )


def impl_env(which: str) -> Dict[str, str]:
    """Environment for a child Python process running implementation ``which``."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["MOONCAKE_PY_IMPL"] = which
    env.setdefault("MC_TCP_BIND_ADDRESS", "127.0.0.1")
    env.setdefault("MC_FORCE_TCP", "1")
    paths = [str(PYTHON_DIR)] if which == "ours" and not INSTALLED else []
    paths += [TORCH_SITE] if TORCH_SITE else []
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    if which == "ours":
        lib = our_library()
        if lib is not None:
            env["MOONCAKE_LIBRARY"] = str(lib)
    return env


def impl_python(which: str) -> Optional[str]:
    """A Python that can run implementation ``which`` (None if unavailable)."""
    if which == IMPL:
        return sys.executable
    if which == "ours":
        return sys.executable if our_library() is not None else None
    venv = peer_venv()
    return str(venv / "bin" / "python") if venv else None


class PeerEngine:
    """``tests/interop/peer_engine.py`` in a child process: a TransferEngine with one
    registered buffer, driven by one-line commands (see that script)."""

    def __init__(
        self,
        which: str,
        metadata: str = "P2PHANDSHAKE",
        hostname: str = "127.0.0.1",
        size: int = 1 << 20,
        seed: int = 1,
        extra_env: Optional[Dict[str, str]] = None,
    ) -> None:
        python = impl_python(which)
        if python is None:
            pytest.skip(f"no Python available for implementation {which!r}")
        env = impl_env(which)
        env.update(extra_env or {})
        self.which = which
        self.log = tempfile.NamedTemporaryFile(prefix=f"peer-{which}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [python, str(PEER_ENGINE_SCRIPT), metadata, hostname, str(size), str(seed)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
            cwd=str(REPO),
        )
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.info = self._reply(60)
        if not self.info.get("ready"):
            self.close()
            raise RuntimeError(f"peer did not start: {self.info} {self.log_tail()}")
        self.segment: str = self.info["segment"]
        self.addr: int = self.info["addr"]
        self.size: int = self.info["size"]

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return Path(self.log.name).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def _reply(self, timeout: float) -> dict:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"peer ({self.which}) silent for {timeout}s; log:\n{self.log_tail()}")
        if line is None:
            raise RuntimeError(f"peer ({self.which}) exited; log:\n{self.log_tail()}")
        return json.loads(line)

    def cmd(self, line: str, timeout: float = 60) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self._reply(timeout)
        if not reply.get("ok"):
            raise RuntimeError(f"peer command {line!r} failed: {reply}")
        return reply

    def dump(self, off: int, length: int) -> bytes:
        return bytes.fromhex(self.cmd(f"dump {off} {length}")["hex"])

    def fill(self, off: int, data: bytes) -> None:
        self.cmd(f"fill {off} {data.hex()}")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=15)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except Exception:
                pass
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


@pytest.fixture
def spawn_peer() -> Iterator:
    """Factory: ``spawn_peer(which="ours"|"upstream", **kw)`` -> :class:`PeerEngine`;
    every peer is shut down after the test."""
    peers: List[PeerEngine] = []

    def spawn(which: str = IMPL, **kw) -> PeerEngine:
        peer = PeerEngine(which, **kw)
        peers.append(peer)
        return peer

    yield spawn
    for p in peers:
        p.close()


@pytest.fixture
def http_metadata_server() -> Iterator[str]:
    """An HTTP metadata server (``_http_metadata_server.py``) in a child process;
    yields its URL, ``http://127.0.0.1:<port>/metadata``. (Not a thread: upstream's
    engine holds the GIL while it calls the metadata server.)"""
    script = Path(__file__).resolve().parent / "_http_metadata_server.py"
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = json.loads(proc.stdout.readline())["port"]
        yield f"http://127.0.0.1:{port}/metadata"
    finally:
        try:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=10)
        except Exception:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# The live store fixtures (a master per module, a store, unique keys, memory).
from store_env import k, master, mem, store  # noqa: E402,F401
