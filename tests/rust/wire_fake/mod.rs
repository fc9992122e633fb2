//! A fake `MasterApi` for the wire tests: records calls as `name(args)` and answers with
//! values derived from the arguments; and a loopback server running `serve_stream`.
#![allow(dead_code)]

use mooncake::wire::coro_rpc;
use mooncake::wire::dispatch::serve_stream;
use mooncake::wire::master_api::*;
use parking_lot::Mutex;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Records every call as `name(args)` and answers with values derived from the args.
pub struct Fake {
    version: String,
    calls: Mutex<Vec<String>>,
}

impl Fake {
    pub fn new(version: &str) -> Arc<Fake> {
        Arc::new(Fake {
            version: version.into(),
            calls: Mutex::new(Vec::new()),
        })
    }
    fn log(&self, s: String) {
        self.calls.lock().push(s);
    }
    pub fn last(&self) -> String {
        self.calls.lock().last().cloned().unwrap_or_default()
    }
}

pub fn desc(id: u64, key: &str) -> ReplicaDescriptor {
    ReplicaDescriptor {
        id,
        location: ReplicaLocation::Memory(BufferDescriptor {
            size: id * 10,
            buffer_address: 0x7f00_0000_0000 + id,
            protocol: "tcp".into(),
            transport_endpoint: key.into(),
        }),
        status: ReplicaStatus::Complete,
    }
}

pub fn grlr(key: &str) -> GetReplicaListResponse {
    GetReplicaListResponse {
        replicas: vec![desc(key.len() as u64, key)],
        lease_ttl_ms: 10_000,
        checksum: (key.len() % 2 == 0).then_some(42),
    }
}

pub fn uuid(a: u64) -> Uuid {
    Uuid {
        first: a,
        second: !a,
    }
}

