"""Mooncake PG ("mooncake-cpu") against torch.distributed's Gloo, in one run on one
host (``bench/pg_bench.sh`` runs it with PyPI's torch).

For each rank count and backend it starts that many rank processes (torch's TCP
store on 127.0.0.1), and each measures all-reduce (float32 sum) and all-gather
over message sizes from 8 B to 64 MiB: a warm-up, then as many iterations as fit in
about ``SECONDS`` per size (at least 3), timed between barriers. Rank 0 prints the
median of 3 such timings as latency and bus bandwidth (nccl-tests' convention:
all-reduce moves ``2 (n-1)/n`` of the buffer per rank, all-gather ``(n-1)/n`` of the
output). Then, for Mooncake PG only, it kills one rank while the others loop
all-reducing 1 MiB and reports how long the survivors took from the kill to the
end of their next successful all-reduce.

Usage: python bench/pg_bench.py [--ranks 2,4,8] [--sizes 8,1024,...] [--seconds 0.5]
Prints a CSV-like table and one ``PG_BENCH`` line per row for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    if args.backend == "mooncake-cpu":
        from mooncake import pg  # noqa: F401 - registers the backend

    dist.init_process_group(
        backend=args.backend, init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=args.world
    )
    n = args.world
    if args.mode == "kill":
        buf = torch.ones(1 << 18)
        dist.barrier()
        print(json.dumps({"ready": True}), flush=True)
        while True:
            try:
                dist.all_reduce(buf)
            except Exception as e:  # noqa: BLE001 - the failure under test
                failed = time.time()
                msg = str(e)
                break
        small = torch.ones(4)
        dist.all_reduce(small)
        done = time.time()
        print(json.dumps({"failed": failed, "done": done, "sum": small[0].item(), "msg": msg[:200]}), flush=True)
        os._exit(0)
    rows = []
    for size in args.sizes:
        for op in ("all_reduce", "all_gather"):
            elems = max(size // 4, 2)
            if op == "all_reduce":
                x = torch.ones(elems)
                run = lambda: dist.all_reduce(x)  # noqa: E731
            else:
                per = max(elems // n, 1)
                x = torch.ones(per)
                out = torch.empty(per * n)
                run = lambda: dist.all_gather_into_tensor(out, x)  # noqa: E731
            run()
            dist.barrier()
            t0 = time.perf_counter()
            run()
            one = time.perf_counter() - t0
            iters = max(3, min(2000, int(args.seconds / max(one, 1e-6))))
            # Every rank must run the same number of iterations: rank 0 decides.
            it = torch.tensor([iters])
            dist.broadcast(it, 0)
            iters = int(it.item())
            samples = []
            for _ in range(3):
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    run()
                dist.barrier()
                samples.append((time.perf_counter() - t0) / iters)
            t = statistics.median(samples)
            nbytes = elems * 4 if op == "all_reduce" else per * n * 4
            factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
            rows.append({"op": op, "bytes": nbytes, "lat_us": t * 1e6, "busbw_gbs": nbytes * factor / t / 1e9})
    if args.rank == 0:
        print(json.dumps(rows), flush=True)
    dist.destroy_process_group()
    os._exit(0)


def launch(backend: str, world: int, mode: str, args: argparse.Namespace):
    port = str(free_port())
    cmd = [sys.executable, __file__, "--rank-main", "--backend", backend, "--world", str(world), "--port", port,
           "--mode", mode, "--seconds", str(args.seconds), "--sizes", ",".join(map(str, args.sizes))]
    return [subprocess.Popen(cmd + ["--rank", str(r)], stdout=subprocess.PIPE, text=True) for r in range(world)]


def bench(backend: str, world: int, args: argparse.Namespace) -> list:
    procs = launch(backend, world, "bench", args)
    try:
        out, _ = procs[0].communicate(timeout=1800)
        for p in procs[1:]:
            p.wait(timeout=120)
        return json.loads(out.strip().splitlines()[-1])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def kill_test(world: int, args: argparse.Namespace) -> dict:
    env_timeout = os.environ.setdefault("MC_PG_TIMEOUT_MS", "10000")
    procs = launch("mooncake-cpu", world, "kill", args)
    try:
        for p in procs:
            assert json.loads(p.stdout.readline())["ready"]
        time.sleep(0.5)
        victim = procs[-1]
        killed_at = time.time()
        os.kill(victim.pid, signal.SIGKILL)
        results = [json.loads(p.stdout.readline()) for p in procs[:-1]]
        return {
            "detect_s": max(r["failed"] for r in results) - killed_at,
            "recover_s": max(r["done"] for r in results) - killed_at,
            "sum": results[0]["sum"],
            "timeout_ms": env_timeout,
        }
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--rank-main", action="store_true")
    ap.add_argument("--backend")
    ap.add_argument("--world", type=int)
    ap.add_argument("--port")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--mode", default="bench")
    args = ap.parse_args()
    args.sizes = [int(s) for s in str(args.sizes).split(",")]
    if args.rank_main:
        rank_main(args)
        return
    print(f"{'ranks':>5} {'op':>10} {'bytes':>10} | {'gloo us':>10} {'ours us':>10} {'lat x':>6} |"
          f" {'gloo GB/s':>9} {'ours GB/s':>9} {'bw x':>6}", flush=True)
    for world in [int(r) for r in args.ranks.split(",")]:
        gloo = bench("gloo", world, args)
        ours = bench("mooncake-cpu", world, args)
        for g, o in zip(gloo, ours):
            lat_x = g["lat_us"] / o["lat_us"]
            bw_x = o["busbw_gbs"] / g["busbw_gbs"] if g["busbw_gbs"] else float("nan")
            print(f"{world:>5} {g['op']:>10} {g['bytes']:>10} | {g['lat_us']:>10.1f} {o['lat_us']:>10.1f} {lat_x:>5.2f}x |"
                  f" {g['busbw_gbs']:>9.3f} {o['busbw_gbs']:>9.3f} {bw_x:>5.2f}x", flush=True)
            print("PG_BENCH " + json.dumps({"ranks": world, "op": g["op"], "bytes": g["bytes"], "gloo": g, "ours": o}),
                  flush=True)
        k = kill_test(world, args)
        print(f"{world:>5} kill one rank: survivors failed after {k['detect_s'] * 1000:.0f} ms, finished the next "
              f"all_reduce {k['recover_s'] * 1000:.0f} ms after the kill (sum {k['sum']:.0f})", flush=True)
        print("PG_KILL " + json.dumps({"ranks": world, **k}), flush=True)


if __name__ == "__main__":
    main()
