//! [`DummyClient`]: a store client without a segment, Transfer Engine or master
//! connection of its own. It forwards every operation to a real client on the same
//! host (`mooncake_client`) over a Unix socket; the data moves through shared memory
//! the dummy creates (its local buffer and `alloc_from_mem_pool` allocations) and the
//! real client maps, so the real client's Transfer Engine reads and writes the
//! dummy's bytes in place.
//!
//! Memory the real client cannot see (any other caller memory; registering it is
//! accepted with a warning) is staged through the local buffer: one extra copy, the
//! same results. Memory from [`host_memory`] (upstream's `MooncakeHostMemAllocator`)
//! is shared like the dummy's own allocations.

use super::wire::{self, FetchResult, Op, WireRangedRead};
use crate::host::net::random_u64;
use crate::store::api::StoreApi;
use crate::store::host_memory;
use crate::store::memory::{Mapping, Staging, StagingBuffer};
use crate::store::state::map_error;
use crate::store::vocab::{ranged_failure, RangedRead, RangedResults};
use crate::store::{ErrorCode, Health, Pieces, ReplicateConfig, WriteMode};
use crate::wire::master_api::ReplicaDescriptor;
use crate::wire::struct_pack::Pack;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Everything a set-up dummy holds; dropped by `close`.
struct Inner {
    /// The real client's abstract socket name.
    socket: String,
    /// Names this process's session at the real client.
    token: u64,
    /// Deadline of one call (`MC_RPC_TIMEOUT_MS`).
    timeout: Duration,
    /// Idle connections.
    idle: Mutex<Vec<UnixStream>>,
    /// The local buffer (shared with the real client) that stages bytes.
    staging: Option<StagingBuffer>,
    /// `alloc_from_mem_pool` allocations, by address.
    pool: Mutex<BTreeMap<u64, Mapping>>,
    /// Ranges the real client has mapped: address → length.
    mapped: RwLock<BTreeMap<u64, u64>>,
    /// Ranges registered that the real client cannot map (staged): address → length.
    staged: Mutex<BTreeMap<u64, u64>>,
    /// Whether registering memory that must be staged was warned about.
    warned_staged: AtomicBool,
    /// Staging offered for whole-object reads: the size of the last objects read.
    read_hint: AtomicU64,
    /// The real client's segments mapped here: its base address, length, mapping.
    segments: RwLock<Vec<(u64, u64, Mapping)>>,
}

/// A dummy client (upstream `DummyClient`); thread-safe, every method takes `&self`.
pub struct DummyClient {
    state: RwLock<Option<Inner>>,
    /// The real client's name (its segment's name).
    hostname: String,
}

impl std::fmt::Debug for DummyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DummyClient")
            .field("real_client", &self.hostname)
            .finish_non_exhaustive()
    }
}

fn io_code(e: &io::Error) -> ErrorCode {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ErrorCode::RPC_TIMEOUT,
        _ => ErrorCode::RPC_FAIL,
    }
}

