//! [`StoreApi`]: the operations the C ABI and the Python package call, implemented by
//! a real [`Client`] and by a [`DummyClient`] that forwards them to a real client in
//! another process of the same host.
//!
//! [`DummyClient`]: super::dummy::DummyClient

use super::client::{Client, Health};
use super::metrics::Direction;
use super::vocab::{
    BatchWrite, Fragments, Pieces, RangedRead, RangedResults, ReadTarget, WriteMode,
};
use crate::store::error::{StoreError, StoreResult};
use crate::wire::master_api::{
    ErrorCode, QueryTaskResponse, ReplicaDescriptor, ReplicateConfig, Uuid,
};
use std::time::Instant;

/// -1, as upstream answers the segment calls of a client that is not a real one.
fn real_client_only(call: &str) -> StoreError {
    StoreError::new(
        ErrorCode::INTERNAL_ERROR,
        format!("{call} needs a real client (this one forwards to a real client)"),
    )
}

/// A store client as the C ABI sees it. Every method has the semantics and return
/// codes of the [`Client`] method of the same name.
pub trait StoreApi: Send + Sync + std::fmt::Debug {
    /// The name other clients reach this client's segment by (`host:port`).
    fn hostname(&self) -> String;
    /// 0 healthy, 1 closed, 2 when the client's master (or real client) is unreachable.
    fn health(&self) -> Health;
    /// Releases everything the client holds; idempotent.
    fn close(&self);
    /// Stores a copy of `value` (create only).
    fn put(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> StoreResult<()>;
    /// Stores a copy of `value`, replacing an existing object.
    fn upsert(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> StoreResult<()>;
    /// Writes objects, each the concatenation of its pieces.
    ///
    /// # Safety
    /// Every piece must be readable until this returns.
    unsafe fn batch_write_raw(&self, batch: BatchWrite<'_>) -> Vec<StoreResult<()>>;
    /// Reads objects, each scattered over its pieces; per key the object's size.
    ///
    /// # Safety
    /// Every piece must be writable, and not otherwise accessed, until this returns.
    unsafe fn batch_get_into_multi_raw(
        &self,
        keys: &[&str],
        items: &[Pieces],
    ) -> Vec<StoreResult<u64>>;
    /// Reads whole objects into memory from `alloc(key index, size)`, which returns
    /// the address of `size` writable bytes (called at most once per key); per key the
    /// object's size.
    ///
    /// # Safety
    /// Every address `alloc` returns must be writable for the size asked, and not
    /// otherwise accessed, until this returns.
    unsafe fn batch_get_alloc_addr(
        &self,
        keys: &[&str],
        alloc: &mut dyn FnMut(usize, u64) -> Option<u64>,
    ) -> Vec<StoreResult<u64>>;
    /// Ranged reads into registered buffers.
    ///
    /// # Safety
    /// Every destination buffer must be writable, and not otherwise accessed, until
    /// this returns.
    unsafe fn get_into_ranges_raw(&self, reads: &[RangedRead]) -> RangedResults;
    /// Per key: whether it exists.
    fn batch_is_exist(&self, keys: &[&str]) -> Vec<StoreResult<bool>>;
    /// Per key: the object's size.
    fn batch_get_size(&self, keys: &[&str]) -> Vec<StoreResult<u64>>;
    /// Reads that asked a disk owner to stage objects only its disk holds.
    fn offload_rpc_read_count(&self) -> u64;
    /// Starts the client HTTP server on `port` (0: any); the port bound.
    fn start_http_server(&self, port: u16) -> StoreResult<u16>;
    /// Per key: its replicas.
    fn batch_get_replica_desc(&self, keys: &[&str]) -> Vec<StoreResult<Vec<ReplicaDescriptor>>>;
    /// Per key: removes it.
    fn batch_remove(&self, keys: &[&str], force: bool) -> Vec<StoreResult<()>>;
    /// Removes the keys `pattern` matches; how many.
    fn remove_by_regex(&self, pattern: &str, force: bool) -> StoreResult<i64>;
    /// Removes every removable key; how many.
    fn remove_all(&self, force: bool) -> StoreResult<i64>;
    /// Drops this client's replicas of keys whose read leases expired.
    fn batch_replica_clear(&self, keys: &[&str], segment_name: &str) -> StoreResult<Vec<String>>;
    /// Queues a copy of `key` to the segments `targets`; the task id.
    fn create_copy_task(&self, key: &str, targets: &[String]) -> StoreResult<Uuid>;
    /// Queues a move of `key`'s replica on `source` to `target`; the task id.
    fn create_move_task(&self, key: &str, source: &str, target: &str) -> StoreResult<Uuid>;
    /// A copy or move task's state.
    fn query_task(&self, id: Uuid) -> StoreResult<QueryTaskResponse>;
    /// Registers caller memory for transfers.
    fn register_buffer(&self, addr: *mut u8, len: usize) -> StoreResult<()>;
    /// Unregisters memory registered with [`StoreApi::register_buffer`].
    fn unregister_buffer(&self, addr: *mut u8) -> StoreResult<()>;
    /// Allocates `size` bytes of memory the client can move data to and from (a
    /// dummy client's shared memory); -1012 (not supported) for a real client.
    fn alloc_from_mem_pool(&self, size: u64) -> StoreResult<u64> {
        let _ = size;
        Err(ErrorCode::NOT_SUPPORTED.into())
    }
    /// Mounts `size` bytes of the file at `path` from `offset` as a segment of its
    /// own (see [`Client::mount_file_segment`]); -1 for a dummy client.
    fn mount_file_segment(
        &self,
        path: &std::path::Path,
        offset: u64,
        size: u64,
        protocol: &str,
        location: &str,
    ) -> StoreResult<Option<Uuid>> {
        let _ = (path, offset, size, protocol, location);
        Err(real_client_only("mount_segment"))
    }
    /// Maps and mounts `size` bytes as a segment of its own (see
    /// [`Client::allocate_and_mount_segment`]); -1 for a dummy client.
    fn allocate_and_mount_segment(
        &self,
        size: u64,
        protocol: &str,
        location: &str,
    ) -> StoreResult<(Uuid, u64)> {
        let _ = (size, protocol, location);
        Err(real_client_only("allocate_and_mount_segment"))
    }
    /// `batch_put_session_start` (see [`Client::put_session_start`]); -600 per key for
    /// a dummy client.
    fn put_session_start(
        &self,
        keys: &[&str],
        sizes: &[u64],
        config: &ReplicateConfig,
    ) -> Vec<i32> {
        let _ = (sizes, config);
        vec![ErrorCode::INVALID_PARAMS.0; keys.len()]
    }
    /// `batch_put_from_multi_buffer_ranges` (see [`Client::put_ranges`]).
    ///
    /// # Safety
    /// As [`Client::put_ranges`].
    unsafe fn put_ranges(&self, keys: &[&str], frags: &[Fragments]) -> Vec<i64> {
        let _ = frags;
        vec![i64::from(ErrorCode::INVALID_PARAMS.0); keys.len()]
    }
    /// `batch_put_session_end` (see [`Client::put_session_end`]).
    fn put_session_end(&self, keys: &[&str]) -> Vec<i32> {
        vec![ErrorCode::INVALID_PARAMS.0; keys.len()]
    }
    /// `batch_put_session_revoke` (see [`Client::put_session_revoke`]).
    fn put_session_revoke(&self, keys: &[&str]) -> Vec<i32> {
        vec![ErrorCode::INVALID_PARAMS.0; keys.len()]
    }
    /// `batch_get_session_start` (see [`Client::get_session_start`]).
    fn get_session_start(&self, keys: &[&str]) -> Vec<i32> {
        vec![ErrorCode::INVALID_PARAMS.0; keys.len()]
    }
    /// `batch_get_into_multi_buffer_ranges` (see [`Client::get_ranges`]).
    ///
    /// # Safety
    /// As [`Client::get_ranges`].
    unsafe fn get_ranges(&self, keys: &[&str], frags: &[Fragments]) -> Vec<i64> {
        let _ = frags;
        vec![i64::from(ErrorCode::INVALID_PARAMS.0); keys.len()]
    }
    /// `batch_get_session_end` (see [`Client::get_session_end`]); -600 for a dummy.
    fn get_session_end(&self, keys: &[&str]) -> i32 {
        let _ = keys;
        ErrorCode::INVALID_PARAMS.0
    }
    /// Unmounts the client's local disk at the master (see
    /// [`Client::unmount_local_disk_segment`]); -1 for a dummy client.
    fn unmount_local_disk_segment(&self, grace_seconds: u64) -> StoreResult<()> {
        let _ = grace_seconds;
        Err(real_client_only("unmount_local_disk_segment"))
    }
    /// Unmounts a segment mounted at run time (see
    /// [`Client::unmount_run_time_segment`]); -1 for a dummy client.
    fn unmount_run_time_segment(
        &self,
        id: Uuid,
        allocated: bool,
        grace_seconds: u64,
    ) -> StoreResult<()> {
        let _ = (id, allocated, grace_seconds);
        Err(real_client_only("unmount_segment"))
    }
    /// Whether a dummy client's real client has all of `[addr, addr + len)` mapped
    /// (moves its data in place) rather than staging it through the local buffer;
    /// -1012 (not supported) for a real client.
    fn moves_in_place(&self, addr: u64, len: u64) -> StoreResult<bool> {
        let _ = (addr, len);
        Err(ErrorCode::NOT_SUPPORTED.into())
    }

    /// Zero-copy put of one object (an empty one stores nothing and succeeds, -600
    /// once closed).
    ///
    /// # Safety
    /// When `len > 0`, `[addr, addr + len)` must be readable until this returns.
    unsafe fn put_from_raw(
        &self,
        key: &str,
        addr: u64,
        len: u64,
        config: &ReplicateConfig,
    ) -> StoreResult<()> {
        if len == 0 {
            if self.health() == Health::NotInitialized {
                return Err(StoreError::invalid(format!(
                    "put_from('{key}') on a closed client"
                )));
            }
            log::warn!("store: put_from('{key}') with no data; nothing stored");
            return Ok(());
        }
        // SAFETY: forwarded contract.
        unsafe { write_piece(self, WriteMode::Put, key, (addr, len), config) }
    }
    /// Zero-copy puts, one `(address, length)` per key.
    ///
    /// # Safety
    /// Every item with a non-zero length must be readable until this returns.
    unsafe fn batch_put_from_raw(
        &self,
        keys: &[&str],
        items: &[(u64, u64)],
        config: &ReplicateConfig,
    ) -> Vec<StoreResult<()>> {
        if items.len() != keys.len() {
            let cause = format!("{} buffers for {} keys", items.len(), keys.len());
            return vec![Err(StoreError::invalid(cause)); keys.len()];
        }
        let pieces: Vec<Pieces> = items.iter().map(|&item| vec![item]).collect();
        // SAFETY: forwarded contract.
        unsafe {
            self.batch_write_raw(BatchWrite {
                mode: WriteMode::Put,
                keys,
                items: &pieces,
                config,
            })
        }
    }
    /// Reads one object into `[addr, addr + cap)`; its size.
    ///
    /// # Safety
    /// `[addr, addr + cap)` must be writable, and not otherwise accessed, until this
    /// returns.
    unsafe fn get_into_raw(&self, key: &str, addr: u64, cap: u64) -> StoreResult<u64> {
        // SAFETY: forwarded contract.
        one(unsafe { self.batch_get_into_raw(&[key], &[(addr, cap)]) })
    }
    /// Reads objects, one `(address, capacity)` per key.
    ///
    /// # Safety
    /// Every item must be writable, and not otherwise accessed, until this returns.
    unsafe fn batch_get_into_raw(
        &self,
        keys: &[&str],
        items: &[(u64, u64)],
    ) -> Vec<StoreResult<u64>> {
        let pieces: Vec<Pieces> = items.iter().map(|&item| vec![item]).collect();
        // SAFETY: forwarded contract.
        unsafe { self.batch_get_into_multi_raw(keys, &pieces) }
    }
    /// Whether `key` exists.
    fn is_exist(&self, key: &str) -> StoreResult<bool> {
        one(self.batch_is_exist(&[key]))
    }
    /// The size of `key`'s object.
    fn get_size(&self, key: &str) -> StoreResult<u64> {
        one(self.batch_get_size(&[key]))
    }
    /// The replicas of `key`.
    fn get_replica_desc(&self, key: &str) -> StoreResult<Vec<ReplicaDescriptor>> {
        one(self.batch_get_replica_desc(&[key]))
    }
    /// Removes `key`.
    fn remove(&self, key: &str, force: bool) -> StoreResult<()> {
        one(self.batch_remove(&[key], force))
    }
}

/// One key through a batch operation.
pub fn one<T, E: From<ErrorCode>>(mut batch: Vec<Result<T, E>>) -> Result<T, E> {
    batch
        .pop()
        .unwrap_or_else(|| Err(ErrorCode::INTERNAL_ERROR.into()))
}

/// Writes one object from one piece `(address, length)` of memory.
///
/// # Safety
/// The piece must be readable until this returns.
pub unsafe fn write_piece<A: StoreApi + ?Sized>(
    api: &A,
    mode: WriteMode,
    key: &str,
    piece: (u64, u64),
    config: &ReplicateConfig,
) -> StoreResult<()> {
    let batch = BatchWrite {
        mode,
        keys: &[key],
        items: &[vec![piece]],
        config,
    };
    // SAFETY: forwarded contract.
    one(unsafe { api.batch_write_raw(batch) })
}

/// Reads whole objects into targets from `alloc(size)`; per key the filled target and
/// the object's size (targets of failed keys are dropped).
///
/// # Safety
/// The address a target reports must be writable for the size it was allocated with,
/// for as long as the target lives.
pub unsafe fn batch_get_alloc<T: ReadTarget>(
    api: &dyn StoreApi,
    keys: &[&str],
    mut alloc: impl FnMut(u64) -> Option<T>,
) -> Vec<StoreResult<(T, u64)>> {
    let mut targets: Vec<Option<T>> = keys.iter().map(|_| None).collect();
    let mut provide = |i: usize, n: u64| {
        let slot = targets.get_mut(i)?;
        let mut t = alloc(n)?;
        let addr = t.addr();
        *slot = Some(t);
        Some(addr)
    };
    // SAFETY: forwarded contract; the targets live in `targets` until the call returns.
    let results = unsafe { api.batch_get_alloc_addr(keys, &mut provide) };
    results
        .into_iter()
        .zip(targets)
        .map(|(r, t)| {
            let n = r?;
            t.map(|t| (t, n))
                .ok_or_else(|| StoreError::internal("read without a target"))
        })
        .collect()
}

/// A target that is just an address already provided.
struct Provided(u64);

impl ReadTarget for Provided {
    fn addr(&mut self) -> u64 {
        self.0
    }
}

impl Client {
    /// Records a read of `keys` objects begun at `started`, by what it returned.
    fn record_reads(
        &self,
        op: &'static str,
        keys: usize,
        results: &[StoreResult<u64>],
        started: Instant,
    ) {
        let moved = results.iter().filter_map(|r| r.as_ref().ok()).sum();
        self.metrics()
            .record(Direction::Read, op, keys, moved, started.elapsed());
    }
}

impl StoreApi for Client {
    fn hostname(&self) -> String {
        Client::hostname(self).to_string()
    }
    fn health(&self) -> Health {
        Client::health(self)
    }
    fn close(&self) {
        Client::close(self)
    }
    fn put(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> StoreResult<()> {
        let started = Instant::now();
        let r = Client::put(self, key, value, config);
        let moved = if r.is_ok() { value.len() as u64 } else { 0 };
        self.metrics()
            .record(Direction::Write, "put", 1, moved, started.elapsed());
        r
    }
    fn upsert(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> StoreResult<()> {
        let started = Instant::now();
        let r = Client::upsert(self, key, value, config);
        let moved = if r.is_ok() { value.len() as u64 } else { 0 };
        self.metrics()
            .record(Direction::Write, "upsert", 1, moved, started.elapsed());
        r
    }
    unsafe fn batch_write_raw(&self, batch: BatchWrite<'_>) -> Vec<StoreResult<()>> {
        let started = Instant::now();
        // SAFETY: forwarded contract.
        let results = unsafe { Client::batch_write_raw(self, batch) };
        let moved: u64 = results
            .iter()
            .zip(batch.items)
            .filter(|(r, _)| r.is_ok())
            .map(|(_, pieces)| pieces.iter().map(|&(_, len)| len).sum::<u64>())
            .sum();
        let op = match (batch.mode, batch.keys.len()) {
            (WriteMode::Put, 1) => "put_from",
            (WriteMode::Put, _) => "batch_put_from",
            (WriteMode::Upsert, 1) => "upsert_from",
            (WriteMode::Upsert, _) => "batch_upsert_from",
        };
        self.metrics().record(
            Direction::Write,
            op,
            batch.keys.len(),
            moved,
            started.elapsed(),
        );
        results
    }
    unsafe fn batch_get_into_multi_raw(
        &self,
        keys: &[&str],
        items: &[Pieces],
    ) -> Vec<StoreResult<u64>> {
        let started = Instant::now();
        // SAFETY: forwarded contract.
        let results = unsafe { Client::batch_get_into_multi_raw(self, keys, items) };
        let op = if keys.len() == 1 {
            "get_into"
        } else {
            "batch_get_into"
        };
        self.record_reads(op, keys.len(), &results, started);
        results
    }
    unsafe fn batch_get_alloc_addr(
        &self,
        keys: &[&str],
        alloc: &mut dyn FnMut(usize, u64) -> Option<u64>,
    ) -> Vec<StoreResult<u64>> {
        let started = Instant::now();
        // SAFETY: forwarded contract.
        let results: Vec<StoreResult<u64>> =
            unsafe { Client::batch_get_alloc_raw(self, keys, |i, n| alloc(i, n).map(Provided)) }
                .into_iter()
                .map(|r| r.map(|(_, n)| n))
                .collect();
        let op = if keys.len() == 1 { "get" } else { "get_batch" };
        self.record_reads(op, keys.len(), &results, started);
        results
    }
    unsafe fn get_into_ranges_raw(&self, reads: &[RangedRead]) -> RangedResults {
        // SAFETY: forwarded contract.
        unsafe { Client::get_into_ranges_raw(self, reads) }
    }
    fn batch_is_exist(&self, keys: &[&str]) -> Vec<StoreResult<bool>> {
        Client::batch_is_exist(self, keys)
    }
    fn batch_get_size(&self, keys: &[&str]) -> Vec<StoreResult<u64>> {
        Client::batch_get_size(self, keys)
    }
    fn offload_rpc_read_count(&self) -> u64 {
        Client::offload_rpc_read_count(self)
    }
    fn unmount_local_disk_segment(&self, grace_seconds: u64) -> StoreResult<()> {
        Client::unmount_local_disk_segment(self, std::time::Duration::from_secs(grace_seconds))
    }
    fn put_session_start(
        &self,
        keys: &[&str],
        sizes: &[u64],
        config: &ReplicateConfig,
    ) -> Vec<i32> {
        Client::put_session_start(self, keys, sizes, config)
    }
    unsafe fn put_ranges(&self, keys: &[&str], frags: &[Fragments]) -> Vec<i64> {
        // SAFETY: forwarded contract.
        unsafe { Client::put_ranges(self, keys, frags) }
    }
    fn put_session_end(&self, keys: &[&str]) -> Vec<i32> {
        Client::put_session_end(self, keys)
    }
    fn put_session_revoke(&self, keys: &[&str]) -> Vec<i32> {
        Client::put_session_revoke(self, keys)
    }
    fn get_session_start(&self, keys: &[&str]) -> Vec<i32> {
        Client::get_session_start(self, keys)
    }
    unsafe fn get_ranges(&self, keys: &[&str], frags: &[Fragments]) -> Vec<i64> {
        // SAFETY: forwarded contract.
        unsafe { Client::get_ranges(self, keys, frags) }
    }
    fn get_session_end(&self, keys: &[&str]) -> i32 {
        Client::get_session_end(self, keys);
        0
    }
    fn start_http_server(&self, port: u16) -> StoreResult<u16> {
        Client::start_http_server(self, port)
    }
    fn mount_file_segment(
        &self,
        path: &std::path::Path,
        offset: u64,
        size: u64,
        protocol: &str,
        location: &str,
    ) -> StoreResult<Option<Uuid>> {
        Client::mount_file_segment(self, path, offset, size, protocol, location)
    }
    fn allocate_and_mount_segment(
        &self,
        size: u64,
        protocol: &str,
        location: &str,
    ) -> StoreResult<(Uuid, u64)> {
        Client::allocate_and_mount_segment(self, size, protocol, location)
    }
    fn unmount_run_time_segment(
        &self,
        id: Uuid,
        allocated: bool,
        grace_seconds: u64,
    ) -> StoreResult<()> {
        Client::unmount_run_time_segment(self, id, allocated, grace_seconds)
    }
    fn batch_get_replica_desc(&self, keys: &[&str]) -> Vec<StoreResult<Vec<ReplicaDescriptor>>> {
        Client::batch_get_replica_desc(self, keys)
    }
    fn batch_remove(&self, keys: &[&str], force: bool) -> Vec<StoreResult<()>> {
        Client::batch_remove(self, keys, force)
    }
    fn remove_by_regex(&self, pattern: &str, force: bool) -> StoreResult<i64> {
        Client::remove_by_regex(self, pattern, force)
    }
    fn remove_all(&self, force: bool) -> StoreResult<i64> {
        Client::remove_all(self, force)
    }
    fn batch_replica_clear(&self, keys: &[&str], segment_name: &str) -> StoreResult<Vec<String>> {
        Client::batch_replica_clear(self, keys, segment_name)
    }
    fn create_copy_task(&self, key: &str, targets: &[String]) -> StoreResult<Uuid> {
        Client::create_copy_task(self, key, targets)
    }
    fn create_move_task(&self, key: &str, source: &str, target: &str) -> StoreResult<Uuid> {
        Client::create_move_task(self, key, source, target)
    }
    fn query_task(&self, id: Uuid) -> StoreResult<QueryTaskResponse> {
        Client::query_task(self, id)
    }
    fn register_buffer(&self, addr: *mut u8, len: usize) -> StoreResult<()> {
        Client::register_buffer(self, addr, len)
    }
    fn unregister_buffer(&self, addr: *mut u8) -> StoreResult<()> {
        Client::unregister_buffer(self, addr)
    }
    fn is_exist(&self, key: &str) -> StoreResult<bool> {
        Client::is_exist(self, key)
    }
    fn get_size(&self, key: &str) -> StoreResult<u64> {
        Client::get_size(self, key)
    }
    fn get_replica_desc(&self, key: &str) -> StoreResult<Vec<ReplicaDescriptor>> {
        Client::get_replica_desc(self, key)
    }
    fn remove(&self, key: &str, force: bool) -> StoreResult<()> {
        Client::remove(self, key, force)
    }
}
