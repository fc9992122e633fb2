"""``mooncake.engine``: upstream's Python Transfer Engine API over ``libmooncake.so``.

A pure-Python (ctypes) drop-in for the ``mooncake.engine`` extension module of
upstream's wheel: :class:`TransferEngine` has the same methods, positional argument
order, keyword names, defaults and return codes (0 / negative ``ERR_*`` codes, batch
ids, 0 on failure where upstream returns 0). Engine failures are return codes, never
exceptions; arguments of the wrong type raise ``TypeError`` as pybind11 would.

As upstream, ``initialize`` discovers the transport: RDMA on the NICs named in
``device_name`` (comma-separated; empty: any) when one is usable, else TCP
(``MC_FORCE_TCP=1`` forces TCP); ``protocol`` does not choose it. Metadata:
``P2PHANDSHAKE``, ``http://``, ``etcd://`` (or a bare ``host:port``) and ``redis://``.

Blocking calls (``transfer_sync*``, ``batch_transfer_sync*``,
``get_batch_transfer_status``) wait in native code with the GIL released, woken as
soon as the transfer finishes; they do not spin.
"""

from __future__ import annotations

import ctypes
import enum
import json
import logging
import mmap as _mmap
import operator
import os
import threading
import time
from ctypes import byref, c_int, c_uint64, c_void_p
from typing import Dict, List, Optional, Tuple

from . import _lib
from ._engine_unsupported import SharedSegment
from ._rpc_interface import (
    CoroRPCInterface,
    ReceivedData,
    ReceivedTensor,
    RpcInterface,
    create_rpc_client,
    create_rpc_server,
)
from ._lib import (
    STATUS_COMPLETED,
    STATUS_FAILED,
    STATUS_TIMEOUT,
    BufferEntry,
    NotifyMsg,
    TransferRequest,
    TransferStatus,
)

__all__ = [
    "TransferEngine",
    "TransferOpcode",
    "TransferNotify",
    "InnerTransferEngine",
    "Read",
    "Write",
    "SUPPORT_CUDA",
    "SUPPORT_EFA",
    "SUPPORT_HIP",
    "SUPPORT_INTRA_NVLINK",
    "SUPPORT_MNNVL",
    "SUPPORT_MUSA",
    # The coro_rpc data/tensor channel: _rpc_interface.
    "CoroRPCInterface",
    "ReceivedData",
    "ReceivedTensor",
    "RpcInterface",
    "create_rpc_client",
    "create_rpc_server",
    # Not supported (raise NotImplementedError): _engine_unsupported.
    "SharedSegment",
]

log = logging.getLogger("mooncake.engine")

SUPPORT_EFA = False
SUPPORT_HIP = False
SUPPORT_MNNVL = False
SUPPORT_MUSA = False
SUPPORT_INTRA_NVLINK = False
SUPPORT_CUDA = False

P2PHANDSHAKE = "P2PHANDSHAKE"
_WILDCARD_LOCATION = "*"
_NANOS_PER_SECOND = 1_000_000_000
# Upstream retries once per local RDMA context, plus once; a TCP-only engine has none.
_NUM_CONTEXTS = 0
# Longest single native wait, so KeyboardInterrupt is seen at least this often.
_WAIT_SLICE_MS = 1000

# Managed buffers: upstream's buddy allocator (transfer_engine_py.h).
_DEFAULT_BUFFER_CAPACITY = 2 * 1024 * 1024 * 1024
_SLAB_SIZE_KB = [
    8, 16, 32, 64, 128, 256, 512, 1024,
    2 * 1024, 4 * 1024, 8 * 1024, 16 * 1024, 32 * 1024, 64 * 1024, 128 * 1024, 256 * 1024,
]  # fmt: skip
_MAX_CLASS_ID = len(_SLAB_SIZE_KB) - 1


class TransferOpcode(enum.IntEnum):
    """Direction of a transfer (``Read`` = 0 pulls from the peer, ``Write`` = 1 pushes
    to it)."""

    Read = 0
    Write = 1


Read = TransferOpcode.Read
Write = TransferOpcode.Write


class TransferNotify:
    """A notification: sent with ``transfer_sync(..., notify=...)`` once the transfer
    completed, received with :meth:`TransferEngine.get_notifies`."""

    __slots__ = ("name", "msg")

    def __init__(self, name: str = "", msg: str = "") -> None:
        self.name = _check_str(name, "name")
        self.msg = _check_str(msg, "msg")

    def __repr__(self) -> str:
        return f"TransferNotify(name={self.name!r}, msg={self.msg!r})"


# --- argument conversion (TypeError like pybind11) -------------------------------

