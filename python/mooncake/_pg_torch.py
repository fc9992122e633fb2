"""The ``"mooncake-cpu"`` torch.distributed backend: a Python ``ProcessGroup`` over
:class:`mooncake.pg.ProcessGroup` (this is the only module of the package that imports
torch; ``mooncake.pg`` imports it when torch is installed).

The group meets in the store ``init_process_group`` gives the backend (its keys live
under that store's prefix), and runs every collective synchronously on CPU tensors:
the returned work objects are already complete. ``pg_options`` may be a
:class:`mooncake.pg.MooncakeBackendOptions`.
"""

from __future__ import annotations

import os
from typing import Any, List

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

from . import pg as _pg

#: torch dtype -> Mooncake PG dtype name.
_DTYPES = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.bfloat16: "bfloat16",
    torch.float16: "float16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.int8: "uint8",
    torch.bool: "uint8",
}

_OPS = {
    dist.ReduceOp.SUM: "sum",
    dist.ReduceOp.PRODUCT: "prod",
    dist.ReduceOp.MIN: "min",
    dist.ReduceOp.MAX: "max",
    dist.ReduceOp.AVG: "avg",
}


def _done(result: Any = None):
    fut: Future = Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _check_tensor(t: torch.Tensor) -> None:
    if t.device.type != "cpu":
        raise ValueError(f"the mooncake-cpu backend takes CPU tensors, not {t.device}")
    if not t.is_contiguous():
        raise ValueError("the mooncake-cpu backend takes contiguous tensors")


class _TensorBuf:
    """A contiguous CPU tensor as an ``__array_interface__`` buffer for the PG."""

    def __init__(self, t: torch.Tensor) -> None:
        _check_tensor(t)
        self.t = t
        self.nbytes = t.numel() * t.element_size()
        self.dtype = None
        self.__array_interface__ = {
            "data": (t.data_ptr(), False),
            "shape": (self.nbytes,),
            "typestr": "|u1",
            "version": 3,
        }


def _dtype(t: torch.Tensor) -> str:
    try:
        return _DTYPES[t.dtype]
    except KeyError:
        raise ValueError(f"the mooncake-cpu backend does not reduce {t.dtype}") from None


def _op(opts: Any) -> str:
    op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
    for k, v in _OPS.items():
        if op == k:
            return v
    raise ValueError(f"reduce op {op} is not supported by the mooncake-cpu backend")


