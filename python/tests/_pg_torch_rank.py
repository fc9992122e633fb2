"""One rank of a ``"mooncake-cpu"`` torch.distributed group (``test_pg_torch.py``):
``python _pg_torch_rank.py RANK WORLD PORT``. Runs torch's public collectives, checks
them against torch-computed references and prints one JSON line."""

from __future__ import annotations

import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

from mooncake import pg

RANK, WORLD, PORT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
MODE = sys.argv[4] if len(sys.argv) > 4 else "collectives"


def wait_for(predicate, what: str, seconds: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.01)


def elastic() -> dict:
    """Rank 0 alone deactivates rank 2 and later activates it again (rank 2 waits in
    join_group); the idle ranks follow through their agents."""
    dist.init_process_group(
        backend="mooncake-cpu", init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK, world_size=WORLD
    )
    world = dist.group.WORLD
    x = torch.ones(4)
    dist.all_reduce(x)
    first = x[0].item()
    dist.barrier()
    if RANK == 0:
        pg.deactivate_ranks(world, [2])
    wait_for(lambda: pg.get_peer_state(world, [2]) == [False], "rank 2 deactivated")
    inactive_error = None
    if RANK == 2:
        try:
            dist.all_reduce(torch.ones(4))
        except Exception as e:  # noqa: BLE001 - the error under test
            inactive_error = f"{type(e).__name__}: {e}"
        mask_out = pg.get_active_ranks(world).tolist()
        pg.join_group(world)
        between = None
    else:
        y = torch.full((4,), float(RANK + 1))
        dist.all_reduce(y)
        between = y[0].item()
        mask_out = pg.get_active_ranks(world).tolist()
        if RANK == 0:
            pg.activate_ranks(world, [2])
        wait_for(lambda: pg.get_peer_state(world, [2]) == [True], "rank 2 active again")
    z = torch.full((4,), float(RANK + 1))
    dist.all_reduce(z)
    result = {"first": first, "between": between, "after": z[0].item(), "mask_out": mask_out,
              "inactive_error": inactive_error, "mask": pg.get_active_ranks(world).tolist()}
    dist.destroy_process_group()
    return result


def main() -> dict:
    dist.init_process_group(
        backend="mooncake-cpu", init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK, world_size=WORLD
    )
    assert dist.get_backend() == "mooncake-cpu"
    ranks = range(WORLD)
    checked = 0
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.uint8):
        for n in (5, 100_000):
            x = (torch.arange(n) % 7 + RANK).to(dtype)
            dist.all_reduce(x)
            want = sum((torch.arange(n) % 7 + r).to(dtype) for r in ranks)
            assert torch.equal(x, want.to(dtype)), f"all_reduce {dtype} {n}"
            checked += 1
    for op, ref in ((dist.ReduceOp.MAX, torch.max), (dist.ReduceOp.MIN, torch.min)):
        x = torch.tensor([RANK, -RANK, 3.0])
        dist.all_reduce(x, op=op)
        stack = torch.stack([torch.tensor([r, -r, 3.0]) for r in ranks])
        assert torch.equal(x, ref(stack, 0).values), f"all_reduce {op}"
    x = torch.full((4,), float(RANK + 1))
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    assert torch.allclose(x, torch.full((4,), sum(r + 1 for r in ranks) / WORLD))
    x = torch.arange(6, dtype=torch.int64) * (RANK + 1)
    dist.broadcast(x, src=WORLD - 1)
    assert torch.equal(x, torch.arange(6) * WORLD), "broadcast"
    x = torch.ones(3) * (RANK + 1)
    dist.reduce(x, dst=0)
    if RANK == 0:
        assert torch.equal(x, torch.ones(3) * sum(r + 1 for r in ranks)), "reduce"
    out = [torch.zeros(3, dtype=torch.int32) for _ in ranks]
    dist.all_gather(out, torch.full((3,), RANK, dtype=torch.int32))
    assert all(torch.equal(o, torch.full((3,), r, dtype=torch.int32)) for r, o in zip(ranks, out)), "all_gather"
    big = torch.empty(WORLD * 1000)
    dist.all_gather_into_tensor(big, torch.full((1000,), float(RANK)))
    assert torch.equal(big, torch.arange(WORLD).repeat_interleave(1000).float()), "all_gather_into_tensor"
    inp = torch.arange(WORLD * 8, dtype=torch.float32) + RANK
    out = torch.empty(8)
    dist.reduce_scatter_tensor(out, inp)
    want = sum(torch.arange(WORLD * 8, dtype=torch.float32) + r for r in ranks)[RANK * 8 : (RANK + 1) * 8]
    assert torch.equal(out, want), "reduce_scatter_tensor"
    outs = torch.empty(4)
    dist.reduce_scatter(outs, [torch.full((4,), float(RANK * 10 + r)) for r in ranks])
    assert torch.equal(outs, torch.full((4,), float(sum(q * 10 + RANK for q in ranks)))), "reduce_scatter"
    inp = torch.arange(WORLD * 2, dtype=torch.int64) + 100 * RANK
    out = torch.empty(WORLD * 2, dtype=torch.int64)
    dist.all_to_all_single(out, inp)
    want = torch.cat([torch.arange(RANK * 2, RANK * 2 + 2) + 100 * r for r in ranks])
    assert torch.equal(out, want), "all_to_all_single"
    # uneven: rank a sends a + b + 1 rows to rank b
    ins = [a_b + 1 for a_b in (RANK + b for b in ranks)]
    outs_n = [a + RANK + 1 for a in ranks]
    inp = torch.cat([torch.full((c, 2), float(RANK * 10 + b)) for b, c in enumerate(ins)])
    out = torch.empty(sum(outs_n), 2)
    dist.all_to_all_single(out, inp, output_split_sizes=outs_n, input_split_sizes=ins)
    want = torch.cat([torch.full((c, 2), float(a * 10 + RANK)) for a, c in enumerate(outs_n)])
    assert torch.equal(out, want), "uneven all_to_all_single"
    outl = [torch.empty(2) for _ in ranks]
    dist.all_to_all(outl, [torch.full((2,), float(RANK * 10 + b)) for b in ranks])
    assert all(torch.equal(o, torch.full((2,), float(a * 10 + RANK))) for a, o in enumerate(outl)), "all_to_all"
    gl = [torch.empty(2) for _ in ranks] if RANK == 0 else None
    dist.gather(torch.full((2,), float(RANK)), gl, dst=0)
    if RANK == 0:
        assert all(torch.equal(g, torch.full((2,), float(r))) for r, g in enumerate(gl)), "gather"
    got = torch.empty(3)
    dist.scatter(got, [torch.full((3,), float(r * 2)) for r in ranks] if RANK == 0 else None, src=0)
    assert torch.equal(got, torch.full((3,), float(RANK * 2))), "scatter"
    if WORLD > 1:
        if RANK == 0:
            dist.send(torch.arange(5.0), dst=1)
        elif RANK == 1:
            t = torch.empty(5)
            dist.recv(t, src=0)
            assert torch.equal(t, torch.arange(5.0)), "send/recv"
    dist.barrier()
    backend = dist.group.WORLD
    active = pg.get_active_ranks(backend)
    assert active.tolist() == [1] * WORLD, active
    assert pg.get_num_synced_ranks(backend) == WORLD
    assert pg.get_peer_state(backend, list(ranks)) == [True] * WORLD
    checked += 16
    dist.destroy_process_group()
    return {"checked": checked}


try:
    result = elastic() if MODE == "elastic" else main()
except BaseException as e:  # noqa: BLE001
    result = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
print(json.dumps(result), flush=True)
os._exit(0)
