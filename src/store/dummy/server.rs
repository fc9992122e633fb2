//! [`DummyServer`]: the real client's side of the dummy protocol. It listens on the
//! abstract Unix socket `@mooncake_client_<port>.sock`, admits processes of the same
//! user, maps the shared memory they send, registers it with the real client's
//! Transfer Engine, and runs their operations on the real client with their
//! addresses translated into those mappings.
//!
//! A dummy's connections share one session (named by a token in `HELLO`); the
//! session's memory is unregistered and unmapped when its last connection closes, so
//! a dummy that dies leaves nothing behind. Operations hold the session's regions
//! for reading while they run, so memory is never unmapped under a transfer.

use super::wire::{self, FetchResult, Op, Request, WireRangedRead};
use crate::config::Config;
use crate::host::fd_passing;
use crate::runtime::unix_server::UnixServer;
use crate::store::error::{logged_codes, StoreError, StoreResult};
use crate::store::memory::Mapping;
use crate::store::ops::whole::{HeldReads, Located};
use crate::store::vocab::map_ranged;
use crate::store::{BatchWrite, Client, ErrorCode, Pieces, ReadTarget, ReplicateConfig, WriteMode};
use crate::store::{Range, RangedRead};
use crate::wire::struct_pack::Pack;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

/// One dummy memory region mapped here.
struct Region {
    /// This process's mapping of the dummy's file.
    mapping: Mapping,
    /// The registered range inside it (the dummy's range, translated).
    real: u64,
    /// Its length.
    len: u64,
}

/// One dummy process: its regions, shared by its connections.
struct Session {
    client: Arc<Client>,
    pid: i32,
    /// Whether the dummy runs as this process's user (it may map the segments).
    same_user: bool,
    /// Whether it maps the real client's segments (reads of objects there are left
    /// to it).
    maps_segments: AtomicBool,
    /// Dummy address → region.
    regions: RwLock<BTreeMap<u64, Region>>,
}

impl Session {
    fn unregister(&self, region: &Region) {
        if let Err(e) = self.client.unregister_buffer(region.real as *mut u8) {
            log::warn!(
                "dummy server: unregistering memory of pid {}: {e}",
                self.pid
            );
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let regions = std::mem::take(&mut *self.regions.write());
        for region in regions.values() {
            self.unregister(region);
        }
        if !regions.is_empty() {
            log::info!(
                "dummy server: dummy client pid {} gone; released {} shared regions",
                self.pid,
                regions.len()
            );
        }
    }
}

struct Shared {
    client: Arc<Client>,
    sessions: Mutex<HashMap<u64, Weak<Session>>>,
}

/// The listener dummy clients connect to, and its connection threads.
pub struct DummyServer {
    shared: Arc<Shared>,
    server: UnixServer,
}

impl DummyServer {
    /// Serves dummy clients of `client` on `@mooncake_client_<port>.sock`.
    pub fn start(client: Arc<Client>, port: u16) -> io::Result<DummyServer> {
        let name = super::address::socket_name(port);
        let shared = Arc::new(Shared {
            client,
            sessions: Mutex::new(HashMap::new()),
        });
        let conn_shared = shared.clone();
        let server = UnixServer::start(
            &name,
            "mc-dummy",
            Config::global().inbound_limits(),
            move |stream| {
                if let Err(e) = serve(stream, &conn_shared) {
                    log::debug!("dummy server: connection closed: {e}");
                }
            },
        )?;
        log::info!("dummy server: serving dummy clients on @{name}");
        Ok(DummyServer { shared, server })
    }

    /// The abstract socket name (without the leading `@`).
    pub fn socket_name(&self) -> &str {
        self.server.name()
    }

    /// How many dummy processes are connected.
    pub fn sessions(&self) -> usize {
        let mut sessions = self.shared.sessions.lock();
        sessions.retain(|_, s| s.strong_count() > 0);
        sessions.len()
    }

