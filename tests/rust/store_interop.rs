//! Store interop, part 1: upstream's Python `MooncakeDistributedStore` (wheel 0.3.13,
//! driven by `tests/interop/store_peer.py`) against OUR `mooncake_master` binary, with
//! TE metadata in our master's embedded HTTP metadata server and the data plane
//! between upstream processes. Needs the peer from `bash scripts/upstream-peer.sh`;
//! `MOONCAKE_SKIP_INTEROP=1` skips.

mod interop_common;
mod store_interop_common;

use interop_common::peer;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;
use store_interop_common::*;

/// Proves, for an upstream client on our master: setup (ServiceReady, MountSegment,
/// ReMount after the first Ping), put/get of bytes, is_exist, get_size (and -704 for
/// a missing key), a put of an existing key succeeds and keeps the old value, zero-copy
/// `register_buffer` + `put_from`/`get_into` and `batch_put_from`/`batch_get_into`
/// (a missing key -704 per item), `put_batch`/`get_batch`, all bytes verified; and
/// heartbeats keep it alive past a 3 s `--client_ttl`; and
/// our admin HTTP reports it: `/get_all_segments` lists the upstream segment,
/// `/get_all_keys` the keys, `/query_key` the replica on that segment (404 for a
/// missing key), `/metrics` `master_key_count` the exact number of objects.
#[test]
fn upstream_python_client_basic_ops_on_our_master() {
    let Some(peer) = peer("upstream_python_client_basic_ops_on_our_master") else {
        return;
    };
    let master = MasterProc::ours(&["--client_ttl=3"]);
    let mut py = PyStore::start(
        &peer,
        "py-basic",
        &master.metadata_url(),
        &master.rpc_addr(),
        64 * MIB,
        16 * MIB,
        16 * MIB,
    );
    assert!(py.hostname.starts_with("127.0.0.1:"), "{}", py.hostname);

    // Bytes API.
    assert_eq!(py.put("hello", text("hello world"), default_cfg()), 0);
    assert_eq!(py.get("hello", text("hello world")), (11, true));
    assert_eq!(py.is_exist("hello"), 1);
    assert_eq!(py.is_exist("missing"), 0);
    assert_eq!(py.get_size("hello"), 11);
    assert_eq!(py.get_size("missing"), -704);
    assert_eq!(py.get("missing", json!(null)).0, 0, "get of a missing key");
    // Existing key: success, old value kept.
    assert_eq!(py.put("hello", text("another value!"), default_cfg()), 0);
    assert_eq!(py.get("hello", text("hello world")), (11, true));
    // A value that spans several TE slices of the 64 KiB TCP framing.
    let big = 3 * MIB + 17;
    assert_eq!(py.put("big", val(big, 3), default_cfg()), 0);
    assert_eq!(py.get("big", val(big, 3)), (big, true));
    assert_eq!(py.get_size("big"), big as i64);

    // Zero-copy, registered buffer.
    let zc = MIB + 3;
    assert_eq!(py.put_from("zc", 0, val(zc, 5), default_cfg()), 0);
    assert_eq!(
        py.get_into("zc", 4 * MIB, 2 * MIB, val(zc, 5)),
        (zc as i64, true)
    );
    assert_eq!(py.get("zc", val(zc, 5)), (zc, true));
    // Buffer too small: -600.
    assert_eq!(py.get_into("zc", 4 * MIB, 1000, json!(null)).0, -600);

    let keys = ["bz-0", "bz-1", "bz-2", "bz-3"];
    let sizes = [1u64, 4095, 300 * KIB, 2 * MIB + 1];
    let offs = [0u64, 4096, 8192, 8192 + 300 * KIB];
    let values: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| val(n, 40 + i as u8))
        .collect();
    let (rcs, _) = py.rcs(json!({"op": "batch_put_from", "keys": keys, "offs": offs,
                                 "values": values, "cfg": {}}));
    assert_eq!(rcs, vec![0; 4], "batch_put_from");
    let mut get_keys: Vec<&str> = keys.to_vec();
    get_keys.push("bz-missing");
    let get_offs: Vec<u64> = (0..5).map(|i| 4 * MIB + i * (2 * MIB + 4096)).collect();
    let mut expect = values.clone();
    expect.push(json!(null));
    let (rcs, v) = py.rcs(
        json!({"op": "batch_get_into", "keys": get_keys, "offs": get_offs,
                                 "caps": vec![2 * MIB + 4096; 5], "expect": expect}),
    );
    let mut want: Vec<i64> = sizes.iter().map(|&n| n as i64).collect();
    want.push(-704);
    assert_eq!(rcs, want, "batch_get_into");
    assert_eq!(
        v["matches"],
        json!([true, true, true, true, null]),
        "batch_get_into data"
    );

    // put_batch / get_batch.
    let pkeys = ["pb-0", "pb-1", "pb-2"];
    let pvals = [val(10, 1), val(64 * KIB, 2), val(MIB + 1, 3)];
    assert_eq!(
        py.rc(json!({"op": "put_batch", "keys": pkeys, "values": pvals, "cfg": {}})),
        0
    );
    let v = py.cmd(
        json!({"op": "get_batch", "keys": ["pb-0", "pb-1", "pb-2", "pb-missing"],
                          "expect": [pvals[0], pvals[1], pvals[2], null]}),
    );
    let results = v["results"].as_array().unwrap();
    for (i, r) in results.iter().take(3).enumerate() {
        assert_eq!(r["match"], json!(true), "get_batch item {i}: {r}");
    }
    assert_eq!(results[3]["len"], json!(0), "get_batch of a missing key");

    // Our admin HTTP sees the upstream client and its objects.
    let all: BTreeSet<&str> = [
        "hello", "big", "zc", "bz-0", "bz-1", "bz-2", "bz-3", "pb-0", "pb-1", "pb-2",
    ]
    .into_iter()
    .collect();
    assert_eq!(
        master.admin_lines("/get_all_segments"),
        vec![py.hostname.clone()]
    );
    let listed = master.admin_lines("/get_all_keys");
    assert_eq!(
        listed.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        all,
        "/get_all_keys"
    );
    assert_eq!(
        master.query_key_endpoints("hello"),
        Some(vec![py.hostname.clone()]),
        "/query_key?key=hello"
    );
    assert_eq!(master.query_key_endpoints("missing"), None);
    assert_eq!(master.metric("master_key_count"), Some(all.len() as f64));
    assert_eq!(master.admin("/health").0, 200);
    let (status, summary) = master.admin("/metrics/summary");
    assert_eq!(status, 200);
    assert!(!summary.trim().is_empty());
    assert_eq!(master.admin("/get_segments_detail").0, 200);

    // Heartbeats (Ping, and ReMount when told to) keep the client alive well past
    // the 3 s client TTL.
    eventually(
        Duration::from_secs(30),
        "6 pings from the upstream client",
        || master.metric("master_ping_requests_total").unwrap_or(0.0) >= 6.0,
    );
    assert_eq!(
        master.admin_lines("/get_all_segments"),
        vec![py.hostname.clone()],
        "the upstream client was expired despite its heartbeats"
    );
    assert_eq!(master.metric("master_active_clients"), Some(1.0));
    assert_eq!(py.get("hello", text("hello world")), (11, true));

    assert_eq!(py.close(), 0);
    eventually(
        Duration::from_secs(10),
        "the closed client's segment to leave /get_all_segments",
        || master.admin_lines("/get_all_segments").is_empty(),
    );
    py.quit();
}

