"""Replica copy and move tasks (upstream's ``create_copy_task``, ``create_move_task``,
``query_task``): a base class of ``MooncakeDistributedStore`` over the
``mooncake_store_*_task`` functions, and the value types they answer with.

The master queues a task for the client that owns the source replica; that client's
task thread copies the bytes into the target segments, so the caller carries none.
Return values are upstream's: ``((first, second), 0)`` for a queued task or
``((0, 0), code)``; ``query_task`` answers ``(QueryTaskResponse, 0)`` or
``(None, code)`` (-1400 for an unknown task). Unlike upstream's, calling them before
``setup`` answers -600 instead of crashing the process.
"""

from __future__ import annotations

import ctypes
import json
import logging
from typing import Any, Optional, Sequence, Tuple

from . import _store_ffi as ffi
from ._store_types import _Enum

log = logging.getLogger("mooncake.store")

_MODULE = "mooncake.store"
_NOT_SET_UP = -600

TaskId = Tuple[int, int]


class TaskStatus(_Enum):
    """State of a replica copy/move task."""

    PENDING = 0
    PROCESSING = 1
    SUCCESS = 3
    FAILED = 2


class TaskType(_Enum):
    """Kind of a replica task."""

    REPLICA_COPY = 0
    REPLICA_MOVE = 1


class QueryTaskResponse:
    """Response structure for QueryTask operation."""

    def __init__(self) -> None:
        self.id: TaskId = (0, 0)
        self.type: TaskType = TaskType.REPLICA_COPY
        self.status: TaskStatus = TaskStatus.PENDING
        self.created_at_ms_epoch: int = 0
        self.last_updated_at_ms_epoch: int = 0
        self.assigned_client: TaskId = (0, 0)
        self.message: str = ""

    @classmethod
    def _from_json(cls, d: dict) -> "QueryTaskResponse":
        r = cls()
        r.id = (int(d["id"][0]), int(d["id"][1]))
        r.type = TaskType(int(d["type"]))
        r.status = TaskStatus(int(d["status"]))
        r.created_at_ms_epoch = int(d["created_at_ms_epoch"])
        r.last_updated_at_ms_epoch = int(d["last_updated_at_ms_epoch"])
        r.assigned_client = (int(d["assigned_client"][0]), int(d["assigned_client"][1]))
        r.message = str(d["message"])
        return r

    def __repr__(self) -> str:
        return (
            f"QueryTaskResponse(id={self.id[0]}-{self.id[1]}, type={int(self.type)}, "
            f"status={int(self.status)}, created_at={self.created_at_ms_epoch}, "
            f"last_updated_at={self.last_updated_at_ms_epoch}, "
            f"assigned_client={self.assigned_client[0]}-{self.assigned_client[1]}, "
            f'message="{self.message}")'
        )


for _cls in (TaskStatus, TaskType, QueryTaskResponse):
    _cls.__module__ = _MODULE
del _cls


def _task_id(value: Any) -> TaskId:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError("task_id must be a tuple of two ints")
    first, second = value
    for half in (first, second):
        if isinstance(half, bool) or not isinstance(half, int) or not 0 <= half < 1 << 64:
            raise TypeError("task_id must be a tuple of two unsigned 64-bit ints")
    return first, second


class TaskMethods:
    """Upstream's task methods (uses the store's ``_h`` and ``_set_up``)."""

    def _queued(self, what: str, call) -> Tuple[TaskId, int]:
        if not self._set_up:
            return (0, 0), _NOT_SET_UP
        ids = (ctypes.c_uint64 * 2)()
        rc = call(ids)
        if rc != 0:
            log.error("%s failed: %s", what, ffi.last_error())
            return (0, 0), int(rc)
        return (int(ids[0]), int(ids[1])), 0

    def create_copy_task(self, key: str, targets: Sequence[str]) -> Tuple[TaskId, int]:
        """Queues a copy of ``key`` to the segments ``targets`` (their owners'
        hostnames); ``((first, second), 0)``, or ``((0, 0), code)``: -600 for no
        target or an unknown one, -704 for a missing object."""
        k = ffi.text_arg(key, "key")
        if isinstance(targets, (str, bytes)):
            raise TypeError("targets must be a list of str, not str")
        names = [ffi.text_arg(t, "targets") for t in targets]
        arr = (ctypes.c_char_p * len(names))(*names)
        return self._queued(
            f"create_copy_task({key!r})",
            lambda ids: ffi.L().mooncake_store_create_copy_task(self._h, k, arr, len(names), ids),
        )

    def create_move_task(self, key: str, source: str, target: str) -> Tuple[TaskId, int]:
        """Queues a move of ``key``'s replica on segment ``source`` to ``target``;
        ``((first, second), 0)``, or ``((0, 0), code)``: -600 when they are the same,
        ``target`` is unknown or ``source`` holds no replica, -704 for a missing
        object."""
        k, s, t = ffi.text_arg(key, "key"), ffi.text_arg(source, "source"), ffi.text_arg(target, "target")
        return self._queued(
            f"create_move_task({key!r})",
            lambda ids: ffi.L().mooncake_store_create_move_task(self._h, k, s, t, ids),
        )

    def query_task(self, task_id: Tuple[int, int]) -> Tuple[Optional[QueryTaskResponse], int]:
        """The state of a task: ``(QueryTaskResponse, 0)``, or ``(None, code)``
        (-1400 for an unknown or long-finished task)."""
        first, second = _task_id(task_id)
        if not self._set_up:
            return None, _NOT_SET_UP
        rc, text = ffi.read_json(lambda buf, n: ffi.L().mooncake_store_query_task(self._h, first, second, buf, n))
        if text is None:
            log.error("query_task(%d-%d) failed: %s", first, second, ffi.last_error())
            return None, int(rc)
        return QueryTaskResponse._from_json(json.loads(text)), 0
