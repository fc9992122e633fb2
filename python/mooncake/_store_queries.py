"""The queries and removals of ``MooncakeDistributedStore`` (existence, sizes,
replica descriptors, removal, replica clearing), as a base class of it. Return
conventions are the store's: upstream's integer codes, ``[]``/``{}`` on errors."""

from __future__ import annotations

import json
from typing import Dict, List, Optional, Sequence

from . import _store_ffi as ffi
from ._store_types import ReplicaDescriptor


class StoreQueries:
    """Queries and removals over the native handle ``self._h``."""

    _h: Optional[int]

    def is_exist(self, key: str) -> int:
        """1 exists, 0 not, negative on error. Grants a short read lease."""
        return ffi.L().mooncake_store_is_exist(self._h, ffi.key_bytes(key))

    def batch_is_exist(self, keys: Sequence[str]) -> List[int]:
        """``is_exist`` for several keys in one master call."""
        n = len(keys)
        if n == 0:
            return []
        out = ffi.int_results(n)
        rc = ffi.L().mooncake_store_batch_is_exist(self._h, ffi.keys_array(keys), n, out)
        return list(out) if rc == 0 else [rc] * n

    def get_size(self, key: str) -> int:
        """The object's size, or a negative code (-704 missing)."""
        return ffi.L().mooncake_store_get_size(self._h, ffi.key_bytes(key))

    def remove(self, key: str, force: bool = False) -> int:
        """0, -704 missing, -706 under a read lease unless ``force``."""
        return ffi.L().mooncake_store_remove(self._h, ffi.key_bytes(key), int(bool(force)))

    def remove_by_regex(self, regex_pattern: str, force: bool = False) -> int:
        """Removes the keys the pattern matches (search semantics); returns how many,
        -600 for an invalid pattern."""
        return ffi.L().mooncake_store_remove_by_regex(self._h, ffi.text_arg(regex_pattern, "regex_pattern"), int(bool(force)))

    def remove_all(self, force: bool = False) -> int:
        """Removes every removable object; returns how many."""
        return ffi.L().mooncake_store_remove_all(self._h, int(bool(force)))

    def batch_remove(self, keys: Sequence[str], force: bool = False) -> List[int]:
        """``remove`` for several keys in one master call."""
        n = len(keys)
        if n == 0:
            return []
        out = ffi.int_results(n)
        rc = ffi.L().mooncake_store_batch_remove(self._h, ffi.keys_array(keys), n, int(bool(force)), out)
        return list(out) if rc == 0 else [rc] * n

    def get_replica_desc(self, key: str) -> List[ReplicaDescriptor]:
        """The object's replicas (``[]`` when missing or on error)."""
        k = ffi.key_bytes(key)
        _, text = ffi.read_json(lambda buf, n: ffi.L().mooncake_store_get_replica_desc(self._h, k, buf, n))
        return [ReplicaDescriptor(d) for d in json.loads(text)] if text else []

    def batch_get_replica_desc(self, keys: Sequence[str]) -> Dict[str, List[ReplicaDescriptor]]:
        """key -> replicas, for the keys that exist."""
        if not keys:
            return {}
        karr = ffi.keys_array(keys)
        n = len(keys)
        _, text = ffi.read_json(
            lambda buf, size: ffi.L().mooncake_store_batch_get_replica_desc(self._h, karr, n, buf, size),
            initial=max(4096, 512 * n),
        )
        if not text:
            return {}
        out: Dict[str, List[ReplicaDescriptor]] = {}
        for key, entry in zip(keys, json.loads(text)):
            if isinstance(entry, list):
                out[key] = [ReplicaDescriptor(d) for d in entry]
        return out

    def batch_replica_clear(self, keys: Sequence[str], segment_name: str = "") -> List[str]:
        """Drops this client's objects among ``keys`` whose read leases have expired
        (their replicas on segment ``segment_name``, or all replicas when it is
        empty) and returns the keys cleared; ``[]`` on any error or before setup."""
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys must be a list of str, not str")
        karr, n = ffi.keys_array(keys), len(keys)
        cleared = ffi.int_results(n)
        segment = ffi.text_arg(segment_name, "segment_name")
        if ffi.L().mooncake_store_batch_replica_clear(self._h, karr, n, segment, cleared) != 0:
            return []
        return [k for k, flag in zip(keys, cleared) if flag]

    def get_offload_rpc_read_count(self) -> int:
        """How many times this client's reads asked a disk owner to stage objects only
        its SSD holds (one call per owner per batch of reads, as upstream counts its
        offload RPCs); 0 before setup and for a dummy client."""
        return max(0, int(ffi.L().mooncake_store_get_offload_rpc_read_count(self._h)))