/// Proves, on our master with `--default_kv_lease_ttl=500`: `remove` right after a
/// `get` is refused with OBJECT_HAS_LEASE (-706) and succeeds once the lease expired
/// (polled); `remove(force)` ignores the lease; `remove` of a missing key is -704;
/// `remove_by_regex` removes exactly the (substring-)matching keys and returns their
/// number, an invalid pattern is -600; non-forced `remove_by_regex` / `remove_all`
/// skip a leased object and take it once the lease expired (polled);
/// `remove_all(force)` removes and counts everything, leased or not.
#[test]
fn upstream_python_client_leases_and_removal_on_our_master() {
    let Some(peer) = peer("upstream_python_client_leases_and_removal_on_our_master") else {
        return;
    };
    let master = MasterProc::ours(&["--default_kv_lease_ttl=500"]);
    let mut py = PyStore::start(
        &peer,
        "py-lease",
        &master.metadata_url(),
        &master.rpc_addr(),
        64 * MIB,
        16 * MIB,
        0,
    );

    assert_eq!(py.put("lease", val(1000, 1), default_cfg()), 0);
    assert_eq!(py.get("lease", val(1000, 1)), (1000, true));
    assert_eq!(py.remove("lease", false), -706, "remove under a read lease");
    let mut last = 0;
    eventually(
        Duration::from_secs(15),
        "remove to succeed after the lease",
        || {
            last = py.remove("lease", false);
            assert!(last == 0 || last == -706, "remove returned {last}");
            last == 0
        },
    );
    assert_eq!(py.is_exist("lease"), 0);
    assert_eq!(py.remove("lease", false), -704);

    assert_eq!(py.put("forced", val(2000, 2), default_cfg()), 0);
    assert_eq!(py.get("forced", val(2000, 2)), (2000, true));
    assert_eq!(py.remove("forced", true), 0, "forced remove under a lease");
    assert_eq!(py.is_exist("forced"), 0);

    for k in ["re-a-1", "re-a-2", "xre-a-3", "re-b-1", "other"] {
        assert_eq!(py.put(k, text(k), default_cfg()), 0);
    }
    // ECMAScript regex_search: a substring match, so "xre-a-3" matches too.
    assert_eq!(
        py.rc(json!({"op": "remove_by_regex", "pattern": "re-a-[0-9]", "force": false})),
        3
    );
    assert_eq!(
        master
            .admin_lines("/get_all_keys")
            .into_iter()
            .collect::<BTreeSet<_>>(),
        ["other", "re-b-1"]
            .into_iter()
            .map(String::from)
            .collect::<BTreeSet<_>>()
    );
    assert_eq!(
        py.rc(json!({"op": "remove_by_regex", "pattern": "(", "force": false})),
        -600,
        "invalid regex"
    );
    // Non-forced bulk removal skips leased objects until their lease expired.
    assert_eq!(py.is_exist("re-b-1"), 1); // leased now
    assert_eq!(
        py.rc(json!({"op": "remove_by_regex", "pattern": "^re-b-", "force": false})),
        0,
        "remove_by_regex must skip a leased object"
    );
    assert_eq!(py.is_exist("re-b-1"), 1); // leased again
    assert_eq!(
        py.rc(json!({"op": "remove_all", "force": false})),
        1,
        "remove_all must remove 'other' and skip the leased 're-b-1'"
    );
    eventually(
        Duration::from_secs(15),
        "remove_all to take the object once its lease expired",
        || {
            let rc = py.rc(json!({"op": "remove_all", "force": false}));
            assert!(rc == 0 || rc == 1, "remove_all returned {rc}");
            rc == 1
        },
    );
    assert!(master.admin_lines("/get_all_keys").is_empty());
    assert_eq!(master.metric("master_key_count"), Some(0.0));

    // Forced bulk removal ignores leases.
    for k in ["f-1", "f-2", "f-3"] {
        assert_eq!(py.put(k, text(k), default_cfg()), 0);
    }
    assert_eq!(py.get("f-1", text("f-1")), (3, true));
    assert_eq!(py.is_exist("f-2"), 1);
    assert_eq!(py.rc(json!({"op": "remove_all", "force": true})), 3);
    assert!(master.admin_lines("/get_all_keys").is_empty());
    assert_eq!(py.rc(json!({"op": "remove_all", "force": false})), 0);
    py.quit();
}

