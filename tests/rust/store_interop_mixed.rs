//! Store interop, parts 2 and 3: OUR store client (`mooncake::store::Client::setup`,
//! coro_rpc + HTTP metadata, advertising 127.0.0.1 through `MC_TCP_BIND_ADDRESS`)
//! against upstream's `mooncake_master`, and mixed clusters (an upstream Python client
//! and our client each mounting a segment) on our master and on upstream's, and what
//! `--enable_metadata_cleanup_on_timeout` leaves of a killed client's metadata on each. Needs the
//! peer from `bash scripts/upstream-peer.sh`; `MOONCAKE_SKIP_INTEROP=1` skips.

mod interop_common;
mod store_interop_common;

use interop_common::{assert_bytes_eq, pattern, peer, protocol, Peer};
use mooncake::store::{Client, Code, ErrorCode, ReplicateConfig};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;
use store_interop_common::*;

fn on(segment: &str) -> ReplicateConfig {
    ReplicateConfig {
        preferred_segments: vec![segment.to_string()],
        ..ReplicateConfig::default()
    }
}

fn replicas(n: u64) -> ReplicateConfig {
    ReplicateConfig {
        replica_num: n,
        ..ReplicateConfig::default()
    }
}

/// Reads `key` with our client and checks it equals `pattern(len, seed)`.
#[track_caller]
fn check_ours(c: &Client, key: &str, len: u64, seed: u8) {
    let mut buf = vec![0u8; len as usize + 64];
    let got = c
        .get_into(key, &mut buf)
        .unwrap_or_else(|e| panic!("our get_into({key}): {e:?}"));
    assert_eq!(got, len, "size of {key}");
    assert_bytes_eq(&buf[..len as usize], &pattern(len as usize, seed), key);
    assert!(
        buf[len as usize..].iter().all(|&b| b == 0),
        "{key}: bytes written past the object"
    );
}

/// The published TE descriptor of `segment` in the master's metadata server.
fn te_descriptor(master: &MasterProc, segment: &str) -> Value {
    let key = curl_escape(&format!("mooncake/ram/{segment}"));
    let url = format!("{}?key={key}", master.metadata_url());
    let (status, body) = http_get(&url).expect("metadata server answers");
    assert_eq!(status, 200, "GET {url}: {body}");
    serde_json::from_str(&body).expect("descriptor JSON")
}