_U64_MAX = (1 << 64) - 1


def _uint(value: object, what: str) -> int:
    if isinstance(value, float):
        raise TypeError(f"{what}: expected an int, got float")
    try:
        n = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what}: expected an int, got {type(value).__name__}") from None
    if n < 0 or n > _U64_MAX:
        raise TypeError(f"{what}: {n} does not fit an unsigned 64-bit integer")
    return n


def _uint_list(values: object, what: str) -> List[int]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{what}: expected a list of ints, got {type(values).__name__}")
    return [_uint(v, what) for v in values]  # type: ignore[union-attr]


def _check_str(value: object, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    raise TypeError(f"{what}: expected str, got {type(value).__name__}")


def _c_str(value: object, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    raise TypeError(f"{what}: expected str, got {type(value).__name__}")


def _opcode(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"opcode: expected TransferOpcode, got {type(value).__name__}")
    if value not in (0, 1):
        raise TypeError(f"opcode: {value} is not a TransferOpcode")
    return int(value)


def _notify(value: object) -> Optional[TransferNotify]:
    if value is None or isinstance(value, TransferNotify):
        return value
    raise TypeError(f"notify: expected TransferNotify or None, got {type(value).__name__}")


def _atoi(text: str) -> int:
    """C ``atoi``: optional blanks and sign, then digits; anything else reads 0."""
    s = text.lstrip(" \t\n\r\f\v")
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    digits = ""
    for ch in s:
        if not ch.isdigit():
            break
        digits += ch
    return sign * int(digits) if digits else 0


def _transfer_timeout_ns() -> int:
    raw = os.environ.get("MC_TRANSFER_TIMEOUT")
    if raw is None:
        return 30 * _NANOS_PER_SECOND
    return max(5, _atoi(raw)) * _NANOS_PER_SECOND


def _parse_connection_string(conn: str) -> Tuple[str, str]:
    """Upstream's parseConnectionString: ``scheme://rest``; no scheme means etcd."""
    pos = conn.find("://")
    if pos >= 0:
        return conn[:pos], conn[pos + 3 :]
    if conn == P2PHANDSHAKE:
        return "", P2PHANDSHAKE
    return "etcd", conn


def _build_conn_string(metadata_type: str, metadata_server: str) -> str:
    if metadata_server == P2PHANDSHAKE:
        return P2PHANDSHAKE
    if "://" in metadata_server:
        return metadata_server
    return f"{metadata_type}://{metadata_server}"


def _numa_nodes() -> List[int]:
    try:
        names = os.listdir("/sys/devices/system/node")
    except OSError:
        return [0]
    nodes = sorted(int(n[4:]) for n in names if n.startswith("node") and n[4:].isdigit())
    return nodes or [0]


# --- page-aligned anonymous memory ------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = c_void_p
_libc.mmap.argtypes = [c_void_p, ctypes.c_size_t, c_int, c_int, c_int, ctypes.c_long]
_libc.munmap.restype = c_int
_libc.munmap.argtypes = [c_void_p, ctypes.c_size_t]
_MAP_FAILED = (1 << (8 * ctypes.sizeof(c_void_p))) - 1
_MAP_FLAGS = _mmap.MAP_PRIVATE | _mmap.MAP_ANONYMOUS | getattr(_mmap, "MAP_NORESERVE", 0)


def _map(length: int) -> int:
    addr = _libc.mmap(None, length, _mmap.PROT_READ | _mmap.PROT_WRITE, _MAP_FLAGS, -1, 0)
    if addr is None or addr == _MAP_FAILED:
        log.warning("mmap of %d bytes failed: %s", length, os.strerror(ctypes.get_errno()))
        return 0
    return addr


def _unmap(addr: int, length: int) -> None:
    _libc.munmap(addr, length)


# --- the native engine --------------------------------------------------------------


class InnerTransferEngine:
    """The native engine behind a :class:`TransferEngine` (what ``get_engine()``
    returns). It owns the library handle, destroyed when the last reference goes, and
    the memory of managed buffers, unmapped after the engine is destroyed.

    ``int(engine)`` and ``engine.handle`` give the raw ``transfer_engine_t`` handle;
    the object can be passed directly to ctypes functions taking one
    (``_as_parameter_``). Keep the object alive while the handle is in use.
    """

    __slots__ = ("handle", "_mappings", "__weakref__")

    def __init__(self, handle: int) -> None:
        self.handle = handle
        self._mappings: Dict[int, int] = {}

    @property
    def _as_parameter_(self) -> c_void_p:
        return c_void_p(self.handle)

    def __int__(self) -> int:
        return self.handle

    def __index__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"<mooncake.engine.InnerTransferEngine handle={self.handle:#x}>"

    def _close(self) -> None:
        handle, self.handle = self.handle, 0
        if handle:
            _lib.lib().destroyTransferEngine(handle)
        mappings, self._mappings = self._mappings, {}
        for addr, length in mappings.items():
            _unmap(addr, length)

    def __del__(self) -> None:
        try:
            self._close()
        except Exception:  # interpreter shutdown: modules may be gone
            pass


class TransferEngine:
    """Upstream's ``mooncake.engine.TransferEngine``.

    Create it, then :meth:`initialize` (e.g. ``initialize(ip, "P2PHANDSHAKE", "tcp",
    "")``); peers address this engine as ``f"{ip}:{get_rpc_port()}"``.
    """

    TransferOpcode = TransferOpcode

    def __init__(self) -> None:
        self._transfer_timeout_ns = _transfer_timeout_ns()
        self._inner: Optional[InnerTransferEngine] = None
        self._lock = threading.Lock()
        self._handles: Dict[str, int] = {}
        # batch id -> (start ns, total bytes) of batches handed out to the caller.
        self._batches: Dict[int, Tuple[int, int]] = {}
        self._free_list: List[List[int]] = [[] for _ in _SLAB_SIZE_KB]
        self._large_buffers: Dict[int, int] = {}

    # -- lifecycle ---------------------------------------------------------------------

    def initialize(
        self, local_hostname: str, metadata_server: str, protocol: str, device_name: str, /
    ) -> int:
        """Creates the engine: ``metadata_server`` is ``"P2PHANDSHAKE"``, or
        ``scheme://...`` (``http://host:port/metadata``, ``etcd://h1:2379,h2:2379``,
        ``redis://host:port``); without a scheme it is an etcd address. Returns 0 or
        -1."""
        metadata_server = _check_str(metadata_server, "metadata_server")
        metadata_type, server = _parse_connection_string(metadata_server)
        return self.initialize_ext(local_hostname, server, protocol, device_name, metadata_type)

    def initialize_ext(
        self,
        local_hostname: str,
        metadata_server: str,
        protocol: str,
        device_name: str,
        metadata_type: str,
        /,
    ) -> int:
        """Like :meth:`initialize` with the metadata scheme given separately
        (``metadata_server`` with ``://`` or ``"P2PHANDSHAKE"`` is used as is).
        Returns 0 or -1."""
        hostname = _c_str(local_hostname, "local_hostname")
        server = _check_str(metadata_server, "metadata_server")
        protocol = _check_str(protocol, "protocol")
        if device_name is not None:  # pybind11 passes None as NULL, which upstream accepts
            _check_str(device_name, "device_name")
        metadata_type = _check_str(metadata_type, "metadata_type")
        if protocol == "xgmi":
            log.error("Protocol 'xgmi' is not exposed in the Python API. Use 'hip' instead.")
            return -1
        conn = _build_conn_string(metadata_type, server)
        lib = _lib.lib()
        # Upstream's Python API always auto-discovers, with device_name as the filter.
        devices = (device_name or "").encode()
        handle = lib.mooncake_te_create(conn.encode(), hostname, devices, 1)
        if not handle:
            log.error("initialize(%r, %r) failed: %s", local_hostname, conn, _lib.last_error())
            return -1
        with self._lock:
            self._inner = InnerTransferEngine(handle)
            self._handles.clear()
            self._batches.clear()
            self._free_list = [[] for _ in _SLAB_SIZE_KB]
            self._large_buffers.clear()
        return 0

    def _engine(self) -> Optional[InnerTransferEngine]:
        inner = self._inner
        return inner if inner is not None and inner.handle else None

    def get_rpc_port(self) -> int:
        """The RPC (handshake) port; peers reach this engine as ``host:port``. -1 when
        the engine is not initialized."""
        inner = self._engine()
        if inner is None:
            return -1
        buf = ctypes.create_string_buffer(256)
        if _lib.lib().getLocalIpAndPort(inner.handle, buf, len(buf)) != 0:
            return -1
        text = buf.value.decode("utf-8", "replace")
        port = text.rpartition(":")[2]
        return int(port) if port.isdigit() else -1

    def get_engine(self) -> Optional[InnerTransferEngine]:
        """The native engine (None before :meth:`initialize`)."""
        return self._engine()

    def get_engine_ptr(self) -> int:
        """The raw ``transfer_engine_t`` handle as an int (0 before initialize)."""
        inner = self._engine()
        return inner.handle if inner is not None else 0

    def get_local_topology(self, device_name: Optional[str] = None) -> str:
        """The local NIC priority matrix as a JSON string, as upstream: discovered by a
        temporary engine (limited to the NICs in ``device_name``), one entry per
        location, each ``[preferred NICs, other NICs]``; without RDMA NICs one
        ``"cpu:<numa node>"`` entry per NUMA node with empty lists."""
        if device_name is not None:
            _check_str(device_name, "device_name")
        lib = _lib.lib()
        matrix: Dict[str, object] = {}
        handle = lib.mooncake_te_create(b"P2PHANDSHAKE", b"127.0.0.1", (device_name or "").encode(), 1)
        if handle:
            try:
                buf = ctypes.create_string_buffer(1 << 20)
                if lib.showLinks(handle, buf, len(buf), 1) == 0:
                    try:
                        topology = json.loads(buf.value.decode("utf-8", "replace")).get("topology")
                    except ValueError:
                        topology = None
                    if isinstance(topology, dict):
                        matrix = topology
            finally:
                lib.destroyTransferEngine(handle)
        if not matrix:
            matrix = {f"cpu:{n}": [[], []] for n in _numa_nodes()}
        return json.dumps(matrix, indent="\t") + "\n"

    # -- memory --------------------------------------------------------------------------

    def register_memory(self, buffer_addr: int, capacity: int, location: str = _WILDCARD_LOCATION) -> int:
        """Registers ``[buffer_addr, buffer_addr + capacity)`` for remote access.
        Returns 0, -1 (zero capacity), -7 (overlaps a registered region) or another
        negative code."""
        addr = _uint(buffer_addr, "buffer_addr")
        length = _uint(capacity, "capacity")
        loc = _c_str(location, "location")
        inner = self._engine()
        if inner is None:
            return -1
        return _lib.lib().registerLocalMemory(inner.handle, addr, length, loc, 1)

    def unregister_memory(self, buffer_addr: int, /) -> int:
        """Unregisters the region registered at exactly ``buffer_addr``. Returns 0 or
        -3 (not registered)."""
        addr = _uint(buffer_addr, "buffer_addr")
        inner = self._engine()
        if inner is None:
            return -1
        return _lib.lib().unregisterLocalMemory(inner.handle, addr)

    def batch_register_memory(
        self, buffer_addresses: List[int], capacities: List[int], location: str = _WILDCARD_LOCATION
    ) -> int:
        """Registers several regions at once (all or none). Returns 0, -1 (zero
        length, mismatched lists), -7 (overlap) or another negative code."""
        addrs = _uint_list(buffer_addresses, "buffer_addresses")
        lens = _uint_list(capacities, "capacities")
        loc = _c_str(location, "location")
        inner = self._engine()
        if inner is None or len(addrs) != len(lens):
            return -1
        entries = (BufferEntry * max(1, len(addrs)))()
        for i, (a, n) in enumerate(zip(addrs, lens)):
            entries[i].addr = a
            entries[i].length = n
        return _lib.lib().registerLocalMemoryBatch(inner.handle, entries, len(addrs), loc)

    def batch_unregister_memory(self, buffer_addresses: List[int], /) -> int:
        """Unregisters several regions (best effort). Returns 0 or the first error
        (-3 for an address that is not registered)."""
        addrs = _uint_list(buffer_addresses, "buffer_addresses")
        inner = self._engine()
        if inner is None:
            return -1
        array = (c_void_p * max(1, len(addrs)))(*addrs)
        return _lib.lib().unregisterLocalMemoryBatch(inner.handle, array, len(addrs))

    def _allocate_raw(self, inner: InnerTransferEngine, capacity: int) -> int:
        addr = _map(capacity)
        if not addr:
            return 0
        rc = _lib.lib().registerLocalMemory(inner.handle, addr, capacity, b"*", 1)
        if rc != 0:
            log.error("registering a managed buffer of %d bytes failed: %s", capacity, _lib.last_error())
            _unmap(addr, capacity)
            return 0
        inner._mappings[addr] = capacity
        return addr

    @staticmethod
    def _class_id(size: int) -> int:
        if size > 1024 * _SLAB_SIZE_KB[_MAX_CLASS_ID]:
            return -1
        for i in range(_MAX_CLASS_ID - 1, -1, -1):
            if size > 1024 * _SLAB_SIZE_KB[i]:
                return i + 1
        return 0

    def _buddy_allocate(self, inner: InnerTransferEngine, class_id: int) -> bool:
        if class_id == _MAX_CLASS_ID:
            buffer = self._allocate_raw(inner, _DEFAULT_BUFFER_CAPACITY)
            if not buffer:
                return False
            step = 1024 * _SLAB_SIZE_KB[_MAX_CLASS_ID]
            self._free_list[_MAX_CLASS_ID].extend(
                range(buffer, buffer + _DEFAULT_BUFFER_CAPACITY, step)
            )
            return True
        if not self._free_list[class_id + 1] and not self._buddy_allocate(inner, class_id + 1):
            return False
        buffer = self._free_list[class_id + 1].pop()
        self._free_list[class_id].append(buffer)
        self._free_list[class_id].append(buffer + 1024 * _SLAB_SIZE_KB[class_id])
        return True

    def allocate_managed_buffer(self, length: int, /) -> int:
        """Allocates registered, page-aligned memory of at least ``length`` bytes and
        returns its address (0 on failure). Up to 256 MiB comes from 2 GiB registered
        slabs (power-of-two classes from 8 KiB); larger requests get their own
        mapping."""
        size = _uint(length, "length")
        inner = self._engine()
        if inner is None:
            return 0
        with self._lock:
            class_id = self._class_id(size)
            if class_id < 0:
                addr = self._allocate_raw(inner, size)
                if addr:
                    self._large_buffers[addr] = size
                return addr
            if not self._free_list[class_id] and not self._buddy_allocate(inner, class_id):
                return 0
            return self._free_list[class_id].pop()

    def free_managed_buffer(self, buffer_addr: int, length: int, /) -> int:
        """Returns a buffer from :meth:`allocate_managed_buffer` (same ``length``).
        Returns 0."""
        addr = _uint(buffer_addr, "buffer_addr")
        size = _uint(length, "length")
        inner = self._engine()
        if inner is None:
            return 0
        with self._lock:
            class_id = self._class_id(size)
            if class_id < 0:
                self._large_buffers.pop(addr, None)
                _lib.lib().unregisterLocalMemory(inner.handle, addr)
                mapped = inner._mappings.pop(addr, None)
                if mapped is not None:
                    _unmap(addr, mapped)
                return 0
            self._free_list[class_id].append(addr)
            return 0

    def write_bytes_to_buffer(self, dest_address: int, src: bytes, length: int, /) -> int:
        """Copies ``length`` bytes of ``src`` (bytes, or str as UTF-8) to
        ``dest_address``; never more than ``src`` holds. Returns 0."""
        addr = _uint(dest_address, "dest_address")
        n = _uint(length, "length")
        data = src.encode("utf-8") if isinstance(src, str) else src
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"src: expected bytes, got {type(src).__name__}")
        data = bytes(data)
        ctypes.memmove(addr, data, min(n, len(data)))
        return 0

    def read_bytes_from_buffer(self, source_address: int, length: int, /) -> bytes:
        """Returns ``length`` bytes read from ``source_address``."""
        addr = _uint(source_address, "source_address")
        n = _uint(length, "length")
        return ctypes.string_at(addr, n) if n else b""

    # -- segments ------------------------------------------------------------------------

    def _segment(self, inner: InnerTransferEngine, target_hostname: bytes) -> int:
        """The cached segment id of a peer (opened on first use), or -1."""
        name = target_hostname.decode("utf-8", "surrogateescape")
        handle = self._handles.get(name)
        if handle is not None:
            return handle
        with self._lock:
            handle = self._handles.get(name)
            if handle is not None:
                return handle
            handle = _lib.lib().openSegment(inner.handle, target_hostname)
            if handle < 0:
                log.error("openSegment(%r) failed: %s", name, _lib.last_error())
                return -1
            self._handles[name] = handle
            return handle

    def get_first_buffer_address(self, segment_name: str, /) -> int:
        """Opens ``segment_name`` and returns the address of its first registered
        buffer, or 0."""
        name = _c_str(segment_name, "segment_name")
        inner = self._engine()
        if inner is None:
            return 0
        seg = self._segment(inner, name)
        if seg < 0:
            return 0
        addr = c_uint64(0)
        count = _lib.lib().mooncake_te_segment_buffer(inner.handle, seg, 0, byref(addr), None)
        return addr.value if count > 0 else 0

    def warmup_efa_segment(self, segment_name: str) -> int:
        """No-op without EFA. Returns 0."""
        _check_str(segment_name, "segment_name")
        return 0

    # -- transfers -----------------------------------------------------------------------

    def _wait(self, inner: InnerTransferEngine, batch_id: int, deadline_ns: int) -> None:
        """Blocks (natively, GIL released) until the batch is terminal or the deadline."""
        lib = _lib.lib()
        while True:
            left = deadline_ns - time.monotonic_ns()
            if left <= 0:
                return
            ms = min(_WAIT_SLICE_MS, -(-left // 1_000_000))
            if lib.mooncake_te_wait_batch(inner.handle, batch_id, ms) != 0:
                return

    @staticmethod
    def _requests(
        opcode: int, buffers: List[int], peers: List[int], lengths: List[int], segment: int
    ) -> "ctypes.Array[TransferRequest]":
        reqs = (TransferRequest * max(1, len(buffers)))()
        for i, (src, dst, n) in enumerate(zip(buffers, peers, lengths)):
            r = reqs[i]
            r.opcode = opcode
            r.source = src
            r.target_id = segment
            r.target_offset = dst
            r.length = n
        return reqs

    @staticmethod
    def _submit(
        inner: InnerTransferEngine,
        batch_id: int,
        reqs: "ctypes.Array[TransferRequest]",
        count: int,
        notify: Optional[TransferNotify],
    ) -> int:
        lib = _lib.lib()
        if notify is None:
            return lib.submitTransfer(inner.handle, batch_id, reqs, count)
        msg = NotifyMsg(_c_str(notify.name, "name"), _c_str(notify.msg, "msg"))
        return lib.submitTransferWithNotify(inner.handle, batch_id, reqs, count, msg)

    def transfer_sync_write(
        self, target_hostname: str, buffer: int, peer_buffer_address: int, length: int, transport_hint: str = ""
    ) -> int:
        """Writes ``length`` bytes from local ``buffer`` to ``peer_buffer_address`` (an
        absolute address in the peer) and waits. Returns 0 or -1."""
        return self.transfer_sync(
            target_hostname, buffer, peer_buffer_address, length, TransferOpcode.Write, None, transport_hint
        )

    def transfer_sync_read(
        self, target_hostname: str, buffer: int, peer_buffer_address: int, length: int, transport_hint: str = ""
    ) -> int:
        """Reads ``length`` bytes from the peer's ``peer_buffer_address`` into local
        ``buffer`` and waits. Returns 0 or -1."""
        return self.transfer_sync(
            target_hostname, buffer, peer_buffer_address, length, TransferOpcode.Read, None, transport_hint
        )

    def transfer_sync(
        self,
        target_hostname: str,
        buffer: int,
        peer_buffer_address: int,
        length: int,
        opcode: TransferOpcode,
        notify: Optional[TransferNotify] = None,
        transport_hint: str = "",
    ) -> int:
        """One transfer, waited for; with ``notify``, the peer receives it once the
        transfer completed. Gives up after ``MC_TRANSFER_TIMEOUT`` seconds (default
        30, at least 5) plus one nanosecond per byte. Returns 0 or -1."""
        target = _c_str(target_hostname, "target_hostname")
        src = _uint(buffer, "buffer")
        dst = _uint(peer_buffer_address, "peer_buffer_address")
        n = _uint(length, "length")
        op = _opcode(opcode)
        notify = _notify(notify)
        _check_str(transport_hint, "transport_hint")
        inner = self._engine()
        if inner is None:
            return -1
        segment = self._segment(inner, target)
        if segment < 0:
            return -1
        lib = _lib.lib()
        start = time.monotonic_ns()
        deadline = start + self._transfer_timeout_ns + n
        reqs = self._requests(op, [src], [dst], [n], segment)
        status = TransferStatus()
        for _retry in range(_NUM_CONTEXTS + 1):
            batch_id = lib.allocateBatchID(inner.handle, 1)
            rc = self._submit(inner, batch_id, reqs, 1, notify)
            if rc != 0:
                log.error("submitTransfer to %r failed (%d): %s", target_hostname, rc, _lib.last_error())
                lib.freeBatchID(inner.handle, batch_id)
                return -1
            self._wait(inner, batch_id, deadline)
            if lib.getTransferStatus(inner.handle, batch_id, 0, byref(status)) != 0:
                return -1
            if status.status == STATUS_COMPLETED:
                lib.freeBatchID(inner.handle, batch_id)
                return 0
            if status.status == STATUS_FAILED:
                lib.freeBatchID(inner.handle, batch_id)
            if time.monotonic_ns() > deadline:
                log.info("Sync data transfer timeout after %d ns", time.monotonic_ns() - start)
                return -1
        return -1

    def batch_transfer_sync_write(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        transport_hint: str = "",
    ) -> int:
        """Several writes to one peer, waited for together. Returns 0 or -1."""
        return self.batch_transfer_sync(
            target_hostname, buffers, peer_buffer_addresses, lengths, TransferOpcode.Write, None, transport_hint
        )

    def batch_transfer_sync_read(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        transport_hint: str = "",
    ) -> int:
        """Several reads from one peer, waited for together. Returns 0 or -1."""
        return self.batch_transfer_sync(
            target_hostname, buffers, peer_buffer_addresses, lengths, TransferOpcode.Read, None, transport_hint
        )

    def batch_transfer_sync(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        opcode: TransferOpcode,
        notify: Optional[TransferNotify] = None,
        transport_hint: str = "",
    ) -> int:
        """Several transfers to one peer in one batch, waited for; the deadline is
        ``MC_TRANSFER_TIMEOUT`` plus one nanosecond per byte in total. Returns 0, or
        -1 (unknown peer, mismatched lists, a failed transfer, deadline passed)."""
        target = _c_str(target_hostname, "target_hostname")
        srcs = _uint_list(buffers, "buffers")
        dsts = _uint_list(peer_buffer_addresses, "peer_buffer_addresses")
        lens = _uint_list(lengths, "lengths")
        op = _opcode(opcode)
        notify = _notify(notify)
        _check_str(transport_hint, "transport_hint")
        inner = self._engine()
        if inner is None:
            return -1
        segment = self._segment(inner, target)
        if segment < 0:
            return -1
        if not (len(srcs) == len(dsts) == len(lens)):
            log.error("buffers, peer_buffer_addresses and lengths have different size")
            return -1
        lib = _lib.lib()
        start = time.monotonic_ns()
        deadline = start + self._transfer_timeout_ns + sum(lens)
        count = len(srcs)
        reqs = self._requests(op, srcs, dsts, lens, segment)
        status = TransferStatus()
        for _retry in range(_NUM_CONTEXTS + 1):
            batch_id = lib.allocateBatchID(inner.handle, count)
            rc = self._submit(inner, batch_id, reqs, count, notify)
            if rc != 0:
                log.error("submitTransfer to %r failed (%d): %s", target_hostname, rc, _lib.last_error())
                lib.freeBatchID(inner.handle, batch_id)
                return -1
            self._wait(inner, batch_id, deadline)
            if lib.mooncake_te_batch_status(inner.handle, batch_id, byref(status)) != 0:
                return -1
            freed = False
            if status.status == STATUS_COMPLETED:
                lib.freeBatchID(inner.handle, batch_id)
                return 0
            if status.status == STATUS_FAILED:
                lib.freeBatchID(inner.handle, batch_id)
                freed = True
            if time.monotonic_ns() > deadline:
                log.info("Sync batch data transfer timeout after %d ns", time.monotonic_ns() - start)
                if not freed:
                    lib.freeBatchID(inner.handle, batch_id)
                return -1
        return -1

    def batch_transfer_async_write(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        transport_hint: str = "",
    ) -> int:
        """Submits several writes and returns the batch id (0 on failure); wait with
        :meth:`get_batch_transfer_status`."""
        return self.batch_transfer_async(
            target_hostname, buffers, peer_buffer_addresses, lengths, TransferOpcode.Write, transport_hint
        )

    def batch_transfer_async_read(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        transport_hint: str = "",
    ) -> int:
        """Submits several reads and returns the batch id (0 on failure)."""
        return self.batch_transfer_async(
            target_hostname, buffers, peer_buffer_addresses, lengths, TransferOpcode.Read, transport_hint
        )

    def batch_transfer_async(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        opcode: TransferOpcode,
        transport_hint: str = "",
    ) -> int:
        """Submits a batch without waiting. Returns its id, or 0 (unknown peer,
        mismatched lists, submit refused)."""
        target = _c_str(target_hostname, "target_hostname")
        srcs = _uint_list(buffers, "buffers")
        dsts = _uint_list(peer_buffer_addresses, "peer_buffer_addresses")
        lens = _uint_list(lengths, "lengths")
        op = _opcode(opcode)
        _check_str(transport_hint, "transport_hint")
        return self._submit_async(target, srcs, dsts, lens, op)

    def _submit_async(
        self, target: bytes, srcs: List[int], dsts: List[int], lens: List[int], op: int
    ) -> int:
        inner = self._engine()
        if inner is None:
            return 0
        segment = self._segment(inner, target)
        if segment < 0:
            return 0
        if not (len(srcs) == len(dsts) == len(lens)):
            log.error("buffers, peer_buffer_addresses and lengths have different size")
            return 0
        lib = _lib.lib()
        count = len(srcs)
        reqs = self._requests(op, srcs, dsts, lens, segment)
        batch_id = lib.allocateBatchID(inner.handle, count)
        start = time.monotonic_ns()
        rc = lib.submitTransfer(inner.handle, batch_id, reqs, count)
        if rc != 0:
            log.error("submitTransfer failed (%d): %s", rc, _lib.last_error())
            lib.freeBatchID(inner.handle, batch_id)
            return 0
        with self._lock:
            self._batches[batch_id] = (start, sum(lens))
        return batch_id

    def _forget_batch(self, batch_id: int) -> None:
        with self._lock:
            self._batches.pop(batch_id, None)

    def get_batch_transfer_status(self, batch_ids: List[int], /) -> int:
        """Waits for batches from :meth:`batch_transfer_async` (each freed as it
        completes). Returns 0 when all completed; -1 as soon as one failed or passed
        its deadline (``MC_TRANSFER_TIMEOUT`` + 1 ns per byte from its submission),
        after freeing the rest."""
        ids = _uint_list(batch_ids, "batch_ids")
        inner = self._engine()
        if inner is None:
            return -1
        lib = _lib.lib()
        now = time.monotonic_ns()
        table: Dict[int, int] = {}  # batch id -> deadline
        with self._lock:
            for bid in ids:
                start, total = self._batches.get(bid, (now, 0))
                table[bid] = start + total + self._transfer_timeout_ns
        status = TransferStatus()
        failed = False
        while table and not failed:
            for bid, deadline in list(table.items()):
                if lib.mooncake_te_batch_status(inner.handle, bid, byref(status)) != 0:
                    failed = True  # unknown or freed batch id
                elif status.status == STATUS_COMPLETED:
                    lib.freeBatchID(inner.handle, bid)
                    self._forget_batch(bid)
                    del table[bid]
                    continue
                elif status.status == STATUS_FAILED:
                    failed = True
                elif status.status == STATUS_TIMEOUT:
                    log.info("Sync data transfer timeout")
                if time.monotonic_ns() > deadline:
                    log.info("Sync batch data transfer timeout")
                    failed = True
                if failed:
                    break
            if table and not failed:
                # Block on the first unfinished batch; other batches' failures are
                # noticed within one wait slice.
                bid, deadline = next(iter(table.items()))
                left = deadline - time.monotonic_ns()
                if left > 0:
                    ms = min(_WAIT_SLICE_MS // 10, -(-left // 1_000_000))
                    lib.mooncake_te_wait_batch(inner.handle, bid, ms)
        if failed:
            for bid in table:
                lib.freeBatchID(inner.handle, bid)
                self._forget_batch(bid)
            return -1
        return 0

    def transfer_submit_write(
        self, target_hostname: str, buffer: int, peer_buffer_address: int, length: int, transport_hint: str = ""
    ) -> int:
        """Submits one write without waiting. Returns the batch id, or 0."""
        target = _c_str(target_hostname, "target_hostname")
        src = _uint(buffer, "buffer")
        dst = _uint(peer_buffer_address, "peer_buffer_address")
        n = _uint(length, "length")
        _check_str(transport_hint, "transport_hint")
        return self._submit_async(target, [src], [dst], [n], TransferOpcode.Write)

    def transfer_check_status(self, batch_id: int, /) -> int:
        """Polls the first transfer of a batch: 1 completed (batch freed), 0 still in
        progress, -1 failed (batch freed) or unknown batch, -2 timed out."""
        bid = _uint(batch_id, "batch_id")
        inner = self._engine()
        if inner is None:
            return -1
        lib = _lib.lib()
        status = TransferStatus()
        if lib.getTransferStatus(inner.handle, bid, 0, byref(status)) != 0:
            return -1
        if status.status == STATUS_COMPLETED:
            lib.freeBatchID(inner.handle, bid)
            self._forget_batch(bid)
            return 1
        if status.status == STATUS_FAILED:
            lib.freeBatchID(inner.handle, bid)
            self._forget_batch(bid)
            return -1
        if status.status == STATUS_TIMEOUT:
            return -2
        return 0

    # -- notifications and probing ---------------------------------------------------

    def get_notifies(self) -> List[TransferNotify]:
        """Removes and returns the notifications received so far."""
        inner = self._engine()
        if inner is None:
            return []
        lib = _lib.lib()
        size = c_int(0)
        msgs = lib.getNotifsFromEngine(inner.handle, byref(size))
        if not msgs:
            return []
        result = []
        try:
            for i in range(size.value):
                m = msgs[i]
                name = (m.name or b"").decode("utf-8", "replace")
                msg = (m.msg or b"").decode("utf-8", "replace")
                result.append(TransferNotify(name, msg))
        finally:
            lib.freeNotifsMsgBuf(msgs, size.value)
        return result

    def send_probe(self, peer_server_name: str) -> int:
        """Checks that a peer's RPC daemon answers. Returns 0, or a negative code
        (-102 when it cannot be reached)."""
        name = _c_str(peer_server_name, "peer_server_name")
        inner = self._engine()
        if inner is None:
            return -1
        return _lib.lib().mooncake_te_send_probe(inner.handle, name)
