#!/usr/bin/env python3
"""Mooncake Store client-operations benchmark, driven from Python.

The same harness runs against either implementation, so the comparison is
apples-to-apples:

  --impl=upstream  the upstream wheel's ``mooncake.store.MooncakeDistributedStore``
                   (run it with the peer venv's python);
  --impl=ours      our ``libmooncake.so`` through ctypes on the ``mooncake_store_*``
                   C ABI (include/mooncake/store_c.h), ``--lib`` names the library.

Modes:

  --mode=client    for each value size and each family (put/get, put_from/get_into,
                   batch_put_from/batch_get_into) run --rounds rounds of --ops items
                   with fresh keys (reads read what the round's writes stored), remove
                   the round's keys (untimed); report the median round's ops/s and
                   p50/p99 latency over every call (a batch call is one sample), as a
                   table and one line per row:
                   ROW op=<op> size=<n> ops=<ops/s> mbps=<MB/s> p50=<us> p99=<us> errors=<n>
  --mode=serve     set up with a --global_segment_size segment, print
                   "store_py_bench serving segment <hostname>" on stderr and hold the
                   segment until SIGINT/SIGTERM.

``get`` over our library uses the extension ``mooncake_store_batch_get_buffers``
(mooncake_ext.h: the object in library-allocated memory, one master call, then
copied into ``bytes``) when the library exports it; otherwise what a store_c.h user
does without a preallocated buffer: get_size, then get_into a fresh buffer.
``put_from``/``get_into`` use a registered ctypes buffer (register_buffer), as
upstream's benchmark does (spec store.md Appendix A.2).

``--dummy=HOST:PORT`` (``--impl=ours``, client mode) sets the store up as a dummy
client of the ``mooncake_client`` serving that address on this host
(``mooncake_store_setup_dummy``); its registered buffer then comes from
``mooncake_store_alloc_from_mem_pool``, shared memory the real client maps.
"""

import argparse
import ctypes
import os
import re
import signal
import statistics
import sys
import time

MIN_SLOTS = 16


def parse_size(text):
    """Parses 4096, 4K, 1MiB, 1GB (powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)(i?b)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size")
    shift = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[m.group(2).lower()]
    return int(m.group(1)) << shift


# --- the two implementations behind one interface ------------------------------------


class UpstreamStore:
    """The upstream wheel's MooncakeDistributedStore."""

    name = "upstream"

    def __init__(self, _lib):
        from mooncake.store import MooncakeDistributedStore

        self.s = MooncakeDistributedStore()

    def setup(self, host, metadata, segment, local, protocol, master):
        return self.s.setup(host, metadata, segment, local, protocol, "", master)

    def hostname(self):
        return self.s.get_hostname()

    def put(self, key, value):
        return self.s.put(key, value)

    def get(self, key):
        return self.s.get(key)

    def put_from(self, key, addr, size):
        return self.s.put_from(key, addr, size)

    def get_into(self, key, addr, size):
        return self.s.get_into(key, addr, size)

    def batch_put_from(self, keys, addrs, sizes):
        return self.s.batch_put_from(keys, addrs, sizes)

    def batch_get_into(self, keys, addrs, sizes):
        return self.s.batch_get_into(keys, addrs, sizes)

    def register_buffer(self, addr, size):
        return self.s.register_buffer(addr, size)

    def unregister_buffer(self, addr):
        return self.s.unregister_buffer(addr)

    def remove_by_regex(self, pattern):
        return self.s.remove_by_regex(pattern, True)

    def close(self):
        self.s.close()