/// Proves, on our master: with `replica_num=2` and two upstream clients each
/// mounting a segment, the master places one replica on each segment (seen through
/// upstream's `get_replica_desc` and our `/query_key`); the second client reads what
/// the first wrote (`get`, `get_into`, `get_batch`), from both segments; after the
/// writer `close()`s (UnmountSegment), its single-replica objects disappear while the
/// replicated ones survive on the other segment and still read back byte for byte.
#[test]
fn upstream_python_replication_across_two_clients_on_our_master() {
    let Some(peer) = peer("upstream_python_replication_across_two_clients_on_our_master") else {
        return;
    };
    let master = MasterProc::ours(&[]);
    let (url, addr) = (master.metadata_url(), master.rpc_addr());
    let mut a = PyStore::start(&peer, "py-a", &url, &addr, 64 * MIB, 16 * MIB, 8 * MIB);
    let mut b = PyStore::start(&peer, "py-b", &url, &addr, 64 * MIB, 16 * MIB, 8 * MIB);
    assert_ne!(a.hostname, b.hostname);
    let both: BTreeSet<String> = [a.hostname.clone(), b.hostname.clone()].into();
    assert_eq!(
        master
            .admin_lines("/get_all_segments")
            .into_iter()
            .collect::<BTreeSet<_>>(),
        both
    );

    let rep2 = json!({"replica_num": 2});
    let n = 2 * MIB + 5;
    assert_eq!(a.put_from("rep2", 0, val(n, 7), rep2.clone()), 0);
    assert_eq!(a.put("rep2-bytes", val(70_000, 8), rep2.clone()), 0);
    let pkeys = ["rep2-b0", "rep2-b1", "rep2-b2"];
    let pvals = [val(1, 9), val(4096, 10), val(MIB, 11)];
    assert_eq!(
        a.rc(json!({"op": "put_batch", "keys": pkeys, "values": pvals, "cfg": rep2})),
        0
    );
    for k in ["rep2", "rep2-bytes", "rep2-b0", "rep2-b1", "rep2-b2"] {
        let eps: BTreeSet<String> = a.replica_endpoints(k).into_iter().collect();
        assert_eq!(eps, both, "replicas of {k}");
        let ours: BTreeSet<String> = master
            .query_key_endpoints(k)
            .expect("query_key")
            .into_iter()
            .collect();
        assert_eq!(ours, both, "/query_key of {k}");
    }
    // Single replica on the writer's segment, and one on the other client's.
    assert_eq!(a.put("solo-a", val(5000, 12), on_cfg(&a.hostname)), 0);
    assert_eq!(a.put("solo-b", val(6000, 13), on_cfg(&b.hostname)), 0);
    assert_eq!(a.replica_endpoints("solo-a"), vec![a.hostname.clone()]);
    assert_eq!(a.replica_endpoints("solo-b"), vec![b.hostname.clone()]);

    assert_eq!(b.get("rep2", val(n, 7)), (n, true));
    assert_eq!(b.get_into("rep2", 0, 4 * MIB, val(n, 7)), (n as i64, true));
    assert_eq!(b.get("rep2-bytes", val(70_000, 8)), (70_000, true));
    let v = b.cmd(json!({"op": "get_batch", "keys": pkeys, "expect": pvals}));
    assert_eq!(
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["match"].clone())
            .collect::<Vec<_>>(),
        vec![json!(true); 3],
        "get_batch from the second client: {v}"
    );
    assert_eq!(b.get("solo-a", val(5000, 12)), (5000, true));
    assert_eq!(b.get("solo-b", val(6000, 13)), (6000, true));

    // The writer leaves.
    assert_eq!(a.close(), 0);
    eventually(
        Duration::from_secs(15),
        "solo-a to vanish with its segment",
        || b.is_exist("solo-a") == 0,
    );
    assert_eq!(
        master.admin_lines("/get_all_segments"),
        vec![b.hostname.clone()]
    );
    for k in [
        "rep2",
        "rep2-bytes",
        "rep2-b0",
        "rep2-b1",
        "rep2-b2",
        "solo-b",
    ] {
        assert_eq!(b.is_exist(k), 1, "{k} after the writer closed");
        assert_eq!(
            b.replica_endpoints(k),
            vec![b.hostname.clone()],
            "replicas of {k} after the writer closed"
        );
    }
    assert_eq!(b.get("rep2", val(n, 7)), (n, true));
    assert_eq!(b.get_into("rep2", 0, 4 * MIB, val(n, 7)), (n as i64, true));
    assert_eq!(b.get("rep2-b2", val(MIB, 11)), (MIB, true));
    assert_eq!(b.get("solo-b", val(6000, 13)), (6000, true));
    a.quit();
    b.quit();
}

