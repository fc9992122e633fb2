"""One rank of a Mooncake PG test group, as its own process (``test_pg.py`` starts
these): ``python _pg_rank.py SCENARIO RANK WORLD STORE GROUP``. Each scenario checks
what it can locally and prints one JSON line with what the test asserts on; any
exception prints ``{"error": ...}``. Inputs are functions of the rank, so every rank
can compute every reference.
"""

from __future__ import annotations

import array
import json
import os
import struct
import sys
import traceback

from mooncake import pg

SCENARIO, RANK, WORLD, STORE, GROUP = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]

#: Every dtype Mooncake PG reduces.
DTYPES = ("float32", "float64", "bfloat16", "float16", "int32", "int64", "uint8")
#: array.array type codes of the dtypes the standard library has.
CODES = {"float32": "f", "float64": "d", "int32": "i", "int64": "q", "uint8": "B"}


def values(rank: int, n: int, salt: int = 0) -> list:
    """Small integers (exact in every dtype and under every reduction)."""
    return [((rank * 5 + i * 3 + salt) % 7) - (0 if salt % 2 else 3) for i in range(n)]


def factors(rank: int, n: int) -> list:
    """1s and a few 2s: products stay exact in every dtype."""
    return [2 if (i + rank) % 5 == 0 else 1 for i in range(n)]


