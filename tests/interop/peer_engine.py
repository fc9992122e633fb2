"""Upstream Mooncake TransferEngine driven over stdin/stdout, for the Rust interop tests.

Run with the upstream peer's python (installed by scripts/upstream-peer.sh), with
MC_FORCE_TCP=1 and MC_TCP_BIND_ADDRESS=127.0.0.1 in the environment, or with
PEER_RDMA_DEVICE=<device> (and no MC_FORCE_TCP) to run over RDMA:

    peer_engine.py <metadata> <local_hostname> <buffer_size> <seed>

<metadata> is "P2PHANDSHAKE" or "http://127.0.0.1:<port>/metadata". The script creates a
TransferEngine, initializes it (protocol "tcp", or "rdma" on PEER_RDMA_DEVICE), allocates a buffer with ctypes, registers
it, fills it with pattern(<buffer_size>, <seed>) and prints one JSON line:

    {"ready": true, "segment": <segment name>, "addr": <buffer address>,
     "size": <buffer size>, "rpc_port": <rpc port>}

(in P2P mode the segment name is "127.0.0.1:<rpc_port>", otherwise <local_hostname>).
It then reads one command per line on stdin and answers each with one JSON line on
stdout ({"ok": true, ...} or {"ok": false, "error": ...}). Offsets are relative to the
buffer; remote addresses are absolute. Data is hex.

    dump <off> <len>                      -> {"hex": ...}
    fill <off> <hex>                      -> {}
    pattern <off> <len> <seed>            -> {}   fill with pattern(len, seed)
    write <segment> <off> <raddr> <len>   -> {"rc": transfer_sync_write(...)}
    read <segment> <off> <raddr> <len>    -> {"rc": transfer_sync_read(...)}
    batch_write <segment> <json [[off, raddr, len], ...]>
                                          -> {"rc": batch_transfer_sync_write(...)}
    batch_read <segment> <json [[off, raddr, len], ...]>
                                          -> {"rc": batch_transfer_sync_read(...)}
    write_notify <segment> <off> <raddr> <len> <name> <msg>
                                          -> {"rc": transfer_sync(..., Write, notify)}
    probe <segment>                       -> {"rc": send_probe(segment)}
    first_buffer <segment>                -> {"addr": get_first_buffer_address(segment)}
    notifies                              -> {"notifies": [[name, msg], ...]}
    quit                                  -> {} and exit 0

pattern(n, seed)[i] = (i * 7 + (i >> 8) + seed) & 0xff; the Rust side computes the same.
"""

import ctypes
import json
import os
import sys

from mooncake.engine import TransferEngine, TransferNotify, TransferOpcode


def pattern(n, seed):
    return bytes(((i * 7 + (i >> 8) + seed) & 0xFF) for i in range(n))


def reply(**kw):
    kw.setdefault("ok", True)
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def main():
    metadata, hostname, size, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    engine = TransferEngine()
    device = os.environ.get("PEER_RDMA_DEVICE", "")
    rc = engine.initialize(hostname, metadata, "rdma" if device else "tcp", device)
    if rc != 0:
        reply(ok=False, error="initialize returned %d" % rc)
        return 1
    buf = ctypes.create_string_buffer(size)
    base = ctypes.addressof(buf)
    ctypes.memmove(base, pattern(size, seed), size)
    rc = engine.register_memory(base, size, "cpu:0")
    if rc != 0:
        reply(ok=False, error="register_memory returned %d" % rc)
        return 1
    port = engine.get_rpc_port()
    segment = "127.0.0.1:%d" % port if metadata == "P2PHANDSHAKE" else hostname
    reply(ready=True, segment=segment, addr=base, size=size, rpc_port=port)

    def local(off, length):
        if off < 0 or length < 0 or off + length > size:
            raise ValueError("local range %d+%d outside the %d-byte buffer" % (off, length, size))
        return base + off

    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        cmd, args = parts[0], parts[1:]
        try:
            if cmd == "quit":
                reply()
                break
            elif cmd == "dump":
                off, length = int(args[0]), int(args[1])
                reply(hex=ctypes.string_at(local(off, length), length).hex())
            elif cmd == "fill":
                data = bytes.fromhex(args[1])
                ctypes.memmove(local(int(args[0]), len(data)), data, len(data))
                reply()
            elif cmd == "pattern":
                off, length, s = int(args[0]), int(args[1]), int(args[2])
                ctypes.memmove(local(off, length), pattern(length, s), length)
                reply()
            elif cmd in ("write", "read"):
                seg, off, raddr, length = args[0], int(args[1]), int(args[2]), int(args[3])
                fn = engine.transfer_sync_write if cmd == "write" else engine.transfer_sync_read
                reply(rc=fn(seg, local(off, length), raddr, length))
            elif cmd in ("batch_write", "batch_read"):
                seg, triples = args[0], json.loads(" ".join(args[1:]))
                bufs = [local(o, n) for o, _, n in triples]
                fn = (engine.batch_transfer_sync_write if cmd == "batch_write"
                      else engine.batch_transfer_sync_read)
                reply(rc=fn(seg, bufs, [r for _, r, _ in triples], [n for _, _, n in triples]))
            elif cmd == "write_notify":
                seg, off, raddr, length = args[0], int(args[1]), int(args[2]), int(args[3])
                notify = TransferNotify(args[4], args[5])
                reply(rc=engine.transfer_sync(seg, local(off, length), raddr, length,
                                              TransferOpcode.Write, notify))
            elif cmd == "probe":
                reply(rc=engine.send_probe(args[0]))
            elif cmd == "first_buffer":
                reply(addr=engine.get_first_buffer_address(args[0]))
            elif cmd == "notifies":
                reply(notifies=[[n.name, n.msg] for n in engine.get_notifies()])
            else:
                reply(ok=False, error="unknown command %r" % cmd)
        except Exception as e:  # report, keep serving
            reply(ok=False, error="%s: %s" % (type(e).__name__, e))
    engine.unregister_memory(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
