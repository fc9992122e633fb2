"""The SSD tier with this package's client as the disk owner, on our master with
``--enable_offload`` (upstream's ``test_offload_on_eviction.py`` and
``test_ssd_offload_in_evict.py`` scenarios): ``setup(..., enable_ssd_offload=True,
ssd_offload_path=...)`` mounts a local disk; objects evicted from memory read back
from it, bit-exact, through a second client as through the owner; in
offload-on-evict mode nothing is copied before eviction."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Iterator, Tuple

import pytest

from mooncake.store import MooncakeDistributedStore
from store_env import Master, new_store, pattern

MIB = 1 << 20
DEADLINE_S = 60.0


@pytest.fixture
def disk_dir() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="mooncake-ssd-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fast_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS", "1")
    monkeypatch.setenv("MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES", str(64 * MIB))
    # Upstream's owner writes a bucket only once it is full: small ones keep it moving.
    monkeypatch.setenv("MOONCAKE_OFFLOAD_BUCKET_KEYS_LIMIT", "4")


def owner(master: Master, segment: int, path: str) -> MooncakeDistributedStore:
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", master.metadata, segment, 16 * MIB, "tcp", "", master.addr,
                 enable_ssd_offload=True, ssd_offload_path=path)
    assert rc == 0, f"setup with SSD offload failed: {rc}"
    return s


def kinds(store: MooncakeDistributedStore, key: str) -> Tuple[int, int]:
    """(memory, local disk) replicas of ``key``."""
    reps = store.get_replica_desc(key)
    return (sum(r.is_memory_replica() for r in reps), sum(r.is_local_disk_replica() for r in reps))


def put_retrying(store: MooncakeDistributedStore, key: str, value: bytes) -> int:
    """Puts, retrying -200 (the pool is full of objects still being offloaded)."""
    deadline = time.time() + DEADLINE_S
    while True:
        rc = store.put(key, value)
        if rc != -200 or time.time() > deadline:
            return rc
        time.sleep(0.02)


def test_eager_offload_keeps_every_evicted_object_readable(disk_dir: str, fast_heartbeat: None) -> None:
    m = Master(extra=["--enable_offload=true"])
    try:
        o = owner(m, 32 * MIB, disk_dir)
        reader = new_store(m, segment=0)
        keys = [f"evict-{i}" for i in range(100)]
        for i, k in enumerate(keys):
            assert put_retrying(o, k, pattern(MIB, i)) == 0, k
        disk_only = 0
        for i, k in enumerate(keys):
            mem, disk = kinds(reader, k)
            assert mem + disk > 0, f"{k} was lost"
            disk_only += mem == 0
            assert reader.get(k) == pattern(MIB, i), k
        assert disk_only > 40, f"only {disk_only} objects were on disk alone"
        # Each read of an object only the disk held asked its owner to stage it.
        staged = reader.get_offload_rpc_read_count()
        assert 0 < staged <= len(keys), staged
        assert o.get(keys[0]) == pattern(MIB, 0)
        assert any(name.endswith(".bucket") for name in os.listdir(disk_dir))
        reader.close()
        o.close()
    finally:
        m.stop()


def test_offload_on_evict_copies_nothing_before_eviction(disk_dir: str, fast_heartbeat: None) -> None:
    m = Master(extra=["--enable_offload=true", "--offload_on_evict=true"])
    try:
        o = owner(m, 128 * MIB, disk_dir)
        keys = [f"small-{i}" for i in range(16)]
        for i, k in enumerate(keys):
            assert o.put(k, pattern(1024, i)) == 0
        time.sleep(3)
        for reps in o.batch_get_replica_desc(keys).values():
            assert reps and all(r.is_memory_replica() for r in reps)
        for i, k in enumerate(keys):
            assert o.get(k) == pattern(1024, i)
        o.close()
    finally:
        m.stop()


def test_setup_with_offload_needs_an_offloading_master(disk_dir: str, impl: str) -> None:
    """Ours fails setup with the master's UNABLE_OFFLOAD (-1300), and -600 for an
    unusable directory; upstream's codes are only checked to be failures."""
    m = Master()
    try:
        s = MooncakeDistributedStore()
        rc = s.setup("127.0.0.1", m.metadata, 16 * MIB, 16 * MIB, "tcp", "", m.addr,
                     enable_ssd_offload=True, ssd_offload_path=disk_dir)
        assert rc == -1300 if impl == "ours" else rc != 0
        config = {"local_hostname": "127.0.0.1", "metadata_server": m.metadata,
                  "master_server_addr": m.addr, "global_segment_size": str(16 * MIB),
                  "local_buffer_size": str(16 * MIB), "enable_ssd_offload": "true",
                  "ssd_offload_path": "relative/dir"}
        if impl == "ours":
            assert s.setup(config) == -600
        else:
            # Upstream raises instead of returning a code.
            with pytest.raises(ValueError):
                s.setup(config)
    finally:
        m.stop()


def test_the_disk_is_unmounted_at_run_time(disk_dir: str, fast_heartbeat: None) -> None:
    m = Master(extra=["--enable_offload=true"])
    try:
        o = owner(m, 64 * MIB, disk_dir)
        reader = new_store(m, segment=0)
        assert reader.unmount_local_disk_segment() == 0  # no SSD tier: nothing to do
        keys = [f"drain-{i}" for i in range(4)]  # a full bucket (see fast_heartbeat)
        for i, k in enumerate(keys):
            assert o.put(k, pattern(MIB, i)) == 0
        deadline = time.time() + DEADLINE_S
        while any(kinds(reader, k)[1] == 0 for k in keys):
            assert time.time() < deadline, "never offloaded"
            time.sleep(0.05)
        assert o.unmount_local_disk_segment(grace_period_seconds=0) == 0
        assert [kinds(reader, k) for k in keys] == [(1, 0)] * 4
        for i, k in enumerate(keys):
            assert reader.get(k) == pattern(MIB, i)
        assert o.unmount_local_disk_segment() == 0  # already unmounted
        o.close()
        reader.close()
    finally:
        m.stop()