/// Proves, for our client on upstream's master (embedded HTTP metadata,
/// `--default_kv_lease_ttl=500`): `Client::setup` (ServiceReady "2.0.0", client id,
/// MountSegment, heartbeat ReMount) is accepted; our TE descriptor advertises
/// 127.0.0.1; upstream's `/get_all_segments` lists both of our clients; put (staged),
/// put_from (multi-slice, 40 MiB+), batch_put_from with preferred segments land where
/// asked (upstream's `/query_key`), and get_into / batch_get_into read them back byte
/// for byte across our two clients over TCP (a missing key -704 per item, a small
/// buffer -600); an existing key keeps its value; is_exist / get_size; a `remove`
/// right after a read is -706 and succeeds after the lease (polled); forced remove;
/// remove_by_regex and remove_all counts; `replica_num=2` places one replica on each
/// client; our heartbeats (Ping, ReMount) keep both clients alive past a 3 s
/// `--client_ttl`; dropping a client unmounts its segment on upstream's master.
#[test]
fn our_client_on_upstream_master() {
    let Some(peer) = peer("our_client_on_upstream_master") else {
        return;
    };
    // SoftRoCE in the test VM moves ~100 MB/s: a 40 MiB read needs a longer lease.
    let lease = if protocol() == "rdma" {
        "--default_kv_lease_ttl=5000"
    } else {
        "--default_kv_lease_ttl=500"
    };
    let master = MasterProc::upstream(&peer, &[lease, "--client_ttl=3"]);
    let a = our_client(&master, 64 * MIB, 16 * MIB);
    let b = our_client(&master, 64 * MIB, 16 * MIB);
    let (ha, hb) = (a.hostname().to_string(), b.hostname().to_string());
    assert_ne!(ha, hb);
    assert_eq!(a.te_segment_name().as_deref(), Some(ha.as_str()));
    let d = te_descriptor(&master, &ha);
    assert_eq!(d["protocol"], json!(protocol()), "descriptor {d}");
    if protocol() == "tcp" {
        assert_eq!(d["tcp_data_host"], json!("127.0.0.1"), "descriptor {d}");
    }
    let both: BTreeSet<String> = [ha.clone(), hb.clone()].into();
    assert_eq!(
        master
            .admin_lines("/get_all_segments")
            .into_iter()
            .collect::<BTreeSet<_>>(),
        both
    );

    // Staged put from a into b's segment, read by both.
    let small = pattern(100_000, 1);
    a.put("r-small", &small, &on(&hb)).unwrap();
    assert_eq!(
        master.query_key_endpoints("r-small"),
        Some(vec![hb.clone()])
    );
    check_ours(&a, "r-small", 100_000, 1);
    check_ours(&b, "r-small", 100_000, 1);
    // Existing key: success, old value kept.
    a.put("r-small", &pattern(5000, 99), &on(&ha)).unwrap();
    check_ours(&b, "r-small", 100_000, 1);
    assert_eq!(a.get_size("r-small"), Ok(100_000));
    assert_eq!(
        a.get_size("r-missing").code(),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    assert_eq!(a.is_exist("r-small"), Ok(true));
    assert_eq!(a.is_exist("r-missing"), Ok(false));
    let mut tiny = [0u8; 10];
    assert_eq!(
        a.get_into("r-small", &mut tiny).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(
        a.get_into("r-missing", &mut tiny).code(),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );

    // Zero-copy put larger than one 16 MiB slice, from b into a's segment.
    let big_len = 40 * MIB + 5;
    let big = pattern(big_len as usize, 2);
    b.put_from("r-big", &big, &on(&ha)).unwrap();
    drop(big);
    assert_eq!(master.query_key_endpoints("r-big"), Some(vec![ha.clone()]));
    check_ours(&b, "r-big", big_len, 2);
    check_ours(&a, "r-big", big_len, 2);
    a.remove("r-big", true).unwrap();

    // Batches across both segments.
    let keys = ["rb-0", "rb-1", "rb-2", "rb-3"];
    let sizes = [1usize, 4095, 300 * 1024, 2 * 1024 * 1024 + 1];
    let data: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| pattern(n, 10 + i as u8))
        .collect();
    let bufs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let res_a = a.batch_put_from(&keys[..2], &bufs[..2], &on(&hb));
    let res_b = b.batch_put_from(&keys[2..], &bufs[2..], &on(&ha));
    assert_eq!(res_a, vec![Ok(()); 2]);
    assert_eq!(res_b, vec![Ok(()); 2]);
    assert_eq!(master.query_key_endpoints("rb-0"), Some(vec![hb.clone()]));
    assert_eq!(master.query_key_endpoints("rb-3"), Some(vec![ha.clone()]));
    let mut outs: Vec<Vec<u8>> = (0..5).map(|_| vec![0u8; 3 * 1024 * 1024]).collect();
    let mut views: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
    let get_keys = ["rb-0", "rb-1", "rb-2", "rb-3", "rb-missing"];
    let res = a.batch_get_into(&get_keys, &mut views);
    let mut want: Vec<Result<u64, ErrorCode>> = sizes.iter().map(|&n| Ok(n as u64)).collect();
    want.push(Err(ErrorCode::OBJECT_NOT_FOUND));
    assert_eq!(res.code(), want, "batch_get_into");
    for i in 0..4 {
        assert_bytes_eq(&outs[i][..sizes[i]], &data[i], keys[i]);
    }

    // Leases (500 ms on this master).
    check_ours(&a, "rb-0", 1, 10);
    assert_eq!(
        a.remove("rb-0", false).code(),
        Err(ErrorCode::OBJECT_HAS_LEASE)
    );
    eventually(
        Duration::from_secs(15),
        "remove after the lease expired",
        || match a.remove("rb-0", false).code() {
            Ok(()) => true,
            Err(ErrorCode::OBJECT_HAS_LEASE) => false,
            Err(e) => panic!("remove: {e:?}"),
        },
    );
    assert_eq!(a.is_exist("rb-0"), Ok(false));
    assert_eq!(
        a.remove("rb-0", false).code(),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    check_ours(&b, "rb-1", 4095, 11);
    assert_eq!(
        b.remove("rb-1", true),
        Ok(()),
        "forced remove under a lease"
    );

    // replica_num = 2 across our two clients.
    a.put_from("r-rep2", &pattern(MIB as usize, 3), &replicas(2))
        .unwrap();
    let eps: BTreeSet<String> = master
        .query_key_endpoints("r-rep2")
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(eps, both, "replicas of r-rep2");

    assert_eq!(a.remove_by_regex("^rb-", true), Ok(2));
    assert_eq!(a.is_exist("rb-2"), Ok(false));
    assert_eq!(b.remove_all(true), Ok(2)); // r-small, r-rep2
    assert!(master.admin_lines("/get_all_keys").is_empty());

    a.put("r-live", &pattern(4096, 5), &on(&hb)).unwrap();
    // Our heartbeats (Ping; ReMount when upstream answers NEED_REMOUNT to the first
    // ping) keep both clients alive well past upstream's 3 s client TTL.
    eventually(
        Duration::from_secs(30),
        "12 pings from our two clients",
        || master.metric("master_ping_requests_total").unwrap_or(0.0) >= 12.0,
    );
    assert!(
        master
            .metric("master_remount_segment_requests_total")
            .unwrap_or(0.0)
            >= 2.0,
        "our clients did not ReMount after NEED_REMOUNT"
    );
    assert_eq!(
        master
            .admin_lines("/get_all_segments")
            .into_iter()
            .collect::<BTreeSet<_>>(),
        both,
        "upstream's master expired our clients despite their heartbeats"
    );
    check_ours(&a, "r-live", 4096, 5);

    // Dropping a client unmounts its segment.
    drop(b);
    eventually(
        Duration::from_secs(15),
        "b's segment to leave upstream's /get_all_segments",
        || master.admin_lines("/get_all_segments") == vec![ha.clone()],
    );
    eventually(
        Duration::from_secs(15),
        "r-live to vanish with b's segment",
        || a.is_exist("r-live") == Ok(false),
    );
    a.put("r-after", &pattern(1000, 4), &ReplicateConfig::default())
        .unwrap();
    check_ours(&a, "r-after", 1000, 4);
}

/// The mixed-cluster scenario, on either master: an upstream Python client and our
/// client each mount a 64 MiB segment; each writes objects pinned (preferred segment)
/// to its own segment and to the other's, plus `replica_num=2` ones, with both the
/// bytes and the zero-copy APIs, including 20 MiB objects (more than one 16 MiB
/// transfer slice) and keys with spaces, `/`, non-ASCII and URL metacharacters;
/// placement is checked through upstream's `get_replica_desc` and the master's
/// `/query_key`; each side reads every object (its own and the other's, from both
/// segments) byte for byte; a pure client of ours (no segment) reads and writes too;
/// a forced remove by one side is seen by the other; when our client leaves, its
/// single-replica objects vanish and the replicated ones still read back from the
/// Python client's segment.
fn mixed_cluster(peer: &Peer, master: &MasterProc) {
    let mut py = PyStore::start(
        peer,
        "py-mixed",
        &master.metadata_url(),
        &master.rpc_addr(),
        64 * MIB,
        32 * MIB,
        32 * MIB,
    );
    let rs = our_client(master, 64 * MIB, 16 * MIB);
    let (hp, hr) = (py.hostname.clone(), rs.hostname().to_string());
    let both: BTreeSet<String> = [hp.clone(), hr.clone()].into();
    assert_eq!(
        master
            .admin_lines("/get_all_segments")
            .into_iter()
            .collect::<BTreeSet<_>>(),
        both
    );

    // (key, len, seed, where the single replica must be; None = replica_num 2)
    let mut objects: Vec<(String, u64, u8, Option<String>)> = Vec::new();

    // Python writes: bytes put and zero-copy put_from onto each segment, then rep2.
    let mut seed = 50u8;
    for (tag, target) in [("py", &hp), ("rs", &hr)] {
        let k = format!("py-put-on-{tag}");
        let len = 300 * KIB + 11;
        assert_eq!(py.put(&k, val(len, seed), on_cfg(target)), 0, "{k}");
        objects.push((k, len, seed, Some(target.clone())));
        seed += 1;
        let k = format!("py-from-on-{tag}");
        let len = 3 * MIB + 1;
        assert_eq!(py.put_from(&k, 0, val(len, seed), on_cfg(target)), 0, "{k}");
        objects.push((k, len, seed, Some(target.clone())));
        seed += 1;
    }
    let keys = ["py-batch-0", "py-batch-1", "py-batch-2"];
    let sizes = [1u64, 65 * KIB, MIB];
    let values: Vec<Value> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| val(n, seed + i as u8))
        .collect();
    let (rcs, _) = py.rcs(json!({"op": "batch_put_from", "keys": keys,
                                 "offs": [0, 4096, 4096 + 65 * KIB],
                                 "values": values, "cfg": {"replica_num": 2}}));
    assert_eq!(rcs, vec![0; 3], "python batch_put_from");
    for (i, k) in keys.iter().enumerate() {
        objects.push((k.to_string(), sizes[i], seed + i as u8, None));
    }
    seed += 3;

    // Our client writes the same shapes.
    for (tag, target) in [("py", &hp), ("rs", &hr)] {
        let k = format!("rs-put-on-{tag}");
        let len = 200 * KIB + 7;
        rs.put(&k, &pattern(len as usize, seed), &on(target))
            .unwrap_or_else(|e| panic!("our put {k}: {e:?}"));
        objects.push((k, len, seed, Some(target.clone())));
        seed += 1;
        let k = format!("rs-from-on-{tag}");
        let len = 5 * MIB + 3;
        rs.put_from(&k, &pattern(len as usize, seed), &on(target))
            .unwrap_or_else(|e| panic!("our put_from {k}: {e:?}"));
        objects.push((k, len, seed, Some(target.clone())));
        seed += 1;
    }
    let rkeys = ["rs-batch-0", "rs-batch-1", "rs-batch-2"];
    let rdata: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| pattern(n as usize, seed + i as u8))
        .collect();
    let rbufs: Vec<&[u8]> = rdata.iter().map(Vec::as_slice).collect();
    assert_eq!(
        rs.batch_put_from(&rkeys, &rbufs, &replicas(2)),
        vec![Ok(()); 3],
        "our batch_put_from"
    );
    for (i, k) in rkeys.iter().enumerate() {
        objects.push((k.to_string(), sizes[i], seed + i as u8, None));
    }

    // Objects larger than one 16 MiB transfer slice, onto the other side's segment.
    let huge = 20 * MIB + 1;
    assert_eq!(
        py.put_from("py-huge-on-rs", 0, val(huge, 100), on_cfg(&hr)),
        0
    );
    objects.push(("py-huge-on-rs".into(), huge, 100, Some(hr.clone())));
    rs.put_from("rs-huge-on-py", &pattern(huge as usize, 101), &on(&hp))
        .unwrap();
    objects.push(("rs-huge-on-py".into(), huge, 101, Some(hp.clone())));
    // Keys with spaces, slashes, non-ASCII and URL metacharacters.
    let odd_py = "py odd/key ü\u{e9}\t#?&=%20";
    let odd_rs = "rs odd/key ü\u{e9}\t#?&=%20";
    assert_eq!(py.put(odd_py, val(777, 102), on_cfg(&hr)), 0);
    objects.push((odd_py.into(), 777, 102, Some(hr.clone())));
    rs.put(odd_rs, &pattern(778, 103), &on(&hp)).unwrap();
    objects.push((odd_rs.into(), 778, 103, Some(hp.clone())));

    let seed_of = |key: &str| -> u8 {
        objects
            .iter()
            .find(|o| o.0 == key)
            .unwrap_or_else(|| panic!("no object {key}"))
            .2
    };

    // Placement, as upstream's client and the master's admin HTTP see it.
    for (k, _, _, target) in &objects {
        let want: BTreeSet<String> = match target {
            Some(t) => [t.clone()].into(),
            None => both.clone(),
        };
        let got: BTreeSet<String> = py.replica_endpoints(k).into_iter().collect();
        assert_eq!(got, want, "replicas of {k} per get_replica_desc");
        if !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            continue; // /query_key takes the key raw (upstream does not decode it)
        }
        let got: BTreeSet<String> = master
            .query_key_endpoints(k)
            .unwrap_or_else(|| panic!("/query_key of {k}: 404"))
            .into_iter()
            .collect();
        assert_eq!(got, want, "replicas of {k} per /query_key");
    }

    // Everyone reads everything.
    for (k, len, seed, _) in &objects {
        check_ours(&rs, k, *len, *seed);
        assert_eq!(py.get(k, val(*len, *seed)), (*len, true), "python get {k}");
        assert_eq!(
            py.get_into(k, 0, 24 * MIB, val(*len, *seed)),
            (*len as i64, true),
            "python get_into {k}"
        );
    }
    // Batched reads of the other side's objects.
    let (rcs, v) = py.rcs(json!({"op": "batch_get_into",
        "keys": ["rs-batch-0", "rs-batch-1", "rs-batch-2", "rs-put-on-py"],
        "offs": [0, 2 * MIB, 4 * MIB, 6 * MIB], "caps": vec![2 * MIB; 4],
        "expect": [val(sizes[0], seed), val(sizes[1], seed + 1), val(sizes[2], seed + 2),
                   val(200 * KIB + 7, seed_of("rs-put-on-py"))]}));
    assert_eq!(
        rcs,
        vec![
            sizes[0] as i64,
            sizes[1] as i64,
            sizes[2] as i64,
            200 * KIB as i64 + 7
        ],
        "python batch_get_into of our objects"
    );
    assert_eq!(v["matches"], json!([true, true, true, true]));
    let mut outs: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; 4 * MIB as usize]).collect();
    let mut views: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
    let res = rs.batch_get_into(
        &["py-batch-0", "py-batch-1", "py-batch-2", "py-from-on-rs"],
        &mut views,
    );
    assert_eq!(
        res,
        vec![Ok(sizes[0]), Ok(sizes[1]), Ok(sizes[2]), Ok(3 * MIB + 1)],
        "our batch_get_into of python's objects"
    );
    for i in 0..3 {
        assert_bytes_eq(
            &outs[i][..sizes[i] as usize],
            &pattern(sizes[i] as usize, seed_of(keys[i])),
            keys[i],
        );
    }
    assert_bytes_eq(
        &outs[3][..(3 * MIB + 1) as usize],
        &pattern((3 * MIB + 1) as usize, seed_of("py-from-on-rs")),
        "py-from-on-rs",
    );

    // Existence and removal across implementations.
    assert_eq!(rs.is_exist("py-put-on-py"), Ok(true));
    assert_eq!(py.is_exist("rs-put-on-rs"), 1);
    assert_eq!(rs.remove("py-put-on-py", true), Ok(()));
    assert_eq!(py.is_exist("py-put-on-py"), 0);
    assert_eq!(py.remove("rs-put-on-rs", true), 0);
    assert_eq!(rs.is_exist("rs-put-on-rs"), Ok(false));
    assert_eq!(py.get_size("rs-from-on-py"), (5 * MIB + 3) as i64);
    assert_eq!(rs.get_size("py-from-on-rs"), Ok(3 * MIB + 1));

    // A pure client of ours (no segment: no mount, no heartbeat) writes and reads.
    let pure = our_client(master, 0, 8 * MIB);
    check_ours(
        &pure,
        "py-from-on-py",
        3 * MIB + 1,
        seed_of("py-from-on-py"),
    );
    check_ours(
        &pure,
        "rs-from-on-py",
        5 * MIB + 3,
        seed_of("rs-from-on-py"),
    );
    pure.put("pure-put", &pattern(123_456, 104), &on(&hp))
        .unwrap();
    assert_eq!(py.get("pure-put", val(123_456, 104)), (123_456, true));
    assert_eq!(
        master
            .admin_lines("/get_all_segments")
            .into_iter()
            .collect::<BTreeSet<_>>(),
        both,
        "a pure client must not mount anything"
    );
    drop(pure);

    // Our client leaves: what only it held vanishes, replicated objects survive.
    drop(rs);
    eventually(
        Duration::from_secs(15),
        "our segment's objects to vanish after our client left",
        || py.is_exist("py-from-on-rs") == 0,
    );
    assert_eq!(py.is_exist("rs-put-on-py"), 1);
    for (i, k) in rkeys.iter().chain(keys.iter()).enumerate() {
        let n = sizes[i % 3];
        assert_eq!(
            py.get(k, val(n, seed_of(k))),
            (n, true),
            "{k} after our client left"
        );
        assert_eq!(py.replica_endpoints(k), vec![hp.clone()]);
    }
    assert_eq!(master.admin_lines("/get_all_segments"), vec![hp.clone()]);
    py.quit();
}

