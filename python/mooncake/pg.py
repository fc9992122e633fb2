"""Mooncake PG on CPU: collectives with dynamic membership over the Transfer Engine.

Two ways in:

* **numpy (no torch needed):** :class:`ProcessGroup` — one rank of a group that meets
  in a store (an HTTP metadata server, etcd or Redis: ``store="http://host:port/metadata"``,
  or any object with torch-store-like ``set``/``get``/``check`` methods) and runs the
  collectives on numpy arrays or any writable buffer.
* **torch.distributed:** importing this module registers the ``"mooncake-cpu"``
  backend when torch is installed (torch is imported only by this module, in
  ``mooncake._pg_torch``)::

      from mooncake import pg
      dist.init_process_group(backend="mooncake-cpu", rank=rank, world_size=n)

  with upstream's membership helpers: :func:`get_active_ranks`,
  :func:`activate_ranks` / :func:`recover_ranks`, :func:`deactivate_ranks`,
  :func:`join_group`, :func:`get_num_synced_ranks`, :func:`get_peer_state`,
  :class:`MooncakeBackendOptions`, :func:`set_host_ip`, :func:`set_device_filter`,
  :func:`set_transfer_engine`.

Membership follows upstream's model: a group reserves ``max_group_size`` rank slots;
``active_ranks`` says which take part; ranks are never renumbered, so ``size`` is one
past the highest active rank. An operation that fails because of peers raises
:class:`PeerFailedError` naming them (``.suspects``); with
``auto_deactivate_on_failure`` (the default) they are already out of the group when
it is raised and the next operation runs with the survivors.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import importlib.util
import sys
import weakref
from ctypes import POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint64, c_uint8, c_void_p
from typing import Any, List, Optional, Sequence

from . import _lib

__all__ = [
    "ProcessGroup",
    "PgError",
    "PeerFailedError",
    "MembershipChangedError",
    "NotActiveError",
    "MismatchError",
    "DTYPES",
    "OPS",
    "MooncakeBackendOptions",
    "set_host_ip",
    "set_device_filter",
    "set_transfer_engine",
    "get_active_ranks",
    "get_num_synced_ranks",
    "get_peer_state",
    "activate_ranks",
    "recover_ranks",
    "deactivate_ranks",
    "join_group",
]

#: Element type name -> C code (``MOONCAKE_PG_DTYPE_*``).
DTYPES = {
    "float32": 0,
    "float64": 1,
    "bfloat16": 2,
    "float16": 3,
    "int32": 4,
    "int64": 5,
    "uint8": 6,
}
_SIZES = {0: 4, 1: 8, 2: 2, 3: 2, 4: 4, 5: 8, 6: 1}
#: Reduction name -> C code (``MOONCAKE_PG_OP_*``).
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}
#: memoryview format characters -> dtype name.
_FORMATS = {"f": "float32", "d": "float64", "e": "float16", "i": "int32", "l": "int64", "q": "int64", "B": "uint8"}

_KV_GET = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, POINTER(c_uint8), c_size_t, POINTER(c_size_t))
_KV_SET = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, POINTER(c_uint8), c_size_t)
_KV_REMOVE = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p)

_PROTOTYPES = {
    "mooncake_pg_create": (
        c_void_p,
        [c_void_p, c_char_p, c_char_p, c_void_p, _KV_GET, _KV_SET, _KV_REMOVE, c_char_p,
         c_int, c_int, c_int, c_int, c_int, c_int64],
    ),
    "mooncake_pg_destroy": (c_int, [c_void_p]),
    "mooncake_pg_all_reduce": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int]),
    "mooncake_pg_reduce": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_int]),
    "mooncake_pg_broadcast": (c_int, [c_void_p, c_void_p, c_size_t, c_int]),
    "mooncake_pg_all_gather": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t]),
    "mooncake_pg_reduce_scatter": (
        c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_int, c_int]),
    "mooncake_pg_all_to_all": (
        c_int,
        [c_void_p, c_void_p, c_size_t, POINTER(c_uint64), c_void_p, c_size_t, POINTER(c_uint64), c_size_t],
    ),
    "mooncake_pg_gather": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_int]),
    "mooncake_pg_scatter": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_int]),
    "mooncake_pg_barrier": (c_int, [c_void_p]),
    "mooncake_pg_send": (c_int, [c_void_p, c_void_p, c_size_t, c_int]),
    "mooncake_pg_recv": (c_int, [c_void_p, c_void_p, c_size_t, c_int]),
    "mooncake_pg_rank": (c_int, [c_void_p]),
    "mooncake_pg_size": (c_int, [c_void_p]),
    "mooncake_pg_epoch": (c_int64, [c_void_p]),
    "mooncake_pg_active_ranks": (c_int, [c_void_p, POINTER(c_uint8), c_size_t]),
    "mooncake_pg_deactivate_ranks": (c_int, [c_void_p, POINTER(c_int), c_size_t]),
    "mooncake_pg_activate_ranks": (c_int, [c_void_p, POINTER(c_int), c_size_t]),
    "mooncake_pg_join_group": (c_int, [c_void_p]),
    "mooncake_pg_set_timeout": (c_int, [c_void_p, c_int64]),
    "mooncake_pg_last_suspects": (c_int, [POINTER(c_int), c_size_t]),
}


def _cdll() -> ctypes.CDLL:
    lib = _lib.lib()
    if not getattr(lib, "_mooncake_pg_declared", False):
        _lib.declare(lib, _PROTOTYPES)
        lib._mooncake_pg_declared = True
    return lib


class PgError(RuntimeError):
    """A PG call failed; ``code`` is the ``MOONCAKE_PG_ERR_*`` value and
    ``suspects`` the ranks the failure points at."""

    def __init__(self, message: str, code: int = -1, suspects: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.suspects = list(suspects)


class MismatchError(PgError):
    """The ranks disagree about the operation (sizes, kinds)."""


class PeerFailedError(PgError):
    """A peer failed, timed out or went away; ``suspects`` names it."""


class MembershipChangedError(PgError):
    """The membership changed under the operation; retry it."""


class NotActiveError(PgError):
    """This rank is not an active member of the group."""


_ERRORS = {-2: MismatchError, -3: PeerFailedError, -4: MembershipChangedError, -5: NotActiveError}


def _check(rc: int, what: str) -> None:
    """Raises the error of a failed PG call: ``ValueError`` for a bad argument (or a
    closed group), else the :class:`PgError` subclass of its code."""
    if rc >= 0:
        return
    lib = _cdll()
    message = _lib.last_error() or f"{what} failed ({rc})"
    if rc == -1:
        raise ValueError(message)
    out = (c_int * 64)()
    n = lib.mooncake_pg_last_suspects(out, 64)
    suspects = list(out[: max(0, min(n, 64))])
    raise _ERRORS.get(rc, PgError)(message, rc, suspects)


def _buffer(obj: Any, writable: bool):
    """(address, byte length, dtype name or None, keepalive) of a buffer object."""
    if hasattr(obj, "__array_interface__") and not isinstance(obj, (bytes, bytearray, memoryview)):
        ai = obj.__array_interface__
        if ai.get("strides") is not None and not _contiguous(obj):
            raise ValueError("the array must be C-contiguous")
        if writable and ai["data"][1]:
            raise ValueError("the array is read-only")
        addr = ai["data"][0]
        nbytes = int(obj.nbytes)
        kind = getattr(getattr(obj, "dtype", None), "name", None)
        return addr, nbytes, kind, obj
    view = memoryview(obj)
    if not view.c_contiguous:
        raise ValueError("the buffer must be C-contiguous")
    if writable and view.readonly:
        raise ValueError("the buffer is read-only")
    nbytes = view.nbytes
    if nbytes == 0:
        return None, 0, _FORMATS.get(view.format.lstrip("@=<")), view
    if view.readonly:
        tmp = (ctypes.c_char * nbytes).from_buffer_copy(view)
        return ctypes.addressof(tmp), nbytes, _FORMATS.get(view.format.lstrip("@=<")), tmp
    holder = (ctypes.c_char * nbytes).from_buffer(view.cast("B"))
    return ctypes.addressof(holder), nbytes, _FORMATS.get(view.format.lstrip("@=<")), (holder, view)


def _contiguous(arr: Any) -> bool:
    flags = getattr(arr, "flags", None)
    return bool(flags["C_CONTIGUOUS"]) if flags is not None else True


def _dtype_code(kind: Optional[str], dtype: Optional[str]) -> int:
    name = dtype or kind
    if name is None:
        raise ValueError("the buffer's element type is unknown: pass dtype=")
    name = str(name).replace("torch.", "")
    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} is not one of {sorted(DTYPES)}")
    return DTYPES[name]


def _op_code(op: Any) -> int:
    name = str(getattr(op, "name", op)).lower().replace("reduceop.", "")
    if name not in OPS:
        raise ValueError(f"reduce op {op!r} is not one of {sorted(OPS)}")
    return OPS[name]


class _StoreCallbacks:
    """ctypes callbacks over a torch-store-like object (``set``, ``get``, ``check``,
    optionally ``delete_key``). Kept alive as long as the group."""

    def __init__(self, store: Any) -> None:
        self.store = store

        def get(_ctx, key, buf, cap, length):
            try:
                k = key.decode()
                if hasattr(store, "check"):
                    if not store.check([k]):
                        return 0
                    value = bytes(store.get(k))
                else:
                    value = store.get(k)
                    if value is None:
                        return 0
                    value = bytes(value)
                length[0] = len(value)
                if len(value) <= cap:
                    ctypes.memmove(buf, value, len(value))
                return 1
            except Exception:  # noqa: BLE001 - reported to the library as a failure
                return -1

        def set_(_ctx, key, value, n):
            try:
                store.set(key.decode(), ctypes.string_at(value, n))
                return 0
            except Exception:  # noqa: BLE001
                return -1

        def remove(_ctx, key):
            try:
                if hasattr(store, "delete_key"):
                    store.delete_key(key.decode())
                return 0
            except Exception:  # noqa: BLE001
                return -1

        self.get = _KV_GET(get)
        self.set = _KV_SET(set_)
        self.remove = _KV_REMOVE(remove)


_host_ip: Optional[str] = None
_device_filter: Optional[List[str]] = None
_engine: Any = None


def set_host_ip(host_ip: str) -> None:
    """The address groups created afterwards listen on (default 127.0.0.1)."""
    global _host_ip
    _host_ip = str(host_ip)


def set_device_filter(filters: Sequence[str]) -> None:
    """Restricts NIC/HCA selection (kept for upstream's API; the CPU backend's own
    engine uses TCP and the same-host path)."""
    global _device_filter
    _device_filter = [str(f) for f in filters]


def set_transfer_engine(engine: Any) -> None:
    """Reuse ``engine`` (a ``mooncake.engine.TransferEngine``, initialized) for groups
    created afterwards; it must outlive them."""
    global _engine
    _engine = engine


def _engine_handle(engine: Any) -> Optional[int]:
    if engine is None:
        return None
    inner = engine.get_engine() if hasattr(engine, "get_engine") else engine
    handle = getattr(inner, "handle", inner)
    return int(handle)


class ProcessGroup:
    """One rank of a Mooncake PG group.

    ``store``: ``"http://host:port/metadata"`` (``mooncake_http_metadata_server``),
    ``"etcd://host:port"``, ``"redis://host:port"``, or an object with torch-store
    ``set``/``get``/``check``. ``rank`` and ``world_size`` are the founding layout;
    ``max_group_size`` reserves more slots; ``is_extension`` makes this process a rank
    that enters an existing group with :meth:`join_group`. ``timeout`` (seconds)
    bounds every wait (default ``MC_PG_TIMEOUT_MS`` or 30 s).
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        store: Any,
        group_name: str = "default",
        *,
        max_group_size: Optional[int] = None,
        is_extension: bool = False,
        auto_deactivate_on_failure: bool = True,
        timeout: Optional[float] = None,
        engine: Any = None,
        host_ip: Optional[str] = None,
    ) -> None:
        lib = _cdll()
        self._callbacks: Optional[_StoreCallbacks] = None
        conn = None
        if isinstance(store, str):
            conn = store.encode()
            get = _KV_GET()
            set_ = _KV_SET()
            remove = _KV_REMOVE()
        else:
            self._callbacks = _StoreCallbacks(store)
            get, set_, remove = self._callbacks.get, self._callbacks.set, self._callbacks.remove
        engine = engine if engine is not None else _engine
        self._engine = engine
        host = host_ip or _host_ip
        handle = lib.mooncake_pg_create(
            _engine_handle(engine),
            host.encode() if host else None,
            conn,
            None,
            get,
            set_,
            remove,
            str(group_name).encode(),
            int(rank),
            int(world_size),
            int(max_group_size or 0),
            1 if is_extension else 0,
            1 if auto_deactivate_on_failure else 0,
            int((timeout or 0) * 1000),
        )
        if not handle:
            message = _lib.last_error() or "mooncake_pg_create failed"
            if lib.mooncake_last_error_errno() == errno.EINVAL:
                raise ValueError(message)
            out = (c_int * 64)()
            n = lib.mooncake_pg_last_suspects(out, 64)
            raise PgError(message, -3, list(out[: max(0, min(n, 64))]))
        self._handle = handle
        _LIVE.add(self)

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Leaves the group (the handle is freed)."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _cdll().mooncake_pg_destroy(handle)

    def __enter__(self) -> "ProcessGroup":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _h(self) -> int:
        if not self._handle:
            raise ValueError("the process group is closed")
        return self._handle

    # -- membership ------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """This rank's in-group rank."""
        return _cdll().mooncake_pg_rank(self._h())

    @property
    def size(self) -> int:
        """One past the highest active rank."""
        return _cdll().mooncake_pg_size(self._h())

    @property
    def epoch(self) -> int:
        """The membership epoch (0 at founding, one more per change)."""
        return _cdll().mooncake_pg_epoch(self._h())

    def active_ranks(self) -> List[int]:
        """One 0/1 flag per rank slot (``max_group_size`` entries)."""
        lib = _cdll()
        n = lib.mooncake_pg_active_ranks(self._h(), None, 0)
        out = (c_uint8 * max(n, 1))()
        lib.mooncake_pg_active_ranks(self._h(), out, n)
        return list(out[:n])

    def deactivate_ranks(self, ranks: Sequence[int]) -> None:
        """Takes ``ranks`` out of the group (every active rank takes part; ranks
        inside an operation join by themselves)."""
        arr = (c_int * max(len(ranks), 1))(*[int(r) for r in ranks])
        _check(_cdll().mooncake_pg_deactivate_ranks(self._h(), arr, len(ranks)), "deactivate_ranks")

    def activate_ranks(self, ranks: Sequence[int]) -> None:
        """Brings ``ranks`` (waiting in :meth:`join_group`) into the group."""
        arr = (c_int * max(len(ranks), 1))(*[int(r) for r in ranks])
        _check(_cdll().mooncake_pg_activate_ranks(self._h(), arr, len(ranks)), "activate_ranks")

    recover_ranks = activate_ranks

    def join_group(self) -> None:
        """Declares this extension rank ready; returns once it is active."""
        _check(_cdll().mooncake_pg_join_group(self._h()), "join_group")

    def set_timeout(self, seconds: float) -> None:
        """How long operations and membership changes may wait."""
        _check(_cdll().mooncake_pg_set_timeout(self._h(), int(seconds * 1000)), "set_timeout")

    # -- collectives -----------------------------------------------------------------

    def all_reduce(self, buf: Any, op: Any = "sum", dtype: Optional[str] = None) -> Any:
        """Reduces ``buf`` across the active ranks, in place; returns ``buf``."""
        addr, n, kind, keep = _buffer(buf, writable=True)
        code = _dtype_code(kind, dtype)
        _check(_cdll().mooncake_pg_all_reduce(self._h(), addr, n, code, _op_code(op)), "all_reduce")
        del keep
        return buf

    def reduce(self, buf: Any, root: int, op: Any = "sum", dtype: Optional[str] = None) -> Any:
        """Reduces every rank's ``buf`` into ``root``'s (others are unchanged)."""
        addr, n, kind, keep = _buffer(buf, writable=True)
        code = _dtype_code(kind, dtype)
        _check(_cdll().mooncake_pg_reduce(self._h(), addr, n, code, _op_code(op), int(root)), "reduce")
        del keep
        return buf

    def broadcast(self, buf: Any, root: int) -> Any:
        """Copies ``root``'s ``buf`` into every rank's; returns ``buf``."""
        addr, n, _, keep = _buffer(buf, writable=True)
        _check(_cdll().mooncake_pg_broadcast(self._h(), addr, n, int(root)), "broadcast")
        del keep
        return buf

    def all_gather(self, output: Any, input: Any) -> Any:
        """Every active rank's ``input`` into ``output`` at ``rank * len(input)``
        (``output`` holds ``size`` blocks; holes stay untouched)."""
        iaddr, ilen, _, k1 = _buffer(input, writable=False)
        oaddr, olen, _, k2 = _buffer(output, writable=True)
        _check(_cdll().mooncake_pg_all_gather(self._h(), iaddr, ilen, oaddr, olen), "all_gather")
        del k1, k2
        return output

    def reduce_scatter(self, output: Any, input: Any, op: Any = "sum", dtype: Optional[str] = None) -> Any:
        """Reduces ``input`` (one block of ``len(output)`` per rank) and keeps this
        rank's block in ``output``."""
        iaddr, ilen, kind, k1 = _buffer(input, writable=False)
        oaddr, olen, _, k2 = _buffer(output, writable=True)
        code = _dtype_code(kind, dtype)
        _check(
            _cdll().mooncake_pg_reduce_scatter(self._h(), iaddr, ilen, oaddr, olen, code, _op_code(op)),
            "reduce_scatter",
        )
        del k1, k2
        return output

    def all_to_all(
        self,
        output: Any,
        input: Any,
        output_splits: Optional[Sequence[int]] = None,
        input_splits: Optional[Sequence[int]] = None,
    ) -> Any:
        """All-to-all. Splits are element counts per rank (``size`` entries); without
        them the buffers split evenly over ``size`` ranks."""
        iaddr, ilen, kind, k1 = _buffer(input, writable=False)
        oaddr, olen, _, k2 = _buffer(output, writable=True)
        size = self.size
        item = _SIZES[_dtype_code(kind, None)] if kind in DTYPES else 1
        if input_splits is None:
            input_splits = [ilen // item // size] * size
        if output_splits is None:
            output_splits = [olen // item // size] * size
        if len(input_splits) != len(output_splits):
            raise ValueError("input_splits and output_splits differ in length")
        sc = (c_uint64 * len(input_splits))(*[int(s) * item for s in input_splits])
        rc = (c_uint64 * len(output_splits))(*[int(s) * item for s in output_splits])
        _check(
            _cdll().mooncake_pg_all_to_all(self._h(), iaddr, ilen, sc, oaddr, olen, rc, len(input_splits)),
            "all_to_all",
        )
        del k1, k2
        return output

    def gather(self, input: Any, output: Any, root: int) -> Any:
        """Every rank's ``input`` into ``root``'s ``output`` (``None`` elsewhere)."""
        iaddr, ilen, _, k1 = _buffer(input, writable=False)
        if output is None:
            oaddr, olen, k2 = None, 0, None
        else:
            oaddr, olen, _, k2 = _buffer(output, writable=True)
        _check(_cdll().mooncake_pg_gather(self._h(), iaddr, ilen, oaddr, olen, int(root)), "gather")
        del k1, k2
        return output

    def scatter(self, output: Any, input: Any, root: int) -> Any:
        """``root``'s ``input`` (one block per rank; ``None`` elsewhere) scattered
        into every rank's ``output``."""
        oaddr, olen, _, k2 = _buffer(output, writable=True)
        if input is None:
            iaddr, ilen, k1 = None, 0, None
        else:
            iaddr, ilen, _, k1 = _buffer(input, writable=False)
        _check(_cdll().mooncake_pg_scatter(self._h(), iaddr, ilen, oaddr, olen, int(root)), "scatter")
        del k1, k2
        return output

    def barrier(self) -> None:
        """Blocks until every active rank arrived."""
        _check(_cdll().mooncake_pg_barrier(self._h()), "barrier")

    def send(self, buf: Any, dst: int) -> None:
        """Sends ``buf`` to rank ``dst`` (matched in order by its :meth:`recv`)."""
        addr, n, _, keep = _buffer(buf, writable=False)
        _check(_cdll().mooncake_pg_send(self._h(), addr, n, int(dst)), "send")
        del keep

    def recv(self, buf: Any, src: int) -> Any:
        """Receives exactly ``len(buf)`` bytes from rank ``src`` into ``buf``."""
        addr, n, _, keep = _buffer(buf, writable=True)
        _check(_cdll().mooncake_pg_recv(self._h(), addr, n, int(src)), "recv")
        del keep
        return buf


#: Groups not closed yet: closed at exit, before the interpreter tears down the store
#: callbacks their agent threads may still call.
_LIVE: "weakref.WeakSet[ProcessGroup]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for group in list(_LIVE):
        group.close()


# -- upstream's torch-level helpers (the backend object is a torch ProcessGroup or
# -- our backend; both resolve to the ProcessGroup above) -----------------------------


def _group(backend: Any) -> ProcessGroup:
    if isinstance(backend, ProcessGroup):
        return backend
    inner = getattr(backend, "mooncake_group", None)
    if inner is None and hasattr(backend, "_get_backend"):
        try:
            import torch  # noqa: F401 - only reached with a torch group

            inner = getattr(backend._get_backend(torch.device("cpu")), "mooncake_group", None)
        except Exception:  # noqa: BLE001
            inner = None
    if inner is None:
        raise TypeError(f"{backend!r} is not a Mooncake PG group or backend")
    return inner


def get_active_ranks(backend: Any) -> Any:
    """The active-rank flags (an int32 tensor with torch, else a list)."""
    flags = _group(backend).active_ranks()
    if "torch" in sys.modules:
        import torch

        return torch.tensor(flags, dtype=torch.int32)
    return flags


def get_num_synced_ranks(backend: Any) -> int:
    """The number of group slots whose rank is active (ready for communication)."""
    return sum(_group(backend).active_ranks())


def get_peer_state(backend: Any, ranks: Sequence[int]) -> List[bool]:
    """Whether each of ``ranks`` is active, from the local view (no communication)."""
    flags = _group(backend).active_ranks()
    return [bool(flags[r]) if 0 <= r < len(flags) else False for r in ranks]


def activate_ranks(backend: Any, ranks: Sequence[int]) -> None:
    """Activates ``ranks`` (waiting in :func:`join_group`)."""
    _group(backend).activate_ranks(list(ranks))


recover_ranks = activate_ranks


def deactivate_ranks(backend: Any, ranks: Sequence[int]) -> None:
    """Deactivates ``ranks``."""
    _group(backend).deactivate_ranks(list(ranks))


def join_group(backend: Any) -> None:
    """Confirms readiness and blocks until this rank is activated."""
    _group(backend).join_group()


class MooncakeBackendOptions:
    """Upstream's ``MooncakeBackendOptions``: ``(max_group_size)``,
    ``(max_group_size, is_extension)``, ``(max_group_size, is_extension,
    auto_deactivate_on_failure, auto_sync_on_failure)`` or the same with an
    ``active_ranks`` tensor (mirrored with the committed membership) first."""

    def __init__(self, first: Any = None, is_extension: bool = False, *rest: Any) -> None:
        self.active_ranks = None
        self.max_group_size: Optional[int] = None
        self.is_extension = bool(is_extension)
        self.auto_deactivate_on_failure = True
        self.auto_sync_on_failure = True
        if first is None or isinstance(first, int):
            self.max_group_size = first
            if len(rest) >= 1:
                self.auto_deactivate_on_failure = bool(rest[0])
            if len(rest) >= 2:
                self.auto_sync_on_failure = bool(rest[1])
        else:
            self.active_ranks = first
            if rest:
                self.max_group_size = int(rest[0])
            else:
                self.max_group_size = int(getattr(first, "numel", lambda: len(first))())
        if self.auto_sync_on_failure and not self.auto_deactivate_on_failure:
            raise ValueError("auto_sync_on_failure requires auto_deactivate_on_failure")


if importlib.util.find_spec("torch") is not None:
    try:
        from . import _pg_torch  # noqa: F401 - registers "mooncake-cpu"
    except ImportError as _e:  # torch present but unusable: the numpy API still works
        _pg_torch_error: Optional[BaseException] = _e
