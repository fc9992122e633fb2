"""Names of upstream's ``mooncake.engine`` that mooncake-rs does not support, offered
as ``_unsupported`` describes: they exist, and calling them raises
``NotImplementedError`` with the reason. ``SharedSegment.supported()`` answers False."""

from __future__ import annotations

from . import _unsupported as U

_MODULE = "mooncake.engine"
RPC = "the coro_rpc data/tensor channel (RpcInterface) is not implemented"
SHARED = "cross-process shared segments need CUDA/host-registered memory, which this build lacks"

RpcInterface = U.stub_class(
    _MODULE,
    "RpcInterface",
    RPC,
    """initialize initialize_client initialize_server send_data send_data_async send_tensor
    send_tensor_async set_data_receive_callback set_tensor_receive_callback start_server
    start_server_async stop_server""".split(),
)
#: Upstream's other name for the same class.
CoroRPCInterface = RpcInterface
ReceivedData = U.stub_class(
    _MODULE,
    "ReceivedData",
    RPC,
    ["get_bytes", "get_memory_view"],
    properties=["data_size", "source_address"],
)
ReceivedTensor = U.stub_class(
    _MODULE,
    "ReceivedTensor",
    RPC,
    ["get_data_as_bytes", "get_data_size", "get_memory_view"],
    properties=["dtype", "shape", "source_address", "total_bytes"],
)
create_rpc_client = U.function("mooncake.engine.create_rpc_client", RPC)
create_rpc_server = U.function("mooncake.engine.create_rpc_server", RPC)


def _shared_segments_supported(mmap: bool = True, host_register: bool = False) -> bool:
    """Whether this build can share memory across processes: no."""
    return False


SharedSegment = U.stub_class(
    _MODULE,
    "SharedSegment",
    SHARED,
    ["base_addr", "complete", "device_addr", "ready", "size"],
    static={"supported": _shared_segments_supported, "create": U.function("SharedSegment.create", SHARED)},
)
