"""Mooncake (mooncake-rs): a pure-Python package over ``libmooncake.so``.

* ``mooncake.engine``: the Transfer Engine API (``TransferEngine``), as in upstream's
  wheel.
* ``mooncake.store``: the Mooncake Store client (``MooncakeDistributedStore``).
* ``mooncake.buffer_pool``: ``BufferPool`` (also exported here, with its older name
  ``RegisteredBufferPool``), leases of registered memory for zero-copy store calls.
* ``mooncake.p2p_store``: the P2P Store (``P2PStore``, ``P2PStoreError``, also
  importable from here), mooncake-rs's own: no master, objects spread node to node.
* ``mooncake.mooncake_config``, ``mooncake.http_metadata_server``,
  ``mooncake.async_store``: upstream's helper modules.

Submodules load the native library on first use (see ``mooncake._lib`` for where it
is looked for). ``python/README.md`` lists every name of upstream's package and its
status here.
"""

from pkgutil import extend_path

from .buffer_pool import BufferPool, RegisteredBufferPool

__path__ = extend_path(__path__, __name__)
__version__ = "0.1.0"
__all__ = ["BufferPool", "RegisteredBufferPool"]

# Not in __all__ (upstream's package exports the buffer pools only); loaded on first use.
_P2P_NAMES = ("P2PStore", "P2PStoreError")


def __getattr__(name: str):
    if name in _P2P_NAMES:
        from . import p2p_store

        return getattr(p2p_store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
