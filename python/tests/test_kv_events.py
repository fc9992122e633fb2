"""The master's KV events (``--enable_kv_events``) read by PyPI's ``pyzmq`` and
``msgpack``, as an indexer would read upstream's: a SUB socket subscribed to ``""``,
three frames per message (empty topic, big-endian u64 sequence, msgpack payload
``[timestamp_ms, [event maps], 0]``).

Writes go through the store client of the implementation under test; the master is
ours (``MOONCAKE_TEST_MASTER`` may name another: one without KV events skips). Skips,
with the reason in the warnings summary, when ``zmq`` or ``msgpack`` cannot be
imported.
"""

from __future__ import annotations

import json
import re
import struct
import time
import urllib.request
import warnings
from typing import Iterator, List, Optional, Tuple

import pytest

try:
    import msgpack
    import zmq
except ImportError as e:  # pragma: no cover - depends on the venv
    reason = f"test_kv_events needs pyzmq and msgpack ({e}); pip install pyzmq msgpack"
    warnings.warn(reason)
    pytest.skip(reason, allow_module_level=True)

from store_env import Master, new_store

DEADLINE_S = 40.0
BACKEND = "py-node"
STORED_KEYS = [
    "event_id", "timestamp", "event_type", "type", "model_name", "block_size",
    "additional_salt", "lora_name", "tenant_id", "backend_id", "group_id", "medium",
    "dp_rank", "object_key", "seq_hashes", "block_hashes", "base_block_idx",
    "parent_hash", "token_ids", "parent_block_hash",
]
REMOVED_KEYS = STORED_KEYS[:16] + ["base_block_idx"]
STATUS_FIELDS = ["enabled", "published_batches", "published_events", "dropped_events",
                 "skipped_unparsed_keys"]


