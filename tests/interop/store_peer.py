"""Upstream Mooncake Store client (MooncakeDistributedStore) driven over stdin/stdout,
for the Rust store interop tests (tests/rust/store_interop*.rs).

Run with the upstream peer's python (installed by scripts/upstream-peer.sh), with
MC_TCP_BIND_ADDRESS=127.0.0.1 in the environment:

    store_peer.py <metadata> <master_addr> <global_segment_size> <local_buffer_size> <zc_size>

The script sets the store up (protocol "tcp", or "rdma" on $PEER_RDMA_DEVICE; with the
SSD offload tier on the directory $PEER_SSD_OFFLOAD_PATH when set), allocates a <zc_size>-byte ctypes buffer
for the zero-copy APIs and registers it with register_buffer, then prints one JSON line:

    {"ready": true, "hostname": <get_hostname()>, "register_rc": <rc>}

or {"ready": false, "setup_rc": <rc>} and exits 1. It then reads one JSON command per
line on stdin and answers each with one JSON line on stdout ({"ok": true, ...} or
{"ok": false, "error": ...}). Anything the library prints to fd 1 is redirected to
stderr so it cannot corrupt the replies.

Values are {"len": n, "seed": s} (pattern(n, s)) or {"text": "..."} (UTF-8).
An "expect" value is compared with what was read: the reply carries "match" and, on a
mismatch, "first_diff". A ReplicateConfig is {"replica_num", "preferred_segments",
"preferred_segment", "with_hard_pin"} (all optional). Offsets ("off") are into the
zero-copy buffer.

    {"op": "hostname"}                                   -> {"hostname"}
    {"op": "put", "key", "value", "cfg"?}                -> {"rc"}
    {"op": "put_batch", "keys", "values", "cfg"?}        -> {"rc"}
    {"op": "get", "key", "expect"?}                      -> {"len", "match"?}
    {"op": "get_batch", "keys", "expect"}                -> {"results": [{"len", "match"?}]}
    {"op": "is_exist", "key"}                            -> {"rc"}
    {"op": "batch_is_exist", "keys"}                     -> {"rcs"}
    {"op": "get_size", "key"}                            -> {"rc"}
    {"op": "remove", "key", "force"?}                    -> {"rc"}
    {"op": "remove_by_regex", "pattern", "force"?}       -> {"rc"}
    {"op": "remove_all", "force"?}                       -> {"rc"}
    {"op": "put_from", "key", "off", "value", "cfg"?}    -> {"rc"}
    {"op": "get_into", "key", "off", "cap", "expect"?}   -> {"rc", "match"?}
    {"op": "batch_put_from", "keys", "offs", "values", "cfg"?}   -> {"rcs"}
    {"op": "batch_get_into", "keys", "offs", "caps", "expect"}   -> {"rcs", "matches"}
    {"op": "replica_desc", "key"}      -> {"replicas": [{"memory", "endpoint", "size",
                                                         "addr", "status"}]}
    {"op": "fill", "prefix", "count", "value", "max_retries", "retry_sleep_ms"}
        puts <prefix><i> for i in 0..count, retrying each put on a non-zero rc
        -> {"attempts", "codes": {rc: n}, "failed": [i, ...]}
    {"op": "close"}                                      -> {"rc"}
    {"op": "quit"}                                       -> {} and exit 0

pattern(n, seed)[i] = (i * 7 + (i >> 8) + seed) & 0xff; the Rust side computes the same.
"""

import ctypes
import json
import os
import sys
import time

# Replies go to a private copy of the original stdout; fd 1 becomes stderr.
_OUT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

from mooncake.store import MooncakeDistributedStore, ReplicateConfig  # noqa: E402

_ROW = bytes((7 * r) & 0xFF for r in range(256))
_TABLES = [bytes((b + k) & 0xFF for b in range(256)) for k in range(256)]


def pattern(n, seed):
    # For i = 256q + r: 7i + q + seed == 7r + q + seed (mod 256).
    blocks = (n + 255) // 256
    data = b"".join(_ROW.translate(_TABLES[(q + seed) & 0xFF]) for q in range(blocks))
    return data[:n]


def value(spec):
    if "text" in spec:
        return spec["text"].encode()
    return pattern(int(spec["len"]), int(spec["seed"]))


def compare(got, spec):
    """{"match": bool, "first_diff"?: i} for `got` against the value `spec`."""
    if spec is None:
        return {}
    want = value(spec)
    if got == want:
        return {"match": True}
    n = min(len(got), len(want))
    i = next((j for j in range(n) if got[j] != want[j]), n)
    return {"match": False, "first_diff": i, "got_len": len(got), "want_len": len(want)}


def config(spec):
    c = ReplicateConfig()
    if not spec:
        return c
    if "replica_num" in spec:
        c.replica_num = int(spec["replica_num"])
    if "preferred_segments" in spec:
        c.preferred_segments = list(spec["preferred_segments"])
    if "preferred_segment" in spec:
        c.preferred_segment = spec["preferred_segment"]
    if "with_hard_pin" in spec:
        c.with_hard_pin = bool(spec["with_hard_pin"])
    return c


def reply(**kw):
    kw.setdefault("ok", True)
    _OUT.write(json.dumps(kw) + "\n")
    _OUT.flush()


