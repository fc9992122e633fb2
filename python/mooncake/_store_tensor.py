"""The tensor methods of ``MooncakeDistributedStore`` (upstream's ``put_tensor``,
``get_tensor`` and their batch, ``_into``, ``_from``, ``pub``, ``upsert``,
tensor-parallel, CUDA and safetensors forms), over the store's bytes API and
upstream's object layout (``_tensor_layout``), so tensors put by upstream's client are
read by this one and the other way round.

Return values are upstream's: ints (0, or a negative error code: -600 for anything
invalid), tensors or None, lists of those. torch (and safetensors) are imported only
when a method needs them.

Differences from upstream: a 0-dim tensor comes back 0-dim (upstream returns shape
``(1,)``); ``get_tensor_into_cuda`` works with any contiguous destination of the
stored dtype and shape, CPU or CUDA, on any client (upstream needs a dummy client
and CUDA IPC, and returns -600 otherwise); a CUDA tensor is written from a host copy.
"""

from __future__ import annotations

import copy
import ctypes
import logging
from typing import Any, Callable, List, Optional, Sequence

from . import _store_ffi as ffi
from . import _tensor_layout as T

log = logging.getLogger("mooncake.store")

_INVALID = ffi.INVALID_PARAMS
_FILE_NOT_FOUND = -1100


def tp_key(key: str, rank: int) -> str:
    """The key of shard ``rank`` of a tensor put with ``*_with_tp`` (upstream's)."""
    return f"{key}_tp_{rank}"


def serialize_tensor(tensor: Any) -> tuple:
    """Upstream's ``_serialize_tensor``: ``(header bytes, data address, data size,
    owner)`` of a tensor (``owner`` keeps the data alive); ``ValueError`` when the
    tensor cannot be stored."""
    info = T.tensor_info(tensor)
    if info is None:
        raise ValueError("unsupported tensor for Mooncake tensor serialization")
    return info.header, info.data_ptr, info.data_bytes, info.owner


