"""Upstream's parallelism-aware tensor layout (``*_with_parallelism``): the request
types (``ParallelAxis``, ``TensorParallelism``, ``ReadTarget``, a writer partition),
their validation, the keys shards are stored under, the 96-byte manifests, the shard
headers, and the byte-exact assembly of a tensor (or another shard) from stored
shards. The store calls are in ``_store_parallel``.

Keys: one TP axis alone is stored at ``<key>_tp_<rank>``; any other set of axes at
``<key>`` + ``__<kind>_<rank>of<size>[_sd<d>][_eid<e>][_sid<s>]`` per axis in the order
DP, TP, EP, PP; writer partitions at ``<key>__writer_<rank>of<size>_sd<d>``. Manifests
(dtype, split dimension, shard count, global shape) at ``<key>__parallelism_manifest``
and ``<key>__writer_manifest``. DP, EP and PP never split data: they only name shards.
"""

from __future__ import annotations

import struct
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

from . import _tensor_layout as T

#: LayoutAxisKind codes by upper-case name, and back.
KINDS = {"DP": 0, "TP": 1, "EP": 2, "PP": 3}
_NAMES = {0: "dp", 1: "tp", 2: "ep", 3: "pp"}
TP = KINDS["TP"]
EP = KINDS["EP"]
PP = KINDS["PP"]

MANIFEST_MAGIC = 0x574D414E
_MANIFEST = struct.Struct(f"<IHHiiiii4x{T.MAX_DIMS}q")
MANIFEST_SIZE = _MANIFEST.size
_MODES = ("as_stored", "shard", "full")


class ParallelAxis:
    """One axis of a parallel layout: ``kind`` ("tp", "dp", "ep", "pp", any case),
    this process's ``rank`` of ``size``, the dimension a TP axis splits
    (``split_dim``), and the ``expert_id`` (EP) or ``stage_id`` (PP) it serves."""

    def __init__(self) -> None:
        self.kind: str = ""
        self.rank: int = 0
        self.size: int = 1
        self.split_dim: Optional[int] = None
        self.expert_id: Optional[int] = None
        self.stage_id: Optional[int] = None


class TensorParallelism:
    """A parallel layout: its ``axes`` (at most 4, one per kind)."""

    def __init__(self) -> None:
        self.axes: List[ParallelAxis] = []


class ReadTarget:
    """What a read returns: ``mode`` "as_stored" (the object as written), "shard"
    (the shard ``parallelism`` names, resharded from what is stored if need be) or
    "full" (the whole tensor); any case."""

    def __init__(self) -> None:
        self._mode = "as_stored"
        self.parallelism: Optional[TensorParallelism] = None

    @property
    def mode(self) -> str:
        """The mode, lower case."""
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        text = str(value).lower()
        if text not in _MODES:
            raise RuntimeError("Unsupported ReadTarget mode")
        self._mode = text


for _cls in (ParallelAxis, TensorParallelism, ReadTarget):
    _cls.__module__ = "mooncake.store"
del _cls


class Axis(NamedTuple):
    """A parsed axis of a request."""

    kind: int
    rank: int
    size: int
    split_dim: Optional[int] = None
    expert_id: Optional[int] = None
    stage_id: Optional[int] = None

    def suffix(self) -> str:
        """This axis in a multi-axis shard key."""
        text = f"{_NAMES[self.kind]}_{self.rank}of{self.size}"
        for tag, value in (("sd", self.split_dim), ("eid", self.expert_id), ("sid", self.stage_id)):
            if value is not None:
                text += f"_{tag}{value}"
        return text


class Partition(NamedTuple):
    """A parsed writer partition."""

    rank: int
    size: int
    split_dim: int


def _optional_int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def parse_axes(parallelism: Any) -> Optional[List[Axis]]:
    """The axes of a ``TensorParallelism``-like object (anything with ``axes``, each
    with ``kind``, ``rank``, ``size``, ``split_dim``, ``expert_id``, ``stage_id``),
    in the caller's order; None when it is not one or a kind is unknown."""
    if not hasattr(parallelism, "axes"):
        return None
    out = []
    for a in list(parallelism.axes):
        if not all(hasattr(a, f) for f in ("kind", "rank", "size")):
            return None
        kind = KINDS.get(str(a.kind).upper())
        if kind is None:
            return None
        optional = [_optional_int(getattr(a, f, None)) for f in ("split_dim", "expert_id", "stage_id")]
        out.append(Axis(kind, int(a.rank), int(a.size), *optional))
    return out


def valid(axes: Optional[Sequence[Axis]]) -> bool:
    """Upstream's rules: 1 to 4 axes of distinct kinds, each rank inside its size;
    TP splits a dimension, DP/EP/PP do not; EP names an expert, PP a stage."""
    if not axes or len(axes) > T.MAX_AXES or len({a.kind for a in axes}) != len(axes):
        return False
    for a in axes:
        if a.size <= 0 or not 0 <= a.rank < a.size:
            return False
        if (a.kind == TP) != (a.split_dim is not None):
            return False
        if (a.kind == EP and a.expert_id is None) or (a.kind == PP and a.stage_id is None):
            return False
    return True


def parse_partition(partition: Any) -> Optional[Partition]:
    """A writer partition (anything with ``rank``, ``size``, ``split_dim``), or None
    when it is not one or is out of range."""
    if not all(hasattr(partition, f) for f in ("rank", "size", "split_dim")):
        return None
    p = Partition(int(partition.rank), int(partition.size), int(partition.split_dim))
    return p if p.size > 0 and 0 <= p.rank < p.size and p.split_dim >= 0 else None


