"""Finds and loads ``libmooncake.so`` (the Rust library's C ABI) with ctypes.

Search order for the library:

1. ``$MOONCAKE_LIBRARY`` (a path to the ``.so``; when set, nothing else is tried);
2. the copy bundled in the package, ``mooncake/lib/libmooncake.so`` (what
   ``pip install ./python`` installs);
3. when running from a source checkout, ``<repo>/target/release`` and
   ``<repo>/target/debug``, the more recently built first.

:func:`lib` loads it once per process and declares the prototypes of the Transfer
Engine functions (upstream's ``transfer_engine_c.h``) and of the ``mooncake_*`` /
``mooncake_te_*`` extensions (``mooncake_ext.h``). Other modules declare what else
they use with :func:`declare`. ctypes releases the GIL during every foreign call, so
blocking calls do not stall other Python threads.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_int,
    c_int32,
    c_size_t,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

LIBRARY_NAME = "libmooncake.so"

_PACKAGE_DIR = Path(__file__).resolve().parent
#: Where ``pip install`` bundles the library and binaries.
BUNDLE_DIR = _PACKAGE_DIR / "lib"


def repo_root() -> Optional[Path]:
    """The source checkout this package lives in (``python/mooncake`` two levels
    below ``Cargo.toml``), or None for an installed package."""
    root = _PACKAGE_DIR.parent.parent
    if (root / "Cargo.toml").is_file() and (root / "src" / "ffi").is_dir():
        return root
    return None


def _candidates(name: str, env: Optional[str]) -> Iterator[Path]:
    if env:
        value = os.environ.get(env)
        if value:
            yield Path(value)
            return
    yield BUNDLE_DIR / name
    root = repo_root()
    if root is not None:
        built = [root / "target" / "release" / name, root / "target" / "debug" / name]
        # Both may exist; the one built last is the one that matches the sources.
        built.sort(key=_mtime, reverse=True)
        yield from built


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("-inf")


def library_candidates() -> List[Path]:
    """Every path :func:`lib` would try, in order."""
    return list(_candidates(LIBRARY_NAME, "MOONCAKE_LIBRARY"))


def find_library() -> Optional[Path]:
    """The first existing library candidate, or None."""
    for path in _candidates(LIBRARY_NAME, "MOONCAKE_LIBRARY"):
        if path.is_file():
            return path
    return None


def binary_path(name: str) -> Optional[Path]:
    """A bundled or built executable (``mooncake_master``,
    ``mooncake_http_metadata_server``, ``transfer_engine_bench``, ``mooncake_client``):
    the package's ``lib/`` directory, then the checkout's ``target/release`` and
    ``target/debug`` (newer first). Returns None if none exists."""
    for path in _candidates(name, None):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


# --- C types of transfer_engine_c.h (LP64 layout) --------------------------------


class TransferRequest(Structure):
    """``transfer_request_t``."""

    _fields_ = [
        ("opcode", c_int),
        ("source", c_void_p),
        ("target_id", c_int32),
        ("target_offset", c_uint64),
        ("length", c_uint64),
    ]


class TransferStatus(Structure):
    """``transfer_status_t``."""

    _fields_ = [("status", c_int), ("transferred_bytes", c_uint64)]


class BufferEntry(Structure):
    """``buffer_entry_t``."""

    _fields_ = [("addr", c_void_p), ("length", c_size_t)]


class NotifyMsg(Structure):
    """``notify_msg_t`` (passed by value)."""

    _fields_ = [("name", c_char_p), ("msg", c_char_p)]


OPCODE_READ = 0
OPCODE_WRITE = 1
LOCAL_SEGMENT = 0
INVALID_BATCH = (1 << 64) - 1
STATUS_WAITING = 0
STATUS_PENDING = 1
STATUS_INVALID = 2
STATUS_CANCELED = 3
STATUS_COMPLETED = 4
STATUS_TIMEOUT = 5
STATUS_FAILED = 6

_engine = c_void_p

#: name -> (restype, argtypes) of the Transfer Engine functions and TE extensions.
TE_PROTOTYPES: Dict[str, Tuple[object, Sequence[object]]] = {
    # transfer_engine_c.h
    "createTransferEngine": (c_void_p, [c_char_p, c_char_p, c_char_p, c_uint64, c_int]),
    "destroyTransferEngine": (None, [_engine]),
    "discoverTopology": (c_int, [_engine]),
    "getLocalIpAndPort": (c_int, [_engine, c_char_p, c_size_t]),
    "installTransport": (c_void_p, [_engine, c_char_p, c_void_p]),
    "uninstallTransport": (c_int, [_engine, c_char_p]),
    "openSegment": (c_int32, [_engine, c_char_p]),
    "openSegmentNoCache": (c_int32, [_engine, c_char_p]),
    "closeSegment": (c_int, [_engine, c_int32]),
    "warmupEfaSegment": (c_int, [_engine, c_char_p]),
    "removeLocalSegment": (c_int, [_engine, c_char_p]),
    "registerLocalMemory": (c_int, [_engine, c_void_p, c_size_t, c_char_p, c_int]),
    "unregisterLocalMemory": (c_int, [_engine, c_void_p]),
    "registerLocalMemoryBatch": (c_int, [_engine, POINTER(BufferEntry), c_size_t, c_char_p]),
    "unregisterLocalMemoryBatch": (c_int, [_engine, POINTER(c_void_p), c_size_t]),
    "allocateBatchID": (c_uint64, [_engine, c_size_t]),
    "submitTransfer": (c_int, [_engine, c_uint64, POINTER(TransferRequest), c_size_t]),
    "submitTransferWithNotify": (
        c_int,
        [_engine, c_uint64, POINTER(TransferRequest), c_size_t, NotifyMsg],
    ),
    "getNotifsFromEngine": (POINTER(NotifyMsg), [_engine, POINTER(c_int)]),
    "freeNotifsMsgBuf": (c_int, [POINTER(NotifyMsg), c_int]),
    "genNotifyInEngine": (c_int, [_engine, c_uint64, NotifyMsg]),
    "getTransferStatus": (c_int, [_engine, c_uint64, c_size_t, POINTER(TransferStatus)]),
    "freeBatchID": (c_int, [_engine, c_uint64]),
    "syncSegmentCache": (c_int, [_engine]),
    "enableGracefulShutdown": (None, [_engine]),
    "showLinks": (c_int, [_engine, c_char_p, c_size_t, c_int]),
    # mooncake_ext.h: common
    "mooncake_last_error_message": (c_char_p, []),
    "mooncake_last_error_errno": (c_int, []),
    "mooncake_last_error_function": (c_char_p, []),
    "mooncake_clear_last_error": (None, []),
    "mooncake_version": (c_char_p, []),
    # mooncake_ext.h: Transfer Engine
    "mooncake_te_segment_buffer": (
        c_int,
        [_engine, c_int32, c_size_t, POINTER(c_uint64), POINTER(c_uint64)],
    ),
    "mooncake_te_send_probe": (c_int, [_engine, c_char_p]),
    "mooncake_te_create": (c_void_p, [c_char_p, c_char_p, c_char_p, c_int]),
    "mooncake_te_wait_batch": (c_int, [_engine, c_uint64, c_uint64]),
    "mooncake_te_batch_status": (c_int, [_engine, c_uint64, POINTER(TransferStatus)]),
}

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[Path] = None


def declare(cdll: ctypes.CDLL, prototypes: Dict[str, Tuple[object, Sequence[object]]]) -> None:
    """Sets restype/argtypes of every function in ``prototypes`` that the library
    exports (missing ones are skipped; calling them raises AttributeError)."""
    for name, (restype, argtypes) in prototypes.items():
        try:
            fn = getattr(cdll, name)
        except AttributeError:
            continue
        fn.restype = restype
        fn.argtypes = list(argtypes)


def _load() -> ctypes.CDLL:
    global _lib, _path
    tried = []
    for path in _candidates(LIBRARY_NAME, "MOONCAKE_LIBRARY"):
        tried.append(str(path))
        if not path.is_file():
            continue
        cdll = ctypes.CDLL(str(path))
        declare(cdll, TE_PROTOTYPES)
        _lib, _path = cdll, path
        return cdll
    raise OSError(
        f"{LIBRARY_NAME} not found (tried: {', '.join(tried)}). Install the package "
        "with `pip install ./python` from the repository, build it with "
        "`cargo build --lib`, or set MOONCAKE_LIBRARY to its path."
    )


def lib() -> ctypes.CDLL:
    """The loaded library (loaded and declared on first use). Raises OSError when it
    cannot be found or loaded."""
    cdll = _lib
    if cdll is not None:
        return cdll
    with _lock:
        if _lib is not None:
            return _lib
        return _load()


def library_path() -> Optional[Path]:
    """Path of the loaded library (None before :func:`lib` succeeded)."""
    return _path


def last_error() -> str:
    """The calling thread's last error message from the library (``"function:
    message"``), or ``""`` when its last call succeeded."""
    try:
        raw = lib().mooncake_last_error_message()
    except (OSError, AttributeError):
        return ""
    return raw.decode("utf-8", "replace") if raw else ""


def version() -> str:
    """The library version string."""
    raw = lib().mooncake_version()
    return raw.decode() if raw else ""
