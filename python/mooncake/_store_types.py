"""The value types of :mod:`mooncake.store` (upstream's ``ReplicateConfig``, enums,
replica descriptors, ``BufferHandle``, ``MooncakeHostMemAllocator``). Import them
from :mod:`mooncake.store`."""

from __future__ import annotations

import ctypes
import enum
import json
import threading
from typing import Any, Dict, Optional

from . import _store_fields as F
from . import _store_ffi as ffi


class _Enum(enum.Enum):
    """pybind11-style enum: ``<Name.MEMBER: n>``, ``int()``-able, constructible from
    its value."""

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class SoftPinAction(_Enum):
    """What a put does to the object's soft pin."""

    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2


class ReplicaStatus(_Enum):
    """State of one replica."""

    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


class ObjectDataType(_Enum):
    """What an object holds (``ReplicateConfig.data_type``)."""

    UNKNOWN = 0
    KVCACHE = 1
    TENSOR = 2
    WEIGHT = 3
    SAMPLE = 4
    ACTIVATION = 5
    GRADIENT = 6
    OPTIMIZER_STATE = 7
    METADATA = 8
    GENERAL = 9


class ReplicateConfig:
    """Replication options of a put (upstream's ``ReplicateConfig``).

    ``replica_num`` memory replicas on distinct segments (best effort);
    ``soft_pin_action`` / ``soft_pin_ttl_ms`` (None: the master's default TTL);
    ``with_hard_pin`` (never evicted); ``preferred_segments`` / ``preferred_segment``
    (segment names, i.e. ``get_hostname()`` of their owners); ``group_ids`` (None, or
    one group id per key of a batch put; a group is evicted together);
    ``prefer_alloc_in_same_node``; ``data_type``; ``nof_replica_num``,
    ``dfs_replica_num``, ``preferred_nof_segments`` (accepted, no NVMe-oF/DFS here).
    ``with_soft_pin`` is the older boolean spelling of ``soft_pin_action``.

    Assignments are checked as upstream's binding checks them: integers must lie in
    [0, 2**64 - 1], enums must be members of their enum, lists must hold strings;
    anything else raises ``TypeError``.
    """

    replica_num = F.Field(F.u64, "Memory replicas wanted (>= 1).")
    nof_replica_num = F.Field(F.u64, "NVMe-oF replicas (not supported here).")
    dfs_replica_num = F.Field(F.u64, "DFS replicas (not supported here).")
    soft_pin_action = F.Field(F.member_of(SoftPinAction), "What the put does to the soft pin.")
    soft_pin_ttl_ms = F.Field(F.optional_u64, "Soft pin TTL in ms (None: the master's default).")
    with_hard_pin = F.Field(F.boolean, "Never evict the object.")
    preferred_segments = F.Field(F.text_list, "Segments tried first, in order.")
    preferred_segment = F.Field(F.text, "One preferred segment (older spelling).")
    preferred_nof_segments = F.Field(F.text_list, "Preferred NVMe-oF segments.")
    prefer_alloc_in_same_node = F.Field(F.boolean, "Prefer segments on this node.")
    data_type = F.Field(F.member_of(ObjectDataType), "What the object holds.")
    group_ids = F.Field(F.optional_text_list, "None, or one group id per key of a batch put.")

    __slots__ = tuple(
        "_" + name
        for name in (
            "replica_num",
            "nof_replica_num",
            "dfs_replica_num",
            "soft_pin_action",
            "soft_pin_ttl_ms",
            "with_hard_pin",
            "preferred_segments",
            "preferred_segment",
            "preferred_nof_segments",
            "prefer_alloc_in_same_node",
            "data_type",
            "group_ids",
        )
    )

    def __init__(self) -> None:
        self.replica_num = 1
        self.nof_replica_num = 0
        self.dfs_replica_num = 0
        self.soft_pin_action = SoftPinAction.PRESERVE
        self.soft_pin_ttl_ms = None
        self.with_hard_pin = False
        self.preferred_segments = []
        self.preferred_segment = ""
        self.preferred_nof_segments = []
        self.prefer_alloc_in_same_node = False
        self.data_type = ObjectDataType.UNKNOWN
        self.group_ids = None

    @property
    def with_soft_pin(self) -> bool:
        return self.soft_pin_action == SoftPinAction.ENABLE

    @with_soft_pin.setter
    def with_soft_pin(self, value: bool) -> None:
        self.soft_pin_action = SoftPinAction.ENABLE if value else SoftPinAction.PRESERVE

    def __str__(self) -> str:
        def lst(v: Any) -> str:
            return "[" + ", ".join(str(x) for x in (v or [])) + "]"

        ttl = "default" if self.soft_pin_ttl_ms is None else str(self.soft_pin_ttl_ms)
        text = (
            f"ReplicateConfig: {{ replica_num: {self.replica_num}, "
            f"nof_replica_num: {self.nof_replica_num}, "
            f"dfs_replica_num: {self.dfs_replica_num}, "
            f"soft_pin_action: {self.soft_pin_action.name}, "
            f"soft_pin_ttl_ms: {ttl}, with_hard_pin: {int(self.with_hard_pin)}, "
            f"preferred_segments: {lst(self.preferred_segments)}, "
            f"preferred_nof_segments: {lst(self.preferred_nof_segments)}, "
            f"prefer_alloc_in_same_node: {int(self.prefer_alloc_in_same_node)}, "
            f"data_type: {self.data_type.name}"
        )
        if self.group_ids is not None:
            text += f", group_ids: {lst(self.group_ids)}"
        return text + " }"

    def _to_json(self) -> bytes:
        doc = {
            "replica_num": self.replica_num,
            "nof_replica_num": self.nof_replica_num,
            "dfs_replica_num": self.dfs_replica_num,
            "soft_pin_action": self.soft_pin_action.value,
            "soft_pin_ttl_ms": self.soft_pin_ttl_ms,
            "with_hard_pin": self.with_hard_pin,
            "preferred_segments": self.preferred_segments,
            "preferred_segment": self.preferred_segment,
            "preferred_nof_segments": self.preferred_nof_segments,
            "prefer_alloc_in_same_node": self.prefer_alloc_in_same_node,
            "data_type": self.data_type.value,
            "group_ids": self.group_ids,
        }
        return json.dumps(doc).encode()