/// Proves, on our master with `--client_ttl=2`: when an upstream client that owns a
/// segment is killed (SIGKILL, no unmount), our master expires it: its segment leaves
/// `/get_all_segments`, objects whose only replica was there vanish for the surviving
/// upstream client, and `replica_num=2` objects keep their replica on the survivor and
/// read back byte for byte.
#[test]
fn upstream_python_client_death_on_our_master() {
    let Some(peer) = peer("upstream_python_client_death_on_our_master") else {
        return;
    };
    let master = MasterProc::ours(&["--client_ttl=2"]);
    let (url, addr) = (master.metadata_url(), master.rpc_addr());
    let mut a = PyStore::start(&peer, "py-doomed", &url, &addr, 32 * MIB, 8 * MIB, 0);
    let mut b = PyStore::start(&peer, "py-survivor", &url, &addr, 32 * MIB, 8 * MIB, 0);
    assert_eq!(a.put("dead-solo", val(10_000, 1), on_cfg(&a.hostname)), 0);
    assert_eq!(
        a.put("dead-rep2", val(MIB + 9, 2), json!({"replica_num": 2})),
        0
    );
    assert_eq!(b.put("alive-solo", val(20_000, 3), on_cfg(&b.hostname)), 0);
    assert_eq!(b.get("dead-solo", val(10_000, 1)), (10_000, true));
    assert_eq!(a.replica_endpoints("dead-rep2").len(), 2);

    drop(a); // SIGKILL
    eventually(
        Duration::from_secs(30),
        "the killed client's objects to vanish",
        || b.is_exist("dead-solo") == 0,
    );
    eventually(
        Duration::from_secs(10),
        "the killed client's segment to leave /get_all_segments",
        || master.admin_lines("/get_all_segments") == vec![b.hostname.clone()],
    );
    assert_eq!(b.replica_endpoints("dead-rep2"), vec![b.hostname.clone()]);
    assert_eq!(b.get("dead-rep2", val(MIB + 9, 2)), (MIB + 9, true));
    assert_eq!(b.get("alive-solo", val(20_000, 3)), (20_000, true));
    // The survivor keeps working, on its own segment.
    assert_eq!(b.put("after-death", val(30_000, 4), default_cfg()), 0);
    assert_eq!(b.get("after-death", val(30_000, 4)), (30_000, true));
    b.quit();
}

