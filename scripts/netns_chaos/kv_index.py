"""A KV-event subscriber of every master that keeps an index of the keys the leader
holds, following the procedure README's "KV events across a failover" gives; for the
chaos scenarios, whose checker compares it with the leader's keys once all is healed.

    python3 kv_index.py --endpoint 10.0.0.1:5557 --endpoint 10.0.0.2:5557 \
        --out kv-index.json --stop FILE

One thread per master: a ZMTP 3.1 SUB connection (NULL mechanism, subscribed to every
topic), reconnecting after failures. Each message is [topic, 8-byte big-endian
sequence, msgpack [timestamp, [event maps], dp_rank]]. A batch whose term (sequence
>> 32) is older than the newest seen is a deposed leader's and is ignored; `cleared`
empties the index; `stored` adds `object_key`, `removed` drops it. Every 200 ms the
index is written to --out as {"term": t, "keys": [...], "ignored": n, "batches": n}.
"""

import argparse
import json
import os
import select
import socket
import struct
import threading
import time


class Index:
    def __init__(self):
        self.lock = threading.Lock()
        self.term = 0
        self.keys = set()
        self.ignored = 0
        self.batches = 0

    def apply(self, seq, events):
        with self.lock:
            self.batches += 1
            term = seq >> 32
            if term < self.term:
                self.ignored += 1
                return
            self.term = term
            for e in events:
                kind = e.get("event_type")
                if kind == "cleared":
                    self.keys.clear()
                elif kind == "stored":
                    self.keys.add(e.get("object_key"))
                elif kind == "removed":
                    self.keys.discard(e.get("object_key"))

    def dump(self, path):
        with self.lock:
            state = {"term": self.term, "keys": sorted(self.keys), "ignored": self.ignored,
                     "batches": self.batches}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, path)


def unpack(data):
    """Decodes one msgpack value filling `data` (the types the master writes)."""
    value, at = _value(data, 0)
    if at != len(data):
        raise ValueError("trailing bytes")
    return value


def _value(b, at):
    t = b[at]
    at += 1
    if t <= 0x7F:
        return t, at
    if t >= 0xE0:
        return t - 0x100, at
    if 0x80 <= t <= 0x8F:
        return _map(b, at, t & 0x0F)
    if 0x90 <= t <= 0x9F:
        return _array(b, at, t & 0x0F)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        return b[at:at + n].decode(), at + n
    fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
             0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
    if t in fixed:
        size = struct.calcsize(fixed[t])
        return struct.unpack_from(fixed[t], b, at)[0], at + size
    if t == 0xC0:
        return None, at
    if t in (0xC2, 0xC3):
        return t == 0xC3, at
    lengths = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
    if t in lengths:
        n = struct.unpack_from(lengths[t], b, at)[0]
        at += struct.calcsize(lengths[t])
        raw = b[at:at + n]
        return (raw.decode() if t >= 0xD9 else bytes(raw)), at + n
    if t in (0xDC, 0xDD):
        fmt = ">H" if t == 0xDC else ">I"
        return _array(b, at + struct.calcsize(fmt), struct.unpack_from(fmt, b, at)[0])
    if t in (0xDE, 0xDF):
        fmt = ">H" if t == 0xDE else ">I"
        return _map(b, at + struct.calcsize(fmt), struct.unpack_from(fmt, b, at)[0])
    raise ValueError(f"msgpack type {t:#x}")


def _array(b, at, n):
    out = []
    for _ in range(n):
        v, at = _value(b, at)
        out.append(v)
    return out, at


def _map(b, at, n):
    out = {}
    for _ in range(n):
        k, at = _value(b, at)
        v, at = _value(b, at)
        out[k] = v
    return out, at


def _read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the publisher closed the connection")
        buf += chunk
    return bytes(buf)


def _read_frame(sock):
    """(is a command, more, body) of the next frame."""
    flags = _read_exact(sock, 1)[0]
    if flags & 0x02:
        size = struct.unpack(">Q", _read_exact(sock, 8))[0]
    else:
        size = _read_exact(sock, 1)[0]
    return bool(flags & 0x04), bool(flags & 0x01), _read_exact(sock, size)


def _command(name, data=b""):
    body = bytes([len(name)]) + name + data
    return bytes([0x04, len(body)]) + body


def subscribe(address, index, stop):
    host, port = address.rsplit(":", 1)
    while not os.path.exists(stop):
        try:
            sock = socket.create_connection((host, int(port)), timeout=2)
        except OSError:
            time.sleep(0.5)
            continue
        try:
            greeting = b"\xff" + b"\0" * 8 + b"\x7f\x03\x01" + b"NULL".ljust(20, b"\0")
            sock.sendall(greeting + b"\0" * (64 - len(greeting)))
            sock.sendall(_command(b"READY", b"\x0bSocket-Type\x00\x00\x00\x03SUB"))
            _read_exact(sock, 64)
            _read_frame(sock)  # the publisher's READY
            sock.sendall(_command(b"SUBSCRIBE"))
            # A frame that starts is read whole (within 30 s, else the connection is
            # given up); between frames the stop file is looked at every second.
            sock.settimeout(30)
            frames = []
            while not os.path.exists(stop):
                if not select.select([sock], [], [], 1)[0]:
                    continue
                is_command, more, body = _read_frame(sock)
                if is_command:
                    continue
                frames.append(body)
                if more:
                    continue
                if len(frames) == 3 and len(frames[1]) == 8:
                    seq = struct.unpack(">Q", frames[1])[0]
                    payload = unpack(frames[2])
                    index.apply(seq, payload[1])
                frames = []
        except (OSError, ValueError, IndexError, ConnectionError):
            time.sleep(0.5)
        finally:
            sock.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", action="append", required=True, help="HOST:PORT")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop", required=True)
    args = ap.parse_args()
    index = Index()
    for address in args.endpoint:
        threading.Thread(target=subscribe, args=(address, index, args.stop),
                         daemon=True).start()
    while not os.path.exists(args.stop):
        index.dump(args.out)
        time.sleep(0.2)
    index.dump(args.out)


if __name__ == "__main__":
    main()