class MooncakeCpuProcessGroup(dist.ProcessGroup):
    """A ``torch.distributed`` process group over Mooncake PG."""

    def __init__(self, store: Any, rank: int, size: int, timeout: Any, options: Any = None) -> None:
        super().__init__(rank, size)
        opts = options if isinstance(options, _pg.MooncakeBackendOptions) else None
        # MC_PG_TIMEOUT_MS, when set, bounds waits instead of torch's (30 minutes by
        # default): how soon a rank that stopped answering is named and taken out.
        seconds = timeout.total_seconds() if timeout is not None else None
        if os.environ.get("MC_PG_TIMEOUT_MS"):
            seconds = None
        self.mooncake_group = _pg.ProcessGroup(
            rank,
            size,
            store,
            "torch",
            max_group_size=(opts.max_group_size if opts else None),
            is_extension=(opts.is_extension if opts else False),
            auto_deactivate_on_failure=(opts.auto_deactivate_on_failure if opts else True),
            timeout=seconds,
        )
        self._active_mirror = opts.active_ranks if opts else None
        self._mirror()

    def _mirror(self) -> None:
        if self._active_mirror is not None:
            flags = self.mooncake_group.active_ranks()
            self._active_mirror.copy_(torch.tensor(flags, dtype=self._active_mirror.dtype))

    def _run(self, fn, *args, result=None):
        try:
            fn(*args)
        finally:
            self._mirror()
        return _done(result)

    def shutdown(self) -> None:
        """Leaves the group (``destroy_process_group`` calls it)."""
        self.mooncake_group.close()

    def getBackendName(self) -> str:  # noqa: N802 - torch's name
        return "mooncake-cpu"

    @property
    def group_name(self) -> str:
        return "mooncake-cpu"

    # -- collectives ------------------------------------------------------------------

    def allreduce(self, tensors: List[torch.Tensor], opts: Any = None):
        g, op = self.mooncake_group, _op(opts)
        for t in tensors:
            self._run(g.all_reduce, _TensorBuf(t), op, _dtype(t))
        return _done(tensors)

    def allreduce_coalesced(self, tensors: List[torch.Tensor], opts: Any = None):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors: List[torch.Tensor], opts: Any = None):
        for t in tensors:
            self._run(self.mooncake_group.broadcast, _TensorBuf(t), opts.rootRank)
        return _done(tensors)

    def reduce(self, tensors: List[torch.Tensor], opts: Any = None):
        for t in tensors:
            self._run(self.mooncake_group.reduce, _TensorBuf(t), opts.rootRank, _op(opts), _dtype(t))
        return _done(tensors)

    def allgather(self, output_lists: List[List[torch.Tensor]], inputs: List[torch.Tensor], opts: Any = None):
        for outs, t in zip(output_lists, inputs):
            flat = torch.empty(len(outs) * t.numel(), dtype=t.dtype)
            self._run(self.mooncake_group.all_gather, _TensorBuf(flat), _TensorBuf(t))
            for i, o in enumerate(outs):
                o.copy_(flat[i * t.numel() : (i + 1) * t.numel()].view_as(o))
        return _done(output_lists)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None):
        return self._run(self.mooncake_group.all_gather, _TensorBuf(output), _TensorBuf(input), result=output)

    all_gather_single = _allgather_base

    def reduce_scatter(self, outputs: List[torch.Tensor], input_lists: List[List[torch.Tensor]], opts: Any = None):
        for out, ins in zip(outputs, input_lists):
            flat = torch.cat([i.reshape(-1) for i in ins])
            self._run(self.mooncake_group.reduce_scatter, _TensorBuf(out), _TensorBuf(flat), _op(opts), _dtype(out))
        return _done(outputs)

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None):
        return self._run(
            self.mooncake_group.reduce_scatter, _TensorBuf(output), _TensorBuf(input), _op(opts), _dtype(output),
            result=output,
        )

    reduce_scatter_single = _reduce_scatter_base

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor, output_splits: List[int],
                      input_splits: List[int], opts: Any = None):
        size = self.mooncake_group.size
        rows_in = input.shape[0] if input.dim() else 1
        rows_out = output.shape[0] if output.dim() else 1
        row_in = input.numel() // max(rows_in, 1) * input.element_size()
        row_out = output.numel() // max(rows_out, 1) * output.element_size()
        ins = list(input_splits) or [rows_in // size] * size
        outs = list(output_splits) or [rows_out // size] * size
        g = self.mooncake_group
        self._run(
            g.all_to_all, _TensorBuf(output), _TensorBuf(input), [o * row_out for o in outs], [i * row_in for i in ins]
        )
        return _done(output)

    all_to_all_single = alltoall_base

    def alltoall(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor], opts: Any = None):
        flat_in = torch.cat([t.reshape(-1).view(torch.uint8) for t in inputs])
        flat_out = torch.empty(sum(t.numel() * t.element_size() for t in outputs), dtype=torch.uint8)
        self._run(
            self.mooncake_group.all_to_all,
            _TensorBuf(flat_out),
            _TensorBuf(flat_in),
            [t.numel() * t.element_size() for t in outputs],
            [t.numel() * t.element_size() for t in inputs],
        )
        at = 0
        for t in outputs:
            n = t.numel() * t.element_size()
            t.view(-1).view(torch.uint8).copy_(flat_out[at : at + n])
            at += n
        return _done(outputs)

    def gather(self, output_lists: List[List[torch.Tensor]], inputs: List[torch.Tensor], opts: Any = None):
        t = inputs[0]
        root = opts.rootRank
        me = self.mooncake_group.rank
        flat = torch.empty(self.mooncake_group.size * t.numel(), dtype=t.dtype) if me == root else None
        self._run(self.mooncake_group.gather, _TensorBuf(t), _TensorBuf(flat) if flat is not None else None, root)
        if flat is not None:
            for i, o in enumerate(output_lists[0]):
                o.copy_(flat[i * t.numel() : (i + 1) * t.numel()].view_as(o))
        return _done(output_lists)

    def scatter(self, outputs: List[torch.Tensor], input_lists: List[List[torch.Tensor]], opts: Any = None):
        out = outputs[0]
        root = opts.rootRank
        flat = None
        if self.mooncake_group.rank == root:
            flat = torch.cat([i.reshape(-1) for i in input_lists[0]])
        self._run(self.mooncake_group.scatter, _TensorBuf(out), _TensorBuf(flat) if flat is not None else None, root)
        return _done(outputs)

    def barrier(self, opts: Any = None):
        return self._run(self.mooncake_group.barrier)

    def monitored_barrier(self, timeout: Any = None, wait_all_ranks: bool = False):
        self.mooncake_group.barrier()

    def send(self, tensors: List[torch.Tensor], dst: int, tag: int = 0):
        for t in tensors:
            self._run(self.mooncake_group.send, _TensorBuf(t), dst)
        return _done(tensors)

    def recv(self, tensors: List[torch.Tensor], src: int, tag: int = 0):
        for t in tensors:
            self._run(self.mooncake_group.recv, _TensorBuf(t), src)
        return _done(tensors)


def _create(dist_opts: Any, backend_options: Any) -> MooncakeCpuProcessGroup:
    return MooncakeCpuProcessGroup(
        dist_opts.store, dist_opts.group_rank, dist_opts.group_size, dist_opts.timeout, backend_options
    )


def _register() -> None:
    if "mooncake-cpu" in dist.Backend.backend_list or "MOONCAKE-CPU" in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend("mooncake-cpu", _create, extended_api=True, devices=["cpu"])


_register()

__all__: List[str] = ["MooncakeCpuProcessGroup"]
