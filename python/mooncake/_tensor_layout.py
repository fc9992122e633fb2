"""Upstream's tensor object layout: a 304-byte ``TensorMetadata`` header (magic
``MOON``, version 1) followed by the tensor's bytes in row-major order, exactly as
upstream's ``integration_utils.h`` lays it out, so that tensors written by either
implementation are read by the other.

Header (little endian, no padding)::

    TensorObjectHeader   magic u32, version u16, header_size u16, dtype i32, ndim i32,
                         layout_kind u32 (0 full, 1 shard), reserved_flags u32,
                         data_offset u64, data_bytes u64                      (40 B)
    global_shape         8 x i64, -1 past ndim                               (64 B)
    local_shape          8 x i64, -1 past ndim                               (64 B)
    axis_count u32, reserved0 u32                                            (8 B)
    axes                 4 x {kind, axis_index, shard_rank, shard_count,
                              split_dim, reserved0: i32; reserved1: i64}     (128 B)

torch is imported only by the functions that make or read tensors.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

MAGIC = 0x4D4F4F4E
VERSION = 1
MAX_DIMS = 8
MAX_AXES = 4
FULL = 0
SHARD = 1
#: LayoutAxisKind values.
AXIS_KINDS = {"dp": 0, "tp": 1, "ep": 2, "pp": 3, "reserved": 4}

_HEAD = struct.Struct("<IHHiiIIQQ")
_SHAPE = struct.Struct(f"<{MAX_DIMS}q")
_COUNT = struct.Struct("<II")
_AXIS = struct.Struct("<iiiiiiq")
METADATA_SIZE = _HEAD.size + 2 * _SHAPE.size + _COUNT.size + MAX_AXES * _AXIS.size

#: TensorDtype code -> (torch dtype name, element size), upstream's numbering.
DTYPES = (
    ("float32", 4),
    ("float64", 8),
    ("int8", 1),
    ("uint8", 1),
    ("int16", 2),
    ("uint16", 2),
    ("int32", 4),
    ("uint32", 4),
    ("int64", 8),
    ("uint64", 8),
    ("bool", 1),
    ("float16", 2),
    ("bfloat16", 2),
    ("float8_e4m3fn", 1),
    ("float8_e5m2", 1),
)
_CODE_OF_NAME = {name: code for code, (name, _) in enumerate(DTYPES)}


class Axis(NamedTuple):
    """One ``LayoutAxis`` of a shard's header."""

    kind: int
    axis_index: int
    shard_rank: int
    shard_count: int
    split_dim: int
    reserved0: int = 0
    reserved1: int = 0


class Metadata(NamedTuple):
    """A parsed (and validated) header."""

    dtype: int
    global_shape: Tuple[int, ...]
    local_shape: Tuple[int, ...]
    layout_kind: int
    axes: Tuple[Axis, ...]
    data_offset: int
    data_bytes: int


def dtype_code(dtype: Any) -> Optional[int]:
    """Upstream's TensorDtype code of a torch dtype, None when it has none."""
    name = str(dtype).rsplit(".", 1)[-1]
    return _CODE_OF_NAME.get(name)


def _shape(dims: Sequence[int]) -> bytes:
    return _SHAPE.pack(*(list(dims) + [-1] * (MAX_DIMS - len(dims))))


def pack(
    dtype: int,
    global_shape: Sequence[int],
    local_shape: Sequence[int],
    data_bytes: int,
    layout_kind: int = FULL,
    axes: Sequence[Axis] = (),
) -> bytes:
    """The 304-byte header of an object holding ``data_bytes`` of tensor data."""
    axis_bytes = b"".join(_AXIS.pack(*a) for a in axes) + bytes(_AXIS.size * (MAX_AXES - len(axes)))
    return b"".join(
        (
            _HEAD.pack(
                MAGIC, VERSION, METADATA_SIZE, dtype, len(global_shape), layout_kind, 0, METADATA_SIZE, data_bytes
            ),
            _shape(global_shape),
            _shape(local_shape),
            _COUNT.pack(len(axes), 0),
            axis_bytes,
        )
    )


def element_count(shape: Sequence[int]) -> int:
    """The number of elements of a tensor of ``shape``."""
    n = 1
    for d in shape:
        n *= d
    return n


