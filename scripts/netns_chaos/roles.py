"""Samples every master's role during a chaos scenario, for the checker's one-writer
check: each master's `/health` (its metrics port) every --interval seconds, one thread
per master so that a paused master does not hold up the others' samples.

    python3 roles.py --master m1=10.0.0.1:9003 --master m2=10.0.0.2:9003 \
        --out roles.jsonl --stop FILE

Each sample is one line: {"op": "role", "master": name, "t0": s, "t1": s,
"serving": bool, "view": int | null} (t0 when the request was sent, t1 when the answer
came; "serving" is a leader that says it serves, "view" its view version). A master
that does not answer within the interval is not recorded for that round.
"""

import argparse
import json
import os
import threading
import time
import urllib.request


def sample(name, address, interval, stop, out, lock):
    url = f"http://{address}/health"
    while not os.path.exists(stop):
        t0 = time.time()
        try:
            with urllib.request.urlopen(url, timeout=max(interval, 0.2)) as reply:
                health = json.loads(reply.read())
        except (OSError, ValueError):
            health = None
        t1 = time.time()
        if isinstance(health, dict):
            serving = health.get("role") == "leader" and health.get("service_ready") is not False
            record = {"op": "role", "master": name, "t0": t0, "t1": t1,
                      "serving": bool(serving), "view": health.get("view_version")}
            with lock:
                out.write(json.dumps(record) + "\n")
        time.sleep(max(interval - (time.time() - t0), 0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", action="append", required=True, help="NAME=HOST:PORT")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--interval", type=float, default=0.1)
    args = ap.parse_args()
    lock = threading.Lock()
    with open(args.out, "a", buffering=1) as out:
        threads = []
        for spec in args.master:
            name, address = spec.split("=", 1)
            t = threading.Thread(target=sample,
                                 args=(name, address, args.interval, args.stop, out, lock))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()


if __name__ == "__main__":
    main()