def main():
    metadata, master = sys.argv[1], sys.argv[2]
    seg, local, zc = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    store = MooncakeDistributedStore()
    device = os.environ.get("PEER_RDMA_DEVICE", "")
    ssd_path = os.environ.get("PEER_SSD_OFFLOAD_PATH", "")
    protocol = "rdma" if device else "tcp"
    if ssd_path:
        rc = store.setup("127.0.0.1", metadata, seg, local, protocol, device, master,
                         None, True, ssd_path)
    else:
        rc = store.setup("127.0.0.1", metadata, seg, local, protocol, device, master)
    if rc != 0:
        reply(ok=False, ready=False, setup_rc=rc, error="setup returned %d" % rc)
        return 1
    buf = ctypes.create_string_buffer(max(zc, 1))
    base = ctypes.addressof(buf)
    register_rc = store.register_buffer(base, zc) if zc > 0 else 0
    reply(ready=True, hostname=store.get_hostname(), register_rc=register_rc)

    def local_ptr(off, length):
        if off < 0 or length < 0 or off + length > zc:
            raise ValueError("range %d+%d outside the %d-byte buffer" % (off, length, zc))
        return base + off

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            c = json.loads(line)
            op = c["op"]
            if op == "quit":
                reply()
                break
            elif op == "hostname":
                reply(hostname=store.get_hostname())
            elif op == "put":
                reply(rc=store.put(c["key"], value(c["value"]), config(c.get("cfg"))))
            elif op == "put_batch":
                vals = [value(v) for v in c["values"]]
                reply(rc=store.put_batch(c["keys"], vals, config(c.get("cfg"))))
            elif op == "get":
                got = store.get(c["key"])
                reply(len=len(got), **compare(got, c.get("expect")))
            elif op == "get_batch":
                got = store.get_batch(c["keys"])
                exp = c.get("expect") or [None] * len(got)
                reply(results=[dict(len=len(g), **compare(g, e)) for g, e in zip(got, exp)])
            elif op == "is_exist":
                reply(rc=store.is_exist(c["key"]))
            elif op == "batch_is_exist":
                reply(rcs=list(store.batch_is_exist(c["keys"])))
            elif op == "get_size":
                reply(rc=store.get_size(c["key"]))
            elif op == "remove":
                reply(rc=store.remove(c["key"], bool(c.get("force", False))))
            elif op == "remove_by_regex":
                reply(rc=store.remove_by_regex(c["pattern"], bool(c.get("force", False))))
            elif op == "remove_all":
                reply(rc=store.remove_all(bool(c.get("force", False))))
            elif op == "put_from":
                data = value(c["value"])
                ptr = local_ptr(int(c["off"]), len(data))
                ctypes.memmove(ptr, data, len(data))
                reply(rc=store.put_from(c["key"], ptr, len(data), config(c.get("cfg"))))
            elif op == "get_into":
                off, cap = int(c["off"]), int(c["cap"])
                ptr = local_ptr(off, cap)
                ctypes.memset(ptr, 0, cap)
                rc = store.get_into(c["key"], ptr, cap)
                got = ctypes.string_at(ptr, rc) if rc > 0 else b""
                reply(rc=rc, **compare(got, c.get("expect")))
            elif op == "batch_put_from":
                ptrs, sizes = [], []
                for off, v in zip(c["offs"], c["values"]):
                    data = value(v)
                    ptr = local_ptr(int(off), len(data))
                    ctypes.memmove(ptr, data, len(data))
                    ptrs.append(ptr)
                    sizes.append(len(data))
                rcs = store.batch_put_from(c["keys"], ptrs, sizes, config(c.get("cfg")))
                reply(rcs=list(rcs))
            elif op == "batch_get_into":
                ptrs = [local_ptr(int(o), int(n)) for o, n in zip(c["offs"], c["caps"])]
                for p, n in zip(ptrs, c["caps"]):
                    ctypes.memset(p, 0, int(n))
                rcs = list(store.batch_get_into(c["keys"], ptrs, [int(n) for n in c["caps"]]))
                exp = c.get("expect") or [None] * len(rcs)
                matches = []
                for p, rc, e in zip(ptrs, rcs, exp):
                    got = ctypes.string_at(p, rc) if rc > 0 else b""
                    matches.append(compare(got, e).get("match"))
                reply(rcs=rcs, matches=matches)
            elif op == "replica_desc":
                out = []
                for r in store.get_replica_desc(c["key"]):
                    d = {"memory": bool(r.is_memory_replica()), "status": str(r.status)}
                    if r.is_memory_replica():
                        b = r.get_memory_descriptor().buffer_descriptor
                        d.update(endpoint=b.transport_endpoint, size=b.size,
                                 addr=b.buffer_address)
                    out.append(d)
                reply(replicas=out)
            elif op == "fill":
                data = value(c["value"])
                retries = int(c.get("max_retries", 100))
                pause = int(c.get("retry_sleep_ms", 20)) / 1000.0
                codes, failed, attempts = {}, [], 0
                for i in range(int(c["count"])):
                    for _ in range(retries + 1):
                        attempts += 1
                        rc = store.put("%s%d" % (c["prefix"], i), data)
                        codes[str(rc)] = codes.get(str(rc), 0) + 1
                        if rc == 0:
                            break
                        time.sleep(pause)
                    else:
                        failed.append(i)
                reply(attempts=attempts, codes=codes, failed=failed)
            elif op == "close":
                reply(rc=store.close())
            else:
                reply(ok=False, error="unknown op %r" % op)
        except Exception as e:  # report, keep serving
            reply(ok=False, error="%s: %s" % (type(e).__name__, e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