class KvMaster(Master):
    """A master with KV events bound on 127.0.0.1, port chosen by the system."""

    def __init__(self) -> None:
        kv_flags = [
            "--enable_kv_events=true",
            "--kv_events_bind_endpoint=tcp://127.0.0.1:0",
            f"--kv_events_backend_id={BACKEND}",
        ]
        super().__init__(extra=kv_flags, lease_ttl_ms=None, log_prefix="mooncake-kv-master-")

    def status_text(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/kv_events/status"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def kv_endpoint(self) -> Optional[str]:
        """``tcp://host:port`` of the publisher, or None when it is not enabled."""
        deadline = time.time() + DEADLINE_S
        while time.time() < deadline:
            found = re.search(r"KV events published on (\S+)", self.log.read_text(errors="replace"))
            if found:
                return f"tcp://{found.group(1)}"
            if json.loads(self.status_text())["enabled"] is False:
                return None
            time.sleep(0.05)
        raise TimeoutError(f"no KV-event address in the master's log:\n{self.log.read_text()[-3000:]}")


@pytest.fixture
def kv_master() -> Iterator[KvMaster]:
    m = KvMaster()
    yield m
    m.stop()


class Events:
    """A pyzmq SUB (or XSUB) on the publisher, checking sequence numbers and event ids
    run on. It sends heartbeats (ZMTP PINGs): a publisher that did not answer them
    would be dropped and reconnected, losing messages."""

    def __init__(self, endpoint: str, xsub: bool = False) -> None:
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.XSUB if xsub else zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt(zmq.HEARTBEAT_IVL, 50)
        self.sub.setsockopt(zmq.HEARTBEAT_TIMEOUT, 200)
        self.sub.connect(endpoint)
        if xsub:
            self.sub.send(b"\x01")
        else:
            self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.last_seq: Optional[int] = None
        self.last_id: Optional[int] = None
        self.first_id: Optional[int] = None
        self.pending: List[dict] = []
        self.unparsed = 0

    def close(self) -> None:
        self.sub.close()
        self.ctx.term()

    def _batch(self, timeout_ms: int) -> bool:
        if not self.sub.poll(timeout_ms):
            return False
        frames = self.sub.recv_multipart()
        assert len(frames) == 3 and frames[0] == b"" and len(frames[1]) == 8
        (seq,) = struct.unpack(">Q", frames[1])
        if self.last_seq is not None:
            assert seq == self.last_seq + 1, "sequence numbers run without gaps"
        self.last_seq = seq
        payload = msgpack.unpackb(frames[2], raw=False, strict_map_key=False)
        assert isinstance(payload, list) and len(payload) == 3 and payload[2] == 0
        ts, events = payload[0], payload[1]
        assert isinstance(ts, int) and abs(ts / 1000 - time.time()) < 3600
        for e in events:
            assert e["timestamp"] == ts
            self.pending.append(e)
        return True

    def next(self) -> dict:
        deadline = time.time() + DEADLINE_S
        while not self.pending:
            assert time.time() < deadline, "no event arrived"
            self._batch(200)
        e = self.pending.pop(0)
        if self.last_id is not None:
            assert e["event_id"] == self.last_id + 1, "event ids run without gaps"
        else:
            self.first_id = e["event_id"]
        self.last_id = e["event_id"]
        if not e["seq_hashes"]:
            self.unparsed += 1
        return e

    def warm_up(self, store, prefix: str) -> None:
        """Puts probe keys until one's event arrives (the subscription takes effect at
        some point after connect), then skips up to a marker put after it."""
        deadline = time.time() + DEADLINE_S
        n = 0
        while not self.pending:
            assert time.time() < deadline, "the subscription never took effect"
            assert store.put(f"{prefix}-probe-{n}", b"p") == 0
            n += 1
            self._batch(200)
        assert store.put(f"{prefix}-synced", b"s") == 0
        while True:
            e = self.next()
            assert e["event_type"] == "stored" and e["object_key"].startswith(f"{prefix}-")
            if e["object_key"] == f"{prefix}-synced":
                return


def endpoint_of(kv_master: KvMaster) -> str:
    endpoint = kv_master.kv_endpoint()
    if endpoint is None:
        pytest.skip("this master publishes no KV events (/kv_events/status says enabled:false)")
    return endpoint


@pytest.fixture
def events(kv_master: KvMaster) -> Iterator[Events]:
    ev = Events(endpoint_of(kv_master))
    yield ev
    ev.close()


def check_event(e: dict, stored: bool, key: str, hash_: Optional[int]) -> None:
    """``e`` is exactly the map upstream's publisher writes, defaults on."""
    assert list(e.keys()) == (STORED_KEYS if stored else REMOVED_KEYS)
    want = {
        "event_type": "stored" if stored else "removed",
        "type": "BlockStored" if stored else "BlockRemoved",
        "model_name": None, "block_size": None, "additional_salt": None, "lora_name": None,
        "tenant_id": "default", "backend_id": BACKEND, "group_id": None, "medium": "cpu",
        "dp_rank": None, "object_key": key,
        "seq_hashes": [] if hash_ is None else [hash_],
        "block_hashes": [] if hash_ is None else [hash_ - (1 << 64) if hash_ >= 1 << 63 else hash_],
    }
    if stored:
        want.update(base_block_idx=0, parent_hash=None, token_ids=None, parent_block_hash=None)
    else:
        want.update(base_block_idx=None)
    got = {k: v for k, v in e.items() if k not in ("event_id", "timestamp")}
    assert got == want


def test_events_read_by_pyzmq_and_msgpack(kv_master: KvMaster, events: Events) -> None:
    store = new_store(kv_master)
    try:
        prefix = f"py{int(time.time() * 1000) % 100000}"
        events.warm_up(store, prefix)
        cases: List[Tuple[str, Optional[int]]] = [
            ("12345", 12345),
            ("0xFF", 255),
            (f"{prefix}-not-a-hash", None),
            ("18446744073709551615", (1 << 64) - 1),
        ]
        for key, h in cases:
            assert store.put(key, b"value") == 0
            check_event(events.next(), True, key, h)
        assert store.remove("12345", True) == 0
        check_event(events.next(), False, "12345", 12345)

        # Announced by nobody: a batch remove, a regex remove, remove all.
        assert store.batch_remove(["0xFF"], True) == [0]
        assert store.remove_by_regex("^18446", True) == 1
        assert store.remove_all(True) >= 1
        assert store.put(f"{prefix}-marker", b"m") == 0
        check_event(events.next(), True, f"{prefix}-marker", None)

        # The counters: everything up to the last event id, in as many batches as
        # sequence numbers; probes lost before the subscription took effect were
        # published too (their keys are not hashes).
        assert events.first_id is not None and events.last_id is not None
        want_skipped = events.unparsed + events.first_id - 1
        deadline = time.time() + DEADLINE_S
        while True:
            text = kv_master.status_text()
            status = json.loads(text)
            if status["published_events"] == events.last_id or time.time() > deadline:
                break
            time.sleep(0.05)
        assert list(status.keys()) == STATUS_FIELDS, text
        assert status == {
            "enabled": True,
            "published_batches": events.last_seq,
            "published_events": events.last_id,
            "dropped_events": 0,
            "skipped_unparsed_keys": want_skipped,
        }
    finally:
        store.close()


def test_an_xsub_socket_receives_them_too(kv_master: KvMaster) -> None:
    ev = Events(endpoint_of(kv_master), xsub=True)
    store = new_store(kv_master)
    try:
        ev.warm_up(store, "xsub")
        for n in range(100):
            assert store.put(str(n), b"v") == 0
            check_event(ev.next(), True, str(n), n)
    finally:
        store.close()
        ev.close()
