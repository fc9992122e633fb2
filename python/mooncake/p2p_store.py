"""The Mooncake P2P Store (mooncake-rs): a client-only object store with no master,
for spreading large objects (checkpoints, model weights) from a few nodes to many.

Every node is equal. One node *registers* an object from its own memory; other nodes
*fetch a replica* into their buffers, shard by shard and several shards at once, from
every node that holds a copy, and serve each shard to others as soon as it landed.
Object payloads live in a metadata store (``http://host:port/metadata`` of the
``mooncake_http_metadata_server`` command or ``mooncake_master
--enable_http_metadata_server``, ``etcd://host:2379``, ``redis://host:6379``), in the
format of upstream's Go P2P store, whose operations (``Register``, ``Unregister``,
``List``, ``GetReplica``, ``DeleteReplica``) :class:`P2PStore` offers in snake case.

Buffers (``register``, ``get_replica``, ``get_from_peers``) may be:

* any object supporting the buffer protocol with C-contiguous memory: ``bytearray``,
  a writable ``memoryview``, ``array.array``, numpy arrays, ``mmap`` objects, ctypes
  arrays; ``bytes`` and other read-only buffers only for ``register`` (nothing writes
  to a registered buffer);
* a raw ``(address, size)`` tuple of two ints (e.g. ``(tensor.data_ptr(),
  tensor.nbytes)``): the caller keeps that memory valid;
* a list of those: the object's bytes are the buffers end to end. A receiver's buffers
  must split the object at shard boundaries, which one large enough buffer always
  does.

Buffer objects are pinned (a ``bytearray`` cannot be resized) while the store uses
them: a registered object's buffers until :meth:`P2PStore.unregister`, a replica's until
:meth:`P2PStore.delete_replica`, all of them until :meth:`P2PStore.close`. Their
contents must not change meanwhile: other nodes read them.

Failures raise :class:`P2PStoreError` with the library's code (the module's
constants, e.g. :data:`NOT_FOUND`) and its last-error message.
"""

from __future__ import annotations

import ctypes
import errno
import json
import threading
from ctypes import POINTER, Structure, c_char_p, c_int, c_int64, c_size_t, c_ssize_t, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _lib

__all__ = [
    "P2PStore",
    "P2PStoreError",
    "ObjectInfo",
    "Fetched",
    "OK",
    "INVALID_ARGUMENT",
    "ALREADY_HELD",
    "NOT_HELD",
    "NOT_FOUND",
    "EXISTS",
    "CORRUPT",
    "NO_SOURCE",
    "METADATA",
    "ENGINE",
    "IO",
    "CLOSED",
]

#: The ``MOONCAKE_P2P_*`` codes of ``mooncake_ext.h``.
OK = 0
INVALID_ARGUMENT = -1  # also a bad handle or a rejected argument
ALREADY_HELD = -2
NOT_HELD = -3
NOT_FOUND = -4
EXISTS = -5
CORRUPT = -6
NO_SOURCE = -7
METADATA = -8
ENGINE = -9
IO = -10
CLOSED = -11

_CODE_NAMES = {
    INVALID_ARGUMENT: "INVALID_ARGUMENT",
    ALREADY_HELD: "ALREADY_HELD",
    NOT_HELD: "NOT_HELD",
    NOT_FOUND: "NOT_FOUND",
    EXISTS: "EXISTS",
    CORRUPT: "CORRUPT",
    NO_SOURCE: "NO_SOURCE",
    METADATA: "METADATA",
    ENGINE: "ENGINE",
    IO: "IO",
    CLOSED: "CLOSED",
}

_h = c_void_p
_u64s = POINTER(c_uint64)

