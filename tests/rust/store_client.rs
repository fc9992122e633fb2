//! Two store clients in one process (P2PHANDSHAKE metadata, real TCP transfers),
//! each mounting a segment on one in-process master: puts and gets across clients
//! verified byte for byte, the own-segment path, upstream's return codes, batches,
//! replication, buffer registration, heartbeat health, teardown, and a client over an
//! engine it shares with the application.

#[path = "store_support/flaky_master.rs"]
mod flaky_master;
#[path = "store_support/tcp_master.rs"]
mod tcp_master;

use mooncake::master::{MasterConfig, MasterService};
use mooncake::store::{Client, Code, ErrorCode, Health, ReplicateConfig, SetupConfig};
use mooncake::te::TransferEngine;
use mooncake::wire::master_api::{MasterApi, ReplicaLocation, ReplicaType, DEFAULT_TENANT};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

fn master() -> Arc<MasterService> {
    MasterService::new(MasterConfig::default())
}

fn config(segment: u64, local: u64) -> SetupConfig {
    SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: "P2PHANDSHAKE".into(),
        global_segment_size: segment,
        local_buffer_size: local,
        ..SetupConfig::default()
    }
}

fn client(master: &Arc<MasterService>, segment: u64) -> Client {
    Client::setup_with_master(&config(segment, 16 * MIB), master.clone()).expect("setup")
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

fn on(segment: &str) -> ReplicateConfig {
    ReplicateConfig {
        preferred_segments: vec![segment.to_string()],
        ..ReplicateConfig::default()
    }
}

/// Where the master placed `key`'s replicas (TE endpoints).
fn placement(master: &dyn MasterApi, key: &str) -> Vec<String> {
    let resp = master
        .get_replica_list(key, DEFAULT_TENANT)
        .expect("replicas");
    resp.replicas
        .iter()
        .filter_map(|r| match &r.location {
            ReplicaLocation::Memory(d) => Some(d.transport_endpoint.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn put_and_get_across_two_clients() {
    let m = master();
    let a = client(&m, 64 * MIB);
    let b = client(&m, 64 * MIB);
    let (host_a, host_b) = (a.hostname().to_string(), b.hostname().to_string());
    assert_ne!(host_a, host_b);
    for h in [&host_a, &host_b] {
        let port: u16 = h.strip_prefix("127.0.0.1:").unwrap().parse().unwrap();
        assert!((12300..=14300).contains(&port), "{h}");
    }
    // Staged put from a into b's segment; read remotely by a, locally by b.
    let value = pattern((3 * MIB + 17) as usize, 1);
    a.put("k1", &value, &on(&host_b)).unwrap();
    assert_eq!(placement(&*m, "k1"), vec![b.te_segment_name().unwrap()]);
    let mut out = vec![0u8; value.len() + 100];
    assert_eq!(a.get_into("k1", &mut out).unwrap(), value.len() as u64);
    assert!(out[..value.len()] == value[..], "remote read differs");
    assert!(out[value.len()..].iter().all(|&x| x == 0));
    let mut out = vec![0u8; value.len()];
    assert_eq!(b.get_into("k1", &mut out).unwrap(), value.len() as u64);
    assert!(out == value, "own-segment read differs");
    assert!(a.get("k1").unwrap() == value, "owned remote read differs");
    assert!(
        b.get("k1").unwrap() == value,
        "owned own-segment read differs"
    );
    assert_eq!(a.get("missing").code(), Err(ErrorCode::OBJECT_NOT_FOUND));

    // Zero-copy put larger than one 16 MiB slice, written over TCP, both directions.
    let big = pattern((40 * MIB + 5) as usize, 9);
    b.put_from("big", &big, &on(&host_a)).unwrap();
    let mut out = vec![0u8; big.len()];
    assert_eq!(b.get_into("big", &mut out).unwrap(), big.len() as u64);
    assert!(out == big, "sliced remote read differs");
    out.fill(0);
    assert_eq!(a.get_into("big", &mut out).unwrap(), big.len() as u64);
    assert!(out == big, "sliced own read differs");
    assert_eq!(a.get_size("big").unwrap(), big.len() as u64);
}

#[test]
fn setup_over_coro_rpc() {
    let m = master();
    let mut cfg = config(16 * MIB, 16 * MIB);
    cfg.master_server_addr = tcp_master::serve(m.clone());
    let a = Client::setup(&cfg).expect("setup over RPC");
    let b = Client::setup(&cfg).expect("setup over RPC");
    let value = pattern(2_000_000, 8);
    a.put("rpc", &value, &on(b.hostname())).unwrap();
    let mut out = vec![0u8; value.len()];
    assert_eq!(b.get_into("rpc", &mut out).unwrap(), value.len() as u64);
    assert!(out == value);
    // A read holds the object only while it runs; ExistKey grants a lease.
    assert_eq!(b.is_exist("rpc"), Ok(true));
    assert_eq!(
        a.remove("rpc", false).code(),
        Err(ErrorCode::OBJECT_HAS_LEASE)
    );
    eventually("both clients remounted", || m.active_clients() == 2);
    assert_eq!(a.health(), Health::Healthy);
    drop((a, b));
    assert!(m.segments_summary().is_empty());
}

#[test]
fn http_metadata_names_the_segment_after_the_client() {
    let server =
        mooncake::metadata::http_server::HttpMetadataServer::start("127.0.0.1:0".parse().unwrap())
            .unwrap();
    let m = master();
    let mut cfg = config(8 * MIB, 8 * MIB);
    cfg.metadata_server = format!("http://{}/metadata", server.local_addr());
    let a = Client::setup_with_master(&cfg, m.clone()).unwrap();
    let b = Client::setup_with_master(&cfg, m.clone()).unwrap();
    assert_eq!(a.te_segment_name().unwrap(), a.hostname());
    let value = pattern(1_500_000, 6);
    b.put_from("http", &value, &on(a.hostname())).unwrap();
    assert_eq!(placement(&*m, "http"), vec![a.hostname().to_string()]);
    let mut out = vec![0u8; value.len()];
    assert_eq!(b.get_into("http", &mut out).unwrap(), value.len() as u64);
    assert!(out == value);
    drop((a, b));
    server.stop();
}

#[test]
fn own_segment_put_and_get() {
    let m = master();
    let a = client(&m, 16 * MIB);
    let value = pattern(100_000, 4);
    a.put_from("own", &value, &on(a.hostname())).unwrap();
    assert_eq!(placement(&*m, "own"), vec![a.te_segment_name().unwrap()]);
    let mut out = vec![0u8; 100_000];
    assert_eq!(a.get_into("own", &mut out).unwrap(), 100_000);
    assert!(out == value);
}

#[test]
fn upstream_return_codes() {
    let m = master();
    let a = client(&m, 16 * MIB);
    let b = client(&m, 16 * MIB);
    let cfg = ReplicateConfig::default();
    let first = pattern(4096, 1);
    a.put("same", &first, &cfg).unwrap();
    // An existing key is a success that keeps the old value.
    b.put("same", &pattern(4096, 2), &cfg).unwrap();
    b.put_from("same", &pattern(10, 3), &cfg).unwrap();
    let mut out = vec![0u8; 4096];
    assert_eq!(b.get_into("same", &mut out).unwrap(), 4096);
    assert!(out == first);
    // Size 0: put -600, put_from succeeds without storing.
    assert_eq!(
        a.put("empty", &[], &cfg).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(a.put_from("empty", &[], &cfg), Ok(()));
    assert_eq!(a.is_exist("empty"), Ok(false));
    // Larger than the free local buffer: -600 (put_from has no such limit).
    let big = vec![1u8; (16 * MIB + 1) as usize];
    assert_eq!(
        a.put("big", &big, &cfg).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    // Too small a buffer, missing keys.
    let mut small = vec![0u8; 4095];
    assert_eq!(
        a.get_into("same", &mut small).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(
        a.get_into("nope", &mut small).code(),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    assert_eq!(a.get_size("nope").code(), Err(ErrorCode::OBJECT_NOT_FOUND));
    assert_eq!(a.is_exist("nope"), Ok(false));
    assert_eq!(a.is_exist("same"), Ok(true));
    // The reads above hold a lease: remove needs force.
    assert_eq!(
        a.remove("same", false).code(),
        Err(ErrorCode::OBJECT_HAS_LEASE)
    );
    assert_eq!(a.remove("same", true), Ok(()));
    assert_eq!(
        a.remove("same", true).code(),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    // Replica count 0 is passed through and rejected by the master.
    let zero = ReplicateConfig {
        replica_num: 0,
        ..ReplicateConfig::default()
    };
    assert_eq!(
        a.put("zero", b"x", &zero).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    // An object still being written by another client: not readable, not existing,
    // a put of the same key is a silent success, and even a forced remove waits.
    let writer = mooncake::wire::master_api::Uuid {
        first: 7,
        second: 7,
    };
    m.put_start(writer, "pending", 10, &cfg, DEFAULT_TENANT)
        .unwrap();
    assert_eq!(
        a.get_into("pending", &mut small).code(),
        Err(ErrorCode::REPLICA_IS_NOT_READY)
    );
    assert_eq!(a.is_exist("pending"), Ok(false));
    assert_eq!(a.put("pending", b"x", &cfg), Ok(()));
    assert_eq!(
        a.remove("pending", true).code(),
        Err(ErrorCode::REPLICA_IS_NOT_READY)
    );
    m.put_revoke(writer, "pending", ReplicaType::All, DEFAULT_TENANT)
        .unwrap();
    // Regex and remove-all counts.
    for k in ["r1", "r2", "x1"] {
        a.put(k, b"v", &cfg).unwrap();
    }
    assert_eq!(a.remove_by_regex("^r", false), Ok(2));
    assert_eq!(
        a.remove_by_regex("(", false).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(b.remove_all(true), Ok(1));
    assert_eq!(a.is_exist("x1"), Ok(false));
}

#[test]
fn batch_calls_report_per_item() {
    let m = master();
    let a = client(&m, 16 * MIB);
    let b = client(&m, 16 * MIB);
    let cfg = ReplicateConfig::default();
    a.put("exists", b"old", &cfg).unwrap();
    let v1 = pattern(1000, 1);
    let v2 = pattern(2000, 2);
    let v3 = pattern(3000, 3);
    let r = a.batch_put_from(
        &["b1", "b2", "b1", "exists", "empty"],
        &[&v1, &v2, &v3, b"new", &[]],
        &cfg,
    );
    assert_eq!(
        r.code(),
        vec![
            Ok(()),
            Ok(()),
            Ok(()),
            Ok(()),
            Err(ErrorCode::INVALID_PARAMS)
        ]
    );
    let (mut o1, mut o2, mut o3, mut o4) =
        (vec![0u8; 3000], vec![0u8; 100], vec![0u8; 8], vec![0u8; 8]);
    let r = b.batch_get_into(
        &["b1", "b2", "nope", "exists"],
        &mut [&mut o1, &mut o2, &mut o3, &mut o4],
    );
    assert_eq!(
        r.code(),
        vec![
            Ok(3000),
            Err(ErrorCode::INVALID_PARAMS),
            Err(ErrorCode::OBJECT_NOT_FOUND),
            Ok(3)
        ]
    );
    assert!(o1 == v3, "duplicate keys store the last buffer");
    assert_eq!(&o4[..3], b"old");
    assert_eq!(
        b.batch_is_exist(&["b1", "b2", "nope"]),
        vec![Ok(true), Ok(true), Ok(false)]
    );
}

#[test]
fn two_replicas_on_distinct_segments() {
    let m = master();
    let a = client(&m, 16 * MIB);
    let b = client(&m, 16 * MIB);
    let cfg = ReplicateConfig {
        replica_num: 2,
        ..ReplicateConfig::default()
    };
    let value = pattern(1 << 20, 5);
    a.put("two", &value, &cfg).unwrap();
    let mut endpoints = placement(&*m, "two");
    endpoints.sort();
    let mut expected = vec![a.te_segment_name().unwrap(), b.te_segment_name().unwrap()];
    expected.sort();
    assert_eq!(endpoints, expected);
    // b goes away (unmounting its segment); a's replica still serves reads.
    b.close();
    assert_eq!(b.health(), Health::NotInitialized);
    let mut out = vec![0u8; value.len()];
    assert_eq!(a.get_into("two", &mut out).unwrap(), value.len() as u64);
    assert!(out == value);
}

#[test]
fn a_client_over_a_shared_engine() {
    let m = master();
    let mut cfg = config(16 * MIB, 16 * MIB);
    cfg.master_server_addr = tcp_master::serve(m.clone());
    let engine = Arc::new(TransferEngine::new("P2PHANDSHAKE", "127.0.0.1", false).unwrap());
    engine.install("tcp", None).unwrap();
    let session = engine.segment_name().to_string();
    let mut app = pattern(256 * 1024, 4);
    let (addr, len) = (app.as_mut_ptr(), app.len());
    engine
        .register_memory(addr as u64, len as u64, "*", false)
        .unwrap();
    cfg.local_hostname = session.clone();
    let a = Client::setup_on_engine(&cfg, None, engine.clone()).expect("setup on the engine");
    assert_eq!(a.hostname(), session);
    assert_eq!(a.te_segment_name().as_deref(), Some(session.as_str()));
    // The application's registration serves the store, and is not made twice.
    assert_eq!(a.register_buffer(addr, len), Ok(()));
    a.put_from("shared", &app, &on(&session)).unwrap();
    assert_eq!(placement(&*m, "shared"), vec![session.clone()]);
    let mut reader = config(0, 16 * MIB);
    reader.master_server_addr = cfg.master_server_addr.clone();
    let b = Client::setup(&reader).unwrap();
    let mut out = vec![0u8; app.len()];
    assert_eq!(b.get_into("shared", &mut out).unwrap(), app.len() as u64);
    assert!(out == app, "read from the segment behind the shared engine");
    assert_eq!(a.unregister_buffer(addr), Ok(()));
    drop(a);
    // The engine lives on, with the application's registration only.
    assert!(engine.is_registered(addr as u64, len as u64));
    engine.unregister_memory(addr as u64).unwrap();
    drop(b);
    assert!(m.segments_summary().is_empty());
}

#[test]
fn register_buffer_rules() {
    let m = master();
    let a = client(&m, 16 * MIB);
    let mut buf = pattern(64 * 1024, 7);
    let p = buf.as_mut_ptr();
    assert_eq!(
        a.register_buffer(std::ptr::null_mut(), 10)
            .map_err(|e| e.code),
        Err(ErrorCode::INTERNAL_ERROR)
    );
    assert_eq!(
        a.register_buffer(p, 0).map_err(|e| e.code),
        Err(ErrorCode::INTERNAL_ERROR)
    );
    assert_eq!(a.register_buffer(p, buf.len()), Ok(()));
    // SAFETY: only the address is used (registration of an overlapping range).
    let inner = unsafe { p.add(10) };
    assert_eq!(
        a.register_buffer(inner, 10).map_err(|e| e.code),
        Err(ErrorCode::INVALID_PARAMS)
    );
    a.put_from("reg", &buf, &ReplicateConfig::default())
        .unwrap();
    let e = a.unregister_buffer(inner).unwrap_err();
    assert_eq!(e, ErrorCode::INVALID_PARAMS);
    assert!(e.cause.contains("not registered"), "{e}");
    assert_eq!(a.unregister_buffer(p), Ok(()));
    assert_eq!(
        a.unregister_buffer(p).map_err(|e| e.code),
        Err(ErrorCode::INVALID_PARAMS)
    );
    let mut out = vec![0u8; buf.len()];
    assert_eq!(a.get_into("reg", &mut out).unwrap(), buf.len() as u64);
    assert!(out == buf);
}

#[test]
fn setup_rules_and_calls_after_close() {
    let m = master();
    let mut cfg = config(0, 0);
    cfg.protocol = "efa".into();
    assert_eq!(
        Client::setup_with_master(&cfg, m.clone()).code().err(),
        Some(ErrorCode::INVALID_PARAMS)
    );
    // RDMA on a NIC that does not exist: the transport cannot start (-1).
    cfg.protocol = "rdma".into();
    cfg.device_name = "no_such_nic_0".into();
    assert_eq!(
        Client::setup_with_master(&cfg, m.clone()).code().err(),
        Some(ErrorCode::INTERNAL_ERROR)
    );
    // RDMA without device names discovers, and uses TCP when no NIC is usable.
    cfg.device_name = "auto-discovery".into();
    let c = Client::setup_with_master(&cfg, m.clone()).expect("rdma setup with discovery");
    drop(c);
    cfg.device_name.clear();
    cfg.protocol.clear();
    cfg.local_hostname.clear();
    assert_eq!(
        Client::setup_with_master(&cfg, m.clone()).code().err(),
        Some(ErrorCode::INVALID_PARAMS)
    );
    cfg.local_hostname = "127.0.0.1:13999".into();
    let pure = Client::setup_with_master(&cfg, m.clone()).unwrap();
    assert_eq!(pure.hostname(), "127.0.0.1:13999");
    assert_eq!(pure.health(), Health::Healthy);
    // No local buffer: put cannot stage; no segment anywhere: put_from gets -200.
    assert_eq!(
        pure.put("k", b"v", &ReplicateConfig::default()).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(
        pure.put_from("k", b"v", &ReplicateConfig::default()).code(),
        Err(ErrorCode::NO_AVAILABLE_HANDLE)
    );
    pure.close();
    pure.close();
    let cfg = ReplicateConfig::default();
    let mut out = [0u8; 4];
    assert_eq!(pure.health(), Health::NotInitialized);
    assert_eq!(
        pure.put("k", b"v", &cfg).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(
        pure.put_from("k", b"v", &cfg).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(
        pure.put_from("k", b"", &cfg).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(
        pure.get_into("k", &mut out).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(pure.is_exist("k").code(), Err(ErrorCode::INVALID_PARAMS));
    assert_eq!(pure.get_size("k").code(), Err(ErrorCode::INVALID_PARAMS));
    assert_eq!(
        pure.remove("k", true).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(
        pure.remove_by_regex("k", true).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(pure.remove_all(true).code(), Err(ErrorCode::INVALID_PARAMS));
    assert_eq!(
        pure.batch_is_exist(&["a", "b"]).code(),
        vec![Err(ErrorCode::INVALID_PARAMS); 2]
    );
    assert_eq!(
        pure.batch_put_from(&["a"], &[b"x"], &cfg).code(),
        vec![Err(ErrorCode::INVALID_PARAMS)]
    );
    assert_eq!(
        pure.batch_get_into(&["a"], &mut [&mut out[..]]).code(),
        vec![Err(ErrorCode::INVALID_PARAMS)]
    );
    let mut b = [0u8; 8];
    assert_eq!(
        pure.register_buffer(b.as_mut_ptr(), 8).map_err(|e| e.code),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(
        pure.unregister_buffer(b.as_mut_ptr()).map_err(|e| e.code),
        Err(ErrorCode::INVALID_PARAMS)
    );
    // Setup against an unreachable master fails fast with upstream's codes.
    // (Nothing listens on port 1, so the connection is refused at once.)
    let mut cfg = config(MIB, MIB);
    cfg.master_server_addr = "127.0.0.1:1".into();
    assert_eq!(
        Client::setup(&cfg).code().err(),
        Some(ErrorCode::INTERNAL_ERROR)
    );
    cfg.local_hostname = "127.0.0.1:13998".into();
    assert_eq!(
        Client::setup(&cfg).code().err(),
        Some(ErrorCode::INVALID_PARAMS)
    );
}

#[test]
fn threads_share_one_client() {
    let m = master();
    let a = Arc::new(client(&m, 64 * MIB));
    let b = client(&m, 64 * MIB);
    let host_b = b.hostname().to_string();
    let workers: Vec<_> = (0..4u8)
        .map(|t| {
            let (a, host_b) = (a.clone(), host_b.clone());
            std::thread::spawn(move || {
                for i in 0..20u32 {
                    let key = format!("t{t}-{i}");
                    let value = pattern(50_000 + i as usize * 1000, t.wrapping_add(i as u8));
                    let cfg = if i % 2 == 0 {
                        on(&host_b)
                    } else {
                        on(a.hostname())
                    };
                    if i % 3 == 0 {
                        a.put(&key, &value, &cfg).unwrap();
                    } else {
                        a.put_from(&key, &value, &cfg).unwrap();
                    }
                    let mut out = vec![0u8; value.len()];
                    assert_eq!(a.get_into(&key, &mut out).unwrap(), value.len() as u64);
                    assert!(out == value, "{key}");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(b.remove_all(true), Ok(80));
}

/// Polls `cond` every 50 ms for up to 10 s.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn heartbeat_remounts_and_reports_health() {
    let m = master();
    let flaky = Arc::new(flaky_master::FlakyMaster::new(m.clone()));
    let a = Client::setup_with_master(&config(4 * MIB, 0), flaky.clone()).unwrap();
    assert_eq!(a.health(), Health::Healthy);
    // The first ping answers NEED_REMOUNT; the client remounts and becomes OK.
    eventually("ReMountSegment", || flaky.remounts() >= 1);
    eventually("client marked OK", || m.active_clients() == 1);
    flaky.fail_pings(true);
    eventually("health 2 after a failed ping", || {
        a.health() == Health::MasterUnreachable
    });
    flaky.fail_pings(false);
    eventually("healthy again", || a.health() == Health::Healthy);
    assert_eq!(m.segments_summary().len(), 1);
    drop(a);
    assert!(
        m.segments_summary().is_empty(),
        "close unmounts the segment"
    );
}

#[test]
fn a_pure_client_never_pings() {
    let m = master();
    let flaky = Arc::new(flaky_master::FlakyMaster::new(m.clone()));
    let pure = Client::setup_with_master(&config(0, MIB), flaky.clone()).unwrap();
    flaky.fail_pings(true);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(pure.health(), Health::Healthy);
    assert_eq!(flaky.remounts(), 0);
}

#[test]
fn lease_expired_during_the_read_is_reported() {
    // A zero lease has always expired by the time the bytes arrived.
    let m = MasterService::new(MasterConfig {
        default_kv_lease_ttl: Duration::ZERO,
        ..MasterConfig::default()
    });
    let a = client(&m, 8 * MIB);
    let b = client(&m, 8 * MIB);
    let value = pattern(MIB as usize, 3);
    a.put("k", &value, &on(b.hostname())).unwrap();
    let mut out = vec![0u8; value.len()];
    assert_eq!(
        a.get_into("k", &mut out).code(),
        Err(ErrorCode::LEASE_EXPIRED)
    );
    assert!(out == value, "the bytes still arrived");
    let r = a.batch_get_into(&["k", "missing"], &mut [&mut out[..], &mut [0u8; 4][..]]);
    assert_eq!(
        r.code(),
        vec![
            Err(ErrorCode::LEASE_EXPIRED),
            Err(ErrorCode::OBJECT_NOT_FOUND)
        ]
    );
    // Without a lease, a plain remove succeeds right after a read.
    assert_eq!(a.remove("k", false), Ok(()));
}

/// A put whose replicas cannot be written (the master placed them on an owner that just
/// died) is revoked and tried again on the segments the master picks next: `put`,
/// `put_from` and `batch_put_from` all succeed, and the values read back.
#[test]
fn puts_to_a_dead_owner_are_retried_elsewhere() {
    let m = master();
    let flaky = Arc::new(flaky_master::FlakyMaster::new(m.clone()));
    let c = Client::setup_with_master(&config(16 * MIB, 16 * MIB), flaky.clone()).expect("setup");
    let cfg = ReplicateConfig::default();
    let (a, b) = (pattern(70_000, 1), pattern(90_000, 2));

    flaky.divert_puts(1);
    c.put("retried-put", &a, &cfg).unwrap();
    assert_eq!(flaky.revokes(), 1);
    flaky.divert_puts(2);
    c.put_from("retried-put-from", &b, &cfg).unwrap();
    assert_eq!(flaky.revokes(), 3);
    flaky.divert_puts(2);
    let keys = ["retried-batch-1", "retried-batch-2"];
    let r = c.batch_put_from(&keys, &[&a[..], &b[..]], &cfg);
    assert_eq!(r, vec![Ok(()), Ok(())]);
    assert_eq!(
        flaky.revokes(),
        5,
        "both keys of the batch diverted and revoked"
    );
    for (key, value) in [
        ("retried-put", &a),
        ("retried-put-from", &b),
        ("retried-batch-1", &a),
        ("retried-batch-2", &b),
    ] {
        let mut out = vec![0u8; value.len()];
        assert_eq!(c.get_into(key, &mut out), Ok(value.len() as u64));
        assert!(&out == value, "{key} read back different bytes");
    }

    // Three attempts, all failing: the put fails with TRANSFER_FAIL and leaves nothing.
    flaky.divert_puts(3);
    assert_eq!(
        c.put("never", &a, &cfg).code(),
        Err(ErrorCode::TRANSFER_FAIL)
    );
    assert_eq!(c.is_exist("never"), Ok(false));
}

/// Against our master, a read holds its object only while it runs (the tracked-read
/// extension): with an hour-long lease TTL, the object can still be removed without
/// force, and evicted, right after it was read, once the client has ended the read.
#[test]
fn reads_hold_objects_only_while_they_run() {
    let m = MasterService::new(MasterConfig {
        default_kv_lease_ttl: Duration::from_secs(3600),
        ..MasterConfig::default()
    });
    let c = client(&m, 16 * MIB);
    let value = pattern(100_000, 3);
    c.put("read-once", &value, &ReplicateConfig::default())
        .unwrap();
    let mut out = vec![0u8; value.len()];
    assert_eq!(c.get_into("read-once", &mut out), Ok(value.len() as u64));
    assert!(out == value);
    eventually("the read is ended and the object removable", || {
        c.remove("read-once", false).is_ok()
    });
    // ExistKey still leases, for the whole TTL.
    c.put("exists", &value, &ReplicateConfig::default())
        .unwrap();
    assert_eq!(c.is_exist("exists"), Ok(true));
    assert_eq!(
        c.remove("exists", false).code(),
        Err(ErrorCode::OBJECT_HAS_LEASE)
    );
}
