"""Helpers of upstream's fabric-memory allocators (``mooncake.allocator``): finding a
native allocator library shipped inside the ``mooncake`` package, and asking one
which memory backend it would use. Standard library only."""

from __future__ import annotations

import ctypes
import logging
import os
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

ProbeValue = TypeVar("ProbeValue")


def get_mooncake_so_path(so_name: str, import_error_message: str) -> str:
    """The path of ``so_name`` in the installed ``mooncake`` package; ``ImportError``
    with ``import_error_message`` when it is not there."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    candidate = os.path.join(package_dir, so_name)
    if os.path.isfile(candidate):
        return candidate
    raise ImportError(import_error_message)


def probe_allocator_backend(so_path: str, probe_symbol: str, restype: Any, unsupported_value: ProbeValue) -> ProbeValue:
    """Calls ``probe_symbol(0)`` of the library at ``so_path`` (returning ``restype``);
    ``unsupported_value`` when the library cannot be loaded or lacks the symbol (logged
    as a warning)."""
    name = os.path.basename(so_path)
    try:
        lib = ctypes.CDLL(so_path)
    except OSError as exc:
        logger.warning("Failed to probe allocator backend from %s: %s", name, exc)
        return unsupported_value
    probe = getattr(lib, probe_symbol, None)
    if probe is None:
        logger.warning("Symbol '%s' not found in %s. Assuming allocator probing is unsupported.", probe_symbol, name)
        return unsupported_value
    probe.argtypes = [ctypes.c_int]
    probe.restype = restype
    try:
        return probe(0)
    except Exception as exc:  # a foreign library's failure is reported, not raised
        logger.warning("Failed to probe allocator backend from %s: %s", name, exc)
        return unsupported_value
