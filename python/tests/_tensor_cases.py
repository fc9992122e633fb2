"""The tensors both implementations write and read in the cross-implementation
tensor tests (``test_store_tensor.py`` and its child ``_tensor_peer.py``): one per
dtype upstream stores, an empty one, an 8-dim one and a tensor-parallel one, each
made the same way from its name in every process."""

from __future__ import annotations

from typing import List, Tuple

DTYPES = (
    "float32 float64 int8 uint8 int16 uint16 int32 uint32 int64 uint64 bool float16 bfloat16 "
    "float8_e4m3fn float8_e5m2"
).split()

#: (name, dtype, shape) of every full tensor.
CASES: List[Tuple[str, str, Tuple[int, ...]]] = [(d, d, (3, 5)) for d in DTYPES] + [
    ("empty", "float32", (2, 0)),
    ("eight_dims", "int16", (1, 2, 1, 3, 1, 2, 1, 2)),
    ("big", "bfloat16", (256, 1024)),
]
#: The tensor-parallel case: name, shape, tp_size, split_dim.
TP = ("tp", (4, 8), 4, 1)


def make(dtype: str, shape: Tuple[int, ...], seed: int = 0):
    """A deterministic tensor of ``dtype`` and ``shape``."""
    import torch

    n = 1
    for d in shape:
        n *= d
    x = ((torch.arange(n, dtype=torch.int64) * 37 + seed) % 101).to(torch.float32)
    if dtype == "bool":
        x = x.remainder(2)
    return x.to(getattr(torch, dtype)).reshape(shape)


def same(a, b) -> bool:
    """Same dtype, shape and bytes."""
    import torch

    if a is None or b is None or a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return False
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def tp_chunk(rank: int):
    """Shard ``rank`` of the tensor-parallel case."""
    _, shape, size, dim = TP
    full = make("float32", shape, 7)
    part = shape[dim] // size
    return full.narrow(dim, rank * part, part)


class _Partition:
    """A writer partition (upstream binds no class for it: any object with these)."""

    def __init__(self, rank: int, size: int, split_dim: int) -> None:
        self.rank, self.size, self.split_dim = rank, size, split_dim


def _layout(*axes):
    """A ``TensorParallelism`` of ``(kind, rank, size, split_dim)`` axes."""
    from mooncake.store import ParallelAxis, TensorParallelism

    p = TensorParallelism()
    out = []
    for kind, rank, size, split_dim in axes:
        a = ParallelAxis()
        a.kind, a.rank, a.size, a.split_dim = kind, rank, size, split_dim
        out.append(a)
    p.axes = out
    return p


def _target(mode: str, parallelism=None):
    from mooncake.store import ReadTarget

    t = ReadTarget()
    t.mode, t.parallelism = mode, parallelism
    return t


#: The parallelism-aware cases: the whole tensor each is a layout of.
PARALLEL = ("float32", (6, 4), 11)


def write_parallel(store, prefix: str) -> List[str]:
    """The whole tensor of ``PARALLEL`` as single-TP shards (TP 2 on dim 1), DP+TP
    shards (DP rank 1 of 2, TP 3 on dim 0) and writer partitions (3 on dim 0)."""
    full = make(*PARALLEL)
    rcs = [
        store.put_tensor_with_parallelism(f"{prefix}/p_tp", full[:, 2 * r : 2 * r + 2], _layout(("tp", r, 2, 1)))
        for r in range(2)
    ]
    rcs += [
        store.put_tensor_with_parallelism(f"{prefix}/p_dptp", full, _layout(("dp", 1, 2, None), ("tp", r, 3, 0)))
        for r in range(3)
    ]
    rcs += [
        store.put_tensor_with_parallelism(f"{prefix}/p_wp", full, writer_partition=_Partition(r, 3, 0))
        for r in range(3)
    ]
    return [f"parallel put {i}: {rc}" for i, rc in enumerate(rcs) if rc != 0]


def check_parallel(store, prefix: str) -> List[str]:
    """Reads ``write_parallel``'s tensors back whole and as reshards."""
    full = make(*PARALLEL)
    checks = {
        "p_tp full": (
            store.get_tensor_with_parallelism(f"{prefix}/p_tp", _target("full", _layout(("tp", 0, 2, 1)))),
            full,
        ),
        "p_tp reshard": (
            store.get_tensor_with_parallelism(f"{prefix}/p_tp", _target("shard", _layout(("tp", 3, 4, 1)))),
            full[:, 3:],
        ),
        "p_dptp full": (
            store.get_tensor_with_parallelism(
                f"{prefix}/p_dptp", _target("full", _layout(("dp", 1, 2, None), ("tp", 0, 3, 0)))
            ),
            full,
        ),
        "p_dptp reshard": (
            store.get_tensor_with_parallelism(
                f"{prefix}/p_dptp", _target("shard", _layout(("tp", 1, 2, 0), ("dp", 1, 2, None)))
            ),
            full[3:],
        ),
        "p_wp full": (store.get_tensor_with_parallelism(f"{prefix}/p_wp", _target("full")), full),
    }
    return [name for name, (got, want) in checks.items() if not same(got, want)]


def write_all(store, prefix: str) -> List[str]:
    """Puts every case under ``prefix``; the failures, described."""
    errors = write_parallel(store, prefix)
    for name, dtype, shape in CASES:
        rc = store.put_tensor(f"{prefix}/{name}", make(dtype, shape))
        if rc != 0:
            errors.append(f"put_tensor {name}: {rc}")
    name, shape, size, dim = TP
    rc = store.put_tensor_with_tp(f"{prefix}/{name}", make("float32", shape, 7), tp_size=size, split_dim=dim)
    if rc != 0:
        errors.append(f"put_tensor_with_tp: {rc}")
    return errors


def check_all(store, prefix: str) -> List[str]:
    """Reads every case under ``prefix`` back; the mismatches, described."""
    errors = check_parallel(store, prefix)
    for name, dtype, shape in CASES:
        got = store.get_tensor(f"{prefix}/{name}")
        if not same(got, make(dtype, shape)):
            errors.append(f"get_tensor {name}: {None if got is None else (got.dtype, tuple(got.shape))}")
    name, shape, size, dim = TP
    for rank in range(size):
        got = store.get_tensor_with_tp(f"{prefix}/{name}", tp_rank=rank, tp_size=size, split_dim=dim)
        if not same(got, tp_chunk(rank)):
            errors.append(f"get_tensor_with_tp rank {rank}")
    return errors
