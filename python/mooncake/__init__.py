"""Mooncake (mooncake-rs): a pure-Python package over ``libmooncake.so``.

* ``mooncake.engine``: the Transfer Engine API (``TransferEngine``), as in upstream's
  wheel.
* ``mooncake.store``: the Mooncake Store client (``MooncakeDistributedStore``).

Submodules load the native library on first use (see ``mooncake._lib`` for where it
is looked for).
"""

__version__ = "0.1.0"
