//! End to end over loopback: a fake `MasterApi` served with `dispatch::serve_stream`,
//! driven through `MasterRpcClient` (every method, pipelining from many threads,
//! reconnects), transport-level errors on raw sockets, and unreachable masters.

mod wire_fake;

use mooncake::wire::codec::{self, rpc, Rpc};
use mooncake::wire::coro_rpc::{self, Method};
use mooncake::wire::master_api::*;
use mooncake::wire::rpc_client::MasterRpcClient;
use mooncake::wire::struct_pack;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use wire_fake::{desc, grlr, uuid, Fake, Server};

fn client(addr: &str) -> MasterRpcClient {
    MasterRpcClient::connect(addr, Duration::from_secs(10), Duration::from_secs(2)).unwrap()
}

fn seg(size: u64) -> Segment {
    Segment {
        id: uuid(5),
        name: "127.0.0.1:1234".into(),
        base: 0x7f00_0000_0000,
        size,
        te_endpoint: "127.0.0.1:1234".into(),
        protocol: "tcp".into(),
        host_id: "h".into(),
    }
}

#[test]
fn every_method_over_loopback() {
    let fake = Fake::new(SERVICE_VERSION);
    let srv = Server::start(fake.clone());
    let c = client(&srv.addr);
    let me = uuid(9);
    let t = DEFAULT_TENANT;
    let keys: Vec<String> = ["ab", "abc", "missing-1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let cfg = ReplicateConfig {
        replica_num: 2,
        soft_pin_ttl_ms: Some(5),
        preferred_segments: vec!["x".into(); 300], // 2-byte length prefixes
        group_ids: Some(vec!["g".into()]),
        ..Default::default()
    };
    assert_eq!(c.service_ready().unwrap(), "2.0.0");
    assert_eq!(c.get_storage_config().unwrap().fsdir, "/fs/c1");
    assert_eq!(c.get_fsdir(), Err(ErrorCode::NOT_SUPPORTED));
    c.mount_segment(&seg(64), me).unwrap();
    assert_eq!(fake.last(), format!("mount({:?},{me})", seg(64)));
    assert_eq!(c.mount_segment(&seg(0), me), Err(ErrorCode::INVALID_PARAMS));
    c.remount_segment(&[seg(1), seg(2)], me).unwrap();
    assert_eq!(fake.last(), format!("remount({:?},{me})", [seg(1), seg(2)]));
    c.unmount_segment(uuid(5), me).unwrap();
    c.graceful_unmount_segment(uuid(5), me, 77).unwrap();
    assert_eq!(fake.last(), format!("graceful({},{me},77)", uuid(5)));
    assert_eq!(c.ping(me).unwrap().view_version_id, 9);
    let tasks = c.fetch_tasks(me, 16).unwrap();
    assert_eq!((tasks.len(), tasks[2].payload.clone()), (3, me.to_string()));
    let targets = vec!["a".to_string(), "b".to_string()];
    assert_eq!(c.create_copy_task("k", t, &targets), Ok(uuid(2)));
    assert_eq!(fake.last(), format!("copy_task(k,{t},{targets:?})"));
    assert_eq!(
        c.create_copy_task("k", t, &[]),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(c.create_move_task("key", t, "a", "b"), Ok(uuid(3)));
    assert_eq!(fake.last(), format!("move_task(key,{t},a,b)"));
    let q = c.query_task(uuid(4)).unwrap();
    assert_eq!(
        (q.id, q.assigned_client, q.message.len()),
        (uuid(4), uuid(7), 300)
    );
    assert_eq!(c.query_task(uuid(0)), Err(ErrorCode::TASK_NOT_FOUND));
    let report = TaskCompleteRequest {
        id: uuid(4),
        status: TaskStatus::Failed as i32,
        message: "why".into(),
    };
    c.mark_task_to_complete(me, &report).unwrap();
    assert_eq!(fake.last(), format!("complete({me},{},2,why)", uuid(4)));
    let started = c.copy_start(me, "k", t, "a", &targets).unwrap();
    assert_eq!((started.source.id, started.targets.len()), (1, 2));
    c.copy_end(me, "k", t).unwrap();
    assert_eq!(
        c.copy_revoke(me, "k", t),
        Err(ErrorCode::OBJECT_NO_REPLICATION_TASK)
    );
    assert_eq!(
        c.move_start(me, "k", t, "a", "b").unwrap().target,
        Some(desc(2, "k"))
    );
    assert_eq!(c.move_start(me, "k", t, "a", "a").unwrap().target, None);
    c.move_end(me, "k", t).unwrap();
    c.move_revoke(me, "k", t).unwrap();
    assert_eq!(fake.last(), format!("move_revoke({me},k,{t})"));
    let started = c
        .dynamic_replica_copy_start(me, "k", t, "a", &targets, uuid(5), 77)
        .unwrap();
    assert_eq!(started.source.id, 77);
    assert_eq!(
        fake.last(),
        format!("dyn_start({me},k,{t},a,{targets:?},{},77)", uuid(5))
    );
    c.dynamic_replica_copy_end(me, "k", t, uuid(5), 78).unwrap();
    assert_eq!(fake.last(), format!("dyn_end({me},k,{t},{},78)", uuid(5)));
    assert_eq!(
        c.dynamic_replica_copy_revoke(me, "k", t, uuid(5), 79),
        Err(ErrorCode::INVALID_VERSION)
    );
    assert_eq!(c.exist_key("ab", t), Ok(true));
    assert_eq!(c.exist_key("ab", "other"), Err(ErrorCode::INVALID_PARAMS));
    assert_eq!(
        c.batch_exist_key(&keys, t).unwrap(),
        vec![Ok(true), Ok(false), Ok(false)]
    );
    // A whole-call failure of a batch reaches the client as one error per input.
    assert_eq!(c.batch_exist_key(&[], t), Ok(vec![]));
    assert_eq!(c.get_replica_list("abc", t), Ok(grlr("abc")));
    assert_eq!(
        c.get_replica_list("missing", t),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    let b = c.batch_get_replica_list(&keys, t).unwrap();
    assert_eq!(
        b,
        vec![
            Ok(grlr("ab")),
            Ok(grlr("abc")),
            Err(ErrorCode::OBJECT_NOT_FOUND)
        ]
    );
    let by = c.get_replica_list_by_regex("^a", t).unwrap();
    assert_eq!(
        by,
        vec![("^a".into(), vec![desc(1, "^a")]), ("b".into(), vec![])]
    );
    let r = c.put_start(me, "k", 4096, &cfg, t).unwrap();
    assert_eq!(r, vec![desc(1, "k"), desc(2, "k")]);
    assert_eq!(fake.last(), format!("put_start({me},k,4096,{cfg:?},{t})"));
    let meta = ObjectMeta {
        key: "k".into(),
        checksum: Some(1),
    };
    c.put_end(me, &meta, ReplicaType::Memory, t).unwrap();
    assert_eq!(fake.last(), format!("put_end({me},{meta:?},Memory,{t})"));
    assert_eq!(
        c.put_revoke(me, "k", ReplicaType::Dfs, t),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    assert_eq!(fake.last(), format!("put_revoke({me},k,Dfs,{t})"));
    let r = c.batch_put_start(me, &keys, &[1, 2, 3], &cfg, t).unwrap();
    assert_eq!(r.len(), 3);
    let metas = vec![meta.clone(), meta.clone()];
    assert_eq!(
        c.batch_put_end(me, &metas, ReplicaType::All, t).unwrap(),
        vec![Err(ErrorCode::ILLEGAL_CLIENT); 2]
    );
    assert_eq!(
        c.batch_put_revoke(me, &keys, ReplicaType::All, t).unwrap(),
        vec![Ok(()); 3]
    );
    assert_eq!(c.upsert_start(me, "u", 1, &cfg, t), Ok(vec![]));
    c.upsert_end(me, &meta, ReplicaType::Memory, t).unwrap();
    c.upsert_revoke(me, "u", ReplicaType::Memory, t).unwrap();
    assert_eq!(
        c.batch_upsert_start(me, &keys, &[1, 2, 3], &cfg, t)
            .unwrap(),
        vec![Err(ErrorCode::NO_AVAILABLE_HANDLE); 3]
    );
    // No replica type on the wire for these two: the server side uses ALL.
    c.batch_upsert_end(me, &metas, t).unwrap();
    assert_eq!(
        fake.last(),
        format!("batch_upsert_end({me},{metas:?},All,{t})")
    );
    c.batch_upsert_revoke(me, &keys, t).unwrap();
    assert_eq!(
        fake.last(),
        format!("batch_upsert_revoke({me},{keys:?},All,{t})")
    );
    assert_eq!(c.remove("k", false, t), Err(ErrorCode::OBJECT_HAS_LEASE));
    c.remove("k", true, t).unwrap();
    assert_eq!(c.remove_by_regex("^k.*", true, t), Ok(4));
    assert_eq!(c.remove_all(true, t), Ok(1 << 40));
    // RemoveAll is a bare long: a failure arrives as the negative code.
    assert_eq!(c.remove_all(false, t), Ok(-1));
    assert_eq!(
        c.batch_remove(&keys, false, t).unwrap(),
        vec![Err(ErrorCode::OBJECT_HAS_LEASE); 3]
    );
    let ips = c.batch_query_ip(&[uuid(1), uuid(2)]).unwrap();
    assert_eq!(ips[1], (uuid(2), vec!["10.0.0.2".to_string()]));
    assert_eq!(
        c.batch_replica_clear(&keys, me, "seg"),
        Ok(keys[1..].to_vec())
    );
}

#[test]
fn version_mismatch_is_invalid_version() {
    let srv = Server::start(Fake::new("1.9.9"));
    let r = MasterRpcClient::connect(&srv.addr, Duration::from_secs(5), Duration::from_secs(2));
    assert_eq!(r.err(), Some(ErrorCode::INVALID_VERSION));
}

#[test]
fn pipelined_from_many_threads() {
    let srv = Server::start(Fake::new(SERVICE_VERSION));
    let c = Arc::new(client(&srv.addr));
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let c = c.clone();
            thread::spawn(move || {
                for i in 0..150u64 {
                    let key = format!("t{t}-{}", "x".repeat((i % 7) as usize));
                    assert_eq!(c.get_replica_list(&key, DEFAULT_TENANT), Ok(grlr(&key)));
                    let p = c.ping(uuid(t * 1000 + i)).unwrap();
                    assert_eq!(p.view_version_id, (t * 1000 + i) as i64);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn reconnects_after_connections_drop() {
    let srv = Server::start(Fake::new(SERVICE_VERSION));
    let c = client(&srv.addr);
    assert_eq!(c.exist_key("ab", DEFAULT_TENANT), Ok(true));
    srv.drop_connections();
    thread::sleep(Duration::from_millis(100));
    let mut ok = 0;
    for _ in 0..4 {
        ok += c.exist_key("ab", DEFAULT_TENANT).is_ok() as usize;
    }
    assert!(ok >= 3, "client did not reconnect ({ok}/4 calls succeeded)");
}

fn raw_call(s: &mut TcpStream, seq: u32, fid: u32, body: &[u8]) -> (u8, Vec<u8>) {
    s.write_all(&coro_rpc::encode_request(seq, fid, body))
        .unwrap();
    let (h, b) = coro_rpc::read_response(s, 1 << 20).unwrap().unwrap();
    assert_eq!(h.seq, seq);
    (h.err_code, b)
}

#[test]
fn transport_errors_and_garbage() {
    let srv = Server::start(Fake::new(SERVICE_VERSION));
    let mut s = TcpStream::connect(&srv.addr).unwrap();
    // A deadline, not a measure: the panicking handler below prints a backtrace, which
    // takes seconds under ThreadSanitizer on a busy machine.
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let (e, b) = raw_call(&mut s, 1, 0x1234_5678, b"");
    assert_eq!(
        (e, coro_rpc::error_message(&b)),
        (11, coro_rpc::MSG_FUNCTION_NOT_REGISTERED.into())
    );
    // Wrong argument type (hash mismatch) and a truncated body: "invalid rpc arg".
    let wrong = codec::encode_args(&(uuid(1),));
    let (e, b) = raw_call(&mut s, 2, Method::ExistKey.id(), &wrong);
    assert_eq!(
        (e, coro_rpc::error_message(&b)),
        (4, "invalid rpc arg".into())
    );
    let good = codec::encode_args(&("ab".to_string(), DEFAULT_TENANT.to_string()));
    let (e, _) = raw_call(&mut s, 3, Method::ExistKey.id(), &good[..good.len() - 1]);
    assert_eq!(e, 4);
    // Upstream's debug clients send metainfo + type literal: accepted too.
    let rich = struct_pack::serialize_with_type_info(&("ab".to_string(), "default".to_string()));
    let (e, b) = raw_call(&mut s, 4, Method::ExistKey.id(), &rich);
    assert_eq!(e, 0);
    let v: <rpc::ExistKey as Rpc>::Ret = struct_pack::deserialize(&b).unwrap();
    assert_eq!(v, Ok(true));
    // A handler that panics: "rpc throw exception", and the connection goes on.
    let args = codec::encode_args(&("panic-now".to_string(), DEFAULT_TENANT.to_string()));
    let (e, b) = raw_call(&mut s, 5, Method::GetReplicaList.id(), &args);
    assert_eq!(
        (e, coro_rpc::error_message(&b)),
        (coro_rpc::ERR_THROW_EXCEPTION, "rpc throw exception".into())
    );
    let (e, _) = raw_call(&mut s, 6, Method::ExistKey.id(), &good);
    assert_eq!(e, 0);
    // Pipelined: three requests in one write, answered in order.
    let mut burst = Vec::new();
    for seq in 10..13 {
        burst.extend(coro_rpc::encode_request(
            seq,
            Method::ServiceReady.id(),
            b"",
        ));
    }
    s.write_all(&burst).unwrap();
    for seq in 10..13 {
        let (h, _) = coro_rpc::read_response(&mut s, 1 << 20).unwrap().unwrap();
        assert_eq!((h.seq, h.err_code), (seq, 0));
    }
    // Garbage closes only this connection.
    s.write_all(&[0x42; 40]).unwrap();
    let mut buf = [0u8; 16];
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
    // An oversized frame too.
    let mut s2 = TcpStream::connect(&srv.addr).unwrap();
    s2.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut h = coro_rpc::RequestHeader::new(1, Method::Ping.id(), u32::MAX)
        .to_bytes()
        .to_vec();
    h.extend_from_slice(&[0; 64]);
    s2.write_all(&h).unwrap();
    assert!(matches!(s2.read(&mut buf), Ok(0) | Err(_)));
    // Other connections are unaffected.
    assert_eq!(client(&srv.addr).exist_key("ab", DEFAULT_TENANT), Ok(true));
}

#[test]
fn refused_master_is_rpc_fail_quickly() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t0 = Instant::now();
    let r = MasterRpcClient::connect(
        &format!("127.0.0.1:{port}"),
        Duration::from_secs(3),
        Duration::from_secs(1),
    );
    assert_eq!(r.err(), Some(ErrorCode::RPC_FAIL));
    assert!(t0.elapsed() < Duration::from_secs(2));
    let r = MasterRpcClient::connect(
        "no-such-host.invalid:1",
        Duration::from_secs(3),
        Duration::from_secs(1),
    );
    assert!(matches!(
        r.err(),
        Some(ErrorCode::RPC_FAIL | ErrorCode::RPC_TIMEOUT)
    ));
}

/// Calls pipelined to a master that accepts but never answers (a stopped process)
/// wait until their deadline; closing the client fails them at once, and every later
/// call too (how a client following the leader gives up one the view no longer names).
#[test]
fn closing_a_client_fails_the_calls_waiting_on_a_silent_master() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = received.clone();
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let counter = counter.clone();
            thread::spawn(move || {
                let mut b = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut b) {
                    counter.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
    });
    let deadline = Duration::from_secs(120);
    let c = Arc::new(MasterRpcClient::new_unchecked(
        &addr,
        deadline,
        Duration::from_secs(5),
        2,
    ));
    let t0 = Instant::now();
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let c = c.clone();
            thread::spawn(move || c.exist_key("k", DEFAULT_TENANT))
        })
        .collect();
    let wait = Instant::now() + Duration::from_secs(30);
    while received.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < wait,
            "no request reached the silent master"
        );
        thread::sleep(Duration::from_millis(5));
    }
    c.close();
    for h in calls {
        assert_eq!(h.join().unwrap(), Err(ErrorCode::RPC_FAIL));
    }
    assert!(t0.elapsed() < deadline / 2, "{:?}", t0.elapsed());
    assert_eq!(c.exist_key("k", DEFAULT_TENANT), Err(ErrorCode::RPC_FAIL));
}

#[test]
fn silent_master_times_out_within_deadline() {
    // Accepts and reads, never answers.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            thread::spawn(move || {
                let mut b = [0u8; 4096];
                while matches!(s.read(&mut b), Ok(n) if n > 0) {}
            });
        }
    });
    let timeout = Duration::from_millis(400);
    let t0 = Instant::now();
    let r = MasterRpcClient::connect(&addr, timeout, Duration::from_secs(1));
    assert_eq!(r.err(), Some(ErrorCode::RPC_TIMEOUT));
    let el = t0.elapsed();
    assert!(
        el >= timeout && el < timeout + Duration::from_millis(1500),
        "{el:?}"
    );
    // Calls from several threads on an unchecked client all end by the deadline.
    let c = Arc::new(MasterRpcClient::new_unchecked(
        &addr,
        timeout,
        Duration::from_secs(1),
        2,
    ));
    let t0 = Instant::now();
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let c = c.clone();
            thread::spawn(move || c.exist_key("k", DEFAULT_TENANT))
        })
        .collect();
    for h in hs {
        let r = h.join().unwrap();
        assert!(
            matches!(r, Err(ErrorCode::RPC_TIMEOUT | ErrorCode::RPC_FAIL)),
            "{r:?}"
        );
    }
    assert!(t0.elapsed() < timeout + Duration::from_millis(1500));
}