_DEFAULT_JSON = ReplicateConfig()._to_json()


def config_json(config: Optional[ReplicateConfig]) -> Optional[bytes]:
    """The config as the C extensions take it (None: upstream's defaults)."""
    if config is None:
        return None
    if not isinstance(config, ReplicateConfig):
        raise TypeError(f"config must be a ReplicateConfig, not {type(config).__name__}")
    text = config._to_json()
    return None if text == _DEFAULT_JSON else text


class Descriptor:
    """A memory replica's buffer: ``buffer_address`` in its owner's process, ``size``,
    and the ``transport_endpoint`` (TE segment name) it is reached through."""

    def __init__(self) -> None:
        self.size: int = 0
        self.buffer_address: int = 0
        self.transport_endpoint: str = ""
        self.protocol: str = ""

    def __repr__(self) -> str:
        return (
            f"<Descriptor size={self.size} buffer_address={self.buffer_address} "
            f"transport_endpoint={self.transport_endpoint}>"
        )


class MemoryDescriptor:
    """The descriptor of a memory replica (``buffer_descriptor``)."""

    def __init__(self, buffer_descriptor: Optional[Descriptor] = None) -> None:
        self.buffer_descriptor: Descriptor = buffer_descriptor or Descriptor()


class DiskDescriptor:
    """The descriptor of a disk replica."""

    def __init__(self, file_path: str = "", object_size: int = 0) -> None:
        self.file_path = file_path
        self.object_size = object_size


