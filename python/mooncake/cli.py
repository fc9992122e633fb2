"""Console entry points: run the native binaries bundled with the package.

``mooncake_master``, ``mooncake_http_metadata_server``, ``transfer_engine_bench``,
``mooncake_client``, ``mooncake_p2p`` and ``mooncake_conductor`` (installed by pip as scripts) replace themselves
with the bundled executable of the same name, passing the command line through. Outside an installed
package they fall back to the repository's ``target/release`` or ``target/debug`` build.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

from ._lib import BUNDLE_DIR, binary_path


def _exec(name: str, argv: Optional[List[str]] = None) -> int:
    path = binary_path(name)
    if path is None:
        print(
            f"{name}: executable not found in {BUNDLE_DIR} or the repository's target/ "
            "directory; reinstall the package with `pip install ./python` or run "
            f"`cargo build --release --bin {name}`",
            file=sys.stderr,
        )
        return 127
    args = sys.argv[1:] if argv is None else argv
    os.execv(str(path), [name, *args])
    return 0  # not reached


def main() -> int:
    """``mooncake_master``: the Store master (coro_rpc service, metadata, HTTP)."""
    return _exec("mooncake_master")


def http_metadata_server_main() -> int:
    """``mooncake_http_metadata_server``: the HTTP metadata server for the TE."""
    return _exec("mooncake_http_metadata_server")


def bench_main() -> int:
    """``transfer_engine_bench``: the Transfer Engine benchmark."""
    return _exec("transfer_engine_bench")


def client_main() -> int:
    """``mooncake_client``: the real store client that dummy clients of this host
    (``MooncakeDistributedStore.setup_dummy``) forward to."""
    return _exec("mooncake_client")


def p2p_main() -> int:
    """``mooncake_p2p``: a P2P Store node (put, get, list, serve, replicate)."""
    return _exec("mooncake_p2p")


def conductor_main() -> int:
    """``mooncake_conductor``: the KVCache-centric scheduler (Conductor)."""
    return _exec("mooncake_conductor")


if __name__ == "__main__":
    sys.exit(main())
