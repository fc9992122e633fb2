"""Draws the cost curves of bench/scaling.sh: one SVG per CSV family in the given folder.

Usage: python plot_scaling.py OUT_DIR   (needs matplotlib; bench/scaling.sh installs it)
"""

import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import FuncFormatter  # noqa: E402

plt.rcParams["svg.hashsalt"] = "mooncake-rs"
plt.rcParams["svg.fonttype"] = "none"


def rows(folder, name):
    """The CSV's rows as dicts of floats, or None when it was not measured."""
    path = os.path.join(folder, name + ".csv")
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def count(x, _pos=None):
    """1k, 10M, ... for a log axis (1024 stays 1024)."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div and x % div == 0:
            return f"{x / div:g}{suffix}"
    return f"{x:g}"


def axis(ax, xlabel, ylabel, base=10):
    """A log x axis of counts (base 10 or 2) and a linear y axis from 0."""
    ax.set_xscale("log", base=base)
    ax.xaxis.set_major_formatter(FuncFormatter(count))
    ax.yaxis.set_major_formatter(FuncFormatter(count))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_ylim(bottom=0)


def save(fig, folder, name):
    fig.tight_layout()
    fig.savefig(os.path.join(folder, name + ".svg"), metadata={"Date": None})
    plt.close(fig)


def ops_lines(ax, data, x):
    for key, label in (
        ("get_replica_list", "GetReplicaList"),
        ("exist_key", "ExistKey"),
        ("put_start_end", "PutStart+PutEnd"),
    ):
        ax.plot([r[x] for r in data], [r[key] for r in data], marker="o", label=label)
    ax.legend()


def master_objects(folder):
    data = rows(folder, "master_objects")
    if not data:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    ops_lines(a, data, "objects")
    axis(a, "objects in the master", "ops/s (4 connections x 16 in flight)")
    a.set_title("Master throughput vs objects")
    b.plot([r["objects"] for r in data], [r["bytes_per_object"] for r in data], marker="o")
    axis(b, "objects in the master", "RSS bytes per object")
    b.set_title("Master memory per object")
    save(fig, folder, "master_objects")


def master_connections(folder):
    data = rows(folder, "master_connections")
    if not data:
        return
    fig, a = plt.subplots(figsize=(6, 4))
    ops_lines(a, data, "connections")
    axis(a, "client connections (16 calls in flight each)", "ops/s", base=2)
    a.set_title("Master throughput vs connections")
    save(fig, folder, "master_connections")


def te_peers(folder):
    data = rows(folder, "te_peers")
    if not data:
        return
    peers = [r["peers"] for r in data]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(peers, [r["gbps"] for r in data], marker="o")
    axis(a, "peers (TCP, 64 KiB x16 batches, 2 threads)", "GB/s", base=2)
    a.set_title("Transfer Engine throughput vs peers")
    b.plot(peers, [r["init_per_peer_kb"] for r in data], marker="o", label="initiator KB/peer")
    b.plot(peers, [r["targets_per_peer_kb"] for r in data], marker="s", label="target KB/peer (its 2 MiB buffer included)")
    axis(b, "peers", "resident KB per peer", base=2)
    t = b.twinx()
    t.plot(peers, [r["init_threads"] for r in data], color="grey", linestyle="--",
           marker="^", label="initiator threads")
    t.set_ylabel("initiator threads")
    t.set_ylim(bottom=0)
    lines = b.get_legend_handles_labels()
    more = t.get_legend_handles_labels()
    b.legend(lines[0] + more[0], lines[1] + more[1], loc="upper center")
    b.set_title("Memory and threads vs peers")
    save(fig, folder, "te_peers")


def conductor(folder):
    inst = rows(folder, "conductor_instances")
    blocks = rows(folder, "conductor_blocks")
    if not inst and not blocks:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    if inst:
        a.plot([r["instances"] for r in inst], [r["calls_per_s"] for r in inst], marker="o")
        axis(a, f"instances (index of {count(inst[0]['blocks'])} blocks)", "schedule calls/s",
             base=2)
        a.set_title("Conductor rate vs instances")
    if blocks:
        b.plot([r["blocks"] for r in blocks], [r["calls_per_s"] for r in blocks], marker="o",
               label="calls/s")
        axis(b, f"blocks in the prefix index ({int(blocks[0]['instances'])} instances)",
             "schedule calls/s")
        t = b.twinx()
        t.plot([r["blocks"] for r in blocks], [r["rss_mb"] for r in blocks], color="grey",
               linestyle="--", marker="^", label="RSS MB")
        t.set_ylabel("process RSS (MB)")
        t.set_ylim(bottom=0)
        lines = b.get_legend_handles_labels()
        more = t.get_legend_handles_labels()
        b.legend(lines[0] + more[0], lines[1] + more[1], loc="center left")
        b.set_title("Conductor rate vs prefix index")
    save(fig, folder, "conductor")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    for draw in (master_objects, master_connections, te_peers, conductor):
        draw(folder)


if __name__ == "__main__":
    main()