    /// Stops accepting, closes every connection and joins every thread; every
    /// dummy's memory is released.
    pub fn stop(&mut self) {
        self.server.stop();
    }
}

fn refuse(stream: &UnixStream, why: String) -> io::Result<()> {
    log::warn!("dummy server: {why}");
    wire::send_reply(
        stream,
        &Err::<(String, bool), ErrorCode>(ErrorCode::INVALID_PARAMS),
    )?;
    Err(io::Error::new(io::ErrorKind::PermissionDenied, why))
}

fn serve(stream: &UnixStream, shared: &Shared) -> io::Result<()> {
    let cred = fd_passing::peer_credentials(stream)?;
    // Before reading anything: another user's process gets nothing from us.
    // SAFETY: geteuid has no preconditions.
    let own_uid = unsafe { libc::geteuid() };
    if cred.uid != own_uid && own_uid != 0 {
        return refuse(
            stream,
            format!(
                "pid {} runs as uid {}, this real client as uid {own_uid}: refused",
                cred.pid, cred.uid
            ),
        );
    }
    let Some(hello) = wire::read_request(stream)? else {
        return Ok(());
    };
    if Op::from_byte(hello.op) != Some(Op::Hello) {
        return refuse(stream, "a connection did not start with HELLO".into());
    }
    let (version, token) = wire::decode::<(u32, u64)>(&hello.body)?;
    if version != wire::VERSION {
        return refuse(
            stream,
            format!(
                "dummy client speaks protocol {version}, this real client {}",
                wire::VERSION
            ),
        );
    }
    let (session, fresh) = {
        let mut sessions = shared.sessions.lock();
        sessions.retain(|_, s| s.strong_count() > 0);
        match sessions.get(&token).and_then(Weak::upgrade) {
            Some(s) if s.pid == cred.pid => (s, false),
            Some(_) => {
                drop(sessions);
                return refuse(
                    stream,
                    format!("pid {} presented another process's session", cred.pid),
                );
            }
            None => {
                let s = Arc::new(Session {
                    client: shared.client.clone(),
                    pid: cred.pid,
                    same_user: cred.uid == own_uid,
                    maps_segments: AtomicBool::new(false),
                    regions: RwLock::new(BTreeMap::new()),
                });
                sessions.insert(token, Arc::downgrade(&s));
                (s, true)
            }
        }
    };
    let hostname = shared.client.hostname().to_string();
    wire::send_reply(stream, &Ok::<(String, bool), ErrorCode>((hostname, fresh)))?;
    // Reads the dummy's last fetch left to it end with its next message (or when it
    // goes away).
    let mut held: Option<HeldReads> = None;
    let served = (|| {
        while let Some(request) = wire::read_request(stream)? {
            if let Some(h) = held.take() {
                session.client.end_held_reads(h);
            }
            if Op::from_byte(request.op) == Some(Op::Done) {
                continue;
            }
            held = handle(stream, &session, request)?;
        }
        Ok(())
    })();
    if let Some(h) = held.take() {
        session.client.end_held_reads(h);
    }
    served
}

fn reply<T: Pack + 'static>(stream: &UnixStream, v: T) -> io::Result<()> {
    wire::send_reply(stream, &v)
}

