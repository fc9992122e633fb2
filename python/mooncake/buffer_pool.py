"""Public entry point of the store's buffer pools (upstream's
``mooncake.buffer_pool``): :class:`BufferPool`, and ``RegisteredBufferPool``, the older
name of the same class. Both are also in :mod:`mooncake.store` and :mod:`mooncake`."""

from .store import BufferPool, RegisteredBufferPool

__all__ = ["BufferPool", "RegisteredBufferPool"]