/// The mixed-cluster scenario on OUR `mooncake_master`.
#[test]
fn mixed_cluster_on_our_master() {
    let Some(peer) = peer("mixed_cluster_on_our_master") else {
        return;
    };
    let master = MasterProc::ours(&[]);
    mixed_cluster(&peer, &master);
}

/// The mixed-cluster scenario on upstream's `mooncake_master`.
#[test]
fn mixed_cluster_on_upstream_master() {
    let Some(peer) = peer("mixed_cluster_on_upstream_master") else {
        return;
    };
    let master = MasterProc::upstream(&peer, &[]);
    mixed_cluster(&peer, &master);
}

/// Regression test for re-publishing after a remount.
///
/// Proves, for our client on upstream's master killed (SIGKILL) and restarted on the
/// same ports (empty, including its embedded metadata server): our client reconnects
/// and ReMounts its segment by itself (upstream's `/get_all_segments`), and, like
/// upstream's client (`client_service.cpp` heartbeat: `updateLocalSegmentDesc()` and
/// `rePublishRpcMetaEntry()` after every ReMountSegment), re-publishes its TE segment
/// descriptor (`mooncake/ram/<name>`) and RPC location (`mooncake/rpc_meta/<name>`)
/// into the fresh metadata server; then puts from and onto our segment succeed again
/// and an upstream client that joins after the restart reads objects stored in our
/// segment and in the upstream client's.
#[test]
fn our_client_survives_upstream_master_restart() {
    let Some(peer) = peer("our_client_survives_upstream_master_restart") else {
        return;
    };
    let mut master = MasterProc::upstream(&peer, &[]);
    let (url, addr) = (master.metadata_url(), master.rpc_addr());
    let rs = our_client(&master, 32 * MIB, 8 * MIB);
    let mut py = PyStore::start(&peer, "py-restart", &url, &addr, 32 * MIB, 8 * MIB, 0);
    let (hp, hr) = (py.hostname.clone(), rs.hostname().to_string());
    rs.put("before", &pattern(5000, 1), &on(&hp)).unwrap();
    assert!(master.metadata_has("ram", &hr) && master.metadata_has("rpc_meta", &hr));

    master.restart();
    assert!(
        !master.metadata_has("ram", &hr),
        "the restarted master kept metadata"
    );
    let both: BTreeSet<String> = [hp.clone(), hr.clone()].into();
    eventually(
        Duration::from_secs(30),
        "both clients to remount on the restarted upstream master",
        || {
            master
                .admin_lines("/get_all_segments")
                .into_iter()
                .collect::<BTreeSet<_>>()
                == both
        },
    );
    // The upstream client re-published its entries along with the remount...
    eventually(
        Duration::from_secs(10),
        "the upstream client to re-publish its TE descriptor",
        || master.metadata_has("ram", &hp) && master.metadata_has("rpc_meta", &hp),
    );
    // ... and ours must too, or no peer can open our segment any more.
    eventually(
        Duration::from_secs(10),
        "our client to re-publish mooncake/ram/<name> and \
         mooncake/rpc_meta/<name> after ReMountSegment",
        || master.metadata_has("ram", &hr) && master.metadata_has("rpc_meta", &hr),
    );
    assert_eq!(rs.is_exist("before"), Ok(false));
    let mut last = Ok(());
    eventually(
        Duration::from_secs(30),
        "our put onto the upstream client's segment after the restart",
        || {
            last = rs.put("after-rs", &pattern(200_000, 2), &on(&hp));
            last.is_ok()
        },
    );
    eventually(
        Duration::from_secs(30),
        "an upstream put onto our segment after the restart",
        || py.put("after-py", val(300_000, 3), on_cfg(&hr)) == 0,
    );
    assert_eq!(py.replica_endpoints("after-py"), vec![hr.clone()]);
    check_ours(&rs, "after-py", 300_000, 3);
    check_ours(&rs, "after-rs", 200_000, 2);
    assert_eq!(py.get("after-rs", val(200_000, 2)), (200_000, true));
    let mut late = PyStore::start(&peer, "py-late", &url, &addr, 0, 8 * MIB, 0);
    assert_eq!(late.get("after-py", val(300_000, 3)), (300_000, true));
    assert_eq!(late.get("after-rs", val(200_000, 2)), (200_000, true));
    late.quit();
    py.quit();
}

