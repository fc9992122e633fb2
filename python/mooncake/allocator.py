"""Upstream's ``mooncake.allocator``: PyTorch pluggable CUDA allocators whose memory
the Transfer Engine can reach over NVLink fabric (``NVLinkAllocator``) or Barex
(``BarexAllocator``), one per device, as SGLang's custom memory pool uses them.

Both need CUDA and a native allocator library, which mooncake-rs does not build:
``NVLinkAllocator`` looks for ``nvlink_allocator.so`` in this package (upstream's CUDA
wheels ship it; copied here it is used as upstream uses it), ``BarexAllocator`` for
the vendor's ``libaccl_barex.so``. Without them ``get_allocator`` raises
``ImportError`` naming what is missing and ``detect_mem_backend`` answers
``UNSUPPORTED``. torch is imported only by ``get_allocator``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from enum import IntEnum
from typing import Any, Dict, List

from .fabric_allocator_utils import get_mooncake_so_path, probe_allocator_backend

logger = logging.getLogger(__name__)

_NVLINK_SO = "nvlink_allocator.so"
_NVLINK_MISSING = (
    "NVLinkAllocator needs CUDA and Mooncake's nvlink_allocator.so (shipped by upstream's CUDA wheels, "
    "mooncake-transfer-engine >= 0.3.3.post2); mooncake-rs is built without CUDA and does not include it"
)
_BAREX_SO = "libaccl_barex.so"
_BAREX_PATHS: List[str] = ["/usr/lib/libaccl_barex.so", "/usr/lib64/libaccl_barex.so"]
_BAREX_MISSING = (
    "BarexAllocator requires libaccl_barex.so to be installed. "
    "Please install the barex library or ensure it's in the system path."
)


class MemoryBackend(IntEnum):
    """What the NVLink allocator allocates with."""

    USE_CUDAMALLOC = 0
    USE_CUMEMCREATE = 1
    UNKNOWN = -1
    UNSUPPORTED = -2


def _pluggable(so_path: str, malloc: str, free: str) -> Any:
    from torch.cuda.memory import CUDAPluggableAllocator

    return CUDAPluggableAllocator(so_path, malloc, free)


class NVLinkAllocator:
    """One ``CUDAPluggableAllocator`` per device over ``nvlink_allocator.so``."""

    _instances: Dict[Any, Any] = {}
    _lock = threading.Lock()
    _supports_fabric: MemoryBackend = MemoryBackend.UNKNOWN
    _probe_done: bool = False

    @classmethod
    def _get_so_path(cls) -> str:
        return get_mooncake_so_path(_NVLINK_SO, _NVLINK_MISSING)

    @classmethod
    def _probe_fabric_memory_support(cls, so_path: str) -> MemoryBackend:
        value = probe_allocator_backend(so_path, "mc_allocator_probe", ctypes.c_int, -2)
        try:
            backend = MemoryBackend(value)
        except ValueError:
            logger.info("Unknown Backend error")
            return MemoryBackend.UNKNOWN
        messages = {
            MemoryBackend.USE_CUDAMALLOC: "Use CudaMalloc fallback",
            MemoryBackend.USE_CUMEMCREATE: "Supports Fabric Memory",
            MemoryBackend.UNSUPPORTED: "Allocator backend probing is unsupported",
        }
        logger.info(messages.get(backend, "Unknown Backend error"))
        return backend

    @classmethod
    def detect_mem_backend(cls) -> MemoryBackend:
        """Which backend the allocator library uses (probed once); ``UNSUPPORTED``
        when there is no library (the reason logged)."""
        with cls._lock:
            if not cls._probe_done:
                try:
                    cls._supports_fabric = cls._probe_fabric_memory_support(cls._get_so_path())
                except Exception as exc:
                    logger.error("Critical error during fabric memory probe setup: %s", exc)
                    cls._supports_fabric = MemoryBackend.UNSUPPORTED
                cls._probe_done = True
            return cls._supports_fabric

    @classmethod
    def get_allocator(cls, device: Any) -> Any:
        """The allocator of ``device`` (a ``torch.device``); ``ImportError`` without
        the library."""
        with cls._lock:
            if device not in cls._instances:
                cls._instances[device] = _pluggable(cls._get_so_path(), "mc_allocator_malloc", "mc_allocator_free")
            return cls._instances[device]


class BarexAllocator:
    """One ``CUDAPluggableAllocator`` per device over the vendor's
    ``libaccl_barex.so``."""

    _instances: Dict[Any, Any] = {}
    _lock = threading.Lock()

    @classmethod
    def _get_so_path(cls) -> str:
        for path in _BAREX_PATHS:
            if os.path.exists(path):
                return path
        return get_mooncake_so_path(_BAREX_SO, _BAREX_MISSING)

    @classmethod
    def get_allocator(cls, device: Any) -> Any:
        """The allocator of ``device``; ``ImportError`` without the library."""
        with cls._lock:
            if device not in cls._instances:
                cls._instances[device] = _pluggable(
                    cls._get_so_path(), "u2mm_alloc_wrapper_with_stream", "u2mm_free_wrapper_with_stream"
                )
            return cls._instances[device]