#: name -> (restype, argtypes) of the ``mooncake_p2p_*`` functions.
P2P_PROTOTYPES: Dict[str, Tuple[Any, Sequence[Any]]] = {
    "mooncake_p2p_create": (c_void_p, [c_char_p, c_char_p, c_char_p]),
    "mooncake_p2p_create_on_engine": (c_void_p, [c_void_p, c_char_p]),
    "mooncake_p2p_destroy": (None, [_h]),
    "mooncake_p2p_local_server_name": (c_int, [_h, c_void_p, c_size_t]),
    "mooncake_p2p_start_agent": (c_int, [_h, c_char_p, c_void_p, c_size_t]),
    "mooncake_p2p_replicate_to": (c_int, [_h, c_char_p, c_char_p]),
    "mooncake_p2p_register": (c_int, [_h, c_char_p, _u64s, _u64s, c_size_t, c_uint64, c_char_p, c_int]),
    "mooncake_p2p_unregister": (c_int, [_h, c_char_p]),
    "mooncake_p2p_delete_replica": (c_int, [_h, c_char_p]),
    "mooncake_p2p_get_replica": (c_int, [_h, c_char_p, _u64s, _u64s, c_size_t]),
    "mooncake_p2p_get_replica_ex": (
        c_int,
        [_h, c_char_p, _u64s, _u64s, c_size_t, POINTER(c_char_p), c_size_t, c_int, _u64s, _u64s],
    ),
    "mooncake_p2p_size": (c_int64, [_h, c_char_p]),
    "mooncake_p2p_put": (c_int, [_h, c_char_p, c_void_p, c_size_t]),
    "mooncake_p2p_get": (c_int64, [_h, c_char_p, c_void_p, c_size_t]),
    "mooncake_p2p_list": (c_int64, [_h, c_char_p, c_void_p, c_size_t]),
    "mooncake_p2p_discover_peers": (c_int64, [_h, c_char_p, c_void_p, c_size_t]),
}

_declared: Optional[ctypes.CDLL] = None


def _L() -> ctypes.CDLL:
    """The library with the P2P prototypes declared."""
    global _declared
    cdll = _declared
    if cdll is None:
        cdll = _lib.lib()
        _lib.declare(cdll, P2P_PROTOTYPES)
        _declared = cdll
    return cdll


class P2PStoreError(RuntimeError):
    """A failed P2P Store call: ``code`` is the library's ``MOONCAKE_P2P_*`` code (this
    module's constants), ``message`` its last-error text (``"function: why"``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} ({_CODE_NAMES.get(code, 'code')} {code})")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ObjectInfo:
    """An object as :meth:`P2PStore.list` reports it (upstream's ``PayloadInfo``)."""

    name: str
    #: Its size in bytes.
    size: int
    #: Its shard size.
    max_shard_size: int
    #: The sizes of the buffers it was registered from.
    size_list: List[int] = field(default_factory=list)
    #: The nodes holding a copy of any of its shards, sorted.
    holders: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Fetched:
    """What a fetch moved: bytes already in the buffers and kept (``resume``), and
    bytes fetched from other nodes."""

    kept: int
    fetched: int


# --- buffers ----------------------------------------------------------------------


class _PyBuffer(Structure):
    """CPython's ``Py_buffer``."""

    _fields_ = [
        ("buf", c_void_p),
        ("obj", c_void_p),
        ("len", c_ssize_t),
        ("itemsize", c_ssize_t),
        ("readonly", c_int),
        ("ndim", c_int),
        ("format", c_char_p),
        ("shape", c_void_p),
        ("strides", c_void_p),
        ("suboffsets", c_void_p),
        ("internal", c_void_p),
    ]


_PyBUF_SIMPLE = 0
_PyBUF_WRITABLE = 1


def _buffer_api() -> Tuple[Any, Any]:
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, POINTER(_PyBuffer), c_int]
    get.restype = c_int
    release = ctypes.pythonapi.PyBuffer_Release
    release.argtypes = [POINTER(_PyBuffer)]
    release.restype = None
    return get, release


_get_buffer, _release_buffer = _buffer_api()


class _Pinned:
    """A buffer-protocol object's contiguous memory, exported (so it cannot move or be
    resized) until :meth:`release`."""

    __slots__ = ("_view", "addr", "size")

    def __init__(self, obj: Any, writable: bool) -> None:
        view = _PyBuffer()
        _get_buffer(obj, ctypes.byref(view), _PyBUF_WRITABLE if writable else _PyBUF_SIMPLE)
        self._view: Optional[_PyBuffer] = view
        self.addr = view.buf or 0
        self.size = view.len

    def release(self) -> None:
        view, self._view = self._view, None
        if view is not None:
            _release_buffer(ctypes.byref(view))

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


def _is_raw(value: Any) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    )


def _pin(value: Any, writable: bool, what: str) -> _Pinned:
    if isinstance(value, str):
        raise TypeError(f"{what}: a buffer is needed, not str")
    try:
        return _Pinned(value, writable)
    except (BufferError, ValueError) as e:  # numpy: ValueError when not contiguous
        kind = type(value).__name__
        if writable:
            raise TypeError(f"{what} needs writable, C-contiguous buffers; {kind} is not one ({e})") from None
        raise TypeError(f"{what} needs C-contiguous buffers; {kind} is not one ({e})") from None
    except TypeError:
        raise TypeError(
            f"{what}: {type(value).__name__} is neither a buffer nor an (address, size) tuple"
        ) from None