def parse(data: Any, total_length: int) -> Optional[Metadata]:
    """The header at the start of ``data`` (bytes-like, at least 304 bytes) of an
    object of ``total_length`` bytes, or None when it is not a valid tensor object
    (upstream's ``ValidateTensorMetadata`` rules)."""
    if total_length < METADATA_SIZE or len(data) < METADATA_SIZE:
        return None
    magic, version, header_size, dtype, ndim, kind, _flags, data_offset, data_bytes = _HEAD.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION or header_size != METADATA_SIZE:
        return None
    if not 0 <= dtype < len(DTYPES) or not 0 <= ndim <= MAX_DIMS or kind > SHARD:
        return None
    off = _HEAD.size
    global_dims = _SHAPE.unpack_from(data, off)
    local_dims = _SHAPE.unpack_from(data, off + _SHAPE.size)
    axis_count, _ = _COUNT.unpack_from(data, off + 2 * _SHAPE.size)
    if axis_count > MAX_AXES or not METADATA_SIZE <= data_offset <= total_length:
        return None
    if data_bytes != total_length - data_offset:
        return None
    if any(d < 0 for d in global_dims[:ndim] + local_dims[:ndim]):
        return None
    if any(d != -1 for d in global_dims[ndim:] + local_dims[ndim:]):
        return None
    if element_count(local_dims[:ndim]) * DTYPES[dtype][1] != data_bytes:
        return None
    axes_off = off + 2 * _SHAPE.size + _COUNT.size
    axes = tuple(Axis(*_AXIS.unpack_from(data, axes_off + i * _AXIS.size)) for i in range(axis_count))
    for a in axes:
        if not 0 <= a.kind <= AXIS_KINDS["reserved"] or a.shard_count <= 0 or not 0 <= a.shard_rank < a.shard_count:
            return None
        if not -1 <= a.split_dim < ndim:
            return None
    return Metadata(dtype, tuple(global_dims[:ndim]), tuple(local_dims[:ndim]), kind, axes, data_offset, data_bytes)


class TensorInfo(NamedTuple):
    """A tensor ready to be written: its header, the address and size of its
    contiguous bytes, and the object that keeps those bytes alive."""

    header: bytes
    data_ptr: int
    data_bytes: int
    owner: Any


def tensor_info(
    tensor: Any, global_shape: Optional[Sequence[int]] = None, axes: Sequence[Axis] = ()
) -> Optional[TensorInfo]:
    """The header and bytes of ``tensor`` (made contiguous, on the CPU), as a full
    tensor, or as a shard of ``global_shape`` described by ``axes``; None when it is
    not a torch tensor, has a dtype upstream cannot store or more than 8 dims."""
    if "Tensor" not in type(tensor).__name__:
        return None
    try:
        code = dtype_code(tensor.dtype)
        if code is None or tensor.dim() > MAX_DIMS:
            return None
        owner = tensor.detach()
        if owner.device.type != "cpu":
            owner = owner.cpu()
        owner = owner.contiguous()
        local = tuple(int(d) for d in owner.shape)
        nbytes = owner.numel() * owner.element_size()
        ptr = owner.data_ptr() if nbytes else 0
    except Exception:
        return None
    kind = SHARD if axes else FULL
    header = pack(code, tuple(global_shape) if global_shape is not None else local, local, nbytes, kind, axes)
    return TensorInfo(header, ptr, nbytes, owner)


def tensor_from_memory(meta: Metadata, buffer: Any) -> Any:
    """A torch tensor over ``buffer`` (a writable bytes-like object holding the
    whole object, header included) with ``meta``'s dtype and local shape; it shares
    the memory and keeps ``buffer`` alive."""
    import torch

    dtype = getattr(torch, DTYPES[meta.dtype][0])
    shape = meta.local_shape
    if meta.data_bytes == 0:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(buffer, dtype=torch.uint8, count=meta.data_bytes, offset=meta.data_offset)
    return raw.view(dtype).reshape(shape)


def tensor_at(address: int, length: int) -> Any:
    """The tensor stored in the ``length`` bytes at ``address`` (a view of that
    memory), or None when they do not hold a valid tensor object."""
    if address == 0 or length < METADATA_SIZE:
        return None
    view = (ctypes.c_char * length).from_address(address)
    meta = parse(memoryview(view).cast("B"), length)
    return None if meta is None else tensor_from_memory(meta, view)


def tensor_from_bytes(data: Any) -> Any:
    """The tensor stored in ``data`` (a copy it owns), or None when ``data`` does not
    hold a valid tensor object."""
    if data is None:
        return None
    buf = bytearray(data)
    meta = parse(buf, len(buf))
    return None if meta is None else tensor_from_memory(meta, buf)


def shard_range(dim_size: int, rank: int, count: int) -> Tuple[int, int]:
    """(start, length) of shard ``rank`` of ``count`` equal shards of a dimension."""
    length = dim_size // count
    return rank * length, length


def tp_shards(tensor: Any, tp_size: int, split_dim: int) -> Optional[List[TensorInfo]]:
    """The ``tp_size`` equal shards of ``tensor`` along ``split_dim`` (as upstream's
    ``put_tensor_with_tp`` writes them: shard headers with one TP axis), or None when
    the tensor cannot be split that way (upstream supports only equal shards)."""
    if "Tensor" not in type(tensor).__name__ or dtype_code(tensor.dtype) is None:
        return None
    shape = tuple(int(d) for d in tensor.shape)
    if tp_size <= 0 or not 0 <= split_dim < len(shape) or shape[split_dim] % tp_size:
        return None
    shards = []
    for rank in range(tp_size):
        start, length = shard_range(shape[split_dim], rank, tp_size)
        chunk = tensor.narrow(split_dim, start, length)
        axis = Axis(AXIS_KINDS["tp"], 0, rank, tp_size, split_dim, 0, length)
        info = tensor_info(chunk, shape, (axis,))
        if info is None:
            return None
        shards.append(info)
    return shards