impl DummyClient {
    /// Connects to the real client serving `server_address` (`host:port`, or a port;
    /// the real client listens on `@mooncake_client_<port>.sock`), creates a shared
    /// local buffer of `local_buffer_size` bytes (0: none; `put`/`get` of bytes need
    /// one) and has the real client map it. `mem_pool_size` is accepted as upstream
    /// (which does not use it either): `alloc_from_mem_pool` allocations are separate.
    /// -1 when the real client cannot be reached or refuses this process.
    pub fn setup(
        mem_pool_size: u64,
        local_buffer_size: u64,
        server_address: &str,
    ) -> Result<DummyClient, ErrorCode> {
        let _ = mem_pool_size;
        let Some(port) = super::port_of(server_address) else {
            log::error!("dummy client: '{server_address}' names no port of a real client");
            return Err(ErrorCode::INVALID_PARAMS);
        };
        let env = crate::store::config::StoreEnv::from_env();
        let staging = match local_buffer_size {
            0 => None,
            n => Some(StagingBuffer::new(
                Mapping::shared(n).map_err(|e| map_error("the local buffer", n, e))?,
            )),
        };
        let inner = Inner {
            socket: super::socket_name(port),
            token: random_u64(),
            timeout: env.rpc_timeout,
            idle: Mutex::new(Vec::new()),
            staging,
            pool: Mutex::new(BTreeMap::new()),
            mapped: RwLock::new(BTreeMap::new()),
            staged: Mutex::new(BTreeMap::new()),
            warned_staged: AtomicBool::new(false),
            read_hint: AtomicU64::new(0),
            segments: RwLock::new(Vec::new()),
        };
        let (conn, hostname) = inner.connect().map_err(|e| {
            log::error!(
                "dummy client: connecting to the real client at @{} ({server_address}): {e}",
                inner.socket
            );
            ErrorCode::INTERNAL_ERROR
        })?;
        inner.idle.lock().push(conn);
        if let Some(s) = &inner.staging {
            let m = s.memory();
            inner.map(m.addr(), m.len(), m)?;
        }
        log::info!(
            "dummy client: forwarding to real client '{hostname}' (@{})",
            inner.socket
        );
        Ok(DummyClient {
            state: RwLock::new(Some(inner)),
            hostname,
        })
    }

    /// A copy of `value` stored under `key` (staged through the local buffer): -600
    /// when empty.
    fn write_value(
        &self,
        mode: WriteMode,
        key: &str,
        value: &[u8],
        config: &ReplicateConfig,
    ) -> Result<(), ErrorCode> {
        if value.is_empty() {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        let items = [vec![(value.as_ptr() as u64, value.len() as u64)]];
        crate::store::api::one(self.with(
            || vec![Err(ErrorCode::INVALID_PARAMS)],
            |i| i.write(mode, &[key], &items, config),
        ))
    }

    fn with<R>(&self, closed: impl FnOnce() -> R, op: impl FnOnce(&Inner) -> R) -> R {
        match self.state.read().as_ref() {
            Some(inner) => op(inner),
            None => closed(),
        }
    }
}

impl Inner {
    /// A new connection that has joined this process's session; the real client's
    /// hostname. A fresh session (the real client restarted) gets every mapped range
    /// again before the connection is used.
    fn connect(&self) -> io::Result<(UnixStream, String)> {
        let stream = UnixStream::connect_addr(&SocketAddr::from_abstract_name(&self.socket)?)?;
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        wire::send_request(&stream, Op::Hello, &(wire::VERSION, self.token), None)?;
        let reply = wire::decode::<Result<(String, bool), ErrorCode>>(&wire::read_reply(&stream)?)?;
        let (hostname, fresh) = reply.map_err(|e| {
            io::Error::new(io::ErrorKind::PermissionDenied, format!("refused ({e})"))
        })?;
        if fresh {
            self.map_segments(&stream)?;
            let mapped: Vec<(u64, u64)> =
                self.mapped.read().iter().map(|(&a, &l)| (a, l)).collect();
            for (addr, len) in mapped {
                let Some((file, offset)) = self.file_of(addr) else {
                    continue;
                };
                wire::send_request(&stream, Op::Map, &(addr, len, offset), Some(&file))?;
                let r = wire::decode::<Result<(), ErrorCode>>(&wire::read_reply(&stream)?)?;
                if let Err(e) = r {
                    log::warn!(
                        "dummy client: re-mapping [{addr:#x}, +{len}) at the real client: {e}"
                    );
                }
            }
        }
        Ok((stream, hostname))
    }