class _Buffers:
    """Buffers resolved to C arrays of addresses and sizes, and the pins that keep the
    Python objects' memory in place."""

    def __init__(self, value: Any, writable: bool, what: str) -> None:
        if _is_raw(value) or not isinstance(value, (list, tuple)):
            items: Sequence[Any] = [value]
        else:
            items = value
        self.pins: List[_Pinned] = []
        spans: List[Tuple[int, int]] = []
        try:
            for item in items:
                if _is_raw(item):
                    addr, size = item
                    if addr < 0 or size < 0:
                        raise ValueError(f"{what}: negative address or size in {item!r}")
                    spans.append((addr, size))
                else:
                    pin = _pin(item, writable, what)
                    self.pins.append(pin)
                    spans.append((pin.addr, pin.size))
        except BaseException:
            self.release()
            raise
        n = len(spans)
        self.count = n
        self.addrs = (c_uint64 * n)(*[a for a, _ in spans]) if n else None
        self.sizes = (c_uint64 * n)(*[s for _, s in spans]) if n else None

    def release(self) -> None:
        for pin in self.pins:
            pin.release()
        self.pins = []


def _name(value: Any, what: str = "name") -> bytes:
    if isinstance(value, bytes):
        raw = value
    elif isinstance(value, str):
        raw = value.encode("utf-8")
    else:
        raise TypeError(f"{what} must be str, not {type(value).__name__}")
    if b"\0" in raw:
        raise ValueError(f"{what} must not contain NUL")
    return raw


def _engine_handle(engine: Any) -> int:
    """The ``transfer_engine_t`` of a :class:`mooncake.engine.TransferEngine`, its
    ``get_engine()`` or a raw handle."""
    if hasattr(engine, "get_engine_ptr"):
        return int(engine.get_engine_ptr())
    return int(engine)


# --- the store ----------------------------------------------------------------------


