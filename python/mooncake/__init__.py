"""Mooncake (mooncake-rs): a pure-Python package over ``libmooncake.so``.

* ``mooncake.engine``: the Transfer Engine API (``TransferEngine``), as in upstream's
  wheel.
* ``mooncake.store``: the Mooncake Store client (``MooncakeDistributedStore``).
* ``mooncake.buffer_pool``: ``BufferPool`` (also exported here, with its older name
  ``RegisteredBufferPool``), leases of registered memory for zero-copy store calls.
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