class OursStore:
    """libmooncake.so's mooncake_store_* C ABI through ctypes."""

    name = "ours"

    def __init__(self, lib_path):
        lib = ctypes.CDLL(lib_path)
        vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
        sigs = {
            "mooncake_store_create": ([], vp),
            "mooncake_store_destroy": ([vp], None),
            "mooncake_store_setup": ([vp, cp, cp, ctypes.c_uint64, ctypes.c_uint64, cp, cp, cp],
                                     ctypes.c_int),
            "mooncake_store_put": ([vp, cp, cp, sz, vp], ctypes.c_int),
            "mooncake_store_put_from": ([vp, cp, vp, sz, vp], ctypes.c_int),
            "mooncake_store_batch_put_from": ([vp, vp, vp, vp, sz, vp, vp], ctypes.c_int),
            "mooncake_store_get_into": ([vp, cp, vp, sz], ctypes.c_int64),
            "mooncake_store_batch_get_into": ([vp, vp, vp, vp, sz, vp], ctypes.c_int),
            "mooncake_store_get_size": ([vp, cp], ctypes.c_int64),
            "mooncake_store_get_hostname": ([vp, vp, sz], ctypes.c_int),
            "mooncake_store_remove_by_regex": ([vp, cp, ctypes.c_int], ctypes.c_int64),
            "mooncake_store_register_buffer": ([vp, vp, sz], ctypes.c_int),
            "mooncake_store_unregister_buffer": ([vp, vp], ctypes.c_int),
        }
        for fn, (args, ret) in sigs.items():
            f = getattr(lib, fn)
            f.argtypes = args
            f.restype = ret
        # Extensions (mooncake_ext.h), as the mooncake package uses them: a whole object
        # read straight into a new bytes object (one master call, no copy), else into
        # library-allocated memory (one call, one copy). Without either, get falls back
        # to get_size + get_into (two calls).
        self.get_with = getattr(lib, "mooncake_store_get_with_allocator", None)
        if self.get_with is not None:
            self.alloc_fn = ctypes.CFUNCTYPE(vp, vp, ctypes.c_uint64)
            self.get_with.argtypes = [vp, cp, self.alloc_fn, vp]
            self.get_with.restype = ctypes.c_int64
            new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
            new_bytes.restype = ctypes.py_object
            new_bytes.argtypes = [vp, ctypes.c_ssize_t]
            self.read_into = None

            def allocate(_ctx, size):
                self.read_into = new_bytes(None, size)
                return ctypes.cast(ctypes.c_char_p(self.read_into), vp).value

            self.allocate = self.alloc_fn(allocate)
        self.get_buffers = getattr(lib, "mooncake_store_batch_get_buffers", None)
        if self.get_buffers is not None:
            self.get_buffers.argtypes = [vp, vp, sz, vp, vp]
            self.get_buffers.restype = ctypes.c_int
            lib.mooncake_store_free_buffer.argtypes = [vp]
            lib.mooncake_store_free_buffer.restype = None
        self.lib = lib
        self.h = lib.mooncake_store_create()
        if not self.h:
            raise RuntimeError("mooncake_store_create returned NULL")

    def setup(self, host, metadata, segment, local, protocol, master):
        return self.lib.mooncake_store_setup(self.h, host.encode(), metadata.encode(), segment,
                                             local, protocol.encode(), b"", master.encode())

    def setup_dummy(self, local, address):
        self.lib.mooncake_store_setup_dummy.argtypes = [ctypes.c_void_p, ctypes.c_uint64,
                                                        ctypes.c_uint64, ctypes.c_char_p]
        self.lib.mooncake_store_setup_dummy.restype = ctypes.c_int
        return self.lib.mooncake_store_setup_dummy(self.h, 0, local, address.encode())

    def alloc(self, size):
        f = self.lib.mooncake_store_alloc_from_mem_pool
        f.argtypes, f.restype = [ctypes.c_void_p, ctypes.c_uint64], ctypes.c_uint64
        return f(self.h, size)

    def hostname(self):
        buf = ctypes.create_string_buffer(512)
        if self.lib.mooncake_store_get_hostname(self.h, buf, len(buf)) != 0:
            return "?"
        return buf.value.decode()

    def put(self, key, value):
        return self.lib.mooncake_store_put(self.h, key.encode(), value, len(value), None)

    def get(self, key):
        k = key.encode()
        if self.get_with is not None:
            self.read_into = None
            n = self.get_with(self.h, k, self.allocate, None)
            value, self.read_into = self.read_into, None
            return value if n >= 0 and value is not None else b""
        if self.get_buffers is not None:
            keys = (ctypes.c_char_p * 1)(k)
            ptr = (ctypes.c_void_p * 1)()
            n = (ctypes.c_int64 * 1)()
            if self.get_buffers(self.h, keys, 1, ptr, n) != 0 or n[0] < 0 or not ptr[0]:
                return b""
            try:
                return ctypes.string_at(ptr[0], n[0])
            finally:
                self.lib.mooncake_store_free_buffer(ptr[0])
        n = self.lib.mooncake_store_get_size(self.h, k)
        if n <= 0:
            return b""
        buf = ctypes.create_string_buffer(n)
        got = self.lib.mooncake_store_get_into(self.h, k, buf, n)
        if got < 0:
            return b""
        return buf.raw[:got]

    def put_from(self, key, addr, size):
        return self.lib.mooncake_store_put_from(self.h, key.encode(), addr, size, None)

    def get_into(self, key, addr, size):
        return self.lib.mooncake_store_get_into(self.h, key.encode(), addr, size)

    def _arrays(self, keys, addrs, sizes):
        n = len(keys)
        k = (ctypes.c_char_p * n)(*[x.encode() for x in keys])
        a = (ctypes.c_void_p * n)(*addrs)
        s = (ctypes.c_size_t * n)(*sizes)
        return n, k, a, s

    def batch_put_from(self, keys, addrs, sizes):
        n, k, a, s = self._arrays(keys, addrs, sizes)
        out = (ctypes.c_int * n)()
        rc = self.lib.mooncake_store_batch_put_from(self.h, k, a, s, n, None, out)
        return list(out) if rc == 0 else [rc] * n

    def batch_get_into(self, keys, addrs, sizes):
        n, k, a, s = self._arrays(keys, addrs, sizes)
        out = (ctypes.c_int64 * n)()
        rc = self.lib.mooncake_store_batch_get_into(self.h, k, a, s, n, out)
        return list(out) if rc == 0 else [rc] * n

    def register_buffer(self, addr, size):
        return self.lib.mooncake_store_register_buffer(self.h, addr, size)

    def unregister_buffer(self, addr):
        return self.lib.mooncake_store_unregister_buffer(self.h, addr)

    def remove_by_regex(self, pattern):
        return self.lib.mooncake_store_remove_by_regex(self.h, pattern.encode(), 1)

    def close(self):
        if self.h:
            self.lib.mooncake_store_destroy(self.h)
            self.h = None