/// Serves one request; the reads it leaves held, if any.
fn handle(
    stream: &UnixStream,
    session: &Session,
    request: Request,
) -> io::Result<Option<HeldReads>> {
    let Some(op) = Op::from_byte(request.op) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("dummy protocol: unknown operation {}", request.op),
        ));
    };
    let client = &*session.client;
    let body = &request.body;
    if op == Op::Fetch {
        let (keys, staging) = wire::decode::<(Vec<String>, Vec<(u64, u64)>)>(body)?;
        let (results, held) = fetch(session, &keys, &staging);
        reply(stream, results)?;
        return Ok(held);
    }
    match op {
        Op::Hello => reply(
            stream,
            Err::<(String, bool), ErrorCode>(ErrorCode::INVALID_PARAMS),
        ),
        Op::Map => {
            let (addr, len, offset) = wire::decode::<(u64, u64, u64)>(body)?;
            reply(stream, map_region(session, addr, len, offset, request.file))
        }
        Op::Unmap => {
            let addr = wire::decode::<u64>(body)?;
            reply(stream, unmap_region(session, addr))
        }
        Op::Write => {
            let (upsert, keys, items, config) =
                wire::decode::<(bool, Vec<String>, Vec<Pieces>, ReplicateConfig)>(body)?;
            reply(stream, write(session, upsert, &keys, &items, &config))
        }
        Op::Read => {
            let (keys, items) = wire::decode::<(Vec<String>, Vec<Pieces>)>(body)?;
            reply(stream, read(session, &keys, &items))
        }
        Op::Ranges => {
            let reads = wire::decode::<Vec<WireRangedRead>>(body)?;
            reply(stream, ranges(session, reads))
        }
        Op::Exist => {
            let keys = wire::decode::<Vec<String>>(body)?;
            reply(stream, logged_codes(client.batch_is_exist(&refs(&keys))))
        }
        Op::Size => {
            let keys = wire::decode::<Vec<String>>(body)?;
            reply(stream, logged_codes(client.batch_get_size(&refs(&keys))))
        }
        Op::Replicas => {
            let keys = wire::decode::<Vec<String>>(body)?;
            reply(
                stream,
                logged_codes(client.batch_get_replica_desc(&refs(&keys))),
            )
        }
        Op::Remove => {
            let (keys, force) = wire::decode::<(Vec<String>, bool)>(body)?;
            reply(
                stream,
                logged_codes(client.batch_remove(&refs(&keys), force)),
            )
        }
        Op::RemoveRegex => {
            let (pattern, force) = wire::decode::<(String, bool)>(body)?;
            let r = client.remove_by_regex(&pattern, force);
            reply(stream, r.map_err(StoreError::logged))
        }
        Op::RemoveAll => {
            let force = wire::decode::<bool>(body)?;
            reply(stream, client.remove_all(force).map_err(StoreError::logged))
        }
        Op::ReplicaClear => {
            let (keys, segment) = wire::decode::<(Vec<String>, String)>(body)?;
            let r = client.batch_replica_clear(&refs(&keys), &segment);
            reply(stream, r.map_err(StoreError::logged))
        }
        Op::CreateCopyTask => {
            let (key, targets) = wire::decode::<(String, Vec<String>)>(body)?;
            let r = client.create_copy_task(&key, &targets);
            reply(stream, r.map_err(StoreError::logged))
        }
        Op::CreateMoveTask => {
            let (key, source, target) = wire::decode::<(String, String, String)>(body)?;
            let r = client.create_move_task(&key, &source, &target);
            reply(stream, r.map_err(StoreError::logged))
        }
        Op::QueryTask => {
            let id = wire::decode::<crate::wire::master_api::Uuid>(body)?;
            reply(stream, client.query_task(id).map_err(StoreError::logged))
        }
        Op::Health => reply(stream, client.health() as i32),
        Op::Segments => {
            let confirm = wire::decode::<bool>(body)?;
            segments(stream, session, confirm)
        }
        Op::Fetch | Op::Done => Ok(()),
    }?;
    Ok(None)
}

/// The real client's segments and their files, for a dummy of this user; or, once
/// it confirms it mapped them all, the start of leaving reads of objects there to it.
fn segments(stream: &UnixStream, session: &Session, confirm: bool) -> io::Result<()> {
    if confirm {
        if session.same_user {
            session.maps_segments.store(true, Ordering::Relaxed);
        }
        return wire::send_reply(stream, &Vec::<(u64, u64)>::new());
    }
    let files = if session.same_user {
        session.client.own_segment_files()
    } else {
        Vec::new()
    };
    let files: Vec<_> = files.into_iter().take(fd_passing::MAX_FDS).collect();
    let ranges: Vec<(u64, u64)> = files.iter().map(|&(base, len, _)| (base, len)).collect();
    if files.is_empty() {
        return wire::send_reply(stream, &ranges);
    }
    let fds: Vec<&std::os::fd::OwnedFd> = files.iter().map(|(_, _, f)| f).collect();
    wire::send_reply_with_files(stream, &ranges, &fds)
}

fn refs(keys: &[String]) -> Vec<&str> {
    keys.iter().map(String::as_str).collect()
}

