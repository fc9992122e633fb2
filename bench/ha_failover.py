"""Master failover, upstream's mooncake_master against ours, same run, same client.

Per round and master kind: a fresh etcd, two masters with --enable_ha=true
--enable_oplog=true on it, one upstream Python store client (the peer's
MooncakeDistributedStore) addressing the master as etcd://..., OBJECTS puts of SIZE
bytes (all acknowledged), SIGKILL of the leader, then:
  failover  seconds from the kill until a new put is acknowledged
  lost      acknowledged objects that no longer read back with their exact bytes
Prints one JSON line per measurement and a summary table.

Run by bench/ha_failover.sh with the peer's python (it imports the upstream client).
Each measurement runs in its own process: upstream's client keeps one etcd connection
per process.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from mooncake.store import MooncakeDistributedStore


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_get(url, timeout=1.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read().decode()
    except Exception:
        return ""


def wait_for(what, ok, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ok():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def value_of(key, size):
    seed = sum(key.encode()) % 251
    return bytes((seed + i) % 256 for i in range(256)) * (size // 256)


class Cluster:
    def __init__(self, master_bin, work):
        self.master_bin = master_bin
        self.work = work
        self.procs = []
        self.etcd_port = free_port()
        peer_port = free_port()
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self.spawn(
            [
                "etcd",
                "--name=bench",
                f"--data-dir={work}/etcd",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=bench={peer}",
                "--log-level=error",
            ],
            "etcd",
        )
        wait_for(
            "etcd",
            lambda: "header"
            in self.post(f"{client}/v3/kv/range", b'{"key":"AA=="}'),
        )
        self.url = f"etcd://127.0.0.1:{self.etcd_port}"

    @staticmethod
    def post(url, body):
        try:
            req = urllib.request.Request(url, data=body, method="POST")
            with urllib.request.urlopen(req, timeout=1.0) as r:
                return r.read().decode()
        except Exception:
            return ""

    def spawn(self, argv, tag):
        log = open(os.path.join(self.work, f"{tag}-{len(self.procs)}.log"), "wb")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def master(self):
        rpc, metrics = free_port(), free_port()
        p = self.spawn(
            [
                self.master_bin,
                "--enable_ha=true",
                "--enable_oplog=true",
                f"--etcd_endpoints=127.0.0.1:{self.etcd_port}",
                "--rpc_address=127.0.0.1",
                f"--port={rpc}",
                f"--metrics_port={metrics}",
            ],
            "master",
        )
        health = f"http://127.0.0.1:{metrics}/health"
        return p, lambda: http_get(health)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()


def measure(kind, master_bin, objects, size):
    work = tempfile.mkdtemp(prefix=f"ha-failover-{kind}-")
    cluster = Cluster(master_bin, work)
    try:
        a, a_health = cluster.master()
        wait_for("the first leader", lambda: '"role":"leader"' in a_health())
        b, b_health = cluster.master()
        # Ours says when its copy is complete; upstream's standby has no such field.
        wait_for(
            "the standby",
            lambda: '"role":"standby"' in b_health()
            and ('"in_sync"' not in b_health() or '"in_sync":true' in b_health()),
        )
        store = MooncakeDistributedStore()
        rc = store.setup("127.0.0.1", cluster.url, 256 << 20, 64 << 20, "tcp", "", cluster.url)
        if rc != 0:
            raise RuntimeError(f"setup: {rc}")
        keys = [f"obj-{i}" for i in range(objects)]
        acked = [k for k in keys if store.put(k, value_of(k, size)) == 0]
        a.send_signal(signal.SIGKILL)
        a.wait()
        killed = time.time()
        failover = None
        n = 0
        while time.time() - killed < 120:
            n += 1
            if store.put(f"probe-{n}", b"x" * 4096) == 0:
                failover = time.time() - killed
                break
            time.sleep(0.01)
        lost = sum(1 for k in acked if store.get(k) != value_of(k, size))
        store.close()
        return {
            "master": kind,
            "acked": len(acked),
            "failover_s": None if failover is None else round(failover, 2),
            "lost": lost,
        }
    finally:
        cluster.close()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--objects", type=int, default=100)
    ap.add_argument("--size", type=int, default=64 << 10)
    ap.add_argument("--one", choices=["upstream", "ours"], help="one measurement, JSON out")
    args = ap.parse_args()
    if args.one:
        binary = args.ours if args.one == "ours" else args.upstream
        print(json.dumps(measure(args.one, binary, args.objects, args.size)), flush=True)
        return
    results = {"upstream": [], "ours": []}
    for r in range(args.rounds):
        for kind in ("upstream", "ours"):
            out = subprocess.run(
                [sys.executable, "-u", __file__, "--one", kind] + sys.argv[1:],
                stdout=subprocess.PIPE,
                check=True,
            ).stdout.decode()
            m = json.loads(out.strip().splitlines()[-1])
            m["round"] = r + 1
            print(json.dumps(m), flush=True)
            results[kind].append(m)
    print(f"\n{'master':<10}{'failover s (per round)':<34}{'lost of acked (per round)'}")
    for kind in ("upstream", "ours"):
        f = " ".join(str(m["failover_s"]) for m in results[kind])
        lost = " ".join(f"{m['lost']}/{m['acked']}" for m in results[kind])
        print(f"{kind:<10}{f:<34}{lost}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
