"""Upstream's ``mooncake.engine.RpcInterface`` (also ``CoroRPCInterface``): bytes and
tensors sent to a peer's server over coro_rpc, byte for byte as upstream's wheel sends
them, so either side may be upstream's. Over the ``mooncake_rpc_channel_*`` functions.

As upstream: ``send_data`` takes ``bytes``; ``send_tensor`` sends a tensor's raw bytes
(no dtype or shape travels); a received payload of 40 bytes or more that starts with a
tensor header (``u32`` dtype 1..9, ``u32`` ndim <= 4, ``i64`` dims[4]) goes to the
tensor callback as a ``ReceivedTensor``, any other to the data callback as
``{'source': '', 'data': bytes}``; callbacks run on a server thread before the sender
is answered. Better than upstream: a send returns -1 when the peer answered an error
or never answered (upstream: 0 once connected); the ``*_async`` forms work (upstream's
wheel raises); ``start_server()`` blocks without freezing other threads until
``stop_server()``; the tensor callback does not need a data callback, and a payload
that looks like a tensor with no tensor callback set goes to the data callback
(upstream drops it); ``ReceivedTensor.shape`` and ``total_bytes`` answer; a CUDA or
non-contiguous tensor is copied to contiguous host memory before it is sent (upstream
reads its device address as host memory).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import struct
import threading
from ctypes import c_char_p, c_int, c_size_t, c_void_p
from typing import Any, Callable, List, Optional, Tuple

from . import _lib

log = logging.getLogger("mooncake.engine")

_MODULE = "mooncake.engine"
_DATA, _TENSOR = 0, 1
_TENSOR_HEADER = 40
_DTYPES = {
    1: "float16",
    2: "float32",
    3: "float64",
    4: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "uint8",
    9: "bool",
}
_RECEIVE_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, ctypes.POINTER(ctypes.c_ubyte), c_size_t)
_PROTOTYPES = {
    "mooncake_rpc_channel_create": (c_void_p, [c_char_p, c_int, c_int]),
    "mooncake_rpc_channel_destroy": (c_int, [c_void_p]),
    "mooncake_rpc_channel_set_callback": (c_int, [c_void_p, _RECEIVE_FN, c_void_p]),
    "mooncake_rpc_channel_start": (c_int, [c_void_p]),
    "mooncake_rpc_channel_stop": (c_int, [c_void_p]),
    "mooncake_rpc_channel_send": (c_int, [c_void_p, c_char_p, c_int, c_void_p, c_size_t]),
}
_declared = False
_declare_lock = threading.Lock()


def _L() -> ctypes.CDLL:
    global _declared
    cdll = _lib.lib()
    if not _declared:
        with _declare_lock:
            _lib.declare(cdll, _PROTOTYPES)
            _declared = True
    return cdll


class ReceivedData:
    """Data received by the server (upstream's type; data callbacks get a dict)."""

    source_address: str = ""
    data_size: int = 0

    def __init__(self, *_: Any) -> None:
        raise TypeError("mooncake.engine.ReceivedData: No constructor defined!")

    @classmethod
    def _of(cls, source: str, data: bytes) -> "ReceivedData":
        r = object.__new__(cls)
        r.source_address, r._data, r.data_size = source, data, len(data)
        return r

    def get_bytes(self) -> bytes:
        """The bytes."""
        return self._data

    def get_memory_view(self) -> memoryview:
        """The bytes, read-only."""
        return memoryview(self._data)


class ReceivedTensor:
    """A payload received with a tensor header."""

    source_address: str = ""
    dtype: str = ""
    shape: List[int] = []
    total_bytes: int = 0

    def __init__(self, *_: Any) -> None:
        raise TypeError("mooncake.engine.ReceivedTensor: No constructor defined!")

    @classmethod
    def _of(cls, data: bytes, dtype: str, shape: List[int]) -> "ReceivedTensor":
        r = object.__new__(cls)
        r.source_address, r._data, r.dtype, r.shape = "", data, dtype, shape
        r.total_bytes = max(0, len(data) - _TENSOR_HEADER)
        return r

    def get_data_as_bytes(self) -> bytes:
        """The whole payload, header included (as upstream)."""
        return self._data

    def get_data_size(self) -> int:
        """The payload's length, header included."""
        return len(self._data)

    def get_memory_view(self) -> memoryview:
        """The whole payload, read-only."""
        return memoryview(self._data)


for _cls in (ReceivedData, ReceivedTensor):
    _cls.__module__ = _MODULE
del _cls


def _tensor_header(payload: bytes) -> Optional[Tuple[str, List[int]]]:
    """(dtype, shape) when `payload` starts with a tensor header, else None."""
    if len(payload) < _TENSOR_HEADER:
        return None
    dtype, ndim = struct.unpack_from("<II", payload, 0)
    if dtype not in _DTYPES or ndim > 4:
        return None
    dims = struct.unpack_from("<4q", payload, 8)[:ndim]
    return _DTYPES[dtype], [d for d in dims if 0 < d < 1 << 48]


def _tensor_bytes(tensor: Any) -> Optional[bytes]:
    """A tensor's bytes in host memory, contiguous; None for what is not a tensor."""
    for attr in ("data_ptr", "numel", "element_size", "shape", "dtype"):
        if not hasattr(tensor, attr):
            log.error("send_tensor: the object has no %s(); not a tensor", attr)
            return None
    if getattr(tensor, "is_cuda", False) or getattr(getattr(tensor, "device", None), "type", "cpu") != "cpu":
        tensor = tensor.cpu()
    if hasattr(tensor, "is_contiguous") and not tensor.is_contiguous():
        tensor = tensor.contiguous()
    size = int(tensor.numel()) * int(tensor.element_size())
    return ctypes.string_at(int(tensor.data_ptr()), size) if size else b""


class RpcInterface:
    """A client of peers' servers, and a server of its own once initialized with a
    listen address."""

    def __init__(self) -> None:
        self._h: Optional[int] = None
        self._data_cb: Optional[Callable[[dict], Any]] = None
        self._tensor_cb: Optional[Callable[[ReceivedTensor], Any]] = None
        self._receive = _RECEIVE_FN(self._on_receive)
        self._stopped = threading.Event()

    def __del__(self) -> None:
        self._close()

    def _close(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h:
            _L().mooncake_rpc_channel_destroy(h)

    def initialize(
        self, listen_address: str = "", thread_count: int = 0, timeout_seconds: int = 30, pool_size: int = 100
    ) -> bool:
        """Sets the interface up, replacing an earlier set-up: a client, and a server
        to start on ``listen_address`` when one is given (``host:port``, ``:port``).
        ``thread_count`` is accepted (each connection has a thread of its own)."""
        self._close()
        addr = listen_address.encode() if listen_address else None
        h = _L().mooncake_rpc_channel_create(addr, int(timeout_seconds), int(pool_size))
        if not h:
            raise RuntimeError(f"RpcInterface.initialize: {_lib.last_error()}")
        self._h = h
        self._stopped.clear()
        _L().mooncake_rpc_channel_set_callback(h, self._receive, None)
        return True

    def initialize_client(self, pool_size: int = 100, timeout_seconds: int = 30) -> bool:
        """A client only."""
        return self.initialize("", 0, timeout_seconds, pool_size)

    def initialize_server(self, listen_address: str, thread_count: int = 8, timeout_seconds: int = 30) -> bool:
        """A client, and a server to start on ``listen_address``."""
        return self.initialize(listen_address, thread_count, timeout_seconds, 100)

    def start_server_async(self) -> bool:
        """Starts listening; False without a server, for a bad or busy address, or a
        server already started or stopped."""
        if not self._h:
            return False
        port = _L().mooncake_rpc_channel_start(self._h)
        if port < 0:
            log.error("start_server_async: %s", _lib.last_error())
            return False
        self._port = port
        return True

    def start_server(self) -> bool:
        """Starts listening and blocks until :meth:`stop_server` (other threads run
        meanwhile); False when it cannot start."""
        if not self.start_server_async():
            return False
        self._stopped.wait()
        return True

    def stop_server(self) -> None:
        """Stops listening, after the callbacks in progress."""
        if self._h:
            _L().mooncake_rpc_channel_stop(self._h)
        self._stopped.set()

    def set_data_receive_callback(self, callback: Callable[[dict], Any]) -> None:
        """``callback({'source': '', 'data': bytes})`` for every payload received."""
        self._data_cb = callback

    def set_tensor_receive_callback(self, callback: Callable[[ReceivedTensor], Any]) -> None:
        """``callback(ReceivedTensor)`` for every payload received with a tensor
        header."""
        self._tensor_cb = callback

    def _on_receive(self, _user: Any, _kind: int, data: Any, length: int) -> None:
        try:
            payload = ctypes.string_at(data, length) if length else b""
            header = _tensor_header(payload)
            if header is not None and self._tensor_cb is not None:
                self._tensor_cb(ReceivedTensor._of(payload, header[0], header[1]))
            elif self._data_cb is not None:
                self._data_cb({"source": "", "data": payload})
            elif header is None:
                log.debug("RpcInterface: %d bytes received with no data callback set", length)
        except Exception as exc:  # a callback's failure is logged, the sender answered
            log.error("Error in data receive callback: %s: %s", type(exc).__name__, exc)

    def _send(self, target_address: str, kind: int, payload: bytes) -> int:
        if not self._h:
            log.error("RpcInterface: not initialized")
            return -1
        buf = ctypes.create_string_buffer(payload, len(payload)) if payload else None
        rc = _L().mooncake_rpc_channel_send(self._h, target_address.encode(), kind, buf, len(payload))
        if rc != 0:
            log.error("send to %s failed: %s", target_address, _lib.last_error())
            return -1
        return 0

    def send_data(self, target_address: str, data: bytes) -> int:
        """Sends ``data`` and waits for the peer's answer: 0, or -1 (not
        initialized, no connection, an error or no answer from the peer)."""
        if not isinstance(data, bytes):
            raise TypeError(f"Object of type '{type(data).__name__}' is not an instance of 'bytes'")
        return self._send(target_address, _DATA, data)

    def send_tensor(self, target_address: str, tensor: Any) -> int:
        """Sends a tensor's bytes (``data_ptr``, ``numel``, ``element_size``): 0, or
        -1 (not a tensor, or as :meth:`send_data`)."""
        payload = _tensor_bytes(tensor)
        if payload is None:
            return -1
        return self._send(target_address, _TENSOR, payload)

    def _future(self, loop: Any, send: Callable[[], int], what: str) -> Any:
        loop = loop if loop is not None else asyncio.get_event_loop()
        future = loop.create_future()

        def run() -> None:
            try:
                rc = send()
                result: Any = rc if rc == 0 else RuntimeError(f"Send {what} failed")
            except Exception as exc:
                result = RuntimeError(f"Send {what} error: {exc}")

            def settle() -> None:
                if future.done():
                    return
                if isinstance(result, Exception):
                    future.set_exception(result)
                else:
                    future.set_result(result)

            loop.call_soon_threadsafe(settle)

        threading.Thread(target=run, name="mc-rpc-send", daemon=True).start()
        return future

    def send_data_async(self, target_address: str, data: bytes, loop: Any) -> Any:
        """:meth:`send_data` in a thread: a future of ``loop`` resolving to 0, or
        failing with ``RuntimeError``."""
        if not isinstance(data, bytes):
            raise TypeError(f"Object of type '{type(data).__name__}' is not an instance of 'bytes'")
        return self._future(loop, lambda: self._send(target_address, _DATA, data), "data")

    def send_tensor_async(self, target_address: str, tensor: Any, loop: Any) -> Any:
        """:meth:`send_tensor` in a thread, as :meth:`send_data_async`."""
        payload = _tensor_bytes(tensor)
        if payload is None:
            raise AttributeError("send_tensor_async: the object is not a tensor")
        return self._future(loop, lambda: self._send(target_address, _TENSOR, payload), "tensor")


RpcInterface.__module__ = _MODULE
#: Upstream's other name for the same class.
CoroRPCInterface = RpcInterface


def create_rpc_client(local_rank: int = 0, world_size: int = 1) -> RpcInterface:
    """A client (pool of 10 connections per target); the arguments are upstream's and
    unused."""
    r = RpcInterface()
    r.initialize("", 0, 30, 10)
    return r


def create_rpc_server(local_rank: int = 0, world_size: int = 1) -> RpcInterface:
    """A server on ``0.0.0.0:8080``, not started (set the callbacks, then
    ``start_server_async()``); the arguments are upstream's and unused."""
    r = RpcInterface()
    r.initialize("0.0.0.0:8080", 0, 30, 10)
    return r