fn map_region(
    session: &Session,
    addr: u64,
    len: u64,
    offset: u64,
    file: Option<std::os::fd::OwnedFd>,
) -> Result<(), ErrorCode> {
    let Some(file) = file else {
        log::error!(
            "dummy server: MAP from pid {} came without a file",
            session.pid
        );
        return Err(ErrorCode::INVALID_PARAMS);
    };
    let Some(file_len) = offset.checked_add(len) else {
        return Err(ErrorCode::INVALID_PARAMS);
    };
    if addr == 0 || len == 0 || addr.checked_add(len).is_none() {
        return Err(ErrorCode::INVALID_PARAMS);
    }
    let mut regions = session.regions.write();
    let overlaps = regions
        .range(..addr.saturating_add(len))
        .next_back()
        .is_some_and(|(&a, r)| a + r.len > addr);
    if overlaps {
        log::error!(
            "dummy server: pid {} maps [{addr:#x}, +{len}) over a mapped region",
            session.pid
        );
        return Err(ErrorCode::INVALID_PARAMS);
    }
    let mapping = Mapping::from_shared_file(file, file_len).map_err(|e| {
        log::error!("dummy server: mapping memory of pid {}: {e}", session.pid);
        ErrorCode::INVALID_PARAMS
    })?;
    let real = mapping.addr() + offset;
    session
        .client
        .register_buffer(real as *mut u8, len as usize)
        .map_err(StoreError::logged)?;
    regions.insert(addr, Region { mapping, real, len });
    Ok(())
}

fn unmap_region(session: &Session, addr: u64) -> Result<(), ErrorCode> {
    let region = session.regions.write().remove(&addr);
    match region {
        Some(region) => {
            session.unregister(&region);
            drop(region.mapping);
            Ok(())
        }
        None => Err(ErrorCode::INVALID_PARAMS),
    }
}

/// This process's address of the dummy range `[addr, addr + len)`, when one mapped
/// region holds all of it.
fn translate(regions: &BTreeMap<u64, Region>, addr: u64, len: u64) -> Option<u64> {
    let (&base, region) = regions.range(..=addr).next_back()?;
    let end = addr.checked_add(len)?;
    (end <= base + region.len).then(|| region.real + (addr - base))
}

/// Every piece translated, or `None` when one lies outside the mapped regions.
fn translate_pieces(regions: &BTreeMap<u64, Region>, pieces: &Pieces) -> Option<Pieces> {
    pieces
        .iter()
        .map(|&(addr, len)| translate(regions, addr, len).map(|real| (real, len)))
        .collect()
}

/// Runs `op` on the keys whose pieces all translate; the others fail with -600.
fn on_translated<T>(
    session: &Session,
    keys: &[String],
    items: &[Pieces],
    op: impl FnOnce(&[&str], &[Pieces]) -> Vec<Result<T, ErrorCode>>,
) -> Vec<Result<T, ErrorCode>> {
    if keys.len() != items.len() {
        return keys
            .iter()
            .map(|_| Err(ErrorCode::INVALID_PARAMS))
            .collect();
    }
    let regions = session.regions.read();
    let mut results: Vec<Result<T, ErrorCode>> = keys
        .iter()
        .map(|_| Err(ErrorCode::INVALID_PARAMS))
        .collect();
    let (mut idx, mut sub_keys, mut sub_items) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (key, pieces)) in keys.iter().zip(items).enumerate() {
        match translate_pieces(&regions, pieces) {
            Some(t) => {
                idx.push(i);
                sub_keys.push(key.as_str());
                sub_items.push(t);
            }
            None => log::error!(
                "store (dummy pid {}): '{key}': memory outside the buffers the dummy registered",
                session.pid
            ),
        }
    }
    if !idx.is_empty() {
        for (i, r) in idx.into_iter().zip(op(&sub_keys, &sub_items)) {
            results[i] = r;
        }
    }
    results
}

fn write(
    session: &Session,
    upsert: bool,
    keys: &[String],
    items: &[Pieces],
    config: &ReplicateConfig,
) -> Vec<Result<(), ErrorCode>> {
    let mode = if upsert {
        WriteMode::Upsert
    } else {
        WriteMode::Put
    };
    on_translated(session, keys, items, |k, p| {
        // SAFETY: every piece lies in a mapping held (read-locked) for the call.
        logged_codes(unsafe {
            session.client.batch_write_raw(BatchWrite {
                mode,
                keys: k,
                items: p,
                config,
            })
        })
    })
}

