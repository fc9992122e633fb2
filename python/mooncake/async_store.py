"""``MooncakeDistributedStoreAsync`` (upstream's ``mooncake.async_store``): the store
with an awaitable ``async_<name>`` for every method ``<name>``, which runs the blocking
call in the event loop's default executor.

    store = MooncakeDistributedStoreAsync()
    store.setup(...)
    value = await store.async_get("key")
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable

from .store import MooncakeDistributedStore

__all__ = ["MooncakeDistributedStoreAsync"]


class MooncakeDistributedStoreAsync(MooncakeDistributedStore):
    """A :class:`~mooncake.store.MooncakeDistributedStore` whose ``async_<name>``
    attributes are coroutine functions wrapping method ``<name>``."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self, name[len("async_"):], None) if name.startswith("async_") else None
        if not callable(method):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, functools.partial(method, *args, **kwargs))

        setattr(self, name, call)
        return call
