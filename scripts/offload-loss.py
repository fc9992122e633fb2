#!/usr/bin/env python3
"""Objects lost on the way to the SSD tier, upstream's workload (spec
tiers-events-conductor.md §1.9, README "The SSD tier"): a master with eager offload
(`--enable_offload=true`), one client owning a 32 MiB segment and a local disk (1 s
offload heartbeat, 4 objects per bucket), 8 x 256 KiB puts, a 4 s pause, then 60 x
1 MiB puts without retries; every acknowledged object is then read back and
compared (`OFFLOAD_LOSS_COUNT` sets the number of 1 MiB puts). Prints one JSON line:
acknowledged, failed puts, lost (unreadable or different).

Runs whichever `mooncake` package the interpreter imports, with the master given:

  # ours: this checkout's package and master
  PYTHONPATH=python python3 scripts/offload-loss.py target/release/mooncake_master
  # upstream 0.3.13: the peer venv's package and master (scripts/upstream-peer.sh)
  ~/.cache/mooncake-peer/venv/bin/python scripts/offload-loss.py \
      ~/.cache/mooncake-peer/venv/lib/python3.11/site-packages/mooncake/mooncake_master
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the master exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"the master did not listen on {port}")


def value(seed: int, n: int) -> bytes:
    return bytes((i * 31 + seed) % 251 for i in range(256)) * (n // 256)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rpc, http = free_port(), free_port()
    disk = tempfile.mkdtemp(prefix="mooncake-offload-loss-")
    log = open(os.path.join(disk, "..", os.path.basename(disk) + ".master.log"), "wb")
    master = subprocess.Popen(
        [sys.argv[1], f"--port={rpc}", "--rpc_address=127.0.0.1", f"--metrics_port={free_port()}",
         "--enable_http_metadata_server=true", "--http_metadata_server_host=127.0.0.1",
         f"--http_metadata_server_port={http}", "--enable_offload=true"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_port(rpc, master)
        wait_port(http, master)
        os.environ.update({
            "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS": "1",
            "MOONCAKE_OFFLOAD_BUCKET_KEYS_LIMIT": "4",
            "MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES": str(64 * MIB),
            "MC_TCP_BIND_ADDRESS": "127.0.0.1",
        })
        from mooncake.store import MooncakeDistributedStore
        store = MooncakeDistributedStore()
        rc = store.setup("127.0.0.1", f"http://127.0.0.1:{http}/metadata", 32 * MIB, 16 * MIB, "tcp", "",
                         f"127.0.0.1:{rpc}", enable_ssd_offload=True, ssd_offload_path=disk)
        if rc != 0:
            sys.exit(f"setup failed: {rc}")
        written = {}
        for i in range(8):
            if store.put(f"small-{i}", value(i, 256 * 1024)) == 0:
                written[f"small-{i}"] = value(i, 256 * 1024)
        time.sleep(4)
        failed = 0
        for i in range(int(os.environ.get("OFFLOAD_LOSS_COUNT", "60"))):
            v = value(100 + i, MIB)
            if store.put(f"big-{i}", v) == 0:
                written[f"big-{i}"] = v
            else:
                failed += 1
        lost = [k for k, v in written.items() if store.get(k) != v]
        print(json.dumps({"acknowledged": len(written), "failed_puts": failed, "lost": len(lost),
                          "lost_keys": lost}))
        store.close()
    finally:
        master.terminate()
        try:
            master.wait(timeout=10)
        except subprocess.TimeoutExpired:
            master.kill()
        shutil.rmtree(disk, ignore_errors=True)


if __name__ == "__main__":
    main()