/// Proves, for our client on upstream's master with a 16 MiB pool (our client's own
/// segment): objects we put with `with_hard_pin` are never evicted (our encoding of
/// the flag reaches upstream's allocator); a loop of 1 MiB puts well past the capacity
/// keeps succeeding when retried on NO_AVAILABLE_HANDLE (-200, upstream evicts
/// asynchronously); the oldest unpinned objects were evicted, the newest survives and
/// reads back byte for byte.
#[test]
fn our_client_eviction_on_upstream_master() {
    let Some(peer) = peer("our_client_eviction_on_upstream_master") else {
        return;
    };
    let master = MasterProc::upstream(&peer, &[]);
    let rs = our_client(&master, 16 * MIB, 4 * MIB);
    let pinned = ReplicateConfig {
        with_hard_pin: true,
        ..ReplicateConfig::default()
    };
    for i in 0..3u8 {
        rs.put_from(&format!("pin-{i}"), &pattern(MIB as usize, 60 + i), &pinned)
            .unwrap();
    }
    let count = 40usize;
    let value = pattern(MIB as usize, 21);
    let mut no_space = 0;
    for i in 0..count {
        let key = format!("ev-{i}");
        eventually(Duration::from_secs(20), &format!("put {key}"), || match rs
            .put_from(&key, &value, &ReplicateConfig::default())
            .code()
        {
            Ok(()) => true,
            Err(ErrorCode::NO_AVAILABLE_HANDLE) => {
                no_space += 1;
                false
            }
            Err(e) => panic!("put {key}: {e:?}"),
        });
    }
    eprintln!("eviction on upstream's master: {no_space} x -200 along the way");
    let keys: Vec<String> = (0..count).map(|i| format!("ev-{i}")).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let exist: Vec<bool> = rs
        .batch_is_exist(&refs)
        .into_iter()
        .map(|r| r.expect("batch_is_exist"))
        .collect();
    assert!(
        !exist[0],
        "the oldest object must have been evicted: {exist:?}"
    );
    assert!(
        exist[count - 1],
        "the newest object must survive: {exist:?}"
    );
    let present = exist.iter().filter(|&&e| e).count();
    assert!(
        (1..=13).contains(&present),
        "{present} 1 MiB objects beside 3 pinned ones in a 16 MiB pool"
    );
    check_ours(&rs, &keys[count - 1], MIB, 21);
    for i in 0..3u8 {
        check_ours(&rs, &format!("pin-{i}"), MIB, 60 + i);
    }
}

