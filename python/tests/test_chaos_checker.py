"""The network-fault campaign's history checker (scripts/netns_chaos/checker.py) on
made-up histories: what it must count as lost, torn or stale, and what it must not."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "netns_chaos"))

import checker  # noqa: E402


def put(key, v, t0, t1, ok=True):
    return {"op": "put", "key": key, "ver": list(v), "t0": t0, "t1": t1, "ok": ok}


def get(key, v, t0, t1, ok=True, torn=False, op="get"):
    return {"op": op, "key": key, "t0": t0, "t1": t1, "ok": ok,
            "got": list(v) if v else None, "torn": torn}


def remove(key, t0, t1, ok=True):
    return {"op": "remove", "key": key, "t0": t0, "t1": t1, "ok": ok}


def test_a_clean_history_has_no_findings():
    h = [put("a", (1, 1), 0, 1), get("a", (1, 1), 2, 3), get("a", (1, 1), 10, 11, op="final"),
         {"op": "healed", "t": 9, "recovered": 10.5}]
    s = checker.check(h)
    assert (s["lost"], s["torn"], s["stale"]) == (0, 0, 0)
    assert s["acknowledged_puts"] == 1 and s["recovery_s"] == 1.5


def test_an_acknowledged_put_unreadable_after_healing_is_lost():
    h = [put("a", (1, 1), 0, 1), get("a", None, 10, 11, ok=False, op="final")]
    assert checker.check(h)["lost"] == 1
    assert checker.check([put("a", (1, 1), 0, 1)])["lost"] == 1, "never read again"


def test_a_failed_put_or_a_remove_since_excuses_absence():
    assert checker.check([put("a", (1, 1), 0, 1, ok=False)])["lost"] == 0
    h = [put("a", (1, 1), 0, 1), remove("a", 2, 3, ok=False)]
    assert checker.check(h)["lost"] == 0, "the remove may have taken effect"


def test_bytes_no_put_wrote_are_torn():
    h = [put("a", (1, 1), 0, 1), get("a", (1, 1), 2, 3, torn=True), get("a", (9, 9), 4, 5)]
    assert checker.check(h)["torn"] == 2


def test_an_older_version_after_a_newer_was_acknowledged_is_stale():
    h = [put("a", (1, 1), 0, 1), remove("a", 2, 3), put("a", (1, 2), 4, 5),
         get("a", (1, 1), 6, 7)]
    assert checker.check(h)["stale"] == 1


def test_overlapping_operations_may_return_either_version():
    # The second put began before the first was acknowledged: no order between them.
    h = [put("a", (1, 1), 0, 5), put("a", (1, 2), 1, 6), get("a", (1, 1), 7, 8)]
    assert checker.check(h)["stale"] == 0


def test_the_longest_gap_between_successes_is_the_unavailability():
    h = [put("a", (1, 1), 0, 1), get("a", None, 2, 9, ok=False), get("a", (1, 1), 9, 11)]
    assert checker.check(h)["longest_unavailable_s"] == 10


def role(master, t0, t1, serving, view):
    return {"op": "role", "master": master, "t0": t0, "t1": t1, "serving": serving,
            "view": view}


def test_a_handover_is_one_writer_at_a_time():
    h = [role("m1", 0, 0.1, True, 1), role("m2", 0, 0.1, False, None),
         role("m1", 1, 1.1, False, 1), role("m2", 1.2, 1.3, True, 2),
         role("m1", 2, 2.1, False, None), role("m2", 2, 2.1, True, 2)]
    s = checker.check(h)
    assert (s["role_samples"], s["two_writers"]) == (6, 0)


def test_a_master_serving_inside_anothers_unbroken_view_is_two_writers():
    h = [role("m1", 0, 0.1, True, 1), role("m2", 0.5, 0.6, True, 2),
         role("m1", 1, 1.1, True, 1)]
    s = checker.check(h)
    assert s["two_writers"] == 1
    assert s["examples"]["two_writers"][0]["also_serving"]["master"] == "m2"


def test_a_sample_overlapping_the_stretchs_ends_proves_nothing():
    # m2's sample began before m1's first answer came: m1 may have stopped serving
    # (and m2 started) in between; and a change of view is a break.
    h = [role("m1", 0, 0.5, True, 1), role("m2", 0.4, 0.6, True, 2),
         role("m1", 1, 1.1, True, 1),
         role("m1", 2, 2.1, True, 3), role("m2", 2.5, 2.6, True, 4), role("m1", 3, 3.1, True, 5)]
    assert checker.check(h)["two_writers"] == 0


def test_unavailability_is_measured_for_all_and_per_client():
    h = [put("c1-k1", (1, 1), 0, 1), put("c2-k1", (2, 1), 0, 2), put("c1-k2", (1, 2), 1, 6),
         put("c2-k2", (2, 2), 3, 4)]
    s = checker.check(h)
    assert s["longest_unavailable_s"] == 2
    assert s["longest_unavailable_per_client_s"] == {"c1": 5, "c2": 2}


def test_a_subscribers_index_matches_or_differs_from_the_leaders_keys():
    same = checker.compare_index({"keys": ["a", "b"], "term": 3}, ["b", "a"])
    assert same["kv_index"] == "match" and same["keys"] == 2
    off = checker.compare_index({"keys": ["a", "z"], "term": 3, "ignored": 2}, ["a", "b"])
    assert (off["kv_index"], off["missing"], off["extra"]) == ("differs", 1, 1)
    assert off["examples"] == {"missing": ["b"], "extra": ["z"]}
    assert off["ignored_batches"] == 2


def test_a_client_that_never_recovered_fails_the_check(tmp_path, capsys, monkeypatch):
    history = tmp_path / "h.jsonl"
    history.write_text('{"op": "healed", "t": 9, "recovered": null}\n')
    monkeypatch.setattr(sys, "argv", ["checker.py", str(history)])
    with pytest.raises(SystemExit) as exit_:
        checker.main()
    assert exit_.value.code == 1
    assert '"clients_not_recovered": 1' in capsys.readouterr().out