/// Proves, with upstream clients on our master killed (SIGKILL) and restarted on the
/// same ports (empty: no objects, no segments, an empty embedded metadata server):
/// the clients reconnect and ReMount their segments by themselves, old objects are
/// gone, new puts onto the other client's segment succeed, and a client that joins
/// after the restart (no cached TE descriptors) reads them, so the survivors
/// re-published their TE descriptors into our fresh metadata server.
#[test]
fn upstream_python_clients_survive_our_master_restart() {
    let Some(peer) = peer("upstream_python_clients_survive_our_master_restart") else {
        return;
    };
    let mut master = MasterProc::ours(&[]);
    let (url, addr) = (master.metadata_url(), master.rpc_addr());
    let mut a = PyStore::start(&peer, "py-restart-a", &url, &addr, 32 * MIB, 8 * MIB, 0);
    let mut b = PyStore::start(&peer, "py-restart-b", &url, &addr, 32 * MIB, 8 * MIB, 0);
    assert_eq!(a.put("before", val(5000, 1), on_cfg(&b.hostname)), 0);

    master.restart();
    let both: BTreeSet<String> = [a.hostname.clone(), b.hostname.clone()].into();
    eventually(
        Duration::from_secs(30),
        "both upstream clients to remount on the restarted master",
        || {
            master
                .admin_lines("/get_all_segments")
                .into_iter()
                .collect::<BTreeSet<_>>()
                == both
        },
    );
    assert_eq!(
        a.is_exist("before"),
        0,
        "objects do not survive a master restart"
    );
    let mut rc = 1;
    eventually(
        Duration::from_secs(30),
        "a put onto the other client's segment after the restart",
        || {
            rc = a.put("after", val(300_000, 2), on_cfg(&b.hostname));
            rc == 0
        },
    );
    for h in [&a.hostname, &b.hostname] {
        assert!(
            master.metadata_has("ram", h) && master.metadata_has("rpc_meta", h),
            "{h} did not re-publish its TE metadata into our fresh metadata server"
        );
    }
    assert_eq!(a.replica_endpoints("after"), vec![b.hostname.clone()]);
    assert_eq!(b.get("after", val(300_000, 2)), (300_000, true));
    assert_eq!(a.get("after", val(300_000, 2)), (300_000, true));
    let mut c = PyStore::start(&peer, "py-restart-c", &url, &addr, 0, 8 * MIB, 0);
    assert_eq!(c.get("after", val(300_000, 2)), (300_000, true));
    c.quit();
    a.quit();
    b.quit();
}

