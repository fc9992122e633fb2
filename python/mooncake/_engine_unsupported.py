"""Names of upstream's ``mooncake.engine`` that mooncake-rs does not support, offered
as ``_unsupported`` describes: they exist, and calling them raises
``NotImplementedError`` with the reason. ``SharedSegment.supported()`` answers False."""

from __future__ import annotations

from . import _unsupported as U

_MODULE = "mooncake.engine"
SHARED = "cross-process shared segments need CUDA/host-registered memory, which this build lacks"


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