    /// Maps the real client's segments (objects there are then copied by this process
    /// straight from them), replacing any mapped before.
    fn map_segments(&self, stream: &UnixStream) -> io::Result<()> {
        wire::send_request(stream, Op::Segments, &false, None)?;
        let (body, files) = wire::read_reply_with_files(stream)?;
        let ranges = wire::decode::<Vec<(u64, u64)>>(&body)?;
        let offered = ranges.len();
        let mut mapped = Vec::new();
        for ((base, len), file) in ranges.into_iter().zip(files) {
            match Mapping::from_shared_file(file, len) {
                Ok(m) => mapped.push((base, len, m)),
                Err(e) => log::warn!("dummy client: mapping a real client segment: {e}"),
            }
        }
        let all = offered > 0 && mapped.len() == offered;
        *self.segments.write() = mapped;
        if all {
            wire::send_request(stream, Op::Segments, &true, None)?;
            wire::decode::<Vec<(u64, u64)>>(&wire::read_reply(stream)?)?;
        }
        Ok(())
    }

    /// This process's address of `[addr, addr + len)` of the real client's segments.
    fn in_segment(&self, addr: u64, len: u64) -> Option<u64> {
        let segments = self.segments.read();
        segments.iter().find_map(|(base, n, m)| {
            let end = addr.checked_add(len)?;
            (addr >= *base && end <= base + n).then(|| m.addr() + (addr - base))
        })
    }

    /// The shared file holding `addr` (the local buffer or a pool allocation) and the
    /// offset of `addr` in it.
    fn file_of(&self, addr: u64) -> Option<(std::os::fd::OwnedFd, u64)> {
        let found = |m: &Mapping| {
            m.contains(addr, 0)
                .then(|| {
                    m.shared_file()?
                        .try_clone()
                        .ok()
                        .map(|f| (f, addr - m.addr()))
                })
                .flatten()
        };
        if let Some(f) = self.staging.as_ref().and_then(|s| found(s.memory())) {
            return Some(f);
        }
        let pool = self.pool.lock();
        let (_, m) = pool.range(..=addr).next_back()?;
        found(m)
    }

    /// One call: request, reply, decoded. A connection that fails is dropped.
    fn call<T: Pack + 'static, R: Pack + 'static>(
        &self,
        op: Op,
        args: &T,
        file: Option<&std::os::fd::OwnedFd>,
    ) -> Result<R, ErrorCode> {
        let conn = self.connection()?;
        let r = Self::exchange(&conn, op, args, file)?;
        self.idle.lock().push(conn);
        Ok(r)
    }

    /// An idle or new connection; -900 (or -901) when the real client is unreachable.
    fn connection(&self) -> Result<UnixStream, ErrorCode> {
        if let Some(c) = self.idle_connection() {
            return Ok(c);
        }
        self.connect().map(|(c, _)| c).map_err(|e| {
            log::error!(
                "dummy client: the real client at @{} is unreachable: {e}",
                self.socket
            );
            // A real client that is gone must not be kept in memory by its segments
            // mapped here; a new one shares its own.
            self.segments.write().clear();
            io_code(&e)
        })
    }

    /// Request and reply on `conn`, decoded.
    fn exchange<T: Pack + 'static, R: Pack + 'static>(
        conn: &UnixStream,
        op: Op,
        args: &T,
        file: Option<&std::os::fd::OwnedFd>,
    ) -> Result<R, ErrorCode> {
        wire::send_request(conn, op, args, file)
            .and_then(|()| wire::read_reply(conn))
            .and_then(|body| wire::decode::<R>(&body))
            .map_err(|e| {
                log::error!("dummy client: {op:?} to the real client failed: {e}");
                io_code(&e)
            })
    }

    /// An idle connection the real client has not closed (one it closed, e.g. across
    /// a restart, is readable or hung up while no request is outstanding).
    fn idle_connection(&self) -> Option<UnixStream> {
        use std::os::fd::AsRawFd;
        loop {
            let conn = self.idle.lock().pop()?;
            let mut pfd = libc::pollfd {
                fd: conn.as_raw_fd(),
                events: libc::POLLIN | libc::POLLRDHUP,
                revents: 0,
            };
            // SAFETY: one valid pollfd, no waiting.
            if unsafe { libc::poll(&mut pfd, 1, 0) } == 0 {
                return Some(conn);
            }
        }
    }