class ReplicaDescriptor:
    """One replica of an object, as ``get_replica_desc`` reports it."""

    def __init__(self, doc: Dict[str, Any]) -> None:
        self._doc = doc
        self._type: str = doc.get("type", "")
        try:
            self._status = ReplicaStatus(int(doc.get("status", 0)))
        except ValueError:
            self._status = ReplicaStatus.UNDEFINED

    @property
    def status(self) -> ReplicaStatus:
        return self._status

    def is_memory_replica(self) -> bool:
        return self._type == "memory"

    def is_disk_replica(self) -> bool:
        return self._type == "disk"

    def is_local_disk_replica(self) -> bool:
        return self._type == "local_disk"

    def get_memory_descriptor(self) -> MemoryDescriptor:
        if self._type != "memory":
            raise RuntimeError("Expected MemoryDescriptor")
        d = Descriptor()
        d.size = int(self._doc.get("size", 0))
        d.buffer_address = int(self._doc.get("buffer_address", 0))
        d.transport_endpoint = str(self._doc.get("transport_endpoint", ""))
        d.protocol = str(self._doc.get("protocol", ""))
        return MemoryDescriptor(d)

    def get_disk_descriptor(self) -> DiskDescriptor:
        if self._type != "disk":
            raise RuntimeError("Expected DiskDescriptor")
        return DiskDescriptor(str(self._doc.get("file_path", "")), int(self._doc.get("object_size", 0)))

    def __repr__(self) -> str:
        return f"<ReplicaDescriptor type={self._type or 'unknown'} status={self._status}>"


class BufferHandle(bytearray):
    """A fetched object (``get_buffer``): ``ptr()`` and ``size()`` of its bytes, which
    also support the buffer protocol (``memoryview(handle)``). The memory is owned by
    the handle and stays at ``ptr()`` while it lives."""

    def __init__(self, addr: int, size: int) -> None:
        super().__init__(size)
        self._view = (ctypes.c_char * size).from_buffer(self)  # pins the storage
        if size:
            ctypes.memmove(self._view, addr, size)

    def ptr(self) -> int:
        return ctypes.addressof(self._view)

    def size(self) -> int:
        return len(self)

    def __repr__(self) -> str:
        return f"<mooncake.store.BufferHandle size={len(self)} ptr={self.ptr():#x}>"

    __str__ = __repr__


class MooncakeHostMemAllocator:
    """Page-aligned, zeroed host memory for buffers to register (``alloc(size) ->
    address``, 0 when it cannot be had; ``free(address) -> 0``, -1 for an address
    it did not hand out). The memory is sealed shared memory, as
    ``alloc_from_mem_pool``'s: a dummy store (``setup_dummy``) registers any part of
    it with its real client, which then moves data to and from it in place; a real
    store registers it as any memory. Allocations outlive the allocator object and
    every store; free them after unregistering them."""

    def __init__(self) -> None:
        self._live: Dict[int, int] = {}
        self._lock = threading.Lock()

    def alloc(self, size: int) -> int:
        size = ffi.size(size)
        addr = int(ffi.L().mooncake_store_host_mem_alloc(max(size, 1)))
        if addr:
            with self._lock:
                self._live[addr] = size
        return addr

    def free(self, ptr: int) -> int:
        ptr = ffi.address(ptr)
        with self._lock:
            if self._live.pop(ptr, None) is None:
                return -1
        return 0 if ffi.L().mooncake_store_host_mem_free(ptr) == 0 else -1


# Shown (repr, help) as members of mooncake.store, where they are exported.
for _cls in (
    SoftPinAction,
    ReplicaStatus,
    ObjectDataType,
    ReplicateConfig,
    Descriptor,
    MemoryDescriptor,
    DiskDescriptor,
    ReplicaDescriptor,
    BufferHandle,
    MooncakeHostMemAllocator,
):
    _cls.__module__ = "mooncake.store"
del _cls