class P2PStore:
    """One node of the P2P Store.

    ``P2PStore(metadata, local_server_name)`` creates the node at once; ``P2PStore()``
    then :meth:`initialize` does the same in two steps. ``local_server_name`` is
    ``"host:port"``, unique among the nodes sharing ``metadata`` (the port names the
    node; nothing listens on it), and other nodes reach it at ``host``. Data moves over
    TCP, or over RDMA with ``nic_priority_matrix`` (JSON). ``engine=`` (a
    :class:`mooncake.engine.TransferEngine` set up over the same metadata) shares an
    engine instead: the node is named as the engine. Use it as a context manager, or
    call :meth:`close`.

    Settings come from ``MC_P2P_*`` variables read at creation:
    ``MC_P2P_CONCURRENCY`` (shards fetched at once, 8), ``MC_P2P_SHARD_SIZE`` (the
    shard size of :meth:`put`, 16 MiB), ``MC_P2P_CHECKSUM`` (``0``: no CRC-32C per
    shard), ``MC_P2P_NO_SOURCE_RETRIES`` (5).
    """

    def __init__(
        self,
        metadata: Optional[str] = None,
        local_server_name: Optional[str] = None,
        nic_priority_matrix: str = "",
        *,
        engine: Any = None,
    ) -> None:
        self._lock = threading.Lock()
        self._handle = 0
        self._name = ""
        self._engine: Any = None
        # name -> pins of the buffers a registered object or a replica lives in.
        self._pins: Dict[bytes, List[_Pinned]] = {}
        if metadata is not None:
            self.initialize(metadata, local_server_name, nic_priority_matrix, engine=engine)
        elif local_server_name is not None or engine is not None:
            raise TypeError("P2PStore(): metadata is required with local_server_name or engine")

    def initialize(
        self,
        metadata: str,
        local_server_name: Optional[str] = None,
        nic_priority_matrix: str = "",
        *,
        engine: Any = None,
    ) -> None:
        """Creates the node (see the class); raises :class:`P2PStoreError` when it
        cannot, ``RuntimeError`` when it exists already."""
        if self._handle:
            raise RuntimeError("P2PStore.initialize: already initialized")
        meta = _name(metadata, "metadata")
        lib = _L()
        if engine is not None:
            if local_server_name is not None:
                raise TypeError("P2PStore: give local_server_name or engine, not both")
            handle = lib.mooncake_p2p_create_on_engine(_engine_handle(engine), meta)
        else:
            if local_server_name is None:
                raise TypeError("P2PStore: local_server_name is required without engine")
            matrix = _name(nic_priority_matrix or "", "nic_priority_matrix")
            handle = lib.mooncake_p2p_create(meta, _name(local_server_name, "local_server_name"), matrix)
        if not handle:
            raise P2PStoreError(INVALID_ARGUMENT, _lib.last_error())
        self._handle = handle
        self._engine = engine
        self._name = self._read_name()

    # -- plumbing ------------------------------------------------------------------

    def _h(self) -> int:
        handle = self._handle
        if not handle:
            raise P2PStoreError(CLOSED, "P2PStore: the store is closed (or was never initialized)")
        return handle

    @staticmethod
    def _check(rc: int) -> int:
        if rc < 0:
            raise P2PStoreError(int(rc), _lib.last_error())
        return rc

    def _read_name(self) -> str:
        buf = ctypes.create_string_buffer(256)
        self._check(_L().mooncake_p2p_local_server_name(self._h(), buf, len(buf)))
        return buf.value.decode("utf-8", "replace")

    def _json(self, fn: Any, prefix: str) -> Any:
        raw = _name(prefix, "prefix")
        size = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._check(fn(self._h(), raw, buf, size))
            if n < size:
                return json.loads(buf.raw[:n].decode("utf-8"))
            size = n + 1

    def _keep(self, name: bytes, buffers: _Buffers) -> None:
        with self._lock:
            old = self._pins.pop(name, None)
            self._pins[name] = buffers.pins
        for pin in old or []:
            pin.release()

    def _unpin(self, name: bytes) -> None:
        with self._lock:
            pins = self._pins.pop(name, None)
        for pin in pins or []:
            pin.release()

    # -- properties ----------------------------------------------------------------

    @property
    def local_server_name(self) -> str:
        """This node's name (what other nodes, ``holders`` and :meth:`replicate_to`
        call it)."""
        return self._name

    @property
    def closed(self) -> bool:
        """Whether the node is closed (or was never initialized)."""
        return not self._handle

    # -- objects in the caller's memory ----------------------------------------------

    def register(
        self,
        name: str,
        buffers: Any,
        max_shard_size: int,
        location: str = "cpu:0",
        force: bool = False,
    ) -> None:
        """Publishes object ``name`` made of ``buffers`` (end to end), cut into shards
        of at most ``max_shard_size`` bytes that other nodes read from this memory at
        ``location`` (``"cpu:0"``, ``"cuda:0"``, ...). An existing object of that name
        is refused (:data:`EXISTS`) unless ``force``. The buffers must not change until
        :meth:`unregister`."""
        key = _name(name)
        bufs = _Buffers(buffers, False, "register")
        try:
            self._check(
                _L().mooncake_p2p_register(
                    self._h(), key, bufs.addrs, bufs.sizes, bufs.count, int(max_shard_size),
                    _name(location, "location"), 1 if force else 0,
                )
            )
        except BaseException:
            bufs.release()
            raise
        self._keep(key, bufs)

    def unregister(self, name: str) -> None:
        """Withdraws this node's registered copy of ``name``; its buffers are free
        again. The object goes once no node holds a copy."""
        key = _name(name)
        self._check(_L().mooncake_p2p_unregister(self._h(), key))
        self._unpin(key)

    def get_replica(self, name: str, buffers: Any, resume: bool = False) -> Fetched:
        """Fetches object ``name`` into ``buffers`` (writable; end to end, split at shard
        boundaries) from every node holding it, and serves it from there as a replica
        until :meth:`delete_replica`. With ``resume``, shards whose bytes already in
        the buffers match their CRC-32C are kept, not fetched. A failed call fetches
        only what it lacked when called again with the same buffers."""
        return self._fetch(name, buffers, None, resume, "get_replica")

    def get_from_peers(self, key: str, peers: Union[str, Iterable[str]], buffer: Any) -> Fetched:
        """:meth:`get_replica` asking only the nodes ``peers`` (names, or one name)."""
        names = [peers] if isinstance(peers, str) else list(peers)
        if not names:
            raise ValueError("get_from_peers: no peers given")
        return self._fetch(key, buffer, names, False, "get_from_peers")

    def _fetch(self, name: str, buffers: Any, peers: Optional[List[str]], resume: bool, what: str) -> Fetched:
        key = _name(name)
        encoded = [_name(p, "peer") for p in peers or []]
        peer_array = (c_char_p * len(encoded))(*encoded) if encoded else None
        bufs = _Buffers(buffers, True, what)
        kept, fetched = c_uint64(0), c_uint64(0)
        try:
            self._check(
                _L().mooncake_p2p_get_replica_ex(
                    self._h(), key, bufs.addrs, bufs.sizes, bufs.count, peer_array, len(encoded),
                    1 if resume else 0, ctypes.byref(kept), ctypes.byref(fetched),
                )
            )
        except BaseException:
            bufs.release()
            raise
        self._keep(key, bufs)
        return Fetched(kept.value, fetched.value)

    def delete_replica(self, name: str) -> None:
        """Withdraws this node's replica of ``name`` (from :meth:`get_replica`,
        :meth:`get_from_peers`, :meth:`get` or an agent); its buffers are free again."""
        key = _name(name)
        self._check(_L().mooncake_p2p_delete_replica(self._h(), key))
        self._unpin(key)

    # -- bytes through the node's memory -------------------------------------------

    def put(self, key: str, data: Any) -> None:
        """Publishes a copy of ``data`` (a bytes-like object) as object ``key``, from
        memory the node keeps until :meth:`unregister`, in ``MC_P2P_SHARD_SIZE``
        shards."""
        name = _name(key, "key")
        if isinstance(data, str):
            raise TypeError("put: data must be a bytes-like object, not str")
        pin = _pin(data, False, "put")
        try:
            self._check(_L().mooncake_p2p_put(self._h(), name, pin.addr or None, pin.size))
        finally:
            pin.release()

    def get(self, key: str) -> bytes:
        """The bytes of object ``key``: from this node's memory when it put or got it
        before, else fetched into memory the node keeps (and serves as a replica
        until :meth:`delete_replica`). An object held in the caller's buffers
        (registered, or fetched with :meth:`get_replica`) raises :data:`ALREADY_HELD`:
        read it there."""
        name = _name(key, "key")
        lib = _L()
        for _ in range(3):
            size = self._check(lib.mooncake_p2p_size(self._h(), name))
            buf = ctypes.create_string_buffer(size)
            n = lib.mooncake_p2p_get(self._h(), name, buf, size)
            if n >= 0:
                return buf.raw[:n]
            if lib.mooncake_last_error_errno() != errno.ERANGE:  # else: replaced meanwhile
                self._check(n)
        self._check(n)
        return b""

    def size(self, key: str) -> int:
        """The size in bytes of object ``key``."""
        return self._check(_L().mooncake_p2p_size(self._h(), _name(key, "key")))

    # -- what the metadata holds -----------------------------------------------------

    def list(self, prefix: str = "") -> List[ObjectInfo]:
        """The objects whose names start with ``prefix``."""
        return [
            ObjectInfo(
                name=o["name"],
                size=o["size"],
                max_shard_size=o["max_shard_size"],
                size_list=list(o["size_list"]),
                holders=list(o["holders"]),
            )
            for o in self._json(_L().mooncake_p2p_list, prefix)
        ]

    def discover_peers(self, prefix: str = "") -> List[str]:
        """The nodes holding a copy of any object whose name starts with ``prefix``,
        sorted."""
        return [str(p) for p in self._json(_L().mooncake_p2p_discover_peers, prefix)]

    # -- agents --------------------------------------------------------------------

    def start_agent(self, bind: Optional[str] = None) -> str:
        """Starts this node's agent on ``bind`` (``"ip:port"``; None: ``"0.0.0.0:0"``)
        and returns the address it is published at: other nodes'
        :meth:`replicate_to` then ask this node to fetch copies. It runs until
        :meth:`close`; a second call raises :data:`INVALID_ARGUMENT`."""
        raw = None if bind is None else _name(bind, "bind")
        buf = ctypes.create_string_buffer(512)
        self._check(_L().mooncake_p2p_start_agent(self._h(), raw, buf, len(buf)))
        return buf.value.decode("utf-8", "replace")

    def replicate_to(self, key: str, peer: str) -> None:
        """Asks node ``peer`` (its :attr:`local_server_name`; it must run an agent) to
        fetch a copy of ``key``; returns once it holds one."""
        self._check(_L().mooncake_p2p_replicate_to(self._h(), _name(key, "key"), _name(peer, "peer")))

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Stops the agent and withdraws every copy this node holds; its buffers are
        free again. Further calls raise :data:`CLOSED`. Closing twice is a no-op."""
        with self._lock:
            handle, self._handle = self._handle, 0
            pins, self._pins = self._pins, {}
        if handle:
            _L().mooncake_p2p_destroy(handle)
        for group in pins.values():
            for pin in group:
                pin.release()
        self._engine = None

    def __enter__(self) -> "P2PStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: modules may be gone
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else self._name
        return f"<mooncake.p2p_store.P2PStore {state}>"