    /// A batch call whose transport failure fails every key.
    fn call_batch<T: Pack + 'static, V: Pack + 'static>(
        &self,
        op: Op,
        args: &T,
        n: usize,
    ) -> Vec<Result<V, ErrorCode>> {
        match self.call::<T, Vec<Result<V, ErrorCode>>>(op, args, None) {
            Ok(v) if v.len() == n => v,
            Ok(_) => (0..n).map(|_| Err(ErrorCode::INTERNAL_ERROR)).collect(),
            Err(e) => (0..n).map(|_| Err(e)).collect(),
        }
    }

    /// Has the real client map `[addr, addr + len)` of `holder`'s file.
    fn map(&self, addr: u64, len: u64, holder: &Mapping) -> Result<(), ErrorCode> {
        let file = holder.shared_file().ok_or(ErrorCode::INVALID_PARAMS)?;
        let offset = addr - holder.addr();
        self.call::<_, Result<(), ErrorCode>>(Op::Map, &(addr, len, offset), Some(file))??;
        self.mapped.write().insert(addr, len);
        Ok(())
    }

    /// Whether the real client has `[addr, addr + len)` mapped.
    fn is_mapped(&self, addr: u64, len: u64) -> bool {
        let mapped = self.mapped.read();
        mapped
            .range(..=addr)
            .next_back()
            .is_some_and(|(&base, &n)| addr.checked_add(len).is_some_and(|end| end <= base + n))
    }

    fn pieces_mapped(&self, pieces: &Pieces) -> bool {
        pieces.iter().all(|&(a, n)| self.is_mapped(a, n))
    }

    /// A staging reservation of `len` bytes, or -600 with the reason logged.
    fn stage(&self, op: &str, key: &str, len: u64) -> Result<Staging<'_>, ErrorCode> {
        self.staging
            .as_ref()
            .and_then(|s| s.allocate(len))
            .ok_or_else(|| {
                log::error!(
                    "dummy client: {op}('{key}'): {len} bytes do not fit the free local buffer (or are \
                 empty); memory from alloc_from_mem_pool needs no staging"
                );
                ErrorCode::INVALID_PARAMS
            })
    }

    fn write(
        &self,
        mode: WriteMode,
        keys: &[&str],
        items: &[Pieces],
        config: &ReplicateConfig,
    ) -> Vec<Result<(), ErrorCode>> {
        let n = keys.len();
        if items.len() != n {
            return vec![Err(ErrorCode::INVALID_PARAMS); n];
        }
        let mut results = vec![Ok(()); n];
        let mut stagings = Vec::new();
        let mut send: Vec<Pieces> = Vec::with_capacity(n);
        for (i, pieces) in items.iter().enumerate() {
            if self.pieces_mapped(pieces) {
                send.push(pieces.clone());
                continue;
            }
            let total: u64 = pieces.iter().map(|p| p.1).sum();
            match self.stage("put", keys[i], total) {
                Ok(s) => {
                    let mut off = 0;
                    for &(addr, len) in pieces {
                        // SAFETY: the caller's piece is readable (the trait's
                        // contract); the staging range is ours and `total` long.
                        unsafe { copy(addr, s.addr() + off, len) };
                        off += len;
                    }
                    send.push(vec![(s.addr(), total)]);
                    stagings.push(s);
                }
                Err(e) => {
                    results[i] = Err(e);
                    send.push(Vec::new());
                }
            }
        }
        let (idx, sub_keys, sub_items) = select(keys, send, &results);
        let upsert = mode == WriteMode::Upsert;
        let args = (upsert, sub_keys, sub_items, config.clone());
        let n_sub = idx.len();
        if n_sub > 0 {
            for (i, r) in idx
                .into_iter()
                .zip(self.call_batch::<_, ()>(Op::Write, &args, n_sub))
            {
                results[i] = r;
            }
        }
        drop(stagings);
        results
    }