/// Proves, on our master with a 16 MiB pool (one upstream client's segment): a loop
/// of 1 MiB puts well past the capacity keeps succeeding (each put retried while the
/// master answers -200 and evicts asynchronously); eviction happened (the oldest
/// objects are gone, the stored count and `master_key_count` stay within the
/// pool), the newest object survives and reads back byte for byte, and objects put
/// with `with_hard_pin` before the fill were never evicted.
#[test]
fn upstream_python_eviction_on_our_master() {
    let Some(peer) = peer("upstream_python_eviction_on_our_master") else {
        return;
    };
    let master = MasterProc::ours(&[]);
    let mut py = PyStore::start(
        &peer,
        "py-evict",
        &master.metadata_url(),
        &master.rpc_addr(),
        16 * MIB,
        4 * MIB,
        0,
    );
    // Hard-pinned objects are never evicted.
    for i in 0..3u8 {
        let k = format!("pin-{i}");
        assert_eq!(
            py.put(&k, val(MIB, 60 + i), json!({"with_hard_pin": true})),
            0
        );
    }
    let count = 48u64;
    let v = py.cmd(
        json!({"op": "fill", "prefix": "ev-", "count": count, "value": val(MIB, 21),
                          "max_retries": 250, "retry_sleep_ms": 20}),
    );
    assert_eq!(v["failed"], json!([]), "puts that never succeeded: {v}");
    assert_eq!(v["codes"]["0"], json!(count), "successful puts: {v}");
    for (code, _) in v["codes"].as_object().unwrap() {
        assert!(
            code == "0" || code == "-200",
            "unexpected put code {code}: {v}"
        );
    }
    eprintln!("eviction fill: {v}");

    let keys: Vec<String> = (0..count).map(|i| format!("ev-{i}")).collect();
    let (rcs, _) = py.rcs(json!({"op": "batch_is_exist", "keys": keys}));
    let present = rcs.iter().filter(|&&r| r == 1).count() as u64;
    assert!(
        rcs.iter().all(|&r| r == 0 || r == 1),
        "batch_is_exist: {rcs:?}"
    );
    assert_eq!(
        rcs[0], 0,
        "the oldest object must have been evicted: {rcs:?}"
    );
    assert_eq!(
        rcs[count as usize - 1],
        1,
        "the newest object must survive: {rcs:?}"
    );
    assert!(
        (1..=13).contains(&present),
        "{present} 1 MiB objects beside 3 pinned ones in a 16 MiB pool: {rcs:?}"
    );
    for i in 0..3u8 {
        let k = format!("pin-{i}");
        assert_eq!(py.get(&k, val(MIB, 60 + i)), (MIB, true), "hard-pinned {k}");
    }
    // Eviction may still be running in the background: only bound the count.
    let keys_now = master.metric("master_key_count").expect("master_key_count");
    assert!(
        (4.0..=16.0).contains(&keys_now),
        "master_key_count {keys_now} for a 16 MiB pool of 1 MiB objects"
    );
    let last = format!("ev-{}", count - 1);
    assert_eq!(py.get(&last, val(MIB, 21)), (MIB, true));
    py.quit();
}

