"""Replica copy and move tasks (``create_copy_task``, ``create_move_task``,
``query_task``): the master queues a task for the owner of the source replica, whose
task thread writes the bytes into the target segments. Runs with either
implementation (``MOONCAKE_PY_IMPL``) against this project's master and upstream's,
so each client is tested against the other's master too.
"""

from __future__ import annotations

import time
from typing import Dict, Iterator, List, Tuple

import pytest

from mooncake.store import MooncakeDistributedStore, QueryTaskResponse, TaskStatus, TaskType
from store_env import Master, new_store, upstream_master_binary

NOT_FOUND = -704
INVALID = -600
TASK_NOT_FOUND = -1400


@pytest.fixture(scope="module", params=["ours", "upstream"])
def task_master(request) -> Iterator[Master]:
    binary = upstream_master_binary() if request.param == "upstream" else None
    m = Master(binary=binary) if binary else Master()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def trio(task_master) -> Iterator[List[MooncakeDistributedStore]]:
    stores = [new_store(task_master) for _ in range(3)]
    yield stores
    for s in stores:
        s.close()


def _wait(store: MooncakeDistributedStore, task_id: Tuple[int, int]) -> QueryTaskResponse:
    deadline = time.monotonic() + 60
    while True:
        resp, rc = store.query_task(task_id)
        assert rc == 0 and resp is not None, f"query_task: {rc}"
        if resp.status in (TaskStatus.SUCCESS, TaskStatus.FAILED):
            return resp
        assert time.monotonic() < deadline, f"task still {resp!r}"
        time.sleep(0.05)


def _holders(store: MooncakeDistributedStore, key: str) -> List[str]:
    return [d.get_memory_descriptor().buffer_descriptor.transport_endpoint for d in store.get_replica_desc(key)]


def _by_name(stores: List[MooncakeDistributedStore]) -> Dict[str, MooncakeDistributedStore]:
    return {s.get_hostname(): s for s in stores}


def test_a_copy_lands_on_every_target(trio, k):
    names = _by_name(trio)
    value = bytes(range(256)) * 4096
    assert trio[0].put(k("c"), value) == 0
    (source,) = _holders(trio[0], k("c"))
    targets = [n for n in names if n != source]
    task_id, rc = trio[1].create_copy_task(k("c"), targets)
    assert rc == 0 and isinstance(task_id, tuple) and len(task_id) == 2 and task_id != (0, 0)
    done = _wait(trio[2], task_id)
    assert done.status == TaskStatus.SUCCESS, repr(done)
    assert done.type == TaskType.REPLICA_COPY and done.id == task_id
    assert done.message == "Task completed successfully"
    assert done.created_at_ms_epoch <= done.last_updated_at_ms_epoch
    assert sorted(_holders(trio[2], k("c"))) == sorted(names)
    assert repr(done).startswith(f"QueryTaskResponse(id={task_id[0]}-{task_id[1]}, type=0, status=3, ")


def test_a_move_leaves_only_the_target_and_its_bytes(trio, k):
    names = _by_name(trio)
    value = b"moved-" * 50_000
    assert trio[0].put(k("m"), value) == 0
    (source,) = _holders(trio[0], k("m"))
    target = next(n for n in names if n != source)
    task_id, rc = trio[0].create_move_task(k("m"), source, target)
    assert rc == 0
    done = _wait(trio[0], task_id)
    assert done.status == TaskStatus.SUCCESS and done.type == TaskType.REPLICA_MOVE, repr(done)
    assert _holders(trio[0], k("m")) == [target]
    reader = next(s for n, s in names.items() if n not in (source, target))
    assert reader.get(k("m")) == value


def test_bad_requests_get_upstreams_codes(trio, k):
    a = trio[0]
    names = list(_by_name(trio))
    assert a.put(k("e"), b"value") == 0
    (source,) = _holders(a, k("e"))
    other = next(n for n in names if n != source)
    assert a.create_copy_task(k("missing"), [other]) == ((0, 0), NOT_FOUND)
    assert a.create_copy_task(k("e"), []) == ((0, 0), INVALID)
    assert a.create_copy_task(k("e"), ["127.0.0.1:1"]) == ((0, 0), INVALID)
    assert a.create_move_task(k("missing"), source, other) == ((0, 0), NOT_FOUND)
    assert a.create_move_task(k("e"), source, source) == ((0, 0), INVALID)
    assert a.create_move_task(k("e"), other, source) == ((0, 0), INVALID)
    assert a.query_task((1, 2)) == (None, TASK_NOT_FOUND)


@pytest.fixture(scope="module", params=["ours", "upstream"])
def hot_trio(request) -> Iterator[List[MooncakeDistributedStore]]:
    """Three stores on a master in dynamic-replication enforce mode: 3 reads in a
    minute make a key hot; two memory replicas at most."""
    binary = upstream_master_binary() if request.param == "upstream" else None
    extra = [
        "--dynamic_replication_mode=enforce",
        "--dynamic_replication_heat_window_seconds=60",
        "--dynamic_replication_admission_qps_threshold=0.05",
        "--dynamic_replication_max_memory_replicas=2",
    ]
    m = Master(extra=extra, binary=binary) if binary else Master(extra=extra)
    stores = [new_store(m) for _ in range(3)]
    yield stores
    for s in stores:
        s.close()
    m.stop()


def test_a_hot_object_gets_a_second_replica(hot_trio, k):
    names = _by_name(hot_trio)
    value = b"hot-" * 100_000
    assert hot_trio[0].put(k("h"), value) == 0
    (source,) = _holders(hot_trio[0], k("h"))
    reader = next(s for n, s in names.items() if n != source)
    for _ in range(3):
        assert reader.get(k("h")) == value
    deadline = time.monotonic() + 60
    while len(_holders(reader, k("h"))) < 2:
        assert time.monotonic() < deadline, "no second replica"
        time.sleep(0.05)
    holders = _holders(reader, k("h"))
    assert holders[0] == source and holders[1] in names and holders[1] != source
    for s in hot_trio:
        assert s.get(k("h")) == value
    for _ in range(10):
        reader.get(k("h"))
    assert len(_holders(reader, k("h"))) == 2
