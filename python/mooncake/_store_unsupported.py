"""Names of upstream's ``mooncake.store`` that mooncake-rs does not support, offered
as ``_unsupported`` describes (they exist; calling them raises
``NotImplementedError`` with the reason), plus the plain value types that only those
features use (constructible, with upstream's fields and defaults).

:class:`UnsupportedStoreMethods` is a base class of ``MooncakeDistributedStore``.
"""

from __future__ import annotations

from . import _unsupported as U

_MODULE = "mooncake.store"
_STORE = "MooncakeDistributedStore"

NATIVE = "it hands out upstream's native C++ objects, which mooncake-rs does not have"
NOF = "NVMe-oF segments are not supported"


UnsupportedStoreMethods = type(
    "UnsupportedStoreMethods",
    (),
    {
        "__doc__": "The methods of upstream's MooncakeDistributedStore that raise NotImplementedError.",
        "__module__": __name__,
        **U.methods(_STORE, ["_get_pyclient_capsule"], NATIVE),
    },
)


MooncakeDistributedNoFRegister = U.stub_class(
    _MODULE, "MooncakeDistributedNoFRegister", NOF, ["real_register", "real_unregister_by_endpoint"]
)

_get_pyclient_from_wrapper = U.function("mooncake.store._get_pyclient_from_wrapper", NATIVE)
HUGEPAGE = "it returns upstream's SPDK hugepage allocator for NVMe-oF segments, which need NVMe-oF hardware"
get_alloc_func_addr = U.function("mooncake.store.get_alloc_func_addr", HUGEPAGE)
get_free_func_addr = U.function("mooncake.store.get_free_func_addr", HUGEPAGE)