/// The JSON "shape" of a value: objects keep their keys (values replaced by their
/// shapes), arrays the shape of their first element, scalars their type.
fn shape(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::Null => json!("null"),
        Value::Bool(_) => json!("bool"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
    }
}

/// Our admin JSON keeps upstream's shapes. Same scenario (one upstream Python client,
/// one small object) on both masters; compares the JSON shapes of `/query_key?key=<existing>`
/// (upstream: `{"success":true,"data":[{"size_","buffer_address_","protocol_",
/// "transport_endpoint_"}]}`), `/query_key?key=<missing>` (upstream 404
/// `{"success":false,"error_code":-704,"error_message":"OBJECT_NOT_FOUND"}`) and
/// `/get_segments_detail` (upstream `{"total_segments":1,"segments":[{"segment_name",
/// "segment_id","client_id","base_address","size_bytes","size_human","te_endpoint",
/// "protocol","status","allocator_used_bytes","allocator_capacity_bytes",
/// "allocator_usage_percent"}]}`). The plain-text endpoints and `/health` are compared
/// too (they already match).
#[test]
fn admin_http_json_matches_upstream() {
    let Some(peer) = peer("admin_http_json_matches_upstream") else {
        return;
    };
    let run = |master: &MasterProc| {
        let mut py = PyStore::start(
            &peer,
            "py-admin",
            &master.metadata_url(),
            &master.rpc_addr(),
            16 * MIB,
            4 * MIB,
            0,
        );
        assert_eq!(py.put("k", text("hello world"), default_cfg()), 0);
        let get = |path: &str| {
            let (status, body) = master.admin(path);
            let v: serde_json::Value = serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("{:?} {path}: not JSON ({e}): {body}", master.kind));
            (status, shape(&v))
        };
        let out = (
            get("/query_key?key=k"),
            get("/query_key?key=missing"),
            get("/get_segments_detail"),
            master.admin_lines("/get_all_segments") == vec![py.hostname.clone()],
            master.admin_lines("/get_all_keys"),
            {
                let (status, body) = master.admin("/health");
                (
                    status,
                    serde_json::from_str::<serde_json::Value>(&body).ok(),
                )
            },
        );
        py.quit();
        out
    };
    let ours = run(&MasterProc::ours(&[]));
    let upstream = run(&MasterProc::upstream(&peer, &[]));
    // Already equal.
    assert!(ours.3 && upstream.3, "/get_all_segments");
    assert_eq!(ours.4, upstream.4, "/get_all_keys");
    assert_eq!(ours.5, upstream.5, "/health");
    // The known differences, reported together.
    let mut diffs = Vec::new();
    for (what, o, u) in [
        ("/query_key?key=<existing>", &ours.0, &upstream.0),
        ("/query_key?key=<missing>", &ours.1, &upstream.1),
        ("/get_segments_detail", &ours.2, &upstream.2),
    ] {
        if o != u {
            diffs.push(format!(
                "{what}:\n  ours     {} {}\n  upstream {} {}",
                o.0, o.1, u.0, u.1
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "admin JSON differs from upstream's:\n{}",
        diffs.join("\n")
    );
}
