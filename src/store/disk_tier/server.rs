//! The owner's offload RPC port (spec tiers-events-conductor.md §1.5): readers of its
//! LOCAL_DISK replicas call `batch_get_offload_object`, which loads the objects from
//! disk into the owner's registered staging arena and answers where they are; the
//! reader pulls them with a Transfer Engine read and calls `release_offload_buffer`.
//! A batch a reader never releases is freed after the GC TTL. Served with upstream's
//! coro_rpc framing and function ids, so upstream readers fetch from ours.

use super::backend::{read_at, DiskStore, Location};
use crate::runtime::conn_threads::ConnLimits;
use crate::runtime::tcp_acceptor::{StreamTimeouts, TcpAcceptor};
use crate::store::memory::{SharedStaging, StagingBuffer};
use crate::wire::coro_rpc;
use crate::wire::master_api::ErrorCode;
use crate::wire::offload_rpc::{
    BatchGetArgs, BatchGetOffloadObjectResponse, BatchGetReply, OffloadMethod,
};
use crate::wire::struct_pack;
use parking_lot::{Mutex, RwLock};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections the offload port serves at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// Connections one reader host may hold on the offload port.
pub const MAX_CONNECTIONS_PER_PEER: usize = 256;
/// Largest request body (the keys of one batch).
pub const MAX_REQUEST: usize = 16 << 20;
/// A connection that sends nothing this long is closed (readers reconnect per call).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long writing a reply may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Alignment of each object in a staged batch.
const OBJECT_ALIGN: u64 = 64;

/// A batch staged for a reader.
struct StagedBatch {
    _memory: SharedStaging,
    expires: Instant,
}

/// What the offload port serves: the disk store, read into the staging arena.
pub(crate) struct ReadService {
    store: Arc<RwLock<DiskStore>>,
    arena: Arc<StagingBuffer>,
    te_name: String,
    gc_ttl: Duration,
    batches: Mutex<HashMap<u64, StagedBatch>>,
    next_batch: AtomicU64,
}

impl ReadService {
    /// Serves `store` through `arena` (registered with the Transfer Engine named
    /// `te_name`), keeping unreleased batches `gc_ttl`.
    pub fn new(
        store: Arc<RwLock<DiskStore>>,
        arena: Arc<StagingBuffer>,
        te_name: String,
        gc_ttl: Duration,
    ) -> ReadService {
        ReadService {
            store,
            arena,
            te_name,
            gc_ttl,
            batches: Mutex::new(HashMap::new()),
            next_batch: AtomicU64::new(1),
        }
    }

