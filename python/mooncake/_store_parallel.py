"""The parallelism-aware tensor methods of ``MooncakeDistributedStore``
(upstream's ``*_with_parallelism``): writes of a shard named by a
``TensorParallelism`` or a writer partition, and reads of a stored object, of a shard
(resharded from what is stored when the TP sizes differ) or of the whole tensor,
over the store's bytes API and ``_parallel_layout`` (keys, manifests, headers and
assembly byte-compatible with upstream's).

Return values are upstream's (-600 for anything invalid, None for reads that cannot
be served). Differences: reconstruction works on a dummy client too (upstream:
None); a ``*_from`` buffer must hold a whole tensor where upstream reads past a
shard's bytes; the sources of one reconstruction must share a dtype; sequences are
accepted where upstream insists on lists.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

from . import _parallel_layout as P
from . import _store_ffi as ffi
from . import _tensor_layout as T
from ._store_tensor import _config_ok, _groups_match, _header_at, _indexed_config
from ._store_types import config_json

_INVALID = ffi.INVALID_PARAMS


class _Object(NamedTuple):
    """A stored tensor object: its parsed header and all its bytes."""

    meta: T.Metadata
    raw: bytearray

    def tensor(self) -> Any:
        return T.tensor_from_memory(self.meta, self.raw)


def _object_copy(addr: int, size: int) -> Optional[_Object]:
    buf = bytearray(size)
    if size:
        ctypes.memmove((ctypes.c_char * size).from_buffer(buf), addr, size)
    meta = T.parse(buf, size)
    return None if meta is None else _Object(meta, buf)


def _object_of(header: bytes, data: Any) -> Optional[_Object]:
    """The object ``header`` + the bytes of the contiguous CPU tensor ``data``."""
    nbytes = data.numel() * data.element_size()
    raw = bytearray(header) + (ctypes.string_at(data.data_ptr(), nbytes) if nbytes else b"")
    meta = T.parse(raw, len(raw))
    return None if meta is None else _Object(meta, raw)


def _is_tensor(value: Any) -> bool:
    return "Tensor" in type(value).__name__


def _host(tensor: Any) -> Any:
    return tensor.detach().cpu().contiguous()


def _nbytes(tensor: Any) -> int:
    return tensor.numel() * tensor.element_size()


def _prod(dims: Sequence[int]) -> int:
    return T.element_count(dims)


def _source_range(obj: _Object, shape: Sequence[int], d: int) -> Optional[Tuple[int, int]]:
    """(start, extent) along ``d`` of the global ``shape`` that the stored shard
    ``obj`` holds, or None when it is not an equal TP shard of that tensor."""
    m = obj.meta
    if len(m.local_shape) != len(shape) or m.layout_kind != T.SHARD:
        return None
    if any(m.local_shape[i] != shape[i] for i in range(len(shape)) if i != d):
        return None
    tp = next((a for a in m.axes if a.kind == P.TP), None)
    if tp is None or tp.split_dim != d or not 0 <= tp.shard_rank < tp.shard_count:
        return None
    if shape[d] % tp.shard_count or m.local_shape[d] != shape[d] // tp.shard_count:
        return None
    return P.shard_of(shape[d], tp.shard_rank, tp.shard_count)


def _assemble(
    sources: Sequence[_Object], shape: Sequence[int], d: int, start: int, extent: int, header: Callable[[int], Any]
) -> Optional[_Object]:
    """Slice ``[start, start + extent)`` along ``d`` of the tensor of global ``shape``,
    from stored shards that together cover it, under the header ``header(nbytes)``
    makes; None when they do not cover it or are not shards of that tensor."""
    import torch

    if not sources or not 0 <= d < len(shape) or start < 0 or extent < 0 or start + extent > shape[d]:
        return None
    dtype = sources[0].meta.dtype
    if any(s.meta.dtype != dtype for s in sources):
        return None
    ranges = [_source_range(s, shape, d) for s in sources]
    if any(r is None for r in ranges):
        return None
    size = T.DTYPES[dtype][1]
    before, row = _prod(shape[:d]), _prod(shape[d + 1 :]) * size
    cursor, end, pieces = start, start + extent, []
    for (s0, se), obj in sorted(zip(ranges, sources), key=lambda p: p[0][0]):
        o0, o1 = max(s0, cursor), min(s0 + se, end)
        if o1 <= o0:
            continue
        if o0 > cursor:
            return None
        pieces.append((obj, se, o0 - s0, o1 - o0))
        cursor = o1
    if cursor < end:
        return None
    nbytes = before * extent * row
    head = header(nbytes)
    if head is None:
        return None
    if nbytes == 0:
        return _object_of(head, torch.empty(0, dtype=torch.uint8))
    parts = []
    for obj, se, offset, length in pieces:
        raw = torch.frombuffer(obj.raw, dtype=torch.uint8, count=obj.meta.data_bytes, offset=obj.meta.data_offset)
        parts.append(raw.view(before, se, row).narrow(1, offset, length))
    return _object_of(head, torch.cat(parts, dim=1).contiguous())


class _Sources(NamedTuple):
    """Stored shards of one tensor: its dtype, global shape and split dimension."""

    dtype: int
    shape: Tuple[int, ...]
    split_dim: int
    objects: List[_Object]


def _compatible(obj: _Object, request: Sequence[P.Axis], count: int) -> bool:
    """Whether ``obj`` is a shard of the layout ``request`` (canonical) names, with
    ``count`` TP shards, whatever its TP rank."""
    stored = P.stored_axes(obj.meta)
    if len(stored) != len(request):
        return False
    for s, a in zip(stored, request):
        if a.kind != P.TP and s != a:
            return False
        if a.kind == P.TP and (s.kind, s.split_dim, s.expert_id, s.stage_id, s.size) != (
            P.TP,
            a.split_dim,
            a.expert_id,
            a.stage_id,
            count,
        ):
            return False
    return True


class ParallelTensorMethods:
    """Upstream's ``*_with_parallelism`` methods; a base class of
    ``MooncakeDistributedStore`` (uses its tensor and bytes methods)."""

    # --- store access ------------------------------------------------------------

    def _objects(self, keys: Sequence[str]) -> List[Optional[_Object]]:
        if not self._set_up:
            return [None] * len(keys)
        return self._get_buffers(keys, _object_copy)

    def _object(self, key: str) -> Optional[_Object]:
        return self._objects([key])[0]

    def _manifest(self, key: str) -> Optional[P.Manifest]:
        data = self._get_buffers([key], ctypes.string_at)[0] if self._set_up else None
        return P.parse_manifest(data)

    def _write_object(self, key: str, header: Optional[bytes], data: Any, config: Any, upsert: bool) -> int:
        if header is None:
            return _INVALID
        info = T.TensorInfo(header, data.data_ptr() if _nbytes(data) else 0, _nbytes(data), data)
        return self._write_tensors([key], [info], config, upsert)[0]

    def _write_manifest(self, key: str, manifest: bytes, config: Any, upsert: bool) -> int:
        return self.upsert(key, manifest, config) if upsert else self.put(key, manifest, config)

    # --- writes ------------------------------------------------------------------

    def _write_parallel(
        self, key: str, tensor: Any, parallelism: Any, config: Any, partition: Any, upsert: bool
    ) -> int:
        if not self._set_up or (partition is not None and parallelism is not None):
            return _INVALID
        if partition is not None:
            part = P.parse_partition(partition)
            if part is None or not _is_tensor(tensor):
                return _INVALID
            return self._write_partition(key, _host(tensor), part, config, upsert)
        if parallelism is None:
            if not _config_ok(config):
                return _INVALID
            return self._put_tensors([key], [tensor], config, upsert)[0]
        axes = P.parse_axes(parallelism)
        if not P.valid(axes) or not _is_tensor(tensor) or T.dtype_code(tensor.dtype) is None:
            return _INVALID
        t = _host(tensor)
        code, shape = T.dtype_code(t.dtype), tuple(int(x) for x in t.shape)
        tp = P.tp_axis(axes)
        if tp is None:
            header = P.shard_header(code, shape, shape, _nbytes(t), axes)
            return self._write_object(P.shard_key(key, axes), header, t, config, upsert)
        d = tp.split_dim
        if not 0 <= d < len(shape):
            return _INVALID
        if len(axes) == 1:
            # One TP axis: the tensor is this rank's shard of a tensor tp.size times as long.
            full = list(shape)
            full[d] *= tp.size
            header = P.shard_header(code, full, shape, _nbytes(t), axes)
            shard, key_of = t, P.tp_key(key, tp.rank)
        else:
            # Several axes: the tensor is the whole one; this rank's TP shard is stored.
            if shape[d] % tp.size:
                return _INVALID
            full = list(shape)
            start, extent = P.shard_of(shape[d], tp.rank, tp.size)
            shard = t.narrow(d, start, extent).contiguous()
            header = P.shard_header(code, full, tuple(shard.shape), _nbytes(shard), axes)
            key_of = P.shard_key(key, axes)
        rc = self._write_object(key_of, header, shard, config, upsert)
        if rc != 0:
            return rc
        manifest = P.pack_manifest(code, full, d, tp.size)
        return self._write_manifest(P.parallelism_manifest_key(key), manifest, config, upsert)

    def _write_partition(self, key: str, full: Any, part: P.Partition, config: Any, upsert: bool) -> int:
        """Writer partition ``part`` of the whole tensor ``full``, then its manifest."""
        code, shape, d = T.dtype_code(full.dtype), tuple(int(x) for x in full.shape), part.split_dim
        if code is None or d >= len(shape) or shape[d] % part.size:
            return _INVALID
        start, extent = P.shard_of(shape[d], part.rank, part.size)
        shard = full.narrow(d, start, extent).contiguous()
        axis = P.Axis(P.TP, part.rank, part.size, d)
        header = P.shard_header(code, shape, tuple(shard.shape), _nbytes(shard), [axis])
        rc = self._write_object(P.writer_key(key, part.rank, part.size, d), header, shard, config, upsert)
        if rc != 0:
            return rc
        manifest = P.pack_manifest(code, shape, d, part.size)
        return self._write_manifest(P.writer_manifest_key(key), manifest, config, upsert)

    def _write_parallel_from(
        self, key: str, ptr: int, size: int, parallelism: Any, config: Any, partition: Any, upsert: bool
    ) -> int:
        if not self._set_up or (partition is not None and parallelism is not None):
            return _INVALID
        addr, n = ffi.address(ptr), ffi.size(size)
        if parallelism is None and partition is None:
            if config_json(config) is None:
                return (self.upsert_tensor_from if upsert else self.put_tensor_from)(key, addr, n)
            if _header_at(addr, n) is None or not _config_ok(config):
                return _INVALID
            return (self.upsert_from if upsert else self.put_from)(key, addr, n, config)
        meta, tensor = _header_at(addr, n), T.tensor_at(addr, n)
        if meta is None or tensor is None:
            return _INVALID
        whole = meta.global_shape == meta.local_shape
        if partition is not None:
            part = P.parse_partition(partition)
            if part is None or not whole:
                return _INVALID
            return self._write_partition(key, tensor.contiguous(), part, config, upsert)
        axes = P.parse_axes(parallelism)
        if not P.valid(axes):
            return _INVALID
        tp = P.tp_axis(axes)
        if tp is None:
            header = P.shard_header(meta.dtype, meta.global_shape, meta.local_shape, meta.data_bytes, axes)
            return self._write_object(P.shard_key(key, axes), header, tensor, config, upsert)
        # The buffer holds the whole tensor: every TP shard is stored (no manifest, as upstream).
        shape, d = meta.global_shape, tp.split_dim
        if not whole or not 0 <= d < len(shape) or shape[d] % tp.size:
            return _INVALID
        for rank in range(tp.size):
            ranked = P.with_tp(axes, rank=rank)
            start, extent = P.shard_of(shape[d], rank, tp.size)
            shard = tensor.narrow(d, start, extent).contiguous()
            header = P.shard_header(meta.dtype, shape, tuple(shard.shape), _nbytes(shard), ranked)
            rc = self._write_object(P.shard_key(key, ranked), header, shard, config, upsert)
            if rc != 0:
                return rc
        return 0

    def _batch_parallel(
        self,
        keys: Sequence[str],
        items: Sequence[Any],
        parallelisms: Any,
        config: Any,
        partitions: Any,
        direct: Callable[[], List[int]],
        one: Callable[[int, Any, Any, Any], int],
    ) -> List[int]:
        n = len(keys)
        if not _groups_match(config, n) or (parallelisms is not None and partitions is not None):
            return [_INVALID] * n
        if len(items) != n:
            return [_INVALID] * n
        if parallelisms is None and partitions is None:
            if not self._set_up or not _config_ok(config):
                return [_INVALID] * n
            return direct() if n else []
        per_item = parallelisms if parallelisms is not None else partitions
        if isinstance(per_item, (str, bytes)) or len(per_item) != n:
            return [_INVALID] * n
        out = []
        for i in range(n):
            p, w = (per_item[i], None) if parallelisms is not None else (None, per_item[i])
            out.append(one(i, p, _indexed_config(config, [i]), w))
        return out

    def put_tensor_with_parallelism(
        self, key: str, tensor: Any, parallelism: Any = None, config: Any = None, writer_partition: Any = None
    ) -> int:
        """Stores ``tensor`` as the shard ``parallelism`` names (one TP axis: the
        tensor is this rank's shard; several axes with TP: the tensor is whole and
        this rank's TP shard is stored; DP/EP/PP only: stored whole under a key naming
        them), or as ``writer_partition`` (``rank``, ``size``, ``split_dim``) of the
        whole tensor; neither: ``put_tensor``. TP and writer shards also store a
        manifest for readers. 0 or -600 (invalid layout, uneven split, both given)."""
        return self._write_parallel(key, tensor, parallelism, config, writer_partition, False)

    def upsert_tensor_with_parallelism(
        self, key: str, tensor: Any, parallelism: Any = None, config: Any = None, writer_partition: Any = None
    ) -> int:
        """``put_tensor_with_parallelism`` replacing existing objects (manifest too)."""
        return self._write_parallel(key, tensor, parallelism, config, writer_partition, True)

    def put_tensor_with_parallelism_from(
        self,
        key: str,
        buffer_ptr: int,
        size: int,
        parallelism: Any = None,
        config: Any = None,
        writer_partition: Any = None,
    ) -> int:
        """The whole tensor object at ``buffer_ptr`` (header, then data) stored as
        ``parallelism`` names (a TP axis: every TP shard, no manifest) or as
        ``writer_partition``; neither: stored as it is."""
        return self._write_parallel_from(key, buffer_ptr, size, parallelism, config, writer_partition, False)

    def upsert_tensor_with_parallelism_from(
        self,
        key: str,
        buffer_ptr: int,
        size: int,
        parallelism: Any = None,
        config: Any = None,
        writer_partition: Any = None,
    ) -> int:
        """``put_tensor_with_parallelism_from`` replacing existing objects."""
        return self._write_parallel_from(key, buffer_ptr, size, parallelism, config, writer_partition, True)

    def batch_put_tensor_with_parallelism(
        self,
        keys: Sequence[str],
        tensors_list: Sequence[Any],
        parallelisms: Any = None,
        config: Any = None,
        writer_partitions: Any = None,
    ) -> List[int]:
        """``put_tensor_with_parallelism`` per key (``parallelisms`` or
        ``writer_partitions``: one per key, None entries meaning a plain put; neither:
        one ``batch_put_tensor``)."""
        return self._batch_parallel(
            keys,
            tensors_list,
            parallelisms,
            config,
            writer_partitions,
            lambda: self._put_tensors(keys, tensors_list, config, False),
            lambda i, p, c, w: self._write_parallel(keys[i], tensors_list[i], p, c, w, False),
        )

    def batch_upsert_tensor_with_parallelism(
        self,
        keys: Sequence[str],
        tensors_list: Sequence[Any],
        parallelisms: Any = None,
        config: Any = None,
        writer_partitions: Any = None,
    ) -> List[int]:
        """``batch_put_tensor_with_parallelism`` replacing existing objects."""
        return self._batch_parallel(
            keys,
            tensors_list,
            parallelisms,
            config,
            writer_partitions,
            lambda: self._put_tensors(keys, tensors_list, config, True),
            lambda i, p, c, w: self._write_parallel(keys[i], tensors_list[i], p, c, w, True),
        )

    def _batch_from(self, keys, ptrs, sizes, parallelisms, config, partitions, upsert: bool) -> List[int]:
        n = len(keys)
        if len(sizes) != n:
            return [_INVALID] * n

        def direct() -> List[int]:
            if config_json(config) is None:
                return self._from(keys, ptrs, sizes, upsert)
            if any(_header_at(ffi.address(p), ffi.size(s)) is None for p, s in zip(ptrs, sizes)):
                return [_INVALID] * n
            return (self.batch_upsert_from if upsert else self.batch_put_from)(keys, ptrs, sizes, config)

        return self._batch_parallel(
            keys,
            ptrs,
            parallelisms,
            config,
            partitions,
            direct,
            lambda i, p, c, w: self._write_parallel_from(keys[i], ptrs[i], sizes[i], p, c, w, upsert),
        )

    def batch_put_tensor_with_parallelism_from(
        self,
        keys: Sequence[str],
        buffer_ptrs: Sequence[int],
        sizes: Sequence[int],
        parallelisms: Any = None,
        config: Any = None,
        writer_partitions: Any = None,
    ) -> List[int]:
        """``put_tensor_with_parallelism_from`` per buffer (neither layout list: one
        ``batch_put_tensor_from``)."""
        return self._batch_from(keys, buffer_ptrs, sizes, parallelisms, config, writer_partitions, False)

    def batch_upsert_tensor_with_parallelism_from(
        self,
        keys: Sequence[str],
        buffer_ptrs: Sequence[int],
        sizes: Sequence[int],
        parallelisms: Any = None,
        config: Any = None,
        writer_partitions: Any = None,
    ) -> List[int]:
        """``batch_put_tensor_with_parallelism_from`` replacing existing objects."""
        return self._batch_from(keys, buffer_ptrs, sizes, parallelisms, config, writer_partitions, True)

    # --- reads -------------------------------------------------------------------

    def _writer_sources(self, key: str) -> Optional[_Sources]:
        m = self._manifest(P.writer_manifest_key(key))
        if m is None:
            return None
        keys = [P.writer_key(key, r, m.shard_count, m.split_dim) for r in range(m.shard_count)]
        objs = self._objects(keys)
        for r, obj in enumerate(objs):
            if obj is None or obj.meta.layout_kind != T.SHARD or len(obj.meta.axes) != 1:
                return None
            a = obj.meta.axes[0]
            if (a.kind, a.shard_rank, a.shard_count, a.split_dim) != (P.TP, r, m.shard_count, m.split_dim):
                return None
        return _Sources(m.dtype, m.global_shape, m.split_dim, objs)

    def _parallel_sources(self, key: str, axes: Sequence[P.Axis]) -> Optional[_Sources]:
        """The stored TP shards of the tensor ``axes`` (with a TP axis) names: those
        its manifest lists, else those the keys of the request's layout hold."""
        tp, request = P.tp_axis(axes), P.canonical(axes)
        m = self._manifest(P.parallelism_manifest_key(key))
        if m is not None and tp.split_dim == m.split_dim:
            dim = m.global_shape[m.split_dim]
            if dim % tp.size == 0 and dim % m.shard_count == 0:
                keys = [P.shard_key(key, P.with_tp(request, rank=r, size=m.shard_count)) for r in range(m.shard_count)]
                objs = self._objects(keys)
                if all(o is not None and _compatible(o, request, m.shard_count) for o in objs):
                    return _Sources(m.dtype, m.global_shape, m.split_dim, objs)
        if len(axes) > 1:
            keys = [P.shard_key(key, P.with_tp(request, rank=r)) for r in range(tp.size)]
            objs = self._objects(keys)
            if any(o is None or not _compatible(o, request, tp.size) for o in objs):
                return None
            first = next(a for a in objs[0].meta.axes if a.kind == P.TP)
            shape = objs[0].meta.global_shape
            if first.split_dim != tp.split_dim or shape[first.split_dim] % tp.size:
                return None
            return _Sources(objs[0].meta.dtype, shape, first.split_dim, objs)
        first = self._object(key if tp.size <= 1 else P.tp_key(key, 0))
        if first is None or first.meta.layout_kind != T.SHARD:
            return None
        axis = next((a for a in first.meta.axes if a.kind == P.TP), None)
        if axis is None or axis.split_dim != tp.split_dim:
            return None
        shape, d, count = first.meta.global_shape, axis.split_dim, axis.shard_count
        if shape[d] % tp.size or shape[d] % count:
            return None
        objs = self._objects([key if count <= 1 else P.tp_key(key, r) for r in range(count)])
        for r, obj in enumerate(objs):
            a = None if obj is None else next((x for x in obj.meta.axes if x.kind == P.TP), None)
            if (
                a is None
                or obj.meta.layout_kind != T.SHARD
                or (a.shard_rank, a.shard_count, a.split_dim)
                != (
                    r,
                    count,
                    d,
                )
            ):
                return None
        return _Sources(objs[0].meta.dtype, shape, d, objs)

    def _read_parallel(self, key: str, target: Any, into: bool) -> Optional[_Object]:
        parsed = _parse_target(target)
        if parsed is None:
            return None
        mode, axes = parsed
        if axes is None and mode == "as_stored":
            return self._object(key)
        if axes is None and mode == "full":
            src = self._writer_sources(key)
            if src is None:
                return self._object(key)
            return _assemble(src.objects, src.shape, src.split_dim, 0, src.shape[src.split_dim], _full(src))
        if not P.valid(axes):
            return None
        tp = P.tp_axis(axes)
        if mode == "shard":
            obj = self._object(P.shard_key(key, axes))
            if obj is not None and P.matches(axes, obj.meta):
                return obj
            if len(axes) == 1:
                obj = self._object(P.writer_key(key, tp.rank, tp.size, tp.split_dim))
                if obj is not None and len(obj.meta.axes) == 1 and P.matches(axes, obj.meta):
                    return obj
            if tp is not None:
                src = self._parallel_sources(key, axes)
                if src is not None and src.shape[src.split_dim] % tp.size == 0:
                    start, extent = P.shard_of(src.shape[src.split_dim], tp.rank, tp.size)
                    local = list(src.shape)
                    local[src.split_dim] = extent

                    def header(nbytes: int) -> Optional[bytes]:
                        return P.shard_header(src.dtype, src.shape, local, nbytes, axes)

                    obj = _assemble(src.objects, src.shape, src.split_dim, start, extent, header)
                    if obj is not None:
                        return obj
            if len(axes) == 1 and not into:
                return self._object(key if tp.size <= 1 else P.tp_key(key, tp.rank))
            return None
        if mode == "full" and tp is not None:
            src = self._parallel_sources(key, axes)
            if src is None:
                return None
            return _assemble(src.objects, src.shape, src.split_dim, 0, src.shape[src.split_dim], _full(src))
        return None

    def get_tensor_with_parallelism(self, key: str, target: Any = None) -> Any:
        """The tensor a ``ReadTarget`` asks for: the object at ``key`` as stored
        (default), the shard its ``parallelism`` names (stored as such, or assembled
        from the stored TP shards of any TP size), or the whole tensor (assembled from
        TP or writer-partition shards). A CPU tensor, or None."""
        obj = self._read_parallel(key, target, into=False) if self._set_up else None
        return None if obj is None else obj.tensor()

    def batch_get_tensor_with_parallelism(self, keys: Sequence[str], targets: Any = None) -> List[Any]:
        """``get_tensor_with_parallelism`` per key (``targets``: one per key, or None:
        one ``batch_get_tensor``)."""
        if targets is None:
            return self.batch_get_tensor(keys)
        if isinstance(targets, (str, bytes)) or len(targets) != len(keys):
            return [None] * len(keys)
        return [self.get_tensor_with_parallelism(k, t) for k, t in zip(keys, targets)]

    def get_tensor_with_parallelism_into(self, key: str, buffer_ptr: int, size: int, target: Any = None) -> Any:
        """``get_tensor_with_parallelism`` into the ``size`` bytes at ``buffer_ptr``
        (header, then data): a tensor viewing them, or None (also when they are too
        few)."""
        addr, n = ffi.address(buffer_ptr), ffi.size(size)
        if not self._set_up or addr == 0:
            return None
        if _parse_target(target) == ("as_stored", None):
            return self.get_tensor_into(key, addr, n)
        obj = self._read_parallel(key, target, into=True)
        if obj is None or len(obj.raw) > n:
            return None
        ctypes.memmove(addr, (ctypes.c_char * len(obj.raw)).from_buffer(obj.raw), len(obj.raw))
        return T.tensor_at(addr, len(obj.raw))

    def batch_get_tensor_with_parallelism_into(
        self, keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int], targets: Any = None
    ) -> List[Any]:
        """``get_tensor_with_parallelism_into`` per key."""
        n = len(keys)
        if len(buffer_ptrs) != n or len(sizes) != n:
            return [None] * n
        if targets is None:
            targets = [None] * n
        if isinstance(targets, (str, bytes)) or len(targets) != n:
            return [None] * n
        return [self.get_tensor_with_parallelism_into(*args) for args in zip(keys, buffer_ptrs, sizes, targets)]


def _full(src: _Sources) -> Callable[[int], bytes]:
    """The header maker of the whole tensor ``src`` holds."""
    return lambda nbytes: T.pack(src.dtype, src.shape, src.shape, nbytes)


def _parse_target(target: Any) -> Optional[Tuple[str, Optional[List[P.Axis]]]]:
    """(mode, axes or None) of a ``ReadTarget``-like object (None: as stored), or
    None when it is not one."""
    if target is None:
        return "as_stored", None
    if not hasattr(target, "mode") or not hasattr(target, "parallelism"):
        return None
    mode = str(target.mode).lower()
    if mode not in ("as_stored", "shard", "full"):
        return None
    if target.parallelism is None:
        return mode, None
    axes = P.parse_axes(target.parallelism)
    return None if axes is None else (mode, axes)
