//! Interop with upstream's `mooncake_master` (the 0.3.13 wheel installed by `scripts/upstream-peer.sh`):
//! our coro_rpc/struct_pack frames must be accepted by the real master, and its
//! replies (a debug build: metainfo + type literal) decoded by `MasterRpcClient`.
//!
//! Needs the peer (`bash scripts/upstream-peer.sh`; `MOONCAKE_PEER_VENV`
//! overrides its location); `MOONCAKE_SKIP_INTEROP=1` skips.

use mooncake::wire::codec;
use mooncake::wire::coro_rpc::{self, Method};
use mooncake::wire::disk_tier_api::{OffloadTaskItem, StorageObjectMetadata};
use mooncake::wire::master_api::*;
use mooncake::wire::rpc_client::MasterRpcClient;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn find_master() -> Result<PathBuf, String> {
    let venv = match std::env::var_os("MOONCAKE_PEER_VENV").filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(std::env::var_os("HOME").ok_or("HOME is not set")?)
            .join(".cache/mooncake-peer/venv"),
    };
    let lib = venv.join("lib");
    let entries = std::fs::read_dir(&lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    for e in entries.flatten() {
        let m = e.path().join("site-packages/mooncake/mooncake_master");
        if m.is_file() {
            return Ok(m);
        }
    }
    Err(format!("no mooncake_master under {}", lib.display()))
}