    fn read(&self, keys: &[&str], items: &[Pieces]) -> Vec<Result<u64, ErrorCode>> {
        let n = keys.len();
        if items.len() != n {
            return vec![Err(ErrorCode::INVALID_PARAMS); n];
        }
        let mut results: Vec<Result<u64, ErrorCode>> = vec![Ok(0); n];
        let mut staged: Vec<Option<Staging<'_>>> = Vec::with_capacity(n);
        let mut send: Vec<Pieces> = Vec::with_capacity(n);
        for (i, pieces) in items.iter().enumerate() {
            if self.pieces_mapped(pieces) {
                send.push(pieces.clone());
                staged.push(None);
                continue;
            }
            let total: u64 = pieces.iter().map(|p| p.1).sum();
            match self.stage("get", keys[i], total) {
                Ok(s) => {
                    send.push(vec![(s.addr(), total)]);
                    staged.push(Some(s));
                }
                Err(e) => {
                    results[i] = Err(e);
                    send.push(Vec::new());
                    staged.push(None);
                }
            }
        }
        let (idx, sub_keys, sub_items) = select(keys, send, &results);
        if !idx.is_empty() {
            let got = self.call_batch::<_, u64>(Op::Read, &(sub_keys, sub_items), idx.len());
            for (i, r) in idx.into_iter().zip(got) {
                results[i] = r;
            }
        }
        for (i, s) in staged.iter().enumerate() {
            if let (Some(s), Ok(size)) = (s, &results[i]) {
                let mut off = 0;
                for &(addr, len) in &items[i] {
                    if off >= *size {
                        break;
                    }
                    let len = len.min(*size - off);
                    // SAFETY: the caller's piece is writable (the trait's contract);
                    // the staging range holds `size` bytes the real client wrote.
                    unsafe { copy(s.addr() + off, addr, len) };
                    off += len;
                }
            }
        }
        results
    }
}

