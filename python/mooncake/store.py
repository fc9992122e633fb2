"""Mooncake Store client with upstream's Python API (``mooncake.store`` of the
``mooncake-transfer-engine`` wheel), in pure Python over ``libmooncake.so``.

``MooncakeDistributedStore`` has upstream's methods with their argument order,
defaults and return values. Failures are upstream's integer codes (0 OK, -600
INVALID_PARAMS, -704 OBJECT_NOT_FOUND, -706 OBJECT_HAS_LEASE, -200 no space, ...),
``b""`` from bytes getters and ``None`` from buffer getters, never exceptions; only
arguments of the wrong type raise ``TypeError``, as upstream's bindings do.

Differences from upstream: calls on a closed (or never set-up) store return -600
(``b""``, ``None``, ``[]``) instead of crashing; ``get_batch([])`` is ``[]``;
``batch_get_into_multi_buffers`` fills buffers larger than the object instead of
failing. ``setup(..., engine=te)`` runs the client over the given
``mooncake.engine.TransferEngine`` (its segment name, RPC port, registrations and
transports). ``enable_client_http_server`` serves upstream's client endpoints
(/health, /metrics, /metrics/summary). Not supported (options accepted and ignored
with a warning): ``ipc_socket_path``. ``tenant_id`` names the tenant of every object
call (a master with ``--enable_multi_tenants`` keeps tenants' keys apart).
``setup_dummy`` forwards to this project's ``mooncake_client`` (not upstream's).
Tensor methods (``_store_tensor``, ``_store_parallel``) store upstream's tensor
layouts, readable by upstream's client and the other way round. Segments are mounted
and unmounted at run time too (``_store_segments``); replica copy and move tasks are
queued and queried as upstream's (``_store_tasks``). Sessions and draining the
SSD tier's segment exist but raise
``NotImplementedError`` (``_store_unsupported``). ``python/README.md``
lists every upstream name and its status.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import warnings
from typing import Any, Dict, List, Optional, Sequence

from . import _store_ffi as ffi
from ._buffer_pool import (
    BufferLease,
    BufferLeaseView,
    BufferPool,
    RegisteredBufferLease,
    RegisteredBufferLeaseView,
    RegisteredBufferPool,
)
from ._numa import bind_to_numa_node
from ._store_queries import StoreQueries
from ._store_ranges import get_into_ranges as _get_into_ranges
from ._store_setup import dict_setup, setup_args, warn_unsupported
from . import _store_unsupported as _unsupported
from ._engram import EngramStore, EngramStoreConfig
from ._store_unsupported import (
    MooncakeDistributedNoFRegister,
    UnsupportedStoreMethods,
    get_alloc_func_addr,
    get_free_func_addr,
)
from ._parallel_layout import ParallelAxis, ReadTarget, TensorParallelism
from ._store_parallel import ParallelTensorMethods
from ._store_segments import SegmentMethods
from ._store_sessions import SessionMethods
from ._store_tasks import QueryTaskResponse, TaskMethods, TaskStatus, TaskType
from ._store_tensor import TensorMethods, deserialize_tensor, serialize_tensor, tensor_metadata_size
from ._store_types import (
    BufferHandle,
    Descriptor,
    DiskDescriptor,
    MemoryDescriptor,
    MooncakeHostMemAllocator,
    ObjectDataType,
    ReplicaDescriptor,
    ReplicaStatus,
    ReplicateConfig,
    SoftPinAction,
    config_json,
)

__all__ = [
    "BufferHandle",
    "BufferLease",
    "BufferLeaseView",
    "BufferPool",
    "Descriptor",
    "DiskDescriptor",
    "EngramStore",
    "EngramStoreConfig",
    "MemoryDescriptor",
    "MooncakeDistributedNoFRegister",
    "MooncakeDistributedStore",
    "MooncakeHostMemAllocator",
    "ObjectDataType",
    "ParallelAxis",
    "QueryTaskResponse",
    "ReadTarget",
    "RegisteredBufferLease",
    "RegisteredBufferLeaseView",
    "RegisteredBufferPool",
    "ReplicaDescriptor",
    "ReplicaStatus",
    "ReplicateConfig",
    "SoftPinAction",
    "TaskStatus",
    "TaskType",
    "TensorParallelism",
    "bind_to_numa_node",
    "get_alloc_func_addr",
    "get_free_func_addr",
]

# Upstream's private module functions: the tensor codec, and a native handle (not
# supported).
_serialize_tensor = serialize_tensor
_deserialize_tensor = deserialize_tensor
_tensor_metadata_size = tensor_metadata_size
_get_pyclient_from_wrapper = _unsupported._get_pyclient_from_wrapper

# Upstream's module also exports these enums' members at module level (in this
# order: TaskStatus.PROCESSING and .FAILED shadow ReplicaStatus's, as upstream's do).
for _enum in (ReplicaStatus, ObjectDataType, TaskStatus, TaskType):
    globals().update({m.name: m for m in _enum})
del _enum

log = logging.getLogger("mooncake.store")

_INVALID = ffi.INVALID_PARAMS
# init_all's local buffer (upstream's and libmooncake's).
_INIT_ALL_LOCAL_BUFFER = 1 << 30


def _offload_arg(options: Dict[str, Any]) -> Optional[bytes]:
    """The SSD offload directory to set up with (``b""``: the environment's), or None
    without ``enable_ssd_offload``."""
    if not options.get("enable_ssd_offload"):
        return None
    return ffi.text_arg(options.get("ssd_offload_path") or "", "ssd_offload_path")


def _engine_arg(engine: Any) -> Any:
    """The native engine (``InnerTransferEngine``) behind ``setup``'s ``engine``: a
    ``mooncake.engine.TransferEngine`` after ``initialize``, or what its
    ``get_engine()`` returns. Anything else raises ``RuntimeError``, as upstream's
    cast does."""
    from .engine import InnerTransferEngine, TransferEngine

    inner = engine.get_engine() if isinstance(engine, TransferEngine) else engine
    if isinstance(inner, InnerTransferEngine) and inner.handle:
        return inner
    raise RuntimeError(
        "setup(engine=...) needs an initialized mooncake.engine.TransferEngine (or its "
        f"get_engine()), not {engine!r}"
    )


def _int_arg(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be int, not {type(value).__name__}")
    if value < 0:
        raise TypeError(f"{name} must not be negative")
    return value


def _first_error(results: Sequence[int]) -> int:
    return next((r for r in results if r != 0), 0)


class MooncakeDistributedStore(
    StoreQueries,
    TensorMethods,
    ParallelTensorMethods,
    SegmentMethods,
    SessionMethods,
    TaskMethods,
    UnsupportedStoreMethods,
):
    """A Mooncake Store client (upstream's ``MooncakeDistributedStore``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._h: Optional[int] = ffi.L().mooncake_store_create()
        self._set_up = False
        self._local_buffer = 0
        # The shared engine's Python object (kept alive with the client), whether this
        # store is a dummy, and whether it warned about staged registrations.
        self._engine: Any = None
        self._dummy = False
        self._warned_staged = False

    def __del__(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h:
            try:
                ffi.L().mooncake_store_destroy(h)
            except Exception:
                pass

    # --- lifecycle -------------------------------------------------------------

    def setup(self, *args: Any, **kwargs: Any) -> int:
        """``setup(local_hostname, metadata_server, global_segment_size,
        local_buffer_size, protocol, rdma_devices, master_server_addr, engine=None,
        enable_ssd_offload=False, ssd_offload_path="", tenant_id="default",
        enable_client_http_server=False, client_http_port=9300) -> int``, or
        ``setup(config: dict) -> int``. 0 on success. Setting up a store that is set
        up replaces its client. A failure is also logged (logger ``mooncake.store``)
        with the master address and metadata server tried.

        ``engine`` (an initialized ``mooncake.engine.TransferEngine``, or its
        ``get_engine()``) makes the client run over that engine instead of starting
        its own: it shares the engine's segment name and RPC port (the client's
        segment is reached there), its memory registrations (memory registered with
        the engine works in zero-copy calls; ``register_buffer`` of it does not
        register it twice) and its transports; ``metadata_server``, ``protocol`` and
        ``rdma_devices`` are then not used. The client keeps its own master
        connection, local buffer and segment (registered with the engine, and
        unregistered by ``close``)."""
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            return self._setup_dict(args[0])
        if not args and list(kwargs) == ["config"] and isinstance(kwargs["config"], dict):
            return self._setup_dict(kwargs["config"])
        a = setup_args(*args, **kwargs)
        strings = [
            ffi.text_arg(a[k], k)
            for k in ("local_hostname", "metadata_server", "protocol", "rdma_devices", "master_server_addr")
        ]
        sizes = [_int_arg(a[k], k) for k in ("global_segment_size", "local_buffer_size")]
        engine = None if a["engine"] is None else _engine_arg(a["engine"])
        host, meta, protocol, devices, master = strings
        offload = _offload_arg(a)
        http = _int_arg(a["client_http_port"], "client_http_port") if a["enable_client_http_server"] else None
        tenant = self._tenant_arg(a)
        return self._do_setup(host, meta, sizes[0], sizes[1], protocol, devices, master, offload, engine, http, tenant)

    def _setup_dict(self, config: Dict[str, Any]) -> int:
        d = dict_setup(config)
        if d is None:
            log.error(
                "setup(config) returns -600: it needs local_hostname and metadata_server, and sizes and "
                "client_http_port that parse (keys given: %s)",
                sorted(map(str, config)),
            )
            return _INVALID
        if d.options["ipc_socket_path"]:
            warn_unsupported("ipc_socket_path")
        offload = _offload_arg(d.options)
        http = d.options["client_http_port"] if d.options["enable_client_http_server"] else None
        tenant = self._tenant_arg(d.options)
        return self._do_setup(
            d.host, d.metadata, d.segment, d.buffer, d.protocol, d.devices, d.master, offload, None, http, tenant
        )

    @staticmethod
    def _tenant_arg(a: Dict[str, Any]) -> bytes:
        """The tenant every object call names (``""``/None: ``default``)."""
        tenant = a.get("tenant_id")
        return b"" if tenant is None else ffi.text_arg(str(tenant), "tenant_id")

    def _do_setup(
        self,
        host: bytes,
        meta: bytes,
        seg: int,
        buf: int,
        protocol: bytes,
        devices: bytes,
        master: bytes,
        offload: Optional[bytes] = None,
        engine: Any = None,
        http_port: Optional[int] = None,
        tenant: bytes = b"",
    ) -> int:
        with self._lock:
            if self._set_up:
                self._replace_handle()
            if engine is not None:
                rc = ffi.L().mooncake_store_setup_on_engine(
                    self._h, engine, host, meta, seg, buf, protocol, devices, master, offload is not None, offload, tenant
                )
            else:
                rc = ffi.L().mooncake_store_setup_with_offload(
                    self._h, host, meta, seg, buf, protocol, devices, master, offload is not None, offload, tenant
                )
            if rc == 0 and http_port is not None:
                # The client HTTP server (/health, /metrics, /metrics/summary): a
                # setup asking for one that cannot start fails.
                port = ffi.L().mooncake_store_start_http_server(self._h, http_port)
                if port < 0:
                    log.error("the client HTTP server could not start on port %d: %s", http_port,
                              ffi.last_error() or "see the library's log")
                    self._replace_handle()
                    rc = port
            self._set_up, self._local_buffer = rc == 0, buf
            self._engine = engine if rc == 0 else None
            if rc != 0:
                log.error(
                    "setup failed with %d: master %r, metadata server %r, local hostname %r%s (%s)",
                    rc,
                    master.decode(errors="replace"),
                    meta.decode(errors="replace"),
                    host.decode(errors="replace"),
                    " over the given engine" if engine is not None else "",
                    ffi.last_error() or "see the library's log",
                )
            return rc

    def setup_dummy(self, mem_pool_size: int, local_buffer_size: int, server_address: str) -> int:
        """Sets this store up as a dummy client of the ``mooncake_client`` running on
        this host at ``server_address`` (``host:port``): no segment, engine or master
        connection of its own; operations run in the real client, which moves data in
        place through shared memory (a local buffer of ``local_buffer_size`` bytes
        and every :meth:`alloc_from_mem_pool` allocation). 0 on success, -1 when the
        real client cannot be reached. Setting up a store that is set up replaces its
        client."""
        pool, buf = _int_arg(mem_pool_size, "mem_pool_size"), _int_arg(local_buffer_size, "local_buffer_size")
        address = ffi.text_arg(server_address, "server_address")
        with self._lock:
            if self._set_up:
                self._replace_handle()
            rc = ffi.L().mooncake_store_setup_dummy(self._h, pool, buf, address)
            self._set_up, self._local_buffer, self._dummy = rc == 0, buf, rc == 0
            if rc != 0:
                log.error("setup_dummy failed with %d: no real client (mooncake_client) serving %r", rc, server_address)
            return rc

    def alloc_from_mem_pool(self, size: int) -> int:
        """``size`` bytes of shared memory the real client of a dummy store maps
        (register it with :meth:`register_buffer` to move data in place); the
        address, or 0 (not a dummy store, or no memory). Freed when the store is
        closed."""
        return int(ffi.L().mooncake_store_alloc_from_mem_pool(self._h, _int_arg(size, "size")))

    def init_all(self, protocol: str, device_name: str, mount_segment_size: int) -> int:
        """Legacy setup (hostname ``localhost:12345``, etcd metadata at
        ``127.0.0.1:2379``, master ``127.0.0.1:50051``); -600 when already set up."""
        p, d = ffi.text_arg(protocol, "protocol"), ffi.text_arg(device_name, "device_name")
        size = _int_arg(mount_segment_size, "mount_segment_size")
        with self._lock:
            rc = ffi.L().mooncake_store_init_all(self._h, p, d, size)
            if rc == 0:
                self._set_up, self._local_buffer = True, _INIT_ALL_LOCAL_BUFFER
            return rc

    def _replace_handle(self) -> None:
        old, self._h = self._h, ffi.L().mooncake_store_create()
        self._set_up, self._dummy, self._engine = False, False, None
        if old:
            ffi.L().mooncake_store_destroy(old)

    def _local_buffer_capacity(self) -> Optional[int]:
        """The local buffer size this store was set up with; None when not set up
        (what :class:`BufferPool` checks)."""
        return self._local_buffer if self._set_up else None

    def close(self) -> int:
        """Unmounts this client's segment and frees its memory; returns 0. Afterwards
        the store behaves as never set up (and can be set up again)."""
        with self._lock:
            self._replace_handle()
        return 0

    def health_check(self) -> int:
        """0 healthy, 1 not set up or closed, 2 master unreachable."""
        return ffi.L().mooncake_store_health_check(self._h)

    def get_hostname(self) -> str:
        """This client's name, ``host:port`` (its segment name); ``""`` before setup."""
        return ffi.hostname(self._h)

    # --- bytes API -------------------------------------------------------------

    def put(self, key: str, value: Any, config: Optional[ReplicateConfig] = None) -> int:
        """Stores a copy of ``value`` (a bytes-like object) under ``key``. 0 on success,
        also when the key exists (the old value is kept); -600 when empty or larger
        than the local buffer."""
        k, v, c = ffi.key_bytes(key), ffi.Bytes(value), config_json(config)
        return ffi.L().mooncake_store_put_with_config(self._h, k, v.addr or None, v.size, c)

    def put_parts(self, key: str, *parts: Any, config: Optional[ReplicateConfig] = None) -> int:
        """Stores the concatenation of ``parts`` as one object (no parts: 0, nothing
        stored)."""
        data = ffi.concat(parts)
        if not data:
            return 0
        return self.put(key, data, config)

    def put_batch(self, keys: Sequence[str], values: Sequence[Any], config: Optional[ReplicateConfig] = None) -> int:
        """Stores several values; 0, or the first failing key's code (-600 when the
        lists differ in length)."""
        return self._write_values("mooncake_store_batch_put_from_with_config", keys, values, config)

    def get(self, key: str) -> bytes:
        """The object's bytes, ``b""`` when missing or on any error."""
        value = ffi.get_bytes(self._h, key)
        if value is not None:
            return value
        return self._get_buffers([key], ctypes.string_at)[0] or b""

    def get_batch(self, keys: Sequence[str]) -> List[bytes]:
        """``get`` for several keys in one master call."""
        return [b or b"" for b in self._get_buffers(keys, ctypes.string_at)]

    def get_buffer(self, key: str) -> Optional[BufferHandle]:
        """The object in a :class:`BufferHandle`, or None."""
        return self._get_buffers([key], BufferHandle)[0]

    def batch_get_buffer(self, keys: Sequence[str]) -> List[Optional[BufferHandle]]:
        """``get_buffer`` for several keys in one master call."""
        return self._get_buffers(keys, BufferHandle)

    def _get_buffers(self, keys: Sequence[str], convert: Any) -> List[Any]:
        n = len(keys)
        if n == 0:
            return []
        karr = ffi.keys_array(keys)
        ptrs, results = (ctypes.c_void_p * n)(), ffi.int64_results(n)
        if ffi.L().mooncake_store_batch_get_buffers(self._h, karr, n, ptrs, results) != 0:
            return [None] * n
        return ffi.take_buffers(ptrs, results, convert)

    # --- zero-copy API ---------------------------------------------------------

    def register_buffer(self, buffer_ptr: int, size: int) -> int:
        """Registers memory for zero-copy transfers (required by RDMA, optional on
        TCP). 0, or -600 (NULL, zero size, overlap with a registered buffer).

        On a dummy store, memory from :class:`MooncakeHostMemAllocator` or
        :meth:`alloc_from_mem_pool` (any part of an allocation) is moved in place by
        the real client; any other memory is accepted with a warning (once per store)
        and its transfers are staged through the local buffer."""
        ptr, n = ffi.address(buffer_ptr), ffi.size(size)
        if ptr == 0 or n == 0:
            return _INVALID
        rc = ffi.L().mooncake_store_register_buffer(self._h, ptr, n)
        if rc == 0 and self._dummy and not self._warned_staged:
            if ffi.L().mooncake_store_dummy_moves_in_place(self._h, ptr, n) == 0:
                self._warned_staged = True
                what = (
                    f"register_buffer({ptr:#x}, {n}) on a dummy store: the real client cannot map "
                    "this memory (not from MooncakeHostMemAllocator or alloc_from_mem_pool), so its "
                    "transfers are staged through the local buffer (one extra copy)"
                )
                log.warning(what)
                warnings.warn(f"mooncake.store: {what}", RuntimeWarning, stacklevel=2)
        return rc

    def unregister_buffer(self, buffer_ptr: int) -> int:
        """Unregisters a buffer by its base address; -600 when not registered."""
        return ffi.L().mooncake_store_unregister_buffer(self._h, ffi.address(buffer_ptr) or None)

    def put_from(self, key: str, buffer_ptr: int, size: int, config: Optional[ReplicateConfig] = None) -> int:
        """Stores ``size`` bytes at ``buffer_ptr`` without copying them first. Size 0:
        0, nothing stored."""
        return self._write_one("mooncake_store_put_from_with_config", key, buffer_ptr, size, config)

    def put_from_with_metadata(
        self,
        key: str,
        buffer_ptr: int,
        metadata_buffer_ptr: int,
        size: int,
        metadata_size: int,
        config: Optional[ReplicateConfig] = None,
    ) -> int:
        """Stores the ``metadata_size`` bytes at ``metadata_buffer_ptr`` followed by
        the ``size`` bytes at ``buffer_ptr`` as one object (zero-copy). As upstream:
        0 (also for ``size`` 0, storing nothing), -1 before setup or with
        ``prefer_alloc_in_same_node``, other failures as *positive* codes (600)."""
        if (isinstance(config, ReplicateConfig) and config.prefer_alloc_in_same_node) or not self._set_up:
            return ffi.INTERNAL_ERROR
        if ffi.size(size) == 0:
            return 0
        parts = ([metadata_buffer_ptr, buffer_ptr], [metadata_size, size])
        return abs(self.batch_put_from_multi_buffers([key], [parts[0]], [parts[1]], config)[0])

    def batch_put_from(
        self,
        keys: Sequence[str],
        buffer_ptrs: Sequence[int],
        sizes: Sequence[int],
        config: Optional[ReplicateConfig] = None,
    ) -> List[int]:
        """Zero-copy puts; one code per key (0 also for existing keys)."""
        return self._write_batch("mooncake_store_batch_put_from_with_config", keys, buffer_ptrs, sizes, config)

    def get_into(self, key: str, buffer_ptr: int, size: int) -> int:
        """Reads the object into ``size`` bytes at ``buffer_ptr``: its size, -600 when
        the buffer is too small, -704 when missing."""
        k, ptr, n = ffi.key_bytes(key), ffi.address(buffer_ptr), ffi.size(size)
        if ptr == 0 and n > 0:
            return _INVALID
        return ffi.L().mooncake_store_get_into(self._h, k, ptr or None, n)

    def batch_get_into(self, keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int]) -> List[int]:
        """``get_into`` for several keys in one master call."""
        n = len(keys)
        if len(buffer_ptrs) != n or len(sizes) != n:
            return [_INVALID] * n
        if n == 0:
            return []
        karr, parr, sarr = ffi.keys_array(keys), ffi.ptr_array(buffer_ptrs), ffi.size_array(sizes)
        if any(not parr[i] and sarr[i] for i in range(n)):
            return [_INVALID] * n
        out = ffi.int64_results(n)
        rc = ffi.L().mooncake_store_batch_get_into(self._h, karr, parr, sarr, n, out)
        return list(out) if rc == 0 else [rc] * n

    def batch_put_from_multi_buffers(
        self,
        keys: Sequence[str],
        all_buffer_ptrs: Sequence[Sequence[int]],
        all_sizes: Sequence[Sequence[int]],
        config: Optional[ReplicateConfig] = None,
    ) -> List[int]:
        """Zero-copy puts of objects made of several buffers each (concatenated in
        order); one code per key. Mismatched lists: -600 for every key."""
        n = len(keys)
        if len(all_buffer_ptrs) != n or len(all_sizes) != n:
            return [_INVALID] * n
        if any(len(p) != len(s) for p, s in zip(all_buffer_ptrs, all_sizes)):
            return [_INVALID] * n
        if n == 0:
            return []
        karr = ffi.keys_array(keys)
        parr, sarr, carr = self._flatten(all_buffer_ptrs, all_sizes)
        if any(not parr[i] and sarr[i] for i in range(len(parr))):
            return [_INVALID] * n
        out = ffi.int_results(n)
        rc = ffi.L().mooncake_store_batch_put_from_multi_buffers(
            self._h, karr, parr, sarr, carr, n, config_json(config), out
        )
        return list(out) if rc == 0 else [rc] * n

    def batch_get_into_multi_buffers(
        self,
        keys: Sequence[str],
        all_buffer_ptrs: Sequence[Sequence[int]],
        all_sizes: Sequence[Sequence[int]],
        prefer_alloc_in_same_node: bool = False,
    ) -> List[int]:
        """Reads objects scattered over several buffers each, in order; per key the
        object's size, -600 when its buffers are too small, -704 missing. As upstream,
        a key's pointers and sizes are paired up to the shorter list."""
        n = len(keys)
        if len(all_buffer_ptrs) != n or len(all_sizes) != n:
            return [_INVALID] * n
        results = [_INVALID] * n
        pairs = [list(zip(all_buffer_ptrs[i], all_sizes[i])) for i in range(n)]
        good = [i for i in range(n) if all(ffi.address(p) or not ffi.size(s) for p, s in pairs[i])]
        if not good:
            return results
        karr = ffi.keys_array([keys[i] for i in good])
        parr, sarr, carr = self._flatten(
            [[p for p, _ in pairs[i]] for i in good], [[s for _, s in pairs[i]] for i in good]
        )
        out = ffi.int64_results(len(good))
        rc = ffi.L().mooncake_store_batch_get_into_multi_buffers(
            self._h, karr, parr, sarr, carr, len(good), int(bool(prefer_alloc_in_same_node)), out
        )
        for j, i in enumerate(good):
            results[i] = out[j] if rc == 0 else rc
        return results

    def get_into_ranges(
        self,
        buffer_ptrs: Sequence[int],
        all_keys: Sequence[Sequence[str]],
        all_dst_offsets: Sequence[Sequence[Sequence[int]]],
        all_src_offsets: Sequence[Sequence[Sequence[int]]],
        all_sizes: Sequence[Sequence[Sequence[int]]],
    ) -> List[List[List[int]]]:
        """Reads byte ranges of objects into registered buffers: for every buffer
        ``i``, key ``j`` and fragment ``k``, ``all_sizes[i][j][k]`` bytes at offset
        ``all_src_offsets[i][j][k]`` of object ``all_keys[i][j]`` go to
        ``buffer_ptrs[i] + all_dst_offsets[i][j][k]``. Returns the same nesting: bytes
        read, or -600 (fragment outside its buffer or object, lists of different
        lengths, buffer not inside memory registered with ``register_buffer`` or
        leased from a ``BufferPool``), -704 missing, -707 lease expired during the
        read, -800 transfer failure. One master call for all keys."""
        return _get_into_ranges(
            self._h, self._set_up, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes
        )

    @staticmethod
    def _flatten(ptrss: Sequence[Sequence[int]], sizess: Sequence[Sequence[int]]):
        flat_p = [p for ptrs in ptrss for p in ptrs]
        flat_s = [s for sizes in sizess for s in sizes]
        counts = (ctypes.c_size_t * len(ptrss))(*[len(p) for p in ptrss])
        return ffi.ptr_array(flat_p), ffi.size_array(flat_s), counts

    # --- upsert ------------------------------------------------------------------

    def upsert(self, key: str, value: Any, config: Optional[ReplicateConfig] = None) -> int:
        """Stores ``value`` under ``key``, replacing an existing object."""
        k, v, c = ffi.key_bytes(key), ffi.Bytes(value), config_json(config)
        return ffi.L().mooncake_store_upsert(self._h, k, v.addr or None, v.size, c)

    def upsert_from(self, key: str, buffer_ptr: int, size: int, config: Optional[ReplicateConfig] = None) -> int:
        """Zero-copy upsert (size 0: 0, nothing stored)."""
        return self._write_one("mooncake_store_upsert_from", key, buffer_ptr, size, config)

    def batch_upsert_from(
        self,
        keys: Sequence[str],
        buffer_ptrs: Sequence[int],
        sizes: Sequence[int],
        config: Optional[ReplicateConfig] = None,
    ) -> List[int]:
        """Zero-copy upserts; one code per key."""
        return self._write_batch("mooncake_store_batch_upsert_from", keys, buffer_ptrs, sizes, config)

    def upsert_parts(self, key: str, *parts: Any, config: Optional[ReplicateConfig] = None) -> int:
        """Upserts the concatenation of ``parts`` (no parts: 0, nothing stored)."""
        data = ffi.concat(parts)
        if not data:
            return 0
        return self.upsert(key, data, config)

    def upsert_batch(self, keys: Sequence[str], values: Sequence[Any], config: Optional[ReplicateConfig] = None) -> int:
        """Upserts several values; 0 or the first failing key's code."""
        return self._write_values("mooncake_store_batch_upsert_from", keys, values, config)

    # --- shared write paths ------------------------------------------------------

    def _write_one(self, fn: str, key: str, buffer_ptr: int, size: int, config: Optional[ReplicateConfig]) -> int:
        k, ptr, n = ffi.key_bytes(key), ffi.address(buffer_ptr), ffi.size(size)
        if ptr == 0 and n > 0:
            return _INVALID
        return getattr(ffi.L(), fn)(self._h, k, ptr or None, n, config_json(config))

    def _write_batch(
        self,
        fn: str,
        keys: Sequence[str],
        buffer_ptrs: Sequence[int],
        sizes: Sequence[int],
        config: Optional[ReplicateConfig],
    ) -> List[int]:
        n = len(keys)
        if len(buffer_ptrs) != n or len(sizes) != n:
            return [_INVALID] * n
        if n == 0:
            return []
        karr, parr, sarr = ffi.keys_array(keys), ffi.ptr_array(buffer_ptrs), ffi.size_array(sizes)
        if any(not parr[i] and sarr[i] for i in range(n)):
            return [_INVALID] * n
        out = ffi.int_results(n)
        rc = getattr(ffi.L(), fn)(self._h, karr, parr, sarr, n, config_json(config), out)
        return list(out) if rc == 0 else [rc] * n

    def _write_values(
        self, fn: str, keys: Sequence[str], values: Sequence[Any], config: Optional[ReplicateConfig]
    ) -> int:
        if len(keys) != len(values):
            return _INVALID
        if not keys:
            return 0
        views = [ffi.Bytes(v) for v in values]
        results = self._write_batch(fn, keys, [v.addr for v in views], [v.size for v in views], config)
        del views  # the values stay pinned until the call returned
        return _first_error(results)