/// `None` (after a skip line) only with `MOONCAKE_SKIP_INTEROP=1`.
fn master_binary(test: &str) -> Option<PathBuf> {
    match find_master() {
        Ok(p) => Some(p),
        Err(why) if std::env::var("MOONCAKE_SKIP_INTEROP").is_ok_and(|v| v.trim() == "1") => {
            eprintln!(
                "SKIPPED {test}: upstream peer not available ({why}); MOONCAKE_SKIP_INTEROP=1"
            );
            None
        }
        Err(why) => panic!(
            "upstream Mooncake peer not available: {why}.\nInstall it with \
             `bash scripts/upstream-peer.sh`, set MOONCAKE_PEER_VENV, or set \
             MOONCAKE_SKIP_INTEROP=1 to skip the interop tests."
        ),
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The upstream master as a child process, killed by PID on drop.
struct UpstreamMaster {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl UpstreamMaster {
    fn start(bin: &PathBuf) -> UpstreamMaster {
        let (port, metrics) = (free_port(), free_port());
        let log = std::env::temp_dir().join(format!("wire_upstream_master_{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin)
            .arg(format!("--port={port}"))
            .arg("--rpc_address=127.0.0.1")
            .arg(format!("--metrics_port={metrics}"))
            .arg("--metrics_host=127.0.0.1")
            .arg("--logtostderr")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn mooncake_master");
        UpstreamMaster {
            child,
            addr: format!("127.0.0.1:{port}"),
            log,
        }
    }

    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        s[s.len().saturating_sub(4000)..].to_string()
    }

    fn connect(&mut self) -> MasterRpcClient {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = MasterRpcClient::connect(
                &self.addr,
                Duration::from_secs(10),
                Duration::from_secs(2),
            );
            match r {
                Ok(c) => return c,
                Err(e) if Instant::now() > deadline => {
                    panic!(
                        "cannot connect to upstream master: {e}\n{}",
                        self.log_tail()
                    )
                }
                Err(_) => {}
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("upstream master exited: {st}\n{}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for UpstreamMaster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uuid(a: u64, b: u64) -> Uuid {
    Uuid {
        first: a,
        second: b,
    }
}

/// A fake segment (the master only does bookkeeping on it); `n` makes id, name and
/// range distinct.
fn segment(n: u64) -> Segment {
    let name = format!("127.0.0.1:{}", 17777 + n);
    Segment {
        id: uuid(0x1111, 0x2222 + n),
        name: name.clone(),
        base: 0x4000_0000 * (n + 1),
        size: 64 << 20,
        te_endpoint: name,
        protocol: "tcp".into(),
        host_id: String::new(),
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn offload_task() -> OffloadTaskItem {
    OffloadTaskItem {
        tenant_id: DEFAULT_TENANT.into(),
        key: "raw".into(),
        size: 64,
    }
}

fn offload_meta() -> StorageObjectMetadata {
    StorageObjectMetadata {
        bucket_id: 7,
        offset: 0,
        key_size: 3,
        data_size: 64,
        transport_endpoint: "127.0.0.1:1".into(),
    }
}

/// Every method, framed by our codec on a raw socket: the master must not answer
/// err_code 4 (type hash rejected) or 11 (unknown function id).
fn every_request_accepted(addr: &str, log: &dyn Fn() -> String) {
    let me = uuid(0xabc, 0xdef);
    let t = || DEFAULT_TENANT.to_string();
    let cfg = ReplicateConfig::default();
    let meta = ObjectMeta {
        key: "raw".into(),
        checksum: None,
    };
    let k = || strs(&["raw-a", "raw-b"]);
    let kind = ReplicaType::Memory;
    let bodies: Vec<(Method, Vec<u8>)> = vec![
        (Method::ServiceReady, vec![]),
        (Method::GetStorageConfig, vec![]),
        (Method::GetFsdir, vec![]),
        (Method::MountSegment, codec::encode_args(&(segment(1), me))),
        (
            Method::ReMountSegment,
            codec::encode_args(&(vec![segment(1)], me)),
        ),
        (Method::Ping, codec::encode_args(&(me,))),
        (Method::FetchTasks, codec::encode_args(&(me, 16u64))),
        (
            Method::ExistKey,
            codec::encode_args(&("raw".to_string(), t())),
        ),
        (Method::BatchExistKey, codec::encode_args(&(k(), t()))),
        (
            Method::GetReplicaList,
            codec::encode_args(&("raw".to_string(), t())),
        ),
        (Method::BatchGetReplicaList, codec::encode_args(&(k(), t()))),
        (
            Method::GetReplicaListByRegex,
            codec::encode_args(&("^raw".to_string(), t())),
        ),
        (
            Method::PutStart,
            codec::encode_args(&(me, "raw".to_string(), 64u64, cfg.clone(), t())),
        ),
        (
            Method::PutEnd,
            codec::encode_args(&(me, meta.clone(), kind, t())),
        ),
        (
            Method::PutRevoke,
            codec::encode_args(&(me, "raw".to_string(), kind, t())),
        ),
        (
            Method::BatchPutStart,
            codec::encode_args(&(me, k(), vec![8u64, 8], cfg.clone(), t())),
        ),
        (
            Method::BatchPutEnd,
            codec::encode_args(&(me, vec![meta.clone()], kind, t())),
        ),
        (
            Method::BatchPutRevoke,
            codec::encode_args(&(me, k(), kind, t())),
        ),
        (
            Method::UpsertStart,
            codec::encode_args(&(me, "raw".to_string(), 64u64, cfg.clone(), t())),
        ),
        (
            Method::UpsertEnd,
            codec::encode_args(&(me, meta.clone(), kind, t())),
        ),
        (
            Method::UpsertRevoke,
            codec::encode_args(&(me, "raw".to_string(), kind, t())),
        ),
        (
            Method::BatchUpsertStart,
            codec::encode_args(&(me, k(), vec![8u64, 8], cfg, t())),
        ),
        (
            Method::BatchUpsertEnd,
            codec::encode_args(&(me, vec![meta], t())),
        ),
        (
            Method::BatchUpsertRevoke,
            codec::encode_args(&(me, k(), t())),
        ),
        (
            Method::Remove,
            codec::encode_args(&("raw".to_string(), true, t())),
        ),
        (
            Method::RemoveByRegex,
            codec::encode_args(&("^raw".to_string(), true, t())),
        ),
        (Method::RemoveAll, codec::encode_args(&(true, t()))),
        (Method::BatchRemove, codec::encode_args(&(k(), true, t()))),
        (Method::BatchQueryIp, codec::encode_args(&(vec![me],))),
        (
            Method::BatchReplicaClear,
            codec::encode_args(&(k(), me, "raw".to_string())),
        ),
        (
            Method::GracefulUnmountSegment,
            codec::encode_args(&(segment(1).id, me, 0u64)),
        ),
        (
            Method::UnmountSegment,
            codec::encode_args(&(segment(1).id, me)),
        ),
        (
            Method::MountLocalDiskSegment,
            codec::encode_args(&(me, true)),
        ),
        (
            Method::OffloadObjectHeartbeat,
            codec::encode_args(&(me, true)),
        ),
        (Method::PollRemoveAll, codec::encode_args(&(me,))),
        (
            Method::ReportSsdCapacity,
            codec::encode_args(&(me, 1i64 << 40)),
        ),
        (
            Method::NotifyOffloadSuccess,
            codec::encode_args(&(me, vec![offload_task()], vec![offload_meta()])),
        ),
        (Method::PromotionObjectHeartbeat, codec::encode_args(&(me,))),
        (
            Method::PromotionAllocStart,
            codec::encode_args(&(me, "raw".to_string(), t(), 64u64, strs(&["x"]))),
        ),
        (
            Method::NotifyPromotionSuccess,
            codec::encode_args(&(me, "raw".to_string(), t())),
        ),
        (
            Method::NotifyPromotionFailure,
            codec::encode_args(&(me, "raw".to_string(), t())),
        ),
        (
            Method::EvictDiskReplica,
            codec::encode_args(&(me, "raw".to_string(), t(), ReplicaType::LocalDisk)),
        ),
        (
            Method::BatchEvictDiskReplica,
            codec::encode_args(&(me, k(), t(), ReplicaType::LocalDisk)),
        ),
        (Method::UnmountLocalDiskSegment, codec::encode_args(&(me,))),
        (
            Method::CreateCopyTask,
            codec::encode_args(&("raw".to_string(), t(), strs(&["x"]))),
        ),
        (
            Method::CreateMoveTask,
            codec::encode_args(&("raw".to_string(), t(), "x".to_string(), "y".to_string())),
        ),
        (Method::QueryTask, codec::encode_args(&(me,))),
        (
            Method::MarkTaskToComplete,
            codec::encode_args(&(
                me,
                TaskCompleteRequest {
                    id: me,
                    status: TaskStatus::Failed as i32,
                    message: "m".into(),
                },
            )),
        ),
        (
            Method::CopyStart,
            codec::encode_args(&(me, "raw".to_string(), t(), "x".to_string(), strs(&["y"]))),
        ),
        (
            Method::CopyEnd,
            codec::encode_args(&(me, "raw".to_string(), t())),
        ),
        (
            Method::CopyRevoke,
            codec::encode_args(&(me, "raw".to_string(), t())),
        ),
        (
            Method::MoveStart,
            codec::encode_args(&(me, "raw".to_string(), t(), "x".to_string(), "y".to_string())),
        ),
        (
            Method::MoveEnd,
            codec::encode_args(&(me, "raw".to_string(), t())),
        ),
        (
            Method::MoveRevoke,
            codec::encode_args(&(me, "raw".to_string(), t())),
        ),
        (
            Method::DynamicReplicaCopyStart,
            codec::encode_args(&(
                me,
                "raw".to_string(),
                t(),
                "x".to_string(),
                strs(&["y"]),
                me,
                1u64,
            )),
        ),
        (
            Method::DynamicReplicaCopyEnd,
            codec::encode_args(&(me, "raw".to_string(), t(), me, 1u64)),
        ),
        (
            Method::DynamicReplicaCopyRevoke,
            codec::encode_args(&(me, "raw".to_string(), t(), me, 1u64)),
        ),
    ];
    let upstream = Method::ALL.iter().filter(|m| !m.is_extension()).count();
    assert_eq!(bodies.len(), upstream, "one request per upstream method");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for (seq, (m, body)) in bodies.iter().enumerate() {
        s.write_all(&coro_rpc::encode_request(seq as u32, m.id(), body))
            .unwrap();
        let (h, reply) = coro_rpc::read_response(&mut s, coro_rpc::MAX_FRAME)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", m.name(), log()))
            .unwrap_or_else(|| panic!("{}: master closed the connection\n{}", m.name(), log()));
        assert_eq!(h.seq, seq as u32);
        assert_eq!(
            h.err_code,
            0,
            "{}: upstream refused our request: {}",
            m.name(),
            coro_rpc::error_message(&reply)
        );
        codec::reencode_response(*m, &reply)
            .unwrap_or_else(|e| panic!("{}: cannot decode upstream's reply: {e}", m.name()));
    }
    // Our extensions are unknown there: "function not registered", connection intact.
    let extensions = [
        (
            Method::BatchBeginRead,
            codec::encode_args(&(vec!["raw".to_string()], t())),
        ),
        (
            Method::BatchEndRead,
            codec::encode_args(&(vec!["raw".to_string()], vec![1u64], t())),
        ),
    ];
    assert_eq!(bodies.len() + extensions.len(), Method::ALL.len());
    for (seq, (m, body)) in extensions.iter().enumerate() {
        let seq = (bodies.len() + seq) as u32;
        s.write_all(&coro_rpc::encode_request(seq, m.id(), body))
            .unwrap();
        let (h, _) = coro_rpc::read_response(&mut s, coro_rpc::MAX_FRAME)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", m.name(), log()))
            .unwrap_or_else(|| panic!("{}: master closed the connection\n{}", m.name(), log()));
        assert_eq!(
            (h.seq, h.err_code),
            (seq, coro_rpc::ERR_FUNCTION_NOT_REGISTERED),
            "{}",
            m.name()
        );
    }
}

#[test]
fn upstream_master_accepts_our_frames() {
    let Some(bin) = master_binary("upstream_master_accepts_our_frames") else {
        return;
    };
    let mut master = UpstreamMaster::start(&bin);
    let c = master.connect();
    let log = || master.log_tail();
    every_request_accepted(&master.addr, &log);

    let me = uuid(7, 8);
    let t = DEFAULT_TENANT;
    let seg = segment(0);
    let cfg = ReplicateConfig::default();
    assert!(c.get_storage_config().is_ok());
    // Our client learns that upstream has no tracked reads.
    let keys = vec!["nope".to_string()];
    assert_eq!(c.batch_begin_read(&keys, t), Err(ErrorCode::NOT_SUPPORTED));
    assert_eq!(
        c.batch_end_read(&keys, &[1], t),
        Err(ErrorCode::NOT_SUPPORTED)
    );
    c.mount_segment(&seg, me).unwrap();
    // Upstream answers a client's first ping with NEED_REMOUNT (as in the captures).
    c.ping(me).unwrap();
    c.remount_segment(std::slice::from_ref(&seg), me).unwrap();
    assert_eq!(c.ping(me).unwrap().client_status, ClientStatus::Ok);
    assert_eq!(c.fetch_tasks(me, 16), Ok(vec![]));

    // Put / get one object; its replica lies in the fake segment.
    let r = c.put_start(me, "k1", 4096, &cfg, t).unwrap();
    assert_eq!(r.len(), 1);
    match &r[0].location {
        ReplicaLocation::Memory(b) => {
            assert!(b.buffer_address >= seg.base && b.buffer_address + 4096 <= seg.base + seg.size);
            assert_eq!(b.size, 4096);
        }
        other => panic!("unexpected location {other:?}"),
    }
    let meta = |k: &str| ObjectMeta {
        key: k.into(),
        checksum: None,
    };
    c.put_end(me, &meta("k1"), ReplicaType::Memory, t).unwrap();
    assert_eq!(c.exist_key("k1", t), Ok(true));
    assert_eq!(c.exist_key("nope", t), Ok(false));
    let g = c.get_replica_list("k1", t).unwrap();
    assert_eq!(
        (g.replicas.len(), g.replicas[0].status),
        (1, ReplicaStatus::Complete)
    );
    assert_eq!(
        c.get_replica_list("nope", t),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    assert_eq!(
        c.batch_exist_key(&strs(&["k1", "nope"]), t).unwrap(),
        vec![Ok(true), Ok(false)]
    );
    let b = c.batch_get_replica_list(&strs(&["k1", "nope"]), t).unwrap();
    assert!(b[0].is_ok() && b[1] == Err(ErrorCode::OBJECT_NOT_FOUND));

    // A long key and a large batch: container lengths >= 256 need 2-byte prefixes and
    // a metainfo byte, both ways.
    let long = "L".repeat(300);
    c.put_start(me, &long, 64, &cfg, t).unwrap();
    c.put_end(me, &meta(&long), ReplicaType::Memory, t).unwrap();
    let many: Vec<String> = (0..300)
        .map(|i| format!("m{i}"))
        .chain([long.clone()])
        .collect();
    let e = c.batch_exist_key(&many, t).unwrap();
    assert_eq!((e.len(), e[300], e[0]), (301, Ok(true), Ok(false)));

    // Batch put, revoke, upsert.
    let bk = strs(&["b1", "b2"]);
    assert!(c
        .batch_put_start(me, &bk, &[100, 200], &cfg, t)
        .unwrap()
        .iter()
        .all(|r| r.is_ok()));
    let metas = vec![meta("b1"), meta("b2")];
    assert_eq!(
        c.batch_put_end(me, &metas, ReplicaType::Memory, t).unwrap(),
        vec![Ok(()); 2]
    );
    assert!(c
        .batch_put_start(me, &strs(&["r1"]), &[8], &cfg, t)
        .unwrap()[0]
        .is_ok());
    assert_eq!(
        c.batch_put_revoke(me, &strs(&["r1"]), ReplicaType::Memory, t)
            .unwrap(),
        vec![Ok(())]
    );
    c.put_start(me, "rv", 8, &cfg, t).unwrap();
    c.put_revoke(me, "rv", ReplicaType::Memory, t).unwrap();
    assert_eq!(c.exist_key("rv", t), Ok(false));
    c.upsert_start(me, "k1", 4096, &cfg, t).unwrap();
    c.upsert_end(me, &meta("k1"), ReplicaType::Memory, t)
        .unwrap();
    let uk = strs(&["u1", "u2"]);
    assert!(c
        .batch_upsert_start(me, &uk, &[16, 16], &cfg, t)
        .unwrap()
        .iter()
        .all(|r| r.is_ok()));
    let um = vec![meta("u1"), meta("u2")];
    assert_eq!(c.batch_upsert_end(me, &um, t).unwrap(), vec![Ok(()); 2]);
    assert!(c
        .batch_upsert_start(me, &strs(&["u3"]), &[16], &cfg, t)
        .unwrap()[0]
        .is_ok());
    assert_eq!(
        c.batch_upsert_revoke(me, &strs(&["u3"]), t).unwrap(),
        vec![Ok(())]
    );
    c.upsert_start(me, "u4", 16, &cfg, t).unwrap();
    c.upsert_revoke(me, "u4", ReplicaType::Memory, t).unwrap();

    let by = c.get_replica_list_by_regex("^b[0-9]$", t).unwrap();
    let mut names: Vec<&str> = by.iter().map(|(k, _)| k.as_str()).collect();
    names.sort();
    assert_eq!(names, ["b1", "b2"]);

    // Removal.
    c.remove("b1", true, t).unwrap();
    assert_eq!(c.remove("b1", true, t), Err(ErrorCode::OBJECT_NOT_FOUND));
    assert_eq!(c.remove_by_regex("^u[0-9]$", true, t), Ok(2));
    assert_eq!(
        c.batch_remove(&strs(&["b2", "nope"]), true, t).unwrap(),
        vec![Ok(()), Err(ErrorCode::OBJECT_NOT_FOUND)]
    );
    assert!(c.batch_query_ip(&[me]).is_ok());
    assert!(c.batch_replica_clear(&strs(&["k1"]), me, &seg.name).is_ok());
    let n = c.remove_all(true, t).unwrap();
    assert!(n >= 1, "remove_all removed {n}");
    assert_eq!(c.exist_key("k1", t), Ok(false));

    // Segments.
    c.remount_segment(std::slice::from_ref(&seg), me).unwrap();
    c.unmount_segment(seg.id, me).unwrap();
    assert_ne!(
        c.graceful_unmount_segment(seg.id, me, 0),
        Err(ErrorCode::RPC_FAIL)
    );
}