impl MasterApi for Fake {
    fn service_ready(&self) -> MasterResult<String> {
        Ok(self.version.clone())
    }
    fn get_storage_config(&self) -> MasterResult<StorageConfig> {
        Ok(StorageConfig {
            fsdir: "/fs/c1".into(),
            enable_disk_eviction: true,
            quota_bytes: 7,
        })
    }
    fn get_fsdir(&self) -> MasterResult<String> {
        Err(ErrorCode::NOT_SUPPORTED)
    }
    fn mount_segment(&self, s: &Segment, c: Uuid) -> MasterResult<()> {
        self.log(format!("mount({s:?},{c})"));
        if s.size == 0 {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        Ok(())
    }
    fn remount_segment(&self, s: &[Segment], c: Uuid) -> MasterResult<()> {
        self.log(format!("remount({s:?},{c})"));
        Ok(())
    }
    fn unmount_segment(&self, s: Uuid, c: Uuid) -> MasterResult<()> {
        self.log(format!("unmount({s},{c})"));
        Ok(())
    }
    fn graceful_unmount_segment(&self, s: Uuid, c: Uuid, g: u64) -> MasterResult<()> {
        self.log(format!("graceful({s},{c},{g})"));
        Ok(())
    }
    fn ping(&self, c: Uuid) -> MasterResult<PingResponse> {
        Ok(PingResponse {
            view_version_id: c.first as i64,
            client_status: ClientStatus::Ok,
        })
    }
    fn fetch_tasks(&self, c: Uuid, n: u64) -> MasterResult<Vec<TaskAssignment>> {
        Ok((0..n.min(3))
            .map(|i| TaskAssignment {
                id: uuid(i),
                task_type: i as i32,
                payload: format!("{c}"),
                created_at_ms: -1,
                max_retry: 3,
            })
            .collect())
    }
    fn create_copy_task(&self, key: &str, t: &str, targets: &[String]) -> MasterResult<Uuid> {
        self.log(format!("copy_task({key},{t},{targets:?})"));
        match targets.len() {
            0 => Err(ErrorCode::INVALID_PARAMS),
            n => Ok(uuid(n as u64)),
        }
    }
    fn create_move_task(&self, key: &str, t: &str, s: &str, d: &str) -> MasterResult<Uuid> {
        self.log(format!("move_task({key},{t},{s},{d})"));
        Ok(uuid(key.len() as u64))
    }
    fn query_task(&self, id: Uuid) -> MasterResult<QueryTaskResponse> {
        if id.first == 0 {
            return Err(ErrorCode::TASK_NOT_FOUND);
        }
        Ok(QueryTaskResponse {
            id,
            task_type: 1,
            status: TaskStatus::Success as i32,
            created_at_ms: 5,
            last_updated_at_ms: 6,
            assigned_client: uuid(7),
            message: "m".repeat(300),
        })
    }
    fn mark_task_to_complete(&self, c: Uuid, r: &TaskCompleteRequest) -> MasterResult<()> {
        self.log(format!("complete({c},{},{},{})", r.id, r.status, r.message));
        Ok(())
    }
    fn copy_start(
        &self,
        c: Uuid,
        key: &str,
        t: &str,
        s: &str,
        targets: &[String],
    ) -> MasterResult<CopyStartResponse> {
        self.log(format!("copy_start({c},{key},{t},{s},{targets:?})"));
        Ok(CopyStartResponse {
            source: desc(1, key),
            targets: (0..targets.len() as u64)
                .map(|i| desc(i + 2, key))
                .collect(),
        })
    }
    fn copy_end(&self, c: Uuid, key: &str, t: &str) -> MasterResult<()> {
        self.log(format!("copy_end({c},{key},{t})"));
        Ok(())
    }
    fn copy_revoke(&self, c: Uuid, key: &str, t: &str) -> MasterResult<()> {
        self.log(format!("copy_revoke({c},{key},{t})"));
        Err(ErrorCode::OBJECT_NO_REPLICATION_TASK)
    }
    fn move_start(
        &self,
        c: Uuid,
        key: &str,
        t: &str,
        s: &str,
        d: &str,
    ) -> MasterResult<MoveStartResponse> {
        self.log(format!("move_start({c},{key},{t},{s},{d})"));
        Ok(MoveStartResponse {
            source: desc(1, key),
            target: (s != d).then(|| desc(2, key)),
        })
    }
    fn move_end(&self, c: Uuid, key: &str, t: &str) -> MasterResult<()> {
        self.log(format!("move_end({c},{key},{t})"));
        Ok(())
    }
    fn move_revoke(&self, c: Uuid, key: &str, t: &str) -> MasterResult<()> {
        self.log(format!("move_revoke({c},{key},{t})"));
        Ok(())
    }
    fn dynamic_replica_copy_start(
        &self,
        c: Uuid,
        key: &str,
        t: &str,
        s: &str,
        targets: &[String],
        lease: Uuid,
        epoch: u64,
    ) -> MasterResult<CopyStartResponse> {
        self.log(format!(
            "dyn_start({c},{key},{t},{s},{targets:?},{lease},{epoch})"
        ));
        Ok(CopyStartResponse {
            source: desc(epoch, key),
            targets: Vec::new(),
        })
    }
    fn dynamic_replica_copy_end(
        &self,
        c: Uuid,
        key: &str,
        t: &str,
        lease: Uuid,
        epoch: u64,
    ) -> MasterResult<()> {
        self.log(format!("dyn_end({c},{key},{t},{lease},{epoch})"));
        Ok(())
    }
    fn dynamic_replica_copy_revoke(
        &self,
        c: Uuid,
        key: &str,
        t: &str,
        lease: Uuid,
        epoch: u64,
    ) -> MasterResult<()> {
        self.log(format!("dyn_revoke({c},{key},{t},{lease},{epoch})"));
        Err(ErrorCode::INVALID_VERSION)
    }
    fn exist_key(&self, key: &str, tenant: &str) -> MasterResult<bool> {
        if tenant != DEFAULT_TENANT {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        Ok(key.len() % 2 == 0)
    }
    fn batch_exist_key(&self, keys: &[String], _t: &str) -> MasterResult<Vec<MasterResult<bool>>> {
        if keys.is_empty() {
            return Err(ErrorCode::INTERNAL_ERROR);
        }
        Ok(keys
            .iter()
            .map(|k| self.exist_key(k, DEFAULT_TENANT))
            .collect())
    }
    fn get_replica_list(&self, key: &str, _t: &str) -> MasterResult<GetReplicaListResponse> {
        if key.starts_with("missing") {
            return Err(ErrorCode::OBJECT_NOT_FOUND);
        }
        assert!(!key.starts_with("panic"), "the fake panics for {key}");
        // Slow enough that pipelined calls overlap.
        thread::sleep(Duration::from_micros(200));
        Ok(grlr(key))
    }
    fn batch_get_replica_list(
        &self,
        keys: &[String],
        t: &str,
    ) -> MasterResult<Vec<MasterResult<GetReplicaListResponse>>> {
        Ok(keys.iter().map(|k| self.get_replica_list(k, t)).collect())
    }
    fn get_replica_list_by_regex(
        &self,
        re: &str,
        _t: &str,
    ) -> MasterResult<Vec<(String, Vec<ReplicaDescriptor>)>> {
        Ok(vec![
            (re.to_string(), vec![desc(1, re)]),
            ("b".into(), vec![]),
        ])
    }
    fn put_start(
        &self,
        c: Uuid,
        key: &str,
        len: u64,
        cfg: &ReplicateConfig,
        t: &str,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        self.log(format!("put_start({c},{key},{len},{cfg:?},{t})"));
        Ok((0..cfg.replica_num).map(|i| desc(i + 1, key)).collect())
    }
    fn put_end(&self, c: Uuid, m: &ObjectMeta, k: ReplicaType, t: &str) -> MasterResult<()> {
        self.log(format!("put_end({c},{m:?},{k:?},{t})"));
        Ok(())
    }
    fn put_revoke(&self, c: Uuid, key: &str, k: ReplicaType, t: &str) -> MasterResult<()> {
        self.log(format!("put_revoke({c},{key},{k:?},{t})"));
        Err(ErrorCode::OBJECT_NOT_FOUND)
    }
    fn batch_put_start(
        &self,
        c: Uuid,
        keys: &[String],
        lens: &[u64],
        cfg: &ReplicateConfig,
        t: &str,
    ) -> MasterResult<Vec<MasterResult<Vec<ReplicaDescriptor>>>> {
        self.log(format!(
            "batch_put_start({c},{keys:?},{lens:?},{cfg:?},{t})"
        ));
        Ok(keys.iter().map(|k| Ok(vec![desc(1, k)])).collect())
    }
    fn batch_put_end(
        &self,
        c: Uuid,
        m: &[ObjectMeta],
        k: ReplicaType,
        t: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        self.log(format!("batch_put_end({c},{m:?},{k:?},{t})"));
        Err(ErrorCode::ILLEGAL_CLIENT)
    }
    fn batch_put_revoke(
        &self,
        c: Uuid,
        keys: &[String],
        k: ReplicaType,
        t: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        self.log(format!("batch_put_revoke({c},{keys:?},{k:?},{t})"));
        Ok(keys.iter().map(|_| Ok(())).collect())
    }
    fn upsert_start(
        &self,
        c: Uuid,
        key: &str,
        len: u64,
        cfg: &ReplicateConfig,
        t: &str,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        self.log(format!("upsert_start({c},{key},{len},{cfg:?},{t})"));
        Ok(vec![])
    }
    fn upsert_end(&self, c: Uuid, m: &ObjectMeta, k: ReplicaType, t: &str) -> MasterResult<()> {
        self.log(format!("upsert_end({c},{m:?},{k:?},{t})"));
        Ok(())
    }
    fn upsert_revoke(&self, c: Uuid, key: &str, k: ReplicaType, t: &str) -> MasterResult<()> {
        self.log(format!("upsert_revoke({c},{key},{k:?},{t})"));
        Ok(())
    }
    fn batch_upsert_start(
        &self,
        c: Uuid,
        keys: &[String],
        lens: &[u64],
        cfg: &ReplicateConfig,
        t: &str,
    ) -> MasterResult<Vec<MasterResult<Vec<ReplicaDescriptor>>>> {
        self.log(format!(
            "batch_upsert_start({c},{keys:?},{lens:?},{cfg:?},{t})"
        ));
        Ok(keys
            .iter()
            .map(|_| Err(ErrorCode::NO_AVAILABLE_HANDLE))
            .collect())
    }
    fn batch_upsert_end(
        &self,
        c: Uuid,
        m: &[ObjectMeta],
        t: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        self.log(format!("batch_upsert_end({c},{m:?},All,{t})"));
        Ok(m.iter().map(|_| Ok(())).collect())
    }
    fn batch_upsert_revoke(
        &self,
        c: Uuid,
        keys: &[String],
        t: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        self.log(format!("batch_upsert_revoke({c},{keys:?},All,{t})"));
        Ok(keys.iter().map(|_| Ok(())).collect())
    }
    fn remove(&self, key: &str, force: bool, t: &str) -> MasterResult<()> {
        self.log(format!("remove({key},{force},{t})"));
        if force {
            Ok(())
        } else {
            Err(ErrorCode::OBJECT_HAS_LEASE)
        }
    }
    fn remove_by_regex(&self, re: &str, force: bool, t: &str) -> MasterResult<i64> {
        self.log(format!("remove_by_regex({re},{force},{t})"));
        Ok(re.len() as i64)
    }
    fn remove_all(&self, force: bool, _t: &str) -> MasterResult<i64> {
        if force {
            Ok(1 << 40)
        } else {
            Err(ErrorCode::INTERNAL_ERROR)
        }
    }
    fn batch_remove(
        &self,
        keys: &[String],
        f: bool,
        t: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        Ok(keys.iter().map(|k| self.remove(k, f, t)).collect())
    }
    fn batch_query_ip(&self, clients: &[Uuid]) -> MasterResult<Vec<(Uuid, Vec<String>)>> {
        Ok(clients
            .iter()
            .map(|c| (*c, vec![format!("10.0.0.{}", c.first)]))
            .collect())
    }
    fn batch_replica_clear(
        &self,
        keys: &[String],
        c: Uuid,
        seg: &str,
    ) -> MasterResult<Vec<String>> {
        self.log(format!("clear({keys:?},{c},{seg})"));
        Ok(keys.iter().skip(1).cloned().collect())
    }
}

/// A loopback server: a thread per connection running `serve_stream`.
pub struct Server {
    /// `127.0.0.1:port`.
    pub addr: String,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Server {
    pub fn start(api: Arc<Fake>) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let c2 = conns.clone();
        thread::spawn(move || {
            for s in l.incoming().flatten() {
                c2.lock().push(s.try_clone().unwrap());
                let api = api.clone();
                thread::spawn(move || {
                    let _ = serve_stream(s, &*api, coro_rpc::MAX_FRAME);
                });
            }
        });
        Server { addr, conns }
    }
    /// Closes every accepted connection (as a master restart would).
    pub fn drop_connections(&self) {
        for s in self.conns.lock().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}
