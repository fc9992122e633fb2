"""Child process of the cross-implementation tensor tests: a store client of the
implementation its environment selects (``MOONCAKE_PY_IMPL``), which either writes
the cases of ``_tensor_cases`` under a prefix or checks them, prints one JSON line
(``{"errors": [...]}``) and then waits for a line (or end of input) on stdin before
it closes, so that what it wrote stays readable meanwhile.

    _tensor_peer.py METADATA_URL MASTER_ADDR write|check PREFIX
"""

from __future__ import annotations

import json
import sys

from _tensor_cases import check_all, write_all
from mooncake.store import MooncakeDistributedStore


def main() -> int:
    metadata, master, action, prefix = sys.argv[1:5]
    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", metadata, 64 << 20, 16 << 20, "tcp", "", master)
    if rc != 0:
        errors = [f"setup: {rc}"]
    else:
        errors = write_all(store, prefix) if action == "write" else check_all(store, prefix)
    print(json.dumps({"errors": errors}), flush=True)
    sys.stdin.readline()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