    /// `batch_get_offload_object`: stages `keys` (storage keys) of `sizes` bytes.
    pub fn batch_get(
        &self,
        keys: &[String],
        sizes: &[i64],
    ) -> Result<BatchGetOffloadObjectResponse, ErrorCode> {
        if keys.len() != sizes.len() {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        // Each bucket is opened once however many of the keys it holds.
        let mut files: HashMap<u64, File> = HashMap::new();
        let mut sources: Vec<Location> = Vec::with_capacity(keys.len());
        {
            let store = self.store.read();
            for (key, &size) in keys.iter().zip(sizes) {
                let loc = store.get(key).ok_or(ErrorCode::OBJECT_NOT_FOUND)?;
                if u64::try_from(size).ok() != Some(loc.len) {
                    log::warn!("offload: {key:?} is {} bytes, asked for {size}", loc.len);
                    return Err(ErrorCode::INVALID_PARAMS);
                }
                if let Entry::Vacant(slot) = files.entry(loc.bucket) {
                    slot.insert(store.open_bucket(loc.bucket).map_err(|e| {
                        log::warn!("offload: opening {key:?}: {e}");
                        ErrorCode::INTERNAL_ERROR
                    })?);
                }
                sources.push(loc);
            }
        }
        let aligned = |len: u64| len.div_ceil(OBJECT_ALIGN) * OBJECT_ALIGN;
        let total: u64 = sources.iter().map(|l| aligned(l.len)).sum();
        let mut memory = match self.allocate(total.max(1)) {
            Some(m) => m,
            None => {
                log::warn!(
                    "offload: no room to stage {total} bytes ({} of {} free)",
                    self.arena.free_bytes(),
                    self.arena.memory().len()
                );
                return Err(ErrorCode::BUFFER_OVERFLOW);
            }
        };
        let base = memory.addr();
        let mut pointers = Vec::with_capacity(sources.len());
        let mut offset = 0u64;
        let out = memory.as_mut_slice();
        for (loc, key) in sources.iter().zip(keys) {
            let piece = &mut out[offset as usize..(offset + loc.len) as usize];
            read_at(&files[&loc.bucket], loc, piece).map_err(|e| {
                log::warn!("offload: reading {key:?}: {e}");
                if e.kind() == io::ErrorKind::InvalidData {
                    ErrorCode::CHECKSUM_MISMATCH
                } else {
                    ErrorCode::INTERNAL_ERROR
                }
            })?;
            pointers.push(base + offset);
            offset += aligned(loc.len);
        }
        let batch_id = self.next_batch.fetch_add(1, Ordering::Relaxed);
        self.batches.lock().insert(
            batch_id,
            StagedBatch {
                _memory: memory,
                expires: Instant::now() + self.gc_ttl,
            },
        );
        Ok(BatchGetOffloadObjectResponse {
            batch_id,
            pointers,
            transfer_engine_addr: self.te_name.clone(),
            gc_ttl_ms: self.gc_ttl.as_millis() as u64,
        })
    }

    /// Arena space, freeing expired batches first when it is short.
    fn allocate(&self, len: u64) -> Option<SharedStaging> {
        self.arena.allocate_shared(len).or_else(|| {
            self.collect_expired();
            self.arena.allocate_shared(len)
        })
    }

    /// `release_offload_buffer`: whether the batch was staged.
    pub fn release(&self, batch_id: u64) -> bool {
        self.batches.lock().remove(&batch_id).is_some()
    }

    /// Frees batches past their GC TTL.
    pub fn collect_expired(&self) {
        let now = Instant::now();
        let expired: Vec<StagedBatch> = {
            let mut batches = self.batches.lock();
            let ids: Vec<u64> = batches
                .iter()
                .filter(|(_, b)| b.expires <= now)
                .map(|(&id, _)| id)
                .collect();
            ids.iter().filter_map(|id| batches.remove(id)).collect()
        };
        if !expired.is_empty() {
            log::debug!("offload: freed {} unreleased staged batches", expired.len());
        }
    }

    /// Batches staged now.
    #[cfg(test)]
    pub fn staged(&self) -> usize {
        self.batches.lock().len()
    }

    /// Handles one request: the coro_rpc `err_code` and body.
    fn handle(&self, function_id: u32, body: &[u8]) -> (u8, Vec<u8>) {
        let bad_args = || {
            (
                coro_rpc::ERR_INVALID_ARGUMENTS,
                coro_rpc::error_body(coro_rpc::MSG_INVALID_ARGUMENTS),
            )
        };
        match OffloadMethod::from_id(function_id) {
            Some(OffloadMethod::BatchGetOffloadObject) => {
                let Ok((keys, sizes)) = struct_pack::deserialize::<BatchGetArgs>(body) else {
                    return bad_args();
                };
                let reply: BatchGetReply = self.batch_get(&keys, &sizes);
                (coro_rpc::ERR_OK, struct_pack::serialize(&reply))
            }
            Some(OffloadMethod::ReleaseOffloadBuffer) => {
                let Ok((batch_id,)) = struct_pack::deserialize::<(u64,)>(body) else {
                    return bad_args();
                };
                (
                    coro_rpc::ERR_OK,
                    struct_pack::serialize(&self.release(batch_id)),
                )
            }
            None => (
                coro_rpc::ERR_FUNCTION_NOT_REGISTERED,
                coro_rpc::error_body(coro_rpc::MSG_FUNCTION_NOT_REGISTERED),
            ),
        }
    }
}

/// The listening offload port.
pub(crate) struct OffloadServer {
    acceptor: TcpAcceptor,
}

impl OffloadServer {
    /// Binds `bind` (port 0: a free one) and serves `service`.
    pub fn start(bind: SocketAddr, service: Arc<ReadService>) -> io::Result<OffloadServer> {
        let listener = TcpListener::bind(bind)?;
        let acceptor = TcpAcceptor::start(
            listener,
            "mc-offload-rpc",
            ConnLimits::new(MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER),
            StreamTimeouts {
                read: Some(IDLE_TIMEOUT),
                write: Some(WRITE_TIMEOUT),
            },
            move |stream, peer| {
                if let Err(e) = stream.try_clone().and_then(|s| serve(s, &service)) {
                    log::debug!("offload rpc connection from {peer} closed: {e}");
                }
            },
        )?;
        Ok(OffloadServer { acceptor })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.acceptor.local_addr().port()
    }
}

/// Serves one connection's requests in order until it closes.
fn serve(stream: TcpStream, service: &ReadService) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    while let Some((h, body)) = coro_rpc::read_request(&mut reader, MAX_REQUEST)? {
        let (err, reply) = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            service.handle(h.function_id, &body)
        })) {
            Ok(r) => r,
            Err(_) => {
                log::error!("offload rpc: a handler panicked");
                (
                    coro_rpc::ERR_THROW_EXCEPTION,
                    coro_rpc::error_body("rpc throw exception"),
                )
            }
        };
        writer.write_all(&coro_rpc::encode_response(h.seq, err, &reply))?;
        writer.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::Mapping;

    fn service(tag: &str, arena: u64, gc_ttl: Duration) -> (ReadService, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("mc-offload-srv-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut store = DiskStore::open(&dir).unwrap();
        let (a, b) = (vec![1u8; 100], vec![2u8; 3000]);
        store
            .write_bucket(&[("t\0a".into(), &a[..]), ("t\0b".into(), &b[..])])
            .unwrap();
        let arena = Arc::new(StagingBuffer::new(Mapping::zeroed(arena).unwrap()));
        let svc = ReadService::new(Arc::new(RwLock::new(store)), arena, "te:1".into(), gc_ttl);
        (svc, dir)
    }

    fn bytes_at(addr: u64, len: usize) -> Vec<u8> {
        // SAFETY: test addresses come from a live staged batch of at least `len` bytes.
        unsafe { std::slice::from_raw_parts(addr as usize as *const u8, len) }.to_vec()
    }

    #[test]
    fn a_batch_across_buckets_reads_each_key_from_its_own() {
        let (svc, dir) = service("buckets", 1 << 16, Duration::from_secs(60));
        let c = vec![3u8; 500];
        svc.store
            .write()
            .write_bucket(&[("t\0c".into(), &c[..])])
            .unwrap();
        let keys = ["t\0a", "t\0c", "t\0b"].map(String::from);
        let r = svc.batch_get(&keys, &[100, 500, 3000]).unwrap();
        assert_eq!(bytes_at(r.pointers[0], 100), vec![1u8; 100]);
        assert_eq!(bytes_at(r.pointers[1], 500), c);
        assert_eq!(bytes_at(r.pointers[2], 3000), vec![2u8; 3000]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn stages_batches_until_released_or_expired() {
        let (svc, dir) = service("stage", 8192, Duration::from_secs(60));
        let keys = ["t\0a".to_string(), "t\0b".to_string()];
        let r = svc.batch_get(&keys, &[100, 3000]).unwrap();
        assert_eq!(r.transfer_engine_addr, "te:1");
        assert_eq!(r.gc_ttl_ms, 60_000);
        assert_eq!(bytes_at(r.pointers[0], 100), vec![1u8; 100]);
        assert_eq!(bytes_at(r.pointers[1], 3000), vec![2u8; 3000]);
        assert_eq!(svc.staged(), 1);
        // The arena is full until the batch is released.
        let second = svc.batch_get(&keys, &[100, 3000]).unwrap();
        assert_eq!(
            svc.batch_get(&keys, &[100, 3000]),
            Err(ErrorCode::BUFFER_OVERFLOW)
        );
        assert!(svc.release(r.batch_id));
        assert!(!svc.release(r.batch_id));
        assert!(svc.release(second.batch_id));
        assert_eq!(svc.staged(), 0);
        // Wrong sizes, unknown keys and mismatched lists are refused.
        assert_eq!(
            svc.batch_get(&keys[..1], &[99]),
            Err(ErrorCode::INVALID_PARAMS)
        );
        assert_eq!(
            svc.batch_get(&["t\0zz".to_string()], &[1]),
            Err(ErrorCode::OBJECT_NOT_FOUND)
        );
        assert_eq!(svc.batch_get(&keys, &[100]), Err(ErrorCode::INVALID_PARAMS));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn unreleased_batches_are_freed_after_the_gc_ttl() {
        let (svc, dir) = service("gc", 4096, Duration::ZERO);
        let keys = ["t\0b".to_string()];
        svc.batch_get(&keys, &[3000]).unwrap();
        // Expired at once: the next batch that needs the room collects it.
        svc.batch_get(&keys, &[3000]).unwrap();
        svc.collect_expired();
        assert_eq!(svc.staged(), 0);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn answers_upstream_framing_and_refuses_bad_requests() {
        let (svc, dir) = service("rpc", 8192, Duration::from_secs(60));
        let body = struct_pack::serialize(&(vec!["t\0a".to_string()], vec![100i64]));
        let (err, reply) = svc.handle(OffloadMethod::BatchGetOffloadObject.id(), &body);
        assert_eq!(err, coro_rpc::ERR_OK);
        let staged = struct_pack::deserialize::<BatchGetReply>(&reply)
            .unwrap()
            .unwrap();
        let body = struct_pack::serialize(&(staged.batch_id,));
        let (err, reply) = svc.handle(OffloadMethod::ReleaseOffloadBuffer.id(), &body);
        assert_eq!(
            (err, struct_pack::deserialize::<bool>(&reply)),
            (0, Ok(true))
        );
        let (err, _) = svc.handle(OffloadMethod::BatchGetOffloadObject.id(), &[0xff; 3]);
        assert_eq!(err, coro_rpc::ERR_INVALID_ARGUMENTS);
        let (err, _) = svc.handle(0x1234_5678, &[]);
        assert_eq!(err, coro_rpc::ERR_FUNCTION_NOT_REGISTERED);
        let _ = std::fs::remove_dir_all(dir);
    }
}