def encode(dtype: str, vals: list) -> bytearray:
    if dtype == "float16":
        return bytearray(struct.pack(f"{len(vals)}e", *vals))
    if dtype == "bfloat16":  # the upper half of a float32, rounded to nearest even
        out = bytearray()
        for v in vals:
            (bits,) = struct.unpack("<I", struct.pack("<f", float(v)))
            out += struct.pack("<H", (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)
        return out
    if dtype == "uint8":
        return bytearray(array.array("B", [v % 256 for v in vals]).tobytes())
    return bytearray(array.array(CODES[dtype], vals).tobytes())


def reduce_ref(op: str, columns: list, dtype: str) -> list:
    out = []
    for col in zip(*columns):
        if dtype == "uint8":
            col = [c % 256 for c in col]
        if op == "sum":
            v = sum(col)
        elif op == "prod":
            v = 1
            for c in col:
                v *= c
        elif op == "min":
            v = min(col)
        elif op == "max":
            v = max(col)
        elif dtype == "uint8":
            v = (sum(col) % 256) // len(col)
        else:
            v = sum(col) / len(col)
            if dtype in ("int32", "int64"):
                v = int(v)
        out.append(v % 256 if dtype == "uint8" else v)
    return out


def group(**kw) -> pg.ProcessGroup:
    return pg.ProcessGroup(RANK, WORLD, STORE, GROUP, timeout=float(os.environ.get("PG_TEST_TIMEOUT", "20")), **kw)


def collectives() -> dict:
    g = group()
    checked = 0
    ranks = list(range(WORLD))
    for n in (3, 40_000):  # one chunk, and the ring
        for dtype in DTYPES:
            for op in ("sum", "prod", "min", "max", "avg"):
                pick = factors if op == "prod" else values
                buf = encode(dtype, pick(RANK, n))
                g.all_reduce(buf, op=op, dtype=dtype)
                cols = [pick(r, n) for r in ranks]
                want = encode(dtype, reduce_ref(op, cols, dtype))
                if dtype in ("float32", "float64", "float16", "bfloat16") and op == "avg":
                    want = encode(dtype, [float(x) for x in reduce_ref(op, cols, dtype)])
                assert buf == want, f"all_reduce {dtype} {op} n={n}"
                checked += 1
        # broadcast / reduce from every root
        for root in ranks:
            buf = encode("int64", values(RANK, n))
            g.broadcast(buf, root)
            assert buf == encode("int64", values(root, n)), f"broadcast root {root} n={n}"
            buf = encode("int32", values(RANK, n))
            g.reduce(buf, root, op="max", dtype="int32")
            want = encode("int32", reduce_ref("max", [values(r, n) for r in ranks], "int32"))
            assert buf == (want if RANK == root else encode("int32", values(RANK, n))), f"reduce root {root}"
            checked += 2
        # all_gather, gather, scatter, reduce_scatter
        mine = encode("float32", values(RANK, n))
        out = bytearray(len(mine) * WORLD)
        g.all_gather(out, mine)
        assert out == b"".join(encode("float32", values(r, n)) for r in ranks), "all_gather"
        out = bytearray(len(mine) * WORLD)
        g.gather(mine, out if RANK == 0 else None, 0)
        if RANK == 0:
            assert out == b"".join(encode("float32", values(r, n)) for r in ranks), "gather"
        blocks = b"".join(encode("float32", values(r, n, salt=1)) for r in ranks)
        got = bytearray(len(mine))
        g.scatter(got, bytearray(blocks) if RANK == WORLD - 1 else None, WORLD - 1)
        assert got == encode("float32", values(RANK, n, salt=1)), "scatter"
        for dtype in DTYPES:
            op = "max" if dtype in ("float16", "bfloat16") else "sum"
            inp = b"".join(encode(dtype, values(RANK * 10 + r, n)) for r in ranks)
            got = bytearray(len(encode(dtype, values(0, n))))
            g.reduce_scatter(got, bytearray(inp), op=op, dtype=dtype)
            want = reduce_ref(op, [values(q * 10 + RANK, n) for q in ranks], dtype)
            assert got == encode(dtype, want), f"reduce_scatter {dtype} n={n}"
            buf = encode(dtype, values(RANK, n))
            g.reduce(buf, 0, op=op, dtype=dtype)
            if RANK == 0:
                assert buf == encode(dtype, reduce_ref(op, [values(r, n) for r in ranks], dtype)), f"reduce {dtype}"
            checked += 2
        checked += 3
    # uneven all_to_all: rank a sends (a + 2b) % 4 * 1000 + 1 int32s to rank b
    count = lambda a, b: (a + 2 * b) % 4 * 1000 + 1  # noqa: E731
    payload = lambda a, b: [a * 100_000 + b * 10_000 + i % 9_999 for i in range(count(a, b))]  # noqa: E731
    inp = array.array("i", [x for b in ranks for x in payload(RANK, b)])
    out = array.array("i", [0] * sum(count(a, RANK) for a in ranks))
    g.all_to_all(out, inp, [count(a, RANK) for a in ranks], [count(RANK, b) for b in ranks])
    assert out.tolist() == [x for a in ranks for x in payload(a, RANK)], "all_to_all"
    # send / recv around the ring, then a barrier
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    data = bytearray(os.urandom(0)) + encode("int64", values(RANK, 70_000))
    got = bytearray(len(data))
    if WORLD > 1:
        if RANK % 2 == 0:
            g.send(data, nxt)
            g.recv(got, prv)
        else:
            g.recv(got, prv)
            g.send(data, nxt)
        assert got == encode("int64", values(prv, 70_000)), "send/recv"
    g.barrier()
    checked += 3
    g.close()
    return {"checked": checked}


def numpy_api() -> dict:
    import numpy as np

    g = group()
    x = np.arange(10, dtype=np.float32) + RANK
    g.all_reduce(x)
    want = sum(np.arange(10, dtype=np.float32) + r for r in range(WORLD))
    assert (x == want).all(), "numpy all_reduce"
    out = np.zeros((WORLD, 4), dtype=np.int64)
    g.all_gather(out, np.full(4, RANK, dtype=np.int64))
    assert (out == np.arange(WORLD)[:, None]).all(), "numpy all_gather"
    g.close()
    return {"ok": True}


def membership() -> dict:
    g = group(max_group_size=WORLD + 1)
    assert g.active_ranks() == [1] * WORLD + [0]
    g.deactivate_ranks([1])
    mask = g.active_ranks()
    if RANK == 1:
        try:
            g.all_reduce(bytearray(8), dtype="uint8")
        except pg.NotActiveError as e:
            return {"mask": mask, "inactive_error": str(e), "size": g.size}
        return {"error": "an inactive rank ran a collective"}
    buf = bytearray([RANK + 1] * 8)
    g.all_reduce(buf, dtype="uint8")
    return {"mask": mask, "sum": buf[0], "size": g.size, "epoch": g.epoch}


def join() -> dict:
    """WORLD founding ranks plus one extension (rank WORLD) that joins."""
    if RANK == WORLD:
        g = pg.ProcessGroup(RANK, WORLD, STORE, GROUP, max_group_size=WORLD + 1, is_extension=True, timeout=20)
        before = g.active_ranks()
        g.join_group()
    else:
        g = group(max_group_size=WORLD + 1)
        before = g.active_ranks()
        g.activate_ranks([WORLD])
    buf = bytearray([1] * 4)
    g.all_reduce(buf, dtype="uint8")
    return {"before": before, "after": g.active_ranks(), "sum": buf[0], "size": g.size}


def killed() -> dict:
    """Loops all-reduces until a peer is killed (by the test), then goes on; says when
    its first round is done, so the test kills while rounds are running."""
    g = group()
    print(json.dumps({"ready": True}), flush=True)
    buf = bytearray(4 << 20)
    rounds = 0
    while True:
        try:
            g.all_reduce(buf, dtype="uint8", op="max")
        except pg.PeerFailedError as e:
            err = {"type": type(e).__name__, "message": str(e), "suspects": e.suspects}
            break
        rounds += 1
        if rounds == 1:
            print(json.dumps({"running": True}), flush=True)
    small = bytearray([RANK + 1] * 8)
    g.all_reduce(small, dtype="uint8")
    return {
        "error_seen": err,
        "rounds": rounds,
        "mask": g.active_ranks(),
        "sum_after": small[0],
    }


def mismatch() -> dict:
    g = group()
    result = {}
    try:
        g.all_reduce(bytearray(8 if RANK == 0 else 16), dtype="uint8")
        result["mismatch"] = None
    except pg.MismatchError as e:
        result["mismatch"] = str(e)
    # The group resynchronizes after a mismatch: a correct call succeeds (a rank that
    # missed the resynchronization gets MembershipChangedError once).
    for _ in range(3):
        buf = bytearray([RANK + 1] * 8)
        try:
            g.all_reduce(buf, dtype="uint8")
            result["after"] = buf[0]
            break
        except pg.MembershipChangedError:
            continue
    for bad in (lambda: g.all_reduce(bytearray(8), op="xor", dtype="uint8"),
                lambda: g.all_reduce(bytearray(7), dtype="float32"),
                lambda: g.broadcast(bytearray(8), WORLD + 5)):
        try:
            bad()
            result.setdefault("accepted", 0)
            result["accepted"] += 1
        except ValueError as e:
            result.setdefault("value_errors", []).append(str(e))
    return result


def main() -> None:
    try:
        out = {"collectives": collectives, "numpy": numpy_api, "membership": membership,
               "join": join, "killed": killed, "mismatch": mismatch}[SCENARIO]()
    except BaseException as e:  # noqa: BLE001 - reported to the test
        out = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    print(json.dumps(out), flush=True)
    os._exit(0)


main()