impl Inner {
    /// Whole objects copied into `alloc`'s memory: straight from the real client's
    /// segment (mapped here) when the object lies there, else through the local
    /// buffer, where the real client reads it. The staging offered is the size of the
    /// last objects that needed it (so a stream of same-sized gets costs one call
    /// each); objects that did not fit are read again into staging of their size.
    ///
    /// # Safety
    /// As [`StoreApi::batch_get_alloc_addr`].
    unsafe fn fetch(
        &self,
        keys: &[&str],
        alloc: &mut dyn FnMut(usize, u64) -> Option<u64>,
    ) -> Vec<Result<u64, ErrorCode>> {
        let n = keys.len();
        let mut results: Vec<Result<u64, ErrorCode>> = vec![Err(ErrorCode::INTERNAL_ERROR); n];
        let hint = self.read_hint.load(Ordering::Relaxed);
        let mut pending: Vec<(usize, u64)> = (0..n).map(|k| (k, hint)).collect();
        // The largest object that needed staging (not in the real client's segment).
        let mut staged = 0;
        for round in 0..2 {
            if pending.is_empty() {
                break;
            }
            let mut stagings: Vec<Option<Staging<'_>>> = Vec::with_capacity(pending.len());
            let mut asked = Vec::with_capacity(pending.len());
            for &(k, cap) in &pending {
                let s = match cap {
                    0 => None,
                    cap if round == 0 => self.staging.as_ref().and_then(|s| s.allocate(cap)),
                    cap => match self.stage("get", keys[k], cap) {
                        Ok(s) => Some(s),
                        Err(e) => {
                            results[k] = Err(e);
                            continue;
                        }
                    },
                };
                asked.push((k, cap));
                stagings.push(s);
            }
            pending = asked;
            if pending.is_empty() {
                break;
            }
            let offered: Vec<(u64, u64)> = stagings
                .iter()
                .map(|s| s.as_ref().map_or((0, 0), |s| (s.addr(), s.len())))
                .collect();
            let sub_keys: Vec<String> = pending.iter().map(|&(k, _)| keys[k].to_string()).collect();
            let started = std::time::Instant::now();
            let conn = match self.connection() {
                Ok(c) => c,
                Err(e) => {
                    for &(k, _) in &pending {
                        results[k] = Err(e);
                    }
                    return results;
                }
            };
            let replies = match Self::exchange::<_, Vec<FetchResult>>(
                &conn,
                Op::Fetch,
                &(sub_keys, offered),
                None,
            ) {
                Ok(r) if r.len() == pending.len() => Some(r),
                Ok(_) => {
                    for &(k, _) in &pending {
                        results[k] = Err(ErrorCode::INTERNAL_ERROR);
                    }
                    None
                }
                Err(e) => {
                    for &(k, _) in &pending {
                        results[k] = Err(e);
                    }
                    return results;
                }
            };
            let mut again = Vec::new();
            let mut located = false;
            for ((&(k, _), reply), staging) in pending
                .iter()
                .zip(replies.into_iter().flatten())
                .zip(&stagings)
            {
                match reply {
                    Ok((size, at, ttl)) => {
                        let source = if at != 0 {
                            located = true;
                            self.in_segment(at, size)
                        } else {
                            staged = staged.max(size);
                            staging.as_ref().map(|s| s.addr())
                        };
                        results[k] = match (source, alloc(k, size)) {
                            (Some(src), Some(dst)) => {
                                // SAFETY: `alloc` returned `size` writable bytes (the
                                // contract); the source holds the object: in the
                                // staging, or in the real client's segment where the
                                // object stays held until `Done`.
                                unsafe { copy(src, dst, size) };
                                if started.elapsed().as_millis() as u64 > ttl {
                                    Err(ErrorCode::LEASE_EXPIRED)
                                } else {
                                    Ok(size)
                                }
                            }
                            (None, _) => Err(ErrorCode::INTERNAL_ERROR),
                            (_, None) => {
                                log::error!(
                                    "dummy client: get('{}'): cannot allocate {size} bytes",
                                    keys[k]
                                );
                                Err(ErrorCode::INVALID_PARAMS)
                            }
                        };
                    }
                    Err((code, size)) if code == ErrorCode::BUFFER_OVERFLOW && size > 0 => {
                        staged = staged.max(size);
                        if round == 0 {
                            again.push((k, size));
                        } else {
                            results[k] = Err(ErrorCode::INVALID_PARAMS);
                        }
                    }
                    Err((code, _)) => results[k] = Err(code),
                }
            }
            // The located objects are copied: their reads may end.
            if !located || wire::send_request(&conn, Op::Done, &(), None).is_ok() {
                self.idle.lock().push(conn);
            }
            drop(stagings);
            pending = again;
        }
        self.read_hint.store(staged, Ordering::Relaxed);
        results
    }
}

/// The keys still `Ok` in `results`, with their pieces: (index, key, pieces).
fn select(
    keys: &[&str],
    send: Vec<Pieces>,
    results: &[Result<impl Sized, ErrorCode>],
) -> (Vec<usize>, Vec<String>, Vec<Pieces>) {
    let mut idx = Vec::new();
    let mut sub_keys = Vec::new();
    let mut sub_items = Vec::new();
    for (i, pieces) in send.into_iter().enumerate() {
        if results[i].is_ok() {
            idx.push(i);
            sub_keys.push(keys[i].to_string());
            sub_items.push(pieces);
        }
    }
    (idx, sub_keys, sub_items)
}

/// Copies `len` bytes from `src` to `dst`.
///
/// # Safety
/// Both ranges must be valid for `len` bytes and must not overlap.
unsafe fn copy(src: u64, dst: u64, len: u64) {
    // SAFETY: per the contract.
    unsafe {
        std::ptr::copy_nonoverlapping(
            src as usize as *const u8,
            dst as usize as *mut u8,
            len as usize,
        )
    };
}

