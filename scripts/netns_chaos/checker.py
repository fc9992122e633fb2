"""Checks the histories the chaos workload recorded (scripts/netns_chaos/workload.py).

A history is one JSON object per line, one per operation:

  {"op": "put", "key": k, "ver": [client, seq], "t0": s, "t1": s, "ok": bool}
  {"op": "get", "key": k, "t0": s, "t1": s, "ok": bool, "got": [client, seq] | null,
   "torn": bool}
  {"op": "remove", "key": k, "t0": s, "t1": s, "ok": bool}
  {"op": "final", ...}   a get made after the faults healed (same fields as "get")
  {"op": "healed", "t": s, "recovered": s | null}   when the client saw the heal, and
                                                     its first success after it
  {"op": "role", "master": m, "t0": s, "t1": s, "serving": bool, "view": v}
                         a sample of master m's /health (scripts/netns_chaos/roles.py)

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
* unavailable: the longest stretch in which no operation of any client succeeded, and
  per client (the prefix of its keys, "c1-..."), the longest in which none of its own
  did;
* two writers: a master said it served while another served without a break: two
  samples of master A serving the same view, and between them (the whole of its
  request and answer) a sample of master B serving. A leader serves a view without a
  break: once its lease is gone it never serves that view again.

Usage: checker.py HISTORY... (histories and role samples; prints a JSON summary; exits
1 when anything is lost, torn or stale, two masters served at once, or a client had
no success within its settle time after the heal, 60 s by default).

       checker.py kv-index INDEX_JSON LEADER_KEYS (compares a KV-event subscriber's
       index, scripts/netns_chaos/kv_index.py, with the leader's keys, one per line;
       prints a JSON summary; exits 1 when they differ).
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

    longest = longest_gap(r for r in records if r.get("ok") and "t1" in r)
    by_client = defaultdict(list)
    for r in records:
        if r.get("ok") and "t1" in r and "key" in r:
            by_client[r["key"].split("-", 1)[0]].append(r)
    per_client = {c: round(longest_gap(rs), 2) for c, rs in sorted(by_client.items())}
    recovered = [
        r["recovered"] - r["t"] for r in records if r["op"] == "healed" and r.get("recovered")
    ]
    unrecovered = sum(1 for r in records if r["op"] == "healed" and not r.get("recovered"))
    ops = [r for r in records if r["op"] in ("put", "get", "remove")]
    two_writers = overlapping_writers([r for r in records if r["op"] == "role"])
    return {
        "operations": len(ops),
        "acknowledged": sum(1 for r in ops if r["ok"]),
        "acknowledged_puts": sum(1 for v in puts.values() for p in v.values() if p["ok"]),
        "lost": len(lost),
        "torn": len(torn),
        "stale": len(stale),
        "longest_unavailable_s": round(longest, 2),
        "longest_unavailable_per_client_s": per_client,
        "recovery_s": round(max(recovered), 2) if recovered else None,
        "clients_not_recovered": unrecovered,
        "role_samples": sum(1 for r in records if r["op"] == "role"),
        "two_writers": len(two_writers),
        "examples": {"lost": lost[:3], "torn": torn[:3], "stale": stale[:3],
                     "two_writers": two_writers[:3]},
    }


def longest_gap(successes):
    """The longest time between two consecutive successes' ends."""
    ends = sorted(r["t1"] for r in successes)
    return max((b - a for a, b in zip(ends, ends[1:])), default=0.0)


def overlapping_writers(samples):
    """Samples of one master serving inside another's unbroken stretch of serving one
    view (two consecutive serving samples of that view), as (stretch, sample) pairs."""
    by_master = defaultdict(list)
    for s in samples:
        by_master[s["master"]].append(s)
    found = []
    for a, own in by_master.items():
        own.sort(key=lambda s: s["t0"])
        stretches = [
            (s1, s2) for s1, s2 in zip(own, own[1:])
            if s1["serving"] and s2["serving"] and s1["view"] == s2["view"]
        ]
        others = [s for b, lst in by_master.items() if b != a for s in lst if s["serving"]]
        for s1, s2 in stretches:
            for b in others:
                if s1["t1"] < b["t0"] and b["t1"] < s2["t0"]:
                    found.append({"serving": [s1, s2], "also_serving": b})
    return found


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


def compare_index(index, leader_keys):
    """How a subscriber's index (kv_index.py's dump) differs from the leader's keys."""
    have, want = set(index["keys"]), set(leader_keys)
    missing, extra = sorted(want - have), sorted(have - want)
    return {
        "kv_index": "match" if not (missing or extra) else "differs",
        "keys": len(want),
        "missing": len(missing),
        "extra": len(extra),
        "term": index.get("term"),
        "ignored_batches": index.get("ignored", 0),
        "examples": {"missing": missing[:3], "extra": extra[:3]},
    }


def main():
    if sys.argv[1:2] == ["kv-index"]:
        with open(sys.argv[2]) as f:
            index = json.load(f)
        with open(sys.argv[3]) as f:
            keys = [line.strip() for line in f if line.strip()]
        result = compare_index(index, keys)
        print(json.dumps(result))
        sys.exit(0 if result["kv_index"] == "match" else 1)
    summary = check(load(sys.argv[1:]))
    print(json.dumps(summary))
    bad = (summary["lost"] + summary["torn"] + summary["stale"] + summary["two_writers"]
           + summary["clients_not_recovered"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
