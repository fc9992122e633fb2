"""Checks the histories the chaos workload recorded (scripts/netns_chaos/workload.py).

A history is one JSON object per line, one per operation:

  {"op": "put", "key": k, "ver": [client, seq], "t0": s, "t1": s, "ok": bool}
  {"op": "get", "key": k, "t0": s, "t1": s, "ok": bool, "got": [client, seq] | null,
   "torn": bool}
  {"op": "remove", "key": k, "t0": s, "t1": s, "ok": bool}
  {"op": "final", ...}   a get made after the faults healed (same fields as "get")
  {"op": "healed", "t": s, "recovered": s | null}   when the client saw the heal, and
                                                     its first success after it

`ok` is the client's acknowledgement; an operation that failed may still have taken
effect (its request may have reached the master), so the checks count only what
acknowledged operations prove:

* torn: a read returned bytes no put of that key wrote (a bad checksum, or a version
  never put for the key);
* stale: a read returned a version older than one it must see: some put P of the key
  was acknowledged before the read began, and the version read was acknowledged before
  P began (or a remove acknowledged before the read began came after it);
* lost: after healing, a key with an acknowledged put and no remove begun since holds
  nothing, or a version older than that put;
* unavailable: the longest stretch in which no operation of any client succeeded.

Usage: checker.py HISTORY... (prints a JSON summary; exits 1 when anything is lost,
torn or stale).
"""

import json
import sys
from collections import defaultdict


def load(paths):
    """Every record of every history file."""
    records = []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    records.append(json.loads(line))
    return records


def ver(v):
    return None if v is None else tuple(v)


def check(records):
    """The summary of `records`: counts, and a few examples of each finding."""
    puts = defaultdict(dict)  # key -> version -> put record
    removes = defaultdict(list)  # key -> remove records
    reads = []
    finals = []
    for r in records:
        op = r["op"]
        if op == "put":
            puts[r["key"]][ver(r["ver"])] = r
        elif op == "remove":
            removes[r["key"]].append(r)
        elif op == "get":
            reads.append(r)
        elif op == "final":
            finals.append(r)

    torn, stale, lost = [], [], []
    for r in reads + finals:
        if not r["ok"]:
            continue
        key, got = r["key"], ver(r.get("got"))
        written = puts[key].get(got)
        if r.get("torn") or written is None:
            torn.append(r)
            continue
        if is_stale(r, written, puts[key].values(), removes[key]):
            stale.append(r)

    final_of = {r["key"]: r for r in finals}
    for key, versions in puts.items():
        acked = [p for p in versions.values() if p["ok"]]
        if not acked:
            continue
        newest = max(acked, key=lambda p: p["t1"])
        if any(rm["t0"] >= newest["t0"] for rm in removes[key]):
            continue  # possibly removed since
        final = final_of.get(key)
        if final is None:
            lost.append({"key": key, "why": "never read after healing", "put": newest})
        elif not final["ok"]:
            lost.append({"key": key, "why": "not readable after healing", "put": newest})
        else:
            got = versions.get(ver(final.get("got")))
            if got is not None and got["t1"] < newest["t0"]:
                lost.append({"key": key, "why": "an older version after healing", "put": newest})

    successes = sorted(r["t1"] for r in records if r.get("ok") and "t1" in r)
    longest = max((b - a for a, b in zip(successes, successes[1:])), default=0.0)
    recovered = [
        r["recovered"] - r["t"] for r in records if r["op"] == "healed" and r.get("recovered")
    ]
    unrecovered = sum(1 for r in records if r["op"] == "healed" and not r.get("recovered"))
    ops = [r for r in records if r["op"] in ("put", "get", "remove")]
    return {
        "operations": len(ops),
        "acknowledged": sum(1 for r in ops if r["ok"]),
        "acknowledged_puts": sum(1 for v in puts.values() for p in v.values() if p["ok"]),
        "lost": len(lost),
        "torn": len(torn),
        "stale": len(stale),
        "longest_unavailable_s": round(longest, 2),
        "recovery_s": round(max(recovered), 2) if recovered else None,
        "clients_not_recovered": unrecovered,
        "examples": {"lost": lost[:3], "torn": torn[:3], "stale": stale[:3]},
    }


def is_stale(read, written, puts, removes):
    """Whether `read`, which returned the version `written` put, must have seen a newer
    state: an acknowledged put that began after `written` was acknowledged and was
    acknowledged before the read began, or such a remove."""
    if not written["ok"]:
        return False  # when a failed put took effect is unknown
    for p in puts:
        if p["ok"] and p["t1"] < read["t0"] and p["t0"] > written["t1"]:
            return True
    for rm in removes:
        if rm["ok"] and rm["t1"] < read["t0"] and rm["t0"] > written["t1"]:
            return True
    return False


def main():
    summary = check(load(sys.argv[1:]))
    print(json.dumps(summary))
    bad = summary["lost"] + summary["torn"] + summary["stale"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
