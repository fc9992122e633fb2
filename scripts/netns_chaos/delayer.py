"""Delay and jitter without netem: holds every packet an nftables `queue` rule hands to
this process (netfilter queue QUEUE, in the namespace it runs in) for DELAY ± JITTER
milliseconds (uniform), then lets it go on. For kernels without the netem qdisc;
scripts/netns-cluster.sh's `nc_delay` starts it where `tc ... netem` is missing.

    python3 delayer.py --queue 0 --delay-ms 50 --jitter-ms 20 [--ready FILE]

Speaks nfnetlink_queue over a raw netlink socket (no library): binds the queue, asks
for packet metadata only (the verdict needs just the packet id), and answers each
packet with NF_ACCEPT once its time has come. As with netem's jitter, packets whose
delays differ may leave out of order. A packet the queue cannot hold (more than
--max-queued waiting) is dropped by the kernel, as a full netem queue drops it.
"""

import argparse
import heapq
import os
import random
import select
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NLMSG_ERROR = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_GSO = 4
NF_ACCEPT = 1

NLMSGHDR = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
NFGENMSG = struct.Struct("!BBH")  # family, version, resource id (the queue), big-endian
NLATTR = struct.Struct("=HH")  # length, type


def attr(kind, payload):
    """One netlink attribute, padded to 4 bytes."""
    raw = NLATTR.pack(NLATTR.size + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def message(msg, queue, attrs, flags=NLM_F_REQUEST, seq=0):
    body = NFGENMSG.pack(socket.AF_UNSPEC, 0, queue) + b"".join(attrs)
    kind = (NFNL_SUBSYS_QUEUE << 8) | msg
    return NLMSGHDR.pack(NLMSGHDR.size + len(body), kind, flags, seq, 0) + body


def messages(data):
    """(type, payload) of every netlink message in one datagram; stops at a bad length."""
    off = 0
    while off + NLMSGHDR.size <= len(data):
        length, kind, _, _, _ = NLMSGHDR.unpack_from(data, off)
        if length < NLMSGHDR.size or off + length > len(data):
            return
        yield kind, data[off + NLMSGHDR.size:off + length]
        off += (length + 3) & ~3


def packet_id(payload):
    """The id of a queued packet (its NFQA_PACKET_HDR), or None."""
    off = NFGENMSG.size
    while off + NLATTR.size <= len(payload):
        length, kind = NLATTR.unpack_from(payload, off)
        if length < NLATTR.size:
            return None
        if kind & 0x7FFF == NFQA_PACKET_HDR and length >= NLATTR.size + 4:
            return struct.unpack_from("!I", payload, off + NLATTR.size)[0]
        off += (length + 3) & ~3
    return None


def configure(sock, queue, max_queued):
    """Binds the queue and sets metadata-only copies, the queue length and GSO."""
    requests = [
        [attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, socket.AF_INET))],
        [attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))],
        [attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", max_queued))],
        [attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO)),
         attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO))],
    ]
    for seq, attrs in enumerate(requests, 1):
        sock.send(message(NFQNL_MSG_CONFIG, queue, attrs, NLM_F_REQUEST | NLM_F_ACK, seq))
        for kind, payload in messages(sock.recv(65536)):
            if kind == NLMSG_ERROR:
                err = struct.unpack_from("=i", payload)[0]
                if err != 0:
                    raise OSError(-err, f"configuring queue {queue}: {os.strerror(-err)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queue", type=int, default=0)
    ap.add_argument("--delay-ms", type=float, required=True)
    ap.add_argument("--jitter-ms", type=float, default=0)
    ap.add_argument("--max-queued", type=int, default=20000)
    ap.add_argument("--ready", help="a file created once the queue is bound")
    args = ap.parse_args()

    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((0, 0))
    configure(sock, args.queue, args.max_queued)
    if args.ready:
        open(args.ready, "w").close()
    sock.setblocking(False)
    rng = random.Random()
    held = []  # (release time, packet id)
    while True:
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, pid = heapq.heappop(held)
            verdict = attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, pid))
            sock.send(message(NFQNL_MSG_VERDICT, args.queue, [verdict]))
        timeout = max(held[0][0] - now, 0) if held else None
        readable, _, _ = select.select([sock], [], [], timeout)
        if not readable:
            continue
        while True:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                break
            except OSError as e:
                # ENOBUFS: the socket overflowed and the kernel dropped some packets'
                # notices (those packets are dropped when the queue gives up on them).
                print(f"delayer: {e}", file=sys.stderr)
                break
            arrived = time.monotonic()
            for kind, payload in messages(data):
                if kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                    continue
                pid = packet_id(payload)
                if pid is None:
                    continue
                wait = args.delay_ms + rng.uniform(-args.jitter_ms, args.jitter_ms)
                heapq.heappush(held, (arrived + max(wait, 0) / 1000, pid))


if __name__ == "__main__":
    main()
