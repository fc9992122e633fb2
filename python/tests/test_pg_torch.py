"""The ``"mooncake-cpu"`` torch.distributed backend of ``mooncake.pg`` with real torch
(PyPI's, on CPU): ranks as processes (``_pg_torch_rank.py``) started like torchrun
would, through ``init_process_group(backend="mooncake-cpu")`` with torch's own TCP
store, running torch's public collectives against torch-computed references and
upstream's membership helpers. Skipped, with the reason, where torch is not
installed (``scripts/test-python.sh`` installs it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

if os.environ.get("MOONCAKE_PY_IMPL", "ours") != "ours":
    pytest.skip("Mooncake PG on CPU is mooncake-rs's own", allow_module_level=True)
pytest.importorskip("torch", reason="torch is not installed (scripts/test-python.sh installs it)")

from conftest import impl_env  # noqa: E402

RANK_SCRIPT = Path(__file__).with_name("_pg_torch_rank.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(world: int, mode: str) -> list:
    """Starts ``world`` rank processes in ``mode`` and returns their results."""
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(RANK_SCRIPT), str(r), str(world), port, mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=impl_env("ours"),
            text=True,
        )
        for r in range(world)
    ]
    results = []
    try:
        for r, p in enumerate(procs):
            out, err = p.communicate(timeout=300)
            lines = [line for line in out.splitlines() if line.startswith("{")]
            assert lines, f"rank {r} printed nothing (rc {p.returncode}): {err[-3000:]}"
            result = json.loads(lines[-1])
            assert "error" not in result, f"rank {r}: {result['error']}\n{result.get('trace', '')}"
            results.append(result)
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_torch_collectives_through_the_mooncake_cpu_backend(world):
    for result in run_ranks(world, "collectives"):
        assert result["checked"] >= 30


def test_one_rank_deactivates_and_reactivates_another_through_torch():
    out = run_ranks(3, "elastic")
    for r, o in enumerate(out):
        assert o["first"] == 3
        assert o["mask_out"] == [1, 1, 0]
        assert o["after"] == 1 + 2 + 3
        assert o["mask"] == [1, 1, 1]
        if r < 2:
            assert o["between"] == 1 + 2
    assert "not an active member" in out[2]["inactive_error"]