# --- statistics and report -----------------------------------------------------------


class Acc:
    """Latency samples (ns), per-round rates and errors of one row."""

    def __init__(self):
        self.samples = []
        self.rates = []
        self.errors = 0
        self.first_error = None

    def error(self, what):
        self.errors += 1
        if self.first_error is None:
            self.first_error = what

    def row(self, op, size):
        if self.first_error is not None:
            print(f"warning: {op} size {size}: {self.errors} error(s), first: {self.first_error}",
                  file=sys.stderr)
        s = sorted(self.samples)

        def pct(p):
            if not s:
                return 0.0
            i = min(max(int(-(-p * len(s) // 1)), 1), len(s)) - 1
            return s[i] / 1e3

        rate = statistics.median(self.rates) if self.rates else 0.0
        return {"op": op, "size": size, "ops": rate, "mbps": rate * size / 1e6,
                "p50": pct(0.50), "p99": pct(0.99), "errors": self.errors}


def row_line(r):
    return (f"ROW op={r['op']} size={r['size']} ops={r['ops']:.1f} mbps={r['mbps']:.2f} "
            f"p50={r['p50']:.1f} p99={r['p99']:.1f} errors={r['errors']}")


def report(title, rows):
    print(title)
    print(f"{'op':<18} {'size':>9} {'ops/s':>12} {'MB/s':>10} {'p50 us':>10} {'p99 us':>10} "
          f"{'errors':>7}")
    for r in rows:
        print(f"{r['op']:<18} {r['size']:>9} {r['ops']:>12.1f} {r['mbps']:>10.2f} "
              f"{r['p50']:>10.1f} {r['p99']:>10.1f} {r['errors']:>7}")
    for r in rows:
        print(row_line(r))
    sys.stdout.flush()


# --- the benchmark -------------------------------------------------------------------


class SizeBench:
    """All families at one value size."""

    def __init__(self, store, args, size, base, slots):
        self.st = store
        self.a = args
        self.size = size
        self.n = args.ops if args.ops else (200 if size >= 512 << 10 else 2000)
        self.slots = slots
        self.src = base
        self.dst = base + slots * size
        self.payload = os.urandom(size)
        for j in range(slots):
            ctypes.memmove(self.src + j * size, self.payload, size)

    def key(self, fam, rnd, i):
        return f"{self.a.key_prefix}-{fam}-{self.size}-{rnd}-{i}"

    def cleanup(self, fam, rnd):
        self.st.remove_by_regex(f"^{self.a.key_prefix}-{fam}-{self.size}-{rnd}-")

    def wants(self, op):
        return op in self.a.operations

    def clear_dst(self):
        ctypes.memset(self.dst, 0, self.slots * self.size)

    def verify(self, used, acc, what):
        for j in range(used):
            if ctypes.string_at(self.dst + j * self.size, self.size) != self.payload:
                acc.error(f"{what}: data differs from what was put")
                return

    def warm_up(self):
        keys = [self.key("warm", 0, i) for i in range(self.slots)]
        sizes = [self.size] * self.slots
        self.st.batch_put_from(keys, [self.src + j * self.size for j in range(self.slots)], sizes)
        self.st.batch_get_into(keys, [self.dst + j * self.size for j in range(self.slots)], sizes)
        self.cleanup("warm", 0)

    def bytes_family(self, rows):
        put, get = Acc(), Acc()
        clock = time.perf_counter_ns
        st, n, size, value = self.st, self.n, self.size, self.payload
        for rnd in range(self.a.rounds):
            start = clock()
            for i in range(n):
                key = self.key("pb", rnd, i)
                t = clock()
                rc = st.put(key, value)
                put.samples.append(clock() - t)
                if rc != 0:
                    put.error(f"put {key}: {rc}")
            put.rates.append(n * 1e9 / (clock() - start))
            if self.wants("get"):
                last = None
                start = clock()
                for i in range(n):
                    key = self.key("pb", rnd, i)
                    t = clock()
                    v = st.get(key)
                    get.samples.append(clock() - t)
                    if len(v) != size:
                        get.error(f"get {key}: {len(v)} bytes")
                    else:
                        last = v
                get.rates.append(n * 1e9 / (clock() - start))
                if last is not None and last != value:
                    get.error("get: data differs from what was put")
            self.cleanup("pb", rnd)
        if self.wants("put"):
            rows.append(put.row("put", size))
        if self.wants("get"):
            rows.append(get.row("get", size))

    def zero_copy_family(self, rows):
        put, get = Acc(), Acc()
        clock = time.perf_counter_ns
        st, n, size, slots = self.st, self.n, self.size, self.slots
        for rnd in range(self.a.rounds):
            start = clock()
            for i in range(n):
                key = self.key("pf", rnd, i)
                t = clock()
                rc = st.put_from(key, self.src, size)
                put.samples.append(clock() - t)
                if rc != 0:
                    put.error(f"put_from {key}: {rc}")
            put.rates.append(n * 1e9 / (clock() - start))
            if self.wants("get_into"):
                self.clear_dst()
                start = clock()
                for i in range(n):
                    key = self.key("pf", rnd, i)
                    addr = self.dst + (i % slots) * size
                    t = clock()
                    rc = st.get_into(key, addr, size)
                    get.samples.append(clock() - t)
                    if rc != size:
                        get.error(f"get_into {key}: {rc}")
                get.rates.append(n * 1e9 / (clock() - start))
                self.verify(min(n, slots), get, "get_into")
            self.cleanup("pf", rnd)
        if self.wants("put_from"):
            rows.append(put.row("put_from", size))
        if self.wants("get_into"):
            rows.append(get.row("get_into", size))

    def batch_family(self, rows):
        put, get = Acc(), Acc()
        clock = time.perf_counter_ns
        st, n, size, b = self.st, self.n, self.size, self.a.batch
        srcs = [self.src + j * size for j in range(b)]
        dsts = [self.dst + j * size for j in range(b)]
        for rnd in range(self.a.rounds):
            keys = [self.key("bp", rnd, i) for i in range(n)]
            chunks = [keys[i:i + b] for i in range(0, n, b)]
            start = clock()
            for chunk in chunks:
                k = len(chunk)
                t = clock()
                res = st.batch_put_from(chunk, srcs[:k], [size] * k)
                put.samples.append(clock() - t)
                for key, rc in zip(chunk, res):
                    if rc != 0:
                        put.error(f"batch_put_from {key}: {rc}")
            put.rates.append(n * 1e9 / (clock() - start))
            if self.wants("batch_get_into"):
                self.clear_dst()
                start = clock()
                for chunk in chunks:
                    k = len(chunk)
                    t = clock()
                    res = st.batch_get_into(chunk, dsts[:k], [size] * k)
                    get.samples.append(clock() - t)
                    for key, rc in zip(chunk, res):
                        if rc != size:
                            get.error(f"batch_get_into {key}: {rc}")
                get.rates.append(n * 1e9 / (clock() - start))
                self.verify(min(n, b), get, "batch_get_into")
            self.cleanup("bp", rnd)
        if self.wants("batch_put_from"):
            rows.append(put.row("batch_put_from", size))
        if self.wants("batch_get_into"):
            rows.append(get.row("batch_get_into", size))

    def run(self):
        self.warm_up()
        rows = []
        if self.wants("put") or self.wants("get"):
            self.bytes_family(rows)
        if self.wants("put_from") or self.wants("get_into"):
            self.zero_copy_family(rows)
        if self.wants("batch_put_from") or self.wants("batch_get_into"):
            self.batch_family(rows)
        return rows


def make_store(args):
    store = UpstreamStore(None) if args.impl == "upstream" else OursStore(args.lib)
    if args.dummy:
        rc = store.setup_dummy(args.local_buffer_size, args.dummy)
    else:
        rc = store.setup(args.local_hostname, args.metadata_server, args.global_segment_size,
                         args.local_buffer_size, args.protocol, args.master_server_addr)
    if rc != 0:
        raise SystemExit(f"store_py_bench: setup ({store.name}) failed: {rc}")
    return store


def run_client(args):
    store = make_store(args)
    slots = max(args.batch, MIN_SLOTS)
    max_size = max(args.value_sizes)
    length = 2 * slots * max_size
    if args.dummy:
        base = store.alloc(length)
        if base == 0:
            raise SystemExit(f"store_py_bench: alloc_from_mem_pool({length}) failed")
    else:
        buf = (ctypes.c_char * length)()
        base = ctypes.addressof(buf)
    rc = store.register_buffer(base, length)
    if rc != 0:
        raise SystemExit(f"store_py_bench: register_buffer({length}) failed: {rc}")
    print(f"store_py_bench client ({store.name}) {store.hostname()} -> master "
          f"{args.master_server_addr}, prefix {args.key_prefix}", file=sys.stderr)
    rows = []
    for size in args.value_sizes:
        got = SizeBench(store, args, size, base, slots).run()
        for r in got:
            print(row_line(r), file=sys.stderr)
        rows.extend(got)
    store.unregister_buffer(base)
    store.close()
    report(f"store_py_bench client ops ({store.name} via Python, rounds {args.rounds}, "
           f"batch {args.batch}, segment {args.global_segment_size} bytes)", rows)


def run_serve(args):
    stop = []
    if args.global_segment_size == 0:
        raise SystemExit("store_py_bench: --mode=serve needs --global_segment_size > 0")
    store = make_store(args)
    # Installed after setup: upstream's setup may install its own handlers.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(1))
    print(f"store_py_bench serving segment {store.hostname()}", file=sys.stderr, flush=True)
    while not stop:
        time.sleep(0.1)
    store.close()
    print("store_py_bench: segment closed", file=sys.stderr, flush=True)


OPS = ["put", "get", "put_from", "get_into", "batch_put_from", "batch_get_into"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["client", "serve"], default="client")
    p.add_argument("--impl", choices=["upstream", "ours"], required=True)
    p.add_argument("--lib", default="target/release/libmooncake.so",
                   help="our libmooncake.so (--impl=ours)")
    p.add_argument("--master_server_addr", default="127.0.0.1:50051")
    p.add_argument("--metadata_server", default="P2PHANDSHAKE")
    p.add_argument("--local_hostname", default="127.0.0.1")
    p.add_argument("--protocol", default="tcp")
    p.add_argument("--global_segment_size", type=parse_size, default=None,
                   help="serve: 1GiB, client: 0")
    p.add_argument("--local_buffer_size", type=parse_size, default=None,
                   help="serve: 16MiB, client: 64MiB")
    p.add_argument("--value_sizes", default="4096,1048576")
    p.add_argument("--ops", type=int, default=0,
                   help="items per op, size and round (default 200 for >= 512 KiB, else 2000)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--operations", default=",".join(OPS))
    p.add_argument("--key_prefix", default=None)
    p.add_argument("--dummy", default=None,
                   help="ours: a dummy client of the mooncake_client at HOST:PORT")
    a = p.parse_args(argv)
    if a.dummy and (a.impl != "ours" or a.mode != "client"):
        p.error("--dummy needs --impl=ours --mode=client")
    serve = a.mode == "serve"
    if a.global_segment_size is None:
        a.global_segment_size = 1 << 30 if serve else 0
    if a.local_buffer_size is None:
        a.local_buffer_size = 16 << 20 if serve else 64 << 20
    try:
        a.value_sizes = [parse_size(s) for s in a.value_sizes.split(",")]
    except argparse.ArgumentTypeError as e:
        p.error(f"--value_sizes: {e}")
    if any(s <= 0 or s > 1 << 30 for s in a.value_sizes):
        p.error("--value_sizes: every size must be in 1..=1GiB")
    a.operations = [o.strip() for o in a.operations.split(",") if o.strip()]
    bad = [o for o in a.operations if o not in OPS]
    if bad:
        p.error(f"--operations: unknown {bad}")
    if a.ops < 0 or a.batch < 1 or a.rounds < 1:
        p.error("--ops must be >= 0, --batch and --rounds >= 1")
    if a.key_prefix is None:
        a.key_prefix = f"py{os.urandom(4).hex()}"
    if not re.fullmatch(r"[A-Za-z0-9_]+", a.key_prefix):
        p.error("--key_prefix: letters, digits and _ only")
    if not serve and ("put" in a.operations or "get" in a.operations) \
            and a.local_buffer_size < max(a.value_sizes):
        p.error("--local_buffer_size is smaller than the largest value; put stages whole values")
    return a


def main(argv):
    args = parse_args(argv)
    if args.mode == "serve":
        run_serve(args)
    else:
        run_client(args)


if __name__ == "__main__":
    main(sys.argv[1:])
