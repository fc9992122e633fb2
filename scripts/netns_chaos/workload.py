"""One chaos workload client: puts, gets and removes on its own keys through a Mooncake
Store client (`mooncake.store.MooncakeDistributedStore`: ours or upstream's, whichever
`mooncake` this Python imports), recording every operation in a history for
scripts/netns_chaos/checker.py.

Every value carries a header (magic, client, sequence number, body length, CRC-32 of
the body) and a body derived from (client, sequence), so a read tells which put wrote
it and whether the bytes are whole.

After --seconds of load it creates --loaded, waits for --healed (a file the scenario creates once the
faults are undone), records when it saw it and its first success after it, then reads
every key it holds once more (retrying each until --settle seconds after the heal) as
"final" records; it writes HISTORY.done and closes once --release exists.
"""

import argparse
import json
import os
import random
import struct
import sys
import time
import zlib

from mooncake.store import MooncakeDistributedStore

MAGIC = b"MCCH"
HEADER = struct.Struct("<4sIQII")  # magic, client, seq, body length, crc32(body)


def value(client, seq, size):
    body = random.Random((client << 40) | seq).randbytes(max(size - HEADER.size, 0))
    return HEADER.pack(MAGIC, client, seq, len(body), zlib.crc32(body)) + body


def parse(data):
    """(client, seq) of a value, and whether its bytes are whole."""
    if len(data) < HEADER.size:
        return None, True
    magic, client, seq, length, crc = HEADER.unpack_from(data)
    body = data[HEADER.size:]
    whole = magic == MAGIC and length == len(body) and zlib.crc32(body) == crc
    return [client, seq], not whole


class Recorder:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1)

    def write(self, record):
        self.f.write(json.dumps(record) + "\n")


def get_record(store, key, op="get"):
    t0 = time.time()
    try:
        data = store.get(key)
        ok = isinstance(data, (bytes, bytearray)) and len(data) > 0
    except Exception:
        data, ok = b"", False
    t1 = time.time()
    got, torn = parse(bytes(data)) if ok else (None, False)
    record = {"op": op, "key": key, "t0": t0, "t1": t1, "ok": ok, "got": got, "torn": torn}
    if not ok:
        # Why, for the report: whether the master still lists the key (1, 0 or an error).
        try:
            record["exists"] = store.is_exist(key)
        except Exception as e:
            record["exists"] = str(e)
    return record


def put_record(store, key, client, seq, size):
    t0 = time.time()
    try:
        ok = store.put(key, value(client, seq, size)) == 0
    except Exception:
        ok = False
    return {"op": "put", "key": key, "ver": [client, seq], "t0": t0, "t1": time.time(),
            "ok": ok}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", type=int, required=True)
    ap.add_argument("--host", required=True, help="this client's address")
    ap.add_argument("--metadata", required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--size", type=int, default=64 << 10)
    ap.add_argument("--segment", type=int, default=256 << 20)
    ap.add_argument("--healed", required=True)
    ap.add_argument("--settle", type=float, default=60)
    ap.add_argument("--ready", help="a file created once the client is set up")
    ap.add_argument("--go", help="a file whose creation starts the load (the scenario "
                                 "creates it once a lasting fault is in place)")
    ap.add_argument("--loaded", help="a file created once the load has run its time (the "
                                     "scenario heals its faults after that, so that no "
                                     "operation of the load runs on a healed network)")
    ap.add_argument("--release", required=True,
                    help="a file whose creation lets the client close (after every "
                         "client has read its keys back: closing unmounts its segment)")
    ap.add_argument("--rate", type=float, default=100, help="operations per second")
    ap.add_argument("--max-keys", type=int, default=400,
                    help="keys held at most (then the oldest is removed before a put), "
                         "so the data stays far below the segments and nothing is evicted")
    args = ap.parse_args()

    rec = Recorder(args.history)
    store = MooncakeDistributedStore()
    rc = store.setup(args.host, args.metadata, args.segment, 64 << 20, "tcp", "", args.master)
    if rc != 0:
        print(f"workload {args.client}: setup returned {rc}", file=sys.stderr)
        sys.exit(1)
    if args.ready:
        open(args.ready, "w").close()
    while args.go and not os.path.exists(args.go):
        time.sleep(0.01)
    rng = random.Random(args.client)
    held, seq, n = [], 0, 0
    start = time.time()
    end = start + args.seconds
    done = 0
    while time.time() < end:
        done += 1
        pause = start + done / args.rate - time.time()
        if pause > 0:
            time.sleep(pause)
        roll = rng.random()
        if len(held) >= args.max_keys:
            roll = 1.0
        if roll < 0.5 or not held:
            seq += 1
            n += 1
            key = f"c{args.client}-k{n}"
            rec.write(put_record(store, key, args.client, seq, args.size))
            held.append(key)
        elif roll < 0.85:
            rec.write(get_record(store, rng.choice(held)))
        else:
            key = held.pop(0 if len(held) >= args.max_keys else rng.randrange(len(held)))
            t0 = time.time()
            try:
                ok = store.remove(key) == 0
            except Exception:
                ok = False
            rec.write({"op": "remove", "key": key, "t0": t0, "t1": time.time(), "ok": ok})

    if args.loaded:
        open(args.loaded, "w").close()
    while not os.path.exists(args.healed):
        time.sleep(0.05)
    healed = time.time()
    deadline = healed + args.settle
    recovered = None
    while recovered is None and time.time() < deadline:
        # A fresh key each try: a put of a key that exists fails.
        seq += 1
        key = f"c{args.client}-probe{seq}"
        r = put_record(store, key, args.client, seq, args.size)
        rec.write(r)
        if r["ok"]:
            recovered = time.time()
            held.append(key)
        else:
            time.sleep(0.2)
    for key in held:
        tries = 0
        while True:
            tries += 1
            r = get_record(store, key, "final")
            if r["ok"] or time.time() >= deadline:
                break
            time.sleep(0.2)
        r["tries"] = tries
        rec.write(r)
    rec.write({"op": "healed", "t": healed, "recovered": recovered})
    # Closing unmounts this client's segment, and the objects on it go with it: wait
    # until every client has read its keys back.
    open(args.history + ".done", "w").close()
    while not os.path.exists(args.release):
        time.sleep(0.05)
    store.close()


if __name__ == "__main__":
    main()
