"""Segments mounted and unmounted at run time (``mount_segment``,
``allocate_and_mount_segment``, ``unmount_segment``, ``unmount_and_free_segment``)
against a live master, with either implementation (``MOONCAKE_PY_IMPL``): a client
set up without a segment stores nothing until it mounts one, objects placed in a
file-backed segment are the file's bytes, unmounting drops them, and upstream's
return values for bad input.
"""

from __future__ import annotations

import re
import time

import pytest

from mooncake.store import ReplicateConfig
from store_env import OURS, new_store, pattern

MiB = 1 << 20
ID = re.compile(r"^\d+-\d+$")


@pytest.fixture
def bare(master):
    """A client set up with no global segment of its own."""
    s = new_store(master, segment=0)
    yield s
    s.close()


def _file(tmp_path, size: int):
    path = tmp_path / "segment.bin"
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def _wait_missing(store, key: str, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if store.is_exist(key) == 0:
            return True
        time.sleep(0.2)
    return False


def test_file_segment_holds_the_objects(bare, k, tmp_path):
    value = pattern(MiB, 3)
    assert bare.put(k("before"), value) != 0, "a client without a segment stored an object"
    path = _file(tmp_path, 16 * MiB)
    mounted = bare.mount_segment(str(path), 16 * MiB)
    assert mounted["ret"] == 0 and len(mounted["segment_ids"]) == 1
    assert ID.match(mounted["segment_ids"][0])

    assert bare.put(k("a"), value) == 0
    assert bare.get(k("a")) == value
    assert value in path.read_bytes(), "the object is not in the file"

    assert bare.unmount_segment(mounted["segment_ids"]) == 0
    assert bare.is_exist(k("a")) == 0
    assert bare.put(k("after"), value) != 0
    assert bare.unmount_segment(mounted["segment_ids"]) == -1


def test_file_segment_from_an_offset(bare, k, tmp_path):
    path = _file(tmp_path, 24 * MiB)
    mounted = bare.mount_segment(str(path), 16 * MiB, 8 * MiB)
    assert mounted["ret"] == 0
    value = pattern(2 * MiB, 5)
    assert bare.put(k("a"), value) == 0
    data = path.read_bytes()
    assert value in data[8 * MiB :] and value not in data[: 8 * MiB]
    assert bare.unmount_segment(mounted["segment_ids"]) == 0


def test_mount_segment_refuses_bad_ranges(bare, tmp_path):
    path = _file(tmp_path, 8 * MiB)
    for size, offset in ((16 * MiB, 0), (4 * MiB, 6 * MiB), (MiB, 100)):
        assert bare.mount_segment(str(path), size, offset) == {"ret": -1, "segment_ids": []}
    assert bare.mount_segment(str(tmp_path / "absent"), MiB)["ret"] == -1
    assert bare.mount_segment(str(path), 0) == {"ret": 0, "segment_ids": []}


def test_allocated_segment(bare, k):
    assert bare.allocate_and_mount_segment(0)["ret"] == -1
    mounted = bare.allocate_and_mount_segment(MiB + 1)
    assert mounted["ret"] == 0 and mounted["allocated_size"] == 16 * MiB
    (segment,) = mounted["segment_ids"]
    value = pattern(MiB, 9)
    assert bare.put(k("a"), value) == 0 and bare.get(k("a")) == value
    # Each unmount call releases only the kind of segment its mount call made.
    assert bare.unmount_segment([segment]) == -1
    assert bare.unmount_and_free_segment(["not-an-id", segment]) == -1
    assert bare.is_exist(k("a")) == 0
    assert bare.unmount_and_free_segment([segment]) == -1


def test_graceful_unmount_drops_the_segment_later(bare, k):
    mounted = bare.allocate_and_mount_segment(8 * MiB)
    assert mounted["ret"] == 0
    value = pattern(MiB, 1)
    assert bare.put(k("a"), value) == 0
    assert bare.unmount_and_free_segment(mounted["segment_ids"], grace_period_seconds=1) == 0
    assert bare.put(k("b"), value) != 0, "a draining segment took a new object"
    assert _wait_missing(bare, k("a")), "the segment was not dropped after its grace period"


def test_another_client_reads_a_mounted_segment(master, bare, store, k):
    mounted = bare.allocate_and_mount_segment(8 * MiB)
    assert mounted["ret"] == 0
    value = pattern(3 * MiB, 7)
    here = ReplicateConfig()
    here.preferred_segment = bare.get_hostname()
    assert bare.put(k("a"), value, here) == 0
    assert store.get(k("a")) == value
    assert bare.unmount_and_free_segment(mounted["segment_ids"]) == 0
    assert store.get(k("a")) == b""


def test_bad_arguments(bare):
    with pytest.raises(TypeError):
        bare.unmount_segment("1-2")
    with pytest.raises(TypeError):
        bare.mount_segment("/tmp/x", -1)


@pytest.mark.skipif(not OURS, reason="upstream's store may crash before setup (ours only)")
def test_not_set_up():
    from mooncake.store import MooncakeDistributedStore

    s = MooncakeDistributedStore()
    assert s.mount_segment("/tmp/x", MiB)["ret"] == -1
    assert s.allocate_and_mount_segment(MiB)["ret"] == -1
    assert s.unmount_segment(["1-2"]) == -1