fn owned(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

impl StoreApi for DummyClient {
    fn hostname(&self) -> String {
        self.hostname.clone()
    }

    fn health(&self) -> Health {
        self.with(
            || Health::NotInitialized,
            |i| match i.call::<_, i32>(Op::Health, &(), None) {
                Ok(0) => Health::Healthy,
                Ok(1) => Health::NotInitialized,
                _ => Health::MasterUnreachable,
            },
        )
    }

    fn close(&self) {
        // Closing the connections ends the session: the real client unmaps everything.
        let inner = self.state.write().take();
        drop(inner);
    }

    fn put(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> Result<(), ErrorCode> {
        self.write_value(WriteMode::Put, key, value, config)
    }

    fn upsert(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> Result<(), ErrorCode> {
        self.write_value(WriteMode::Upsert, key, value, config)
    }

    unsafe fn batch_write_raw(
        &self,
        mode: WriteMode,
        keys: &[&str],
        items: &[Pieces],
        config: &ReplicateConfig,
    ) -> Vec<Result<(), ErrorCode>> {
        self.with(
            || vec![Err(ErrorCode::INVALID_PARAMS); keys.len()],
            |i| i.write(mode, keys, items, config),
        )
    }

    unsafe fn batch_get_into_multi_raw(
        &self,
        keys: &[&str],
        items: &[Pieces],
    ) -> Vec<Result<u64, ErrorCode>> {
        self.with(
            || vec![Err(ErrorCode::INVALID_PARAMS); keys.len()],
            |i| i.read(keys, items),
        )
    }

    unsafe fn batch_get_alloc_addr(
        &self,
        keys: &[&str],
        alloc: &mut dyn FnMut(usize, u64) -> Option<u64>,
    ) -> Vec<Result<u64, ErrorCode>> {
        self.with(
            || vec![Err(ErrorCode::INVALID_PARAMS); keys.len()],
            // SAFETY: forwarded contract.
            |i| unsafe { i.fetch(keys, alloc) },
        )
    }

    unsafe fn get_into_ranges_raw(&self, reads: &[RangedRead]) -> RangedResults {
        let shape = |e: ErrorCode| ranged_failure(reads, e);
        self.with(
            || shape(ErrorCode::INVALID_PARAMS),
            |i| {
                let wire_reads: Vec<WireRangedRead> = reads
                    .iter()
                    .map(|r| {
                        let keys = r
                            .keys
                            .iter()
                            .map(|(k, frags)| {
                                (
                                    k.clone(),
                                    frags.iter().map(|f| (f.dst, f.src, f.len)).collect(),
                                )
                            })
                            .collect();
                        (r.buffer, keys)
                    })
                    .collect();
                match i.call::<_, RangedResults>(Op::Ranges, &wire_reads, None) {
                    Ok(r) => r,
                    Err(e) => shape(e),
                }
            },
        )
    }

    fn batch_is_exist(&self, keys: &[&str]) -> Vec<Result<bool, ErrorCode>> {
        self.with(
            || vec![Err(ErrorCode::INVALID_PARAMS); keys.len()],
            |i| i.call_batch(Op::Exist, &owned(keys), keys.len()),
        )
    }

    fn batch_get_size(&self, keys: &[&str]) -> Vec<Result<u64, ErrorCode>> {
        self.with(
            || vec![Err(ErrorCode::INVALID_PARAMS); keys.len()],
            |i| i.call_batch(Op::Size, &owned(keys), keys.len()),
        )
    }

    fn batch_get_replica_desc(
        &self,
        keys: &[&str],
    ) -> Vec<Result<Vec<ReplicaDescriptor>, ErrorCode>> {
        self.with(
            || vec![Err(ErrorCode::INVALID_PARAMS); keys.len()],
            |i| i.call_batch(Op::Replicas, &owned(keys), keys.len()),
        )
    }

    fn batch_remove(&self, keys: &[&str], force: bool) -> Vec<Result<(), ErrorCode>> {
        self.with(
            || vec![Err(ErrorCode::INVALID_PARAMS); keys.len()],
            |i| i.call_batch(Op::Remove, &(owned(keys), force), keys.len()),
        )
    }

    fn remove_by_regex(&self, pattern: &str, force: bool) -> Result<i64, ErrorCode> {
        self.with(
            || Err(ErrorCode::INVALID_PARAMS),
            |i| {
                i.call::<_, Result<i64, ErrorCode>>(
                    Op::RemoveRegex,
                    &(pattern.to_string(), force),
                    None,
                )?
            },
        )
    }

    fn remove_all(&self, force: bool) -> Result<i64, ErrorCode> {
        self.with(
            || Err(ErrorCode::INVALID_PARAMS),
            |i| i.call::<_, Result<i64, ErrorCode>>(Op::RemoveAll, &force, None)?,
        )
    }

    fn batch_replica_clear(
        &self,
        keys: &[&str],
        segment_name: &str,
    ) -> Result<Vec<String>, ErrorCode> {
        self.with(
            || Err(ErrorCode::INVALID_PARAMS),
            |i| {
                i.call::<_, Result<Vec<String>, ErrorCode>>(
                    Op::ReplicaClear,
                    &(owned(keys), segment_name.to_string()),
                    None,
                )?
            },
        )
    }

    /// Memory from [`StoreApi::alloc_from_mem_pool`] or [`host_memory::alloc`] (any
    /// sub-range of an allocation) is mapped by the real client, which then moves
    /// data to and from it in place. Other memory is accepted too, with a warning the
    /// first time: the real client cannot map it, so its transfers are staged through
    /// the local buffer (one extra copy). -600 when already registered.
    fn register_buffer(&self, addr: *mut u8, len: usize) -> Result<(), ErrorCode> {
        if addr.is_null() || len == 0 {
            return Err(ErrorCode::INTERNAL_ERROR);
        }
        let (addr, len) = (addr as u64, len as u64);
        self.with(
            || Err(ErrorCode::INVALID_PARAMS),
            |i| {
                if i.mapped.read().contains_key(&addr) || i.staged.lock().contains_key(&addr) {
                    log::error!("dummy client: register_buffer({addr:#x}): already registered");
                    return Err(ErrorCode::INVALID_PARAMS);
                }
                let pool = i.pool.lock();
                let own = pool
                    .range(..=addr)
                    .next_back()
                    .map(|(_, m)| m)
                    .filter(|m| m.contains(addr, len));
                if let Some(holder) = own {
                    return i.map(addr, len, holder);
                }
                drop(pool);
                if let Some(holder) = host_memory::holder(addr, len) {
                    return i.map(addr, len, &holder);
                }
                if !i.warned_staged.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "dummy client: register_buffer({addr:#x}, {len}): the real client cannot \
                         map this memory (not from MooncakeHostMemAllocator or \
                         alloc_from_mem_pool); accepted, and its transfers are staged through \
                         the local buffer (one extra copy; said once per client)"
                    );
                }
                i.staged.lock().insert(addr, len);
                Ok(())
            },
        )
    }

    fn unregister_buffer(&self, addr: *mut u8) -> Result<(), ErrorCode> {
        let addr = addr as u64;
        self.with(
            || Err(ErrorCode::INVALID_PARAMS),
            |i| {
                if i.staged.lock().remove(&addr).is_some() {
                    return Ok(());
                }
                if i.mapped.write().remove(&addr).is_none() {
                    log::error!("dummy client: unregister_buffer({addr:#x}): not registered");
                    return Err(ErrorCode::INVALID_PARAMS);
                }
                i.call::<_, Result<(), ErrorCode>>(Op::Unmap, &addr, None)?
            },
        )
    }

    fn moves_in_place(&self, addr: u64, len: u64) -> Result<bool, ErrorCode> {
        self.with(
            || Err(ErrorCode::INVALID_PARAMS),
            |i| Ok(i.is_mapped(addr, len)),
        )
    }

    fn alloc_from_mem_pool(&self, size: u64) -> Result<u64, ErrorCode> {
        self.with(
            || Err(ErrorCode::INVALID_PARAMS),
            |i| {
                let m =
                    Mapping::shared(size).map_err(|e| map_error("alloc_from_mem_pool", size, e))?;
                let addr = m.addr();
                i.pool.lock().insert(addr, m);
                Ok(addr)
            },
        )
    }
}
