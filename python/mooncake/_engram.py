"""Upstream's ``EngramStore`` and ``EngramStoreConfig`` (``mooncake.store``): the
embedding tables of one Engram layer kept in the store, one object per head
(``engram:l{layer}:h{head}``, raw float32 ``[N_h, D]`` row-major), written once by
``populate`` and gathered row by row by ``lookup`` with one ranged read. Built on the
store's public calls; numpy is imported only by ``populate`` and ``lookup``.

Errors are upstream's: ``ValueError`` for a bad config, ``RuntimeError`` with its
messages otherwise. ``store`` is a ``MooncakeDistributedStore`` of this package (or
None: the getters work, the rest fails as upstream's).
"""

from __future__ import annotations

from typing import Any, List, Optional

_MODULE = "mooncake.store"
_F32 = 4


class EngramStoreConfig:
    """Shape of an Engram layer's tables: one vocabulary size per head, one
    embedding width."""

    def __init__(self) -> None:
        self.table_vocab_sizes: List[int] = [1024]
        self.embedding_dim: int = 64


class EngramStore:
    """One Engram layer's embedding tables in the store."""

    def __init__(self, layer_id: int, config: EngramStoreConfig, store: Optional[Any] = None) -> None:
        sizes = [int(v) for v in config.table_vocab_sizes]
        dim = int(config.embedding_dim)
        if not sizes:
            raise ValueError("EngramStoreConfig.table_vocab_sizes must not be empty")
        if dim <= 0:
            raise ValueError("EngramStoreConfig.embedding_dim must be positive")
        if any(v <= 0 for v in sizes):
            raise ValueError("EngramStoreConfig.table_vocab_sizes must contain only positive values")
        from .store import MooncakeDistributedStore

        if store is not None and not isinstance(store, MooncakeDistributedStore):
            raise RuntimeError(
                "EngramStore store parameter must be a PyClient or store wrapper that implements "
                "_get_pyclient_capsule()"
            )
        self._sizes = sizes
        self._dim = dim
        self._store = store
        self._keys = [f"engram:l{int(layer_id)}:h{h}" for h in range(len(sizes))]

    def get_table_vocab_sizes(self) -> List[int]:
        """Rows of each head's table."""
        return list(self._sizes)

    def get_store_keys(self) -> List[str]:
        """The store key of each head's table."""
        return list(self._keys)

    def get_num_heads(self) -> int:
        """How many heads (tables)."""
        return len(self._sizes)

    def get_embedding_dim(self) -> int:
        """Floats per row."""
        return self._dim

    def populate(self, embedding_buffers: list) -> None:
        """Writes every head's table (``[N_h, D]``, converted to float32) as a new
        object; ``RuntimeError`` for wrong shapes, or ``"populate failed"`` when a
        table exists already or a write fails (the tables written are removed)."""
        import numpy as np

        if len(embedding_buffers) != len(self._keys):
            raise RuntimeError("embedding_buffers size must match num_heads")
        tables = []
        for h, buf in enumerate(embedding_buffers):
            if not isinstance(buf, np.ndarray):
                raise RuntimeError("embedding_buffers must be NumPy arrays")
            try:
                table = np.ascontiguousarray(buf, dtype=np.float32)
            except (TypeError, ValueError):
                raise RuntimeError("embedding_buffers must be float32 arrays") from None
            if table.ndim != 2:
                raise RuntimeError("each embedding buffer must be 2D [N_h, D]")
            if table.shape != (self._sizes[h], self._dim):
                raise RuntimeError("embedding buffer shape does not match get_table_vocab_sizes()/get_embedding_dim()")
            tables.append(table)
        store = self._store
        if store is None:
            raise RuntimeError("populate failed")
        exists = store.batch_is_exist(self._keys)
        if len(exists) != len(self._keys) or any(e != 0 for e in exists):
            raise RuntimeError("populate failed")
        ptrs = [t.ctypes.data for t in tables]
        sizes = [t.nbytes for t in tables]
        registered = []
        for p, n in zip(ptrs, sizes):
            if store.register_buffer(p, n) != 0:
                for q in registered:
                    store.unregister_buffer(q)
                raise RuntimeError("populate failed")
            registered.append(p)
        results = store.batch_put_from(self._keys, ptrs, sizes)
        unregistered = [store.unregister_buffer(p) for p in registered]
        if len(results) != len(self._keys) or any(r != 0 for r in results) or any(unregistered):
            written = (
                [k for k, r in zip(self._keys, results) if r == 0] if len(results) == len(self._keys) else self._keys
            )
            for k in written:
                store.remove(k, True)
            raise RuntimeError("populate failed")

    def _row_ids(self, row_ids: Any) -> Any:
        import numpy as np

        heads = len(self._keys)
        if isinstance(row_ids, np.ndarray):
            ids = np.ascontiguousarray(row_ids, dtype=np.int64)
            if ids.ndim != 3:
                raise RuntimeError("row_ids array must have shape [B, L, H]")
            if ids.shape[2] != heads:
                raise RuntimeError("row_ids last dimension must match num_heads")
            return ids
        rows = [[list(tok) for tok in seq] for seq in row_ids]
        if not rows or not rows[0]:
            raise RuntimeError("row_ids must not be empty")
        length = len(rows[0])
        if any(len(seq) != length for seq in rows) or any(len(tok) != heads for seq in rows for tok in seq):
            raise RuntimeError("EngramStore lookup failed")
        return np.asarray(rows, dtype=np.int64).reshape(len(rows), length, heads)

    def lookup(self, row_ids: Any) -> Any:
        """``out[b, l, h, :] = table_h[row_ids[b, l, h], :]`` as a new float32 array
        ``[B, L, H, D]`` (``row_ids``: a ``[B, L, H]`` array or nested lists), read
        with one ranged read per head; ``RuntimeError("EngramStore lookup failed")``
        for ids out of range, missing tables or a failed read."""
        import numpy as np

        ids = self._row_ids(row_ids)
        b, length, heads = ids.shape
        store = self._store
        if store is None or b <= 0 or length <= 0:
            raise RuntimeError("EngramStore lookup failed")
        for h, n in enumerate(self._sizes):
            column = ids[:, :, h]
            if column.size and (column.min() < 0 or column.max() >= n):
                raise RuntimeError("EngramStore lookup failed")
        out = np.zeros((b, length, heads, self._dim), dtype=np.float32)
        row = self._dim * _F32
        flat = ids.reshape(-1, heads)
        slots = np.arange(flat.shape[0], dtype=np.int64) * heads
        dst = [((slots + h) * row).tolist() for h in range(heads)]
        src = [(flat[:, h] * row).tolist() for h in range(heads)]
        sizes = [[row] * flat.shape[0] for _ in range(heads)]
        ptr = out.ctypes.data
        if store.register_buffer(ptr, out.nbytes) != 0:
            raise RuntimeError("EngramStore lookup failed")
        try:
            results = store.get_into_ranges([ptr], [self._keys], [dst], [src], [sizes])
        finally:
            store.unregister_buffer(ptr)
        if len(results) != 1 or any(r != row for per_key in results[0] for r in per_key):
            out.fill(0)
            raise RuntimeError("EngramStore lookup failed")
        return out

    def remove_from_store(self, force: bool = False) -> int:
        """Removes every head's table; how many were there. ``RuntimeError`` (with the
        first code) when one could not be removed (-706 under a read lease unless
        ``force``)."""
        if self._store is None:
            raise RuntimeError("remove_from_store failed, rc=-600")
        removed, first = 0, 0
        for k in self._keys:
            rc = self._store.remove(k, bool(force))
            if rc == 0:
                removed += 1
            elif rc != -704 and first == 0:
                first = rc
        if first:
            raise RuntimeError(f"remove_from_store failed, rc={first}")
        return removed


for _cls in (EngramStore, EngramStoreConfig):
    _cls.__module__ = _MODULE
del _cls