fn read(session: &Session, keys: &[String], items: &[Pieces]) -> Vec<Result<u64, ErrorCode>> {
    on_translated(session, keys, items, |k, p| {
        // SAFETY: every piece lies in a mapping held (read-locked) for the call.
        logged_codes(unsafe { session.client.batch_get_into_multi_raw(k, p) })
    })
}

/// An address the real client reads into.
struct Into(u64);

impl ReadTarget for Into {
    fn addr(&mut self) -> u64 {
        self.0
    }
}

/// Whole objects for the dummy, one master call: those in this client's own segment
/// located when the dummy maps it (their reads held, returned), the others read into
/// the dummy's staging; per key the size, where it lies (0: staging) and the lease
/// TTL, or -10 and the size when the staging given was too small (or none was given).
fn fetch(
    session: &Session,
    keys: &[String],
    staging: &[(u64, u64)],
) -> (Vec<FetchResult>, Option<HeldReads>) {
    if keys.len() != staging.len() {
        let refused = keys
            .iter()
            .map(|_| Err((ErrorCode::INVALID_PARAMS, 0)))
            .collect();
        return (refused, None);
    }
    let regions = session.regions.read();
    let real: Vec<Option<(u64, u64)>> = staging
        .iter()
        .map(|&(addr, cap)| {
            (cap > 0)
                .then(|| translate(&regions, addr, cap).map(|r| (r, cap)))
                .flatten()
        })
        .collect();
    let mut needed = vec![0u64; keys.len()];
    let alloc = |i: usize, size: u64| match real.get(i).copied().flatten() {
        Some((addr, cap)) if size <= cap => Some(Into(addr)),
        _ => {
            if let Some(n) = needed.get_mut(i) {
                *n = size;
            }
            None
        }
    };
    let refs = refs(keys);
    let client = &*session.client;
    let (found, held) = if session.maps_segments.load(Ordering::Relaxed) {
        // SAFETY: every staging range lies in a mapping held (read-locked) for the call.
        let (found, held) = unsafe { client.batch_locate_or_read(&refs, alloc) };
        let found: Vec<StoreResult<(u64, u64, u64)>> = found
            .into_iter()
            .map(|r| {
                r.map(|(at, size, ttl)| match at {
                    Located::Own(addr) => (size, addr, ttl),
                    Located::Read(_) => (size, 0, ttl),
                })
            })
            .collect();
        (found, Some(held))
    } else {
        // SAFETY: as above.
        let found = unsafe { client.batch_get_alloc_raw(&refs, alloc) }
            .into_iter()
            .map(|r| r.map(|(_, size)| (size, 0, u64::MAX)))
            .collect();
        (found, None)
    };
    let results = found
        .into_iter()
        .enumerate()
        .map(|(i, r)| match r {
            Ok(v) => Ok(v),
            Err(_) if needed[i] > 0 => Err((ErrorCode::BUFFER_OVERFLOW, needed[i])),
            Err(e) => Err((e.logged(), 0)),
        })
        .collect();
    (results, held)
}

fn ranges(session: &Session, reads: Vec<WireRangedRead>) -> Vec<Vec<Vec<Result<u64, ErrorCode>>>> {
    let regions = session.regions.read();
    let reads: Vec<RangedRead> = reads
        .into_iter()
        .map(|(buffer, keys)| RangedRead {
            // An address outside every region becomes 0, which fails each fragment.
            buffer: translate(&regions, buffer, 0).unwrap_or(0),
            keys: keys
                .into_iter()
                .map(|(key, frags)| {
                    let frags = frags
                        .into_iter()
                        .map(|(dst, src, len)| Range { dst, src, len })
                        .collect();
                    (key, frags)
                })
                .collect(),
        })
        .collect();
    // SAFETY: every buffer lies in a mapping held (read-locked) for the call; the
    // client bounds each fragment by the registered region holding the buffer.
    let results = unsafe { session.client.get_into_ranges_raw(&reads) };
    // The wire carries codes: a cause is logged here, the one place it is seen.
    map_ranged(results, StoreError::logged)
}
