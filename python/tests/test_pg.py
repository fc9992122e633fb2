"""``mooncake.pg`` (mooncake-rs only: upstream ships PG only in its CUDA wheels): ranks
as separate processes (``_pg_rank.py``) meeting in an HTTP metadata server run by the
test: every collective and dtype against a reference on 1 to 4 ranks, uneven
all-to-all, send/recv, membership changes between operations, an extension rank
joining, a rank SIGKILLed mid-operation (the others get an error naming it and go on
without it), and bad input as clear errors. The torch backend is tested in
``test_pg_torch.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Dict, List, Optional

import pytest

if os.environ.get("MOONCAKE_PY_IMPL", "ours") != "ours":
    pytest.skip("Mooncake PG on CPU is mooncake-rs's own", allow_module_level=True)

from conftest import impl_env  # noqa: E402
from mooncake.http_metadata_server import KVBootstrapServer  # noqa: E402

RANK_SCRIPT = Path(__file__).with_name("_pg_rank.py")
DEADLINE_S = 240


@pytest.fixture(scope="module")
def store_url():
    server = KVBootstrapServer(0, host="127.0.0.1")
    server.run()
    yield f"http://127.0.0.1:{server.port}/metadata"
    server.close()


class Ranks:
    """Rank processes of one group; every one is killed by PID at the end."""

    def __init__(self, scenario: str, world: int, store: str, extra: int = 0, env: Optional[Dict[str, str]] = None):
        self.group = f"t-{uuid.uuid4().hex[:12]}"
        child_env = impl_env("ours")
        child_env.update(env or {})
        self.procs = [
            subprocess.Popen(
                [sys.executable, str(RANK_SCRIPT), scenario, str(r), str(world), store, self.group],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                text=True,
            )
            for r in range(world + extra)
        ]

    def line(self, rank: int) -> dict:
        """The next JSON line of ``rank``."""
        proc = self.procs[rank]
        line = proc.stdout.readline()
        if not line:
            proc.wait(timeout=DEADLINE_S)
            raise AssertionError(f"rank {rank} printed nothing (rc {proc.returncode}): {proc.stderr.read()[-3000:]}")
        return json.loads(line)

    def results(self, ranks: Optional[List[int]] = None) -> List[dict]:
        ranks = list(range(len(self.procs))) if ranks is None else ranks
        out = [self.line(r) for r in ranks]
        for r, o in zip(ranks, out):
            assert "error" not in o, f"rank {r}: {o['error']}\n{o.get('trace', '')}"
        return out

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)
            for stream in (p.stdout, p.stderr):
                stream.close()


@pytest.fixture
def ranks():
    started: List[Ranks] = []

    def start(*args, **kw) -> Ranks:
        r = Ranks(*args, **kw)
        started.append(r)
        return r

    yield start
    for r in started:
        r.close()


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_collective_and_dtype_matches_the_reference(ranks, store_url, world):
    out = ranks("collectives", world, store_url).results()
    assert all(o["checked"] >= 85 for o in out), out


def test_numpy_arrays(ranks, store_url):
    pytest.importorskip("numpy", reason="numpy is not installed (scripts/test-python.sh installs it)")
    out = ranks("numpy", 3, store_url).results()
    assert all(o["ok"] for o in out)


def test_deactivated_rank_leaves_a_hole_and_the_rest_go_on(ranks, store_url):
    out = ranks("membership", 4, store_url).results()
    for rank, o in enumerate(out):
        assert o["mask"] == [1, 0, 1, 1, 0], o
        assert o["size"] == 4, "size stays one past the highest active rank"
        if rank == 1:
            assert "not an active member" in o["inactive_error"]
        else:
            assert o["sum"] == 1 + 3 + 4
            assert o["epoch"] == 1


def test_an_extension_rank_joins_an_existing_group(ranks, store_url):
    out = ranks("join", 2, store_url, extra=1).results()
    for o in out:
        assert o["after"] == [1, 1, 1]
        assert o["sum"] == 3
        assert o["size"] == 3
    assert out[2]["before"] == [1, 1, 0]


@pytest.mark.parametrize("world", [3, 6])
def test_a_rank_killed_mid_operation_is_named_and_the_survivors_continue(ranks, store_url, world):
    group = ranks("killed", world, store_url, env={"PG_TEST_TIMEOUT": "30"})
    for r in range(world):
        assert group.line(r) == {"ready": True}
    # Once every rank finished a round of 4 MiB all-reduces (they go on looping, ring
    # chunks in flight between every pair), kill rank 1 mid-stream.
    for r in range(world):
        assert group.line(r) == {"running": True}
    os.kill(group.procs[1].pid, signal.SIGKILL)
    survivors = [r for r in range(world) if r != 1]
    for o in group.results(survivors):
        err = o["error_seen"]
        assert err["type"] == "PeerFailedError", err
        assert 1 in err["suspects"], err
        assert "rank 1" in err["message"], err
        assert o["mask"] == [1 if r != 1 else 0 for r in range(world)]
        assert o["sum_after"] == sum(r + 1 for r in survivors)


def test_bad_input_is_a_clear_error(ranks, store_url):
    out = ranks("mismatch", 2, store_url).results()
    for o in out:
        assert o["mismatch"] and "bytes" in o["mismatch"], o
        assert o["after"] == 1 + 2, "the group goes on after a mismatch"
        assert "accepted" not in o, o
        assert len(o["value_errors"]) == 3
    text = " ".join(out[0]["value_errors"])
    assert "xor" in text and "whole number" in text and "not an active member" in text


def test_a_group_without_its_founders_times_out_clearly(store_url):
    from mooncake import pg

    with pytest.raises(pg.PgError) as err:
        pg.ProcessGroup(0, 2, store_url, f"lonely-{uuid.uuid4().hex[:8]}", timeout=1.0)
    assert "rank 1" in str(err.value)