/// `--enable_metadata_cleanup_on_timeout` (3 s `--client_ttl`): an upstream Python
/// client killed with SIGKILL expires. Our master then removes its TE descriptor
/// (`mooncake/ram/<name>`) and RPC location (`mooncake/rpc_meta/<name>`) from its
/// embedded metadata server; upstream 0.3.13's tries the same, but its server keeps
/// keys as clients sent them (percent-encoded) and the cleanup looks them up decoded,
/// so it removes nothing (its log: `ram_key_removed=0, rpc_key_removed=0`) and the
/// entries stay (`removed` says which is expected). A live client (ours) keeps both.
fn killed_clients_metadata_cleanup(peer: &Peer, master: &MasterProc, removed: bool) {
    let py = PyStore::start(
        peer,
        "py-killed",
        &master.metadata_url(),
        &master.rpc_addr(),
        32 * MIB,
        16 * MIB,
        16 * MIB,
    );
    let rs = our_client(master, 32 * MIB, 16 * MIB);
    let (hp, hr) = (py.hostname.clone(), rs.hostname().to_string());
    let entries = |segment: &str| {
        [
            master.metadata_has("ram", segment),
            master.metadata_has("rpc_meta", segment),
        ]
    };
    assert_eq!(entries(&hp), [true, true], "{}", py.log_tail());
    assert_eq!(entries(&hr), [true, true]);
    py.kill();
    // The cleanup runs in the same pass of the client monitor as the unmount.
    eventually(Duration::from_secs(60), "the killed client expires", || {
        !master.admin_lines("/get_all_segments").contains(&hp)
    });
    let left = if removed {
        [false, false]
    } else {
        [true, true]
    };
    eventually(
        Duration::from_secs(60),
        "the killed client's metadata is as expected",
        || entries(&hp) == left,
    );
    assert_eq!(entries(&hr), [true, true]);
}

#[test]
fn killed_clients_metadata_is_cleaned_by_our_master() {
    let Some(peer) = peer("killed_clients_metadata_is_cleaned_by_our_master") else {
        return;
    };
    let master = MasterProc::ours(&[
        "--client_ttl=3",
        "--enable_metadata_cleanup_on_timeout=true",
    ]);
    killed_clients_metadata_cleanup(&peer, &master, true);
}

#[test]
fn killed_clients_metadata_stays_on_upstream_master() {
    let Some(peer) = peer("killed_clients_metadata_stays_on_upstream_master") else {
        return;
    };
    let master = MasterProc::upstream(
        &peer,
        &[
            "--client_ttl=3",
            "--enable_metadata_cleanup_on_timeout=true",
        ],
    );
    killed_clients_metadata_cleanup(&peer, &master, false);
}