def deserialize_tensor(payload: Any) -> Any:
    """Upstream's ``_deserialize_tensor``: the tensor stored in ``payload`` (header
    and data, as a tensor object is stored); ``ValueError`` when it is not one."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise TypeError(f"payload must be bytes, not {type(payload).__name__}")
    tensor = T.tensor_from_bytes(payload)
    if tensor is None:
        raise ValueError("invalid serialized Mooncake tensor payload")
    return tensor


def tensor_metadata_size() -> int:
    """Upstream's ``_tensor_metadata_size``: the header's size, 304 bytes."""
    return T.METADATA_SIZE


def _copy_out(addr: int, size: int) -> Any:
    """The tensor in the ``size`` library-owned bytes at ``addr``, copied out (None
    when they do not hold one)."""
    buf = bytearray(size)
    if size:
        ctypes.memmove((ctypes.c_char * size).from_buffer(buf), addr, size)
    meta = T.parse(buf, size)
    return None if meta is None else T.tensor_from_memory(meta, buf)


def _header_at(addr: int, size: int) -> Optional[T.Metadata]:
    """The valid header of the ``size``-byte tensor object at ``addr``, or None."""
    if addr == 0 or size < T.METADATA_SIZE:
        return None
    view = (ctypes.c_char * T.METADATA_SIZE).from_address(addr)
    return T.parse(memoryview(view).cast("B"), size)


def _config_ok(config: Any) -> bool:
    """Upstream's ``validate_replicate_config``: preferred segments, when given, one
    per replica."""
    segments = getattr(config, "preferred_segments", None) or []
    return not segments or len(segments) == getattr(config, "replica_num", 1)


def _indexed_config(config: Any, indices: Sequence[int], repeat: int = 1) -> Any:
    """``config`` with its per-key ``group_ids`` (if any) for the keys at
    ``indices``, each repeated ``repeat`` times (one per shard)."""
    groups = getattr(config, "group_ids", None)
    if groups is None:
        return config
    out = copy.copy(config)
    out.group_ids = [groups[i] for i in indices for _ in range(repeat)]
    return out


def _groups_match(config: Any, n: int) -> bool:
    groups = getattr(config, "group_ids", None)
    return groups is None or len(groups) == n


class TensorMethods:
    """Upstream's tensor methods; a base class of ``MooncakeDistributedStore`` (uses
    its ``_set_up``, ``_dummy`` and bytes methods)."""

    # --- writes ------------------------------------------------------------------

    def _write_tensors(
        self, keys: Sequence[str], infos: Sequence[Optional[T.TensorInfo]], config: Any, upsert: bool
    ) -> List[int]:
        """Writes every valid ``infos[i]`` (header, then data) under ``keys[i]``; -600
        for the invalid ones. A put on a real client is zero-copy (header and data as
        two buffers of one object); an upsert, or any write of a dummy client, is
        staged through one contiguous copy."""
        n = len(keys)
        if not _groups_match(config, n):
            return [_INVALID] * n
        results = [_INVALID] * n
        good = [i for i in range(n) if infos[i] is not None]
        if not good:
            return results
        cfg = _indexed_config(config, good)
        write_keys = [keys[i] for i in good]
        if upsert or self._dummy:
            staged = [infos[i].header + ctypes.string_at(infos[i].data_ptr, infos[i].data_bytes) for i in good]
            views = [ffi.Bytes(s) for s in staged]
            fn = "mooncake_store_batch_upsert_from" if upsert else "mooncake_store_batch_put_from_with_config"
            out = self._write_batch(fn, write_keys, [v.addr for v in views], [v.size for v in views], cfg)
            del views
        else:
            headers = [ctypes.create_string_buffer(infos[i].header, T.METADATA_SIZE) for i in good]
            ptrs, sizes = [], []
            for header, i in zip(headers, good):
                info = infos[i]
                ptrs.append([ctypes.addressof(header)] + ([info.data_ptr] if info.data_bytes else []))
                sizes.append([T.METADATA_SIZE] + ([info.data_bytes] if info.data_bytes else []))
            out = self.batch_put_from_multi_buffers(write_keys, ptrs, sizes, cfg)
            del headers
        for i, rc in zip(good, out):
            results[i] = rc
        return results

    def _put_tensors(self, keys: Sequence[str], tensors: Sequence[Any], config: Any, upsert: bool) -> List[int]:
        if len(keys) != len(tensors) or not keys:
            return [_INVALID] * len(keys)
        return self._write_tensors(keys, [T.tensor_info(t) for t in tensors], config, upsert)

    def _put_tp(
        self, keys: Sequence[str], tensors: Sequence[Any], config: Any, tp_size: int, split_dim: int, upsert: bool
    ) -> List[int]:
        """Each tensor split into ``tp_size`` equal shards along ``split_dim``, stored
        under ``key_tp_<rank>``; per base key 0 or the first shard's error."""
        n = len(keys)
        if n != len(tensors) or not keys:
            return [_INVALID] * n
        if not _groups_match(config, n):
            return [_INVALID] * n
        results = [_INVALID] * n
        done, shard_keys, shard_infos = [], [], []
        for i, tensor in enumerate(tensors):
            shards = T.tp_shards(tensor, tp_size, split_dim)
            if shards is None:
                continue
            done.append(i)
            shard_keys += [tp_key(keys[i], r) for r in range(tp_size)]
            shard_infos += shards
        if not done:
            return results
        out = self._write_tensors(shard_keys, shard_infos, _indexed_config(config, done, tp_size), upsert)
        for j, i in enumerate(done):
            results[i] = next((rc for rc in out[j * tp_size : (j + 1) * tp_size] if rc != 0), 0)
        return results

    def put_tensor(self, key: str, tensor: Any) -> int:
        """Stores a torch tensor (any device; made contiguous) under ``key`` in
        upstream's layout. 0, or -600 (not a tensor, unsupported dtype, more than 8
        dims, not set up), or the store's error."""
        return self._one(self._put_tensors([key], [tensor], None, False))

    def upsert_tensor(self, key: str, tensor: Any) -> int:
        """``put_tensor`` that replaces an existing object."""
        return self._one(self._put_tensors([key], [tensor], None, True))

    def pub_tensor(self, key: str, tensor: Any, config: Any = None) -> int:
        """``put_tensor`` with a ``ReplicateConfig``; -600 when its preferred
        segments are not one per replica."""
        if not self._set_up or not _config_ok(config):
            return _INVALID
        return self._one(self._put_tensors([key], [tensor], config, False))

    def upsert_pub_tensor(self, key: str, tensor: Any, config: Any = None) -> int:
        """``upsert_tensor`` with a ``ReplicateConfig``."""
        if not self._set_up or not _config_ok(config):
            return _INVALID
        return self._one(self._put_tensors([key], [tensor], config, True))

    def batch_put_tensor(self, keys: Sequence[str], tensors_list: Sequence[Any]) -> List[int]:
        """``put_tensor`` for several keys in one master call; one code per key
        (lists of different lengths: -600 for every key)."""
        return self._batch(keys, lambda: self._put_tensors(keys, tensors_list, None, False))

    def batch_upsert_tensor(self, keys: Sequence[str], tensors_list: Sequence[Any]) -> List[int]:
        """``upsert_tensor`` for several keys."""
        return self._batch(keys, lambda: self._put_tensors(keys, tensors_list, None, True))

    def batch_pub_tensor(self, keys: Sequence[str], tensors_list: Sequence[Any], config: Any = None) -> List[int]:
        """``pub_tensor`` for several keys (``config.group_ids``: one per key)."""
        return self._batch(keys, lambda: self._put_tensors(keys, tensors_list, config, False), config)

    def batch_upsert_pub_tensor(
        self, keys: Sequence[str], tensors_list: Sequence[Any], config: Any = None
    ) -> List[int]:
        """``upsert_pub_tensor`` for several keys."""
        return self._batch(keys, lambda: self._put_tensors(keys, tensors_list, config, True), config)

    def put_tensor_with_tp(self, key: str, tensor: Any, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> int:
        """Splits ``tensor`` into ``tp_size`` equal shards along ``split_dim`` and
        stores shard ``r`` under ``key_tp_<r>`` for every rank (``tp_rank`` is not
        used, as upstream); ``tp_size`` <= 1: ``put_tensor``. -600 when the dimension
        does not split evenly."""
        if tp_size <= 1:
            return self.put_tensor(key, tensor)
        return self._one(self._put_tp([key], [tensor], None, tp_size, split_dim, False))

    def pub_tensor_with_tp(
        self, key: str, tensor: Any, config: Any = None, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0
    ) -> int:
        """``put_tensor_with_tp`` with a ``ReplicateConfig``."""
        if not self._set_up or not _config_ok(config):
            return _INVALID
        if tp_size <= 1:
            return self.pub_tensor(key, tensor, config)
        return self._one(self._put_tp([key], [tensor], config, tp_size, split_dim, False))

    def batch_put_tensor_with_tp(
        self,
        base_keys: Sequence[str],
        tensors_list: Sequence[Any],
        tp_rank: int = 0,
        tp_size: int = 1,
        split_dim: int = 0,
    ) -> List[int]:
        """``put_tensor_with_tp`` for several tensors in one master call."""
        if tp_size <= 1:
            return self.batch_put_tensor(base_keys, tensors_list)
        return self._batch(base_keys, lambda: self._put_tp(base_keys, tensors_list, None, tp_size, split_dim, False))

    def batch_pub_tensor_with_tp(
        self,
        base_keys: Sequence[str],
        tensors_list: Sequence[Any],
        config: Any = None,
        tp_rank: int = 0,
        tp_size: int = 1,
        split_dim: int = 0,
    ) -> List[int]:
        """``pub_tensor_with_tp`` for several tensors (``config.group_ids``: one per
        base key, applied to all its shards)."""
        if tp_size <= 1:
            return self.batch_pub_tensor(base_keys, tensors_list, config)
        return self._batch(
            base_keys, lambda: self._put_tp(base_keys, tensors_list, config, tp_size, split_dim, False), config
        )

    # --- writes of tensor objects already laid out in memory ---------------------

    def _from(self, keys: Sequence[str], ptrs: Sequence[int], sizes: Sequence[int], upsert: bool) -> List[int]:
        n = len(keys)
        if not self._set_up or len(ptrs) != n or len(sizes) != n:
            return [_INVALID] * n
        if n == 0:
            return []
        if any(_header_at(ffi.address(p), ffi.size(s)) is None for p, s in zip(ptrs, sizes)):
            return [_INVALID] * n
        fn = "mooncake_store_batch_upsert_from" if upsert else "mooncake_store_batch_put_from_with_config"
        return self._write_batch(fn, keys, ptrs, sizes, None)

    def put_tensor_from(self, key: str, buffer_ptr: int, size: int) -> int:
        """Stores the ``size`` bytes at ``buffer_ptr``, which must hold a tensor
        object (header, then data, as ``get_tensor_into`` leaves it); -600 when
        they do not."""
        return self._from([key], [buffer_ptr], [size], False)[0]

    def upsert_tensor_from(self, key: str, buffer_ptr: int, size: int) -> int:
        """``put_tensor_from`` that replaces an existing object."""
        return self._from([key], [buffer_ptr], [size], True)[0]

    def batch_put_tensor_from(self, keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int]) -> List[int]:
        """``put_tensor_from`` for several keys; any invalid buffer: -600 for all."""
        return self._from(keys, buffer_ptrs, sizes, False)

    def batch_upsert_tensor_from(
        self, keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int]
    ) -> List[int]:
        """``upsert_tensor_from`` for several keys."""
        return self._from(keys, buffer_ptrs, sizes, True)

    def put_tensor_with_tp_from(
        self, key: str, buffer_ptr: int, size: int, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0
    ) -> int:
        """The full tensor object at ``buffer_ptr`` stored as ``put_tensor_with_tp``
        stores a tensor."""
        return self.batch_put_tensor_with_tp_from([key], [buffer_ptr], [size], tp_rank, tp_size, split_dim)[0]

    def batch_put_tensor_with_tp_from(
        self,
        base_keys: Sequence[str],
        buffer_ptrs: Sequence[int],
        sizes: Sequence[int],
        tp_rank: int = 0,
        tp_size: int = 1,
        split_dim: int = 0,
    ) -> List[int]:
        """``put_tensor_with_tp_from`` for several buffers; per key -600 when its
        buffer holds no tensor object."""
        n = len(base_keys)
        if not self._set_up:
            return [_INVALID] * n
        if tp_size <= 1:
            return self.batch_put_tensor_from(base_keys, buffer_ptrs, sizes)
        if len(buffer_ptrs) != n or len(sizes) != n or n == 0:
            return [_INVALID] * n
        tensors = [T.tensor_at(ffi.address(p), ffi.size(s)) for p, s in zip(buffer_ptrs, sizes)]
        good = [i for i in range(n) if tensors[i] is not None]
        results = [_INVALID] * n
        out = self._put_tp([base_keys[i] for i in good], [tensors[i] for i in good], None, tp_size, split_dim, False)
        for i, rc in zip(good, out):
            results[i] = rc
        return results

    # --- reads -------------------------------------------------------------------

    def get_tensor(self, key: str) -> Any:
        """The tensor stored under ``key`` (a CPU tensor owning a copy), or None when
        missing, not a tensor object, or on any error."""
        return self.batch_get_tensor([key])[0]

    def batch_get_tensor(self, keys: Sequence[str]) -> List[Any]:
        """``get_tensor`` for several keys in one master call."""
        if not self._set_up:
            return [None] * len(keys)
        return self._get_buffers(keys, _copy_out)

    def get_tensor_with_tp(self, key: str, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> Any:
        """Shard ``tp_rank`` of a tensor put with ``*_with_tp`` (``tp_size`` <= 1:
        the tensor under ``key``)."""
        return self.get_tensor(key if tp_size <= 1 else tp_key(key, tp_rank))

    def batch_get_tensor_with_tp(self, base_keys: Sequence[str], tp_rank: int = 0, tp_size: int = 1) -> List[Any]:
        """``get_tensor_with_tp`` for several base keys."""
        return self.batch_get_tensor(list(base_keys) if tp_size <= 1 else [tp_key(k, tp_rank) for k in base_keys])

    def get_tensor_into(self, key: str, buffer_ptr: int, size: int) -> Any:
        """Reads the tensor object into the ``size`` bytes at ``buffer_ptr`` (ideally
        registered: zero-copy) and returns a tensor viewing its data there (valid
        while that memory is); None when missing, too small or not a tensor."""
        if not self._set_up or ffi.address(buffer_ptr) == 0:
            return None
        return self.batch_get_tensor_into([key], [buffer_ptr], [size])[0]

    def batch_get_tensor_into(self, keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int]) -> List[Any]:
        """``get_tensor_into`` for several keys in one master call; lists of
        different lengths or a NULL buffer: -600 for every key (as upstream)."""
        n = len(keys)
        if not self._set_up or len(buffer_ptrs) != n or len(sizes) != n:
            return [_INVALID] * n
        if any(ffi.address(p) == 0 for p in buffer_ptrs):
            return [_INVALID] * n
        lengths = self.batch_get_into(keys, buffer_ptrs, sizes)
        return [T.tensor_at(ffi.address(p), length) if length >= 0 else None for p, length in zip(buffer_ptrs, lengths)]

    def get_tensor_with_tp_into(
        self, key: str, buffer_ptr: int, size: int, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0
    ) -> Any:
        """``get_tensor_into`` of shard ``tp_rank`` (``tp_size`` <= 1: of ``key``)."""
        if not self._set_up:
            return None
        return self.get_tensor_into(key if tp_size <= 1 else tp_key(key, tp_rank), buffer_ptr, size)

    def batch_get_tensor_with_tp_into(
        self,
        base_keys: Sequence[str],
        buffer_ptrs: Sequence[int],
        sizes: Sequence[int],
        tp_rank: int = 0,
        tp_size: int = 1,
    ) -> List[Any]:
        """``get_tensor_with_tp_into`` for several base keys."""
        if not self._set_up:
            return [None] * len(base_keys)
        keys = list(base_keys) if tp_size <= 1 else [tp_key(k, tp_rank) for k in base_keys]
        return self.batch_get_tensor_into(keys, buffer_ptrs, sizes)

    def get_tensor_into_cuda(self, key: str, tensor: Any) -> int:
        """Copies the data of the tensor under ``key`` into ``tensor`` (contiguous,
        same dtype and shape; CUDA or CPU). Its size in bytes, or -600 (missing,
        mismatch, not a tensor)."""
        return self.batch_get_tensor_into_cuda([key], [tensor])[0]

    def batch_get_tensor_into_cuda(self, keys: Sequence[str], tensors_list: Sequence[Any]) -> List[int]:
        """``get_tensor_into_cuda`` for several keys in one master call."""
        n = len(keys)
        if not self._set_up or len(tensors_list) != n:
            return [_INVALID] * n
        stored = self.batch_get_tensor(keys)
        return [_copy_into(dst, src) for dst, src in zip(tensors_list, stored)]

    # --- safetensors -------------------------------------------------------------

    def save_tensor_to_safetensor(self, key: str, file_name: Optional[str] = None) -> int:
        """Writes the tensor under ``key`` to a safetensors file (``file_name``, else
        ``key``) as ``{key: tensor}``. 0, -1100 when the key holds no tensor, -600 when
        the file cannot be written."""
        if not self._set_up:
            return _INVALID
        tensor = self.get_tensor(key)
        if tensor is None:
            return _FILE_NOT_FOUND
        try:
            from safetensors.torch import save_file

            save_file({key: tensor.contiguous()}, key if file_name is None else file_name)
        except Exception as e:  # upstream's code for any failure here
            log.error("save_tensor_to_safetensor(%r): %s", key, e)
            return _INVALID
        return 0

    def load_tensor_from_safetensor(self, key: Optional[str] = None, file_name: str = "") -> Any:
        """Puts a tensor of a safetensors file under ``key`` (else ``file_name``):
        the file's entry named ``key``, else its first. The tensor, or None."""
        if not self._set_up:
            return None
        try:
            from safetensors.torch import load_file

            loaded = load_file(file_name)
        except Exception as e:
            log.error("load_tensor_from_safetensor(%r): %s", file_name, e)
            return None
        if not loaded:
            return None
        names = list(loaded)
        if key is not None and key not in loaded:
            log.warning("load_tensor_from_safetensor: %r not in %s; using its first entry", key, file_name)
        tensor = loaded[key] if key in loaded else loaded[names[0]]
        return tensor if self.put_tensor(file_name if key is None else key, tensor) == 0 else None

    # --- shared ------------------------------------------------------------------

    def _one(self, results: List[int]) -> int:
        return results[0] if self._set_up else _INVALID

    def _batch(self, keys: Sequence[str], run: Callable[[], List[int]], config: Any = None) -> List[int]:
        if not self._set_up or not keys or not _config_ok(config):
            return [_INVALID] * len(keys)
        return run()


def _copy_into(dst: Any, src: Any) -> int:
    """Copies ``src`` (a stored tensor, or None) into the destination tensor ``dst``;
    its byte size, or -600."""
    if src is None or "Tensor" not in type(dst).__name__:
        return _INVALID
    try:
        if not dst.is_contiguous() or dst.dtype != src.dtype or tuple(dst.shape) != tuple(src.shape):
            return _INVALID
        nbytes = src.numel() * src.element_size()
        if nbytes:
            dst.copy_(src)
        return nbytes
    except Exception as e:
        log.error("get_tensor_into_cuda: %s", e)
        return _INVALID