def canonical(axes: Sequence[Axis]) -> List[Axis]:
    """The axes in key order: DP, TP, EP, PP."""
    return sorted(axes, key=lambda a: a.kind)


def tp_axis(axes: Sequence[Axis]) -> Optional[Axis]:
    """The TP axis, if any."""
    return next((a for a in axes if a.kind == TP), None)


def with_tp(axes: Sequence[Axis], **changes: int) -> List[Axis]:
    """``axes`` with the TP axis's fields replaced."""
    return [a._replace(**changes) if a.kind == TP else a for a in axes]


def tp_key(key: str, rank: int) -> str:
    """The key of shard ``rank`` of a single-TP layout."""
    return f"{key}_tp_{rank}"


def shard_key(key: str, axes: Sequence[Axis]) -> str:
    """Where the shard ``axes`` name is stored."""
    if len(axes) == 1 and axes[0].kind == TP:
        return tp_key(key, axes[0].rank)
    return key + "".join("__" + a.suffix() for a in canonical(axes))


def parallelism_manifest_key(key: str) -> str:
    """The manifest of a tensor written with a TP parallelism."""
    return f"{key}__parallelism_manifest"


def writer_key(key: str, rank: int, size: int, split_dim: int) -> str:
    """Where writer partition ``rank`` of ``size`` is stored."""
    return f"{key}__writer_{rank}of{size}_sd{split_dim}"


def writer_manifest_key(key: str) -> str:
    """The manifest of a tensor written by writer partitions."""
    return f"{key}__writer_manifest"


class Manifest(NamedTuple):
    """A parsed manifest."""

    dtype: int
    global_shape: Tuple[int, ...]
    split_dim: int
    shard_count: int


def pack_manifest(dtype: int, global_shape: Sequence[int], split_dim: int, shard_count: int) -> bytes:
    """The 96 bytes of a manifest."""
    dims = list(global_shape) + [-1] * (T.MAX_DIMS - len(global_shape))
    return _MANIFEST.pack(MANIFEST_MAGIC, 1, MANIFEST_SIZE, dtype, len(global_shape), split_dim, shard_count, 0, *dims)


def parse_manifest(data: Optional[bytes]) -> Optional[Manifest]:
    """The manifest in ``data`` (extra bytes ignored), or None when it is not one."""
    if data is None or len(data) < MANIFEST_SIZE:
        return None
    magic, version, size, dtype, ndim, split_dim, count, _, *dims = _MANIFEST.unpack_from(data)
    if magic != MANIFEST_MAGIC or version != 1 or size != MANIFEST_SIZE or not 0 <= ndim <= T.MAX_DIMS:
        return None
    if count <= 0 or not 0 <= split_dim < ndim or any(d < 0 for d in dims[:ndim]):
        return None
    return Manifest(dtype, tuple(dims[:ndim]), split_dim, count)


def header_axes(axes: Sequence[Axis], local_shape: Sequence[int]) -> List[T.Axis]:
    """The header axes of a shard of local shape ``local_shape`` named by ``axes``
    (the caller's order): the expert or stage id in ``reserved0``, a split axis's
    local extent in ``reserved1``."""
    out = []
    for i, a in enumerate(axes):
        reserved0 = (a.expert_id if a.kind == EP else a.stage_id if a.kind == PP else None) or 0
        split = -1 if a.split_dim is None else a.split_dim
        extent = local_shape[a.split_dim] if a.split_dim is not None else 0
        out.append(T.Axis(a.kind, i, a.rank, a.size, split, reserved0, extent))
    return out


def shard_header(
    dtype: int, global_shape: Sequence[int], local_shape: Sequence[int], nbytes: int, axes: Sequence[Axis]
) -> Optional[bytes]:
    """A SHARD header, or None when the axes cannot describe it (more than 4, a split
    dimension outside the shape, shapes of different ranks)."""
    if not axes or len(axes) > T.MAX_AXES or len(global_shape) != len(local_shape):
        return None
    if any(a.split_dim is not None and not 0 <= a.split_dim < len(local_shape) for a in axes):
        return None
    return T.pack(dtype, global_shape, local_shape, nbytes, T.SHARD, header_axes(axes, local_shape))


def stored_axes(meta: T.Metadata) -> List[Axis]:
    """The axes a stored shard's header names, in key order (empty for a full
    tensor)."""
    if meta.layout_kind != T.SHARD:
        return []
    out = []
    for a in meta.axes:
        split = a.split_dim if a.split_dim >= 0 else None
        out.append(
            Axis(
                a.kind,
                a.shard_rank,
                a.shard_count,
                split,
                a.reserved0 if a.kind == EP else None,
                a.reserved0 if a.kind == PP else None,
            )
        )
    return canonical(out)


def matches(axes: Sequence[Axis], meta: T.Metadata) -> bool:
    """Whether the stored shard ``meta`` is exactly the shard ``axes`` name."""
    return canonical(axes) == stored_axes(meta)


def shard_of(dim: int, rank: int, count: int) -> Tuple[int, int]:
    """(start, extent) of equal shard ``rank`` of ``count`` of a dimension."""
    extent = dim // count
    return rank * extent, extent
