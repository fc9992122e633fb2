//! The target side: an abstract Unix socket (named in the segment descriptor). Each
//! request is checked against the registered, remotely accessible regions exactly as
//! a TCP request is; a granted one stays pinned (it cannot be unregistered) until
//! the initiator, which copies the bytes itself, releases its batch or goes away.
//! The target never touches the initiator's memory, so an initiator that gives up on
//! a slow target has nothing to fear from it. Regions shared as files (see
//! `te::shared_regions`) are handed to peers of this process's user on request, with
//! the epoch table that tells them when a region stops being registered; other
//! remotely accessible host memory is leased to them instead (`te::region_leases`):
//! they copy it with `process_vm_*` without asking per batch, pinning it in their
//! connection's pin table, which counts until that connection closes.

use super::wire::{
    decode_header, Header, Request, ShareKind, ShareReply, BATCH_HEADER_LEN, OK, REJECTED, RELEASE,
    REQUEST_LEN, USE_TCP,
};
use crate::host::fd_passing;
use crate::runtime::conn_threads::ConnLimits;
use crate::runtime::unix_server::UnixServer;
use crate::te::memory::{MemoryRegistry, Region};
use crate::te::region_leases::PinTable;
use crate::te::transport::tcp::wire::{decode_status, encode_status, STATUS_LEN};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

struct Shared {
    memory: Arc<MemoryRegistry>,
    /// Whether caller memory is leased to peers (else they ask per batch).
    leases: bool,
}

/// The same-host listener and its connection threads.
pub struct SameHostTarget {
    server: UnixServer,
    memory: Arc<MemoryRegistry>,
}

impl SameHostTarget {
    /// Starts serving the regions of `memory` on a fresh abstract socket, at most
    /// `limits` connections at once, leasing caller memory to peers when `leases`.
    pub fn start(
        memory: Arc<MemoryRegistry>,
        limits: ConnLimits,
        leases: bool,
    ) -> io::Result<SameHostTarget> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "mooncake-te-{}-{nanos:x}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        super::allow_peers_to_copy();
        let shared = Shared { memory, leases };
        let memory = shared.memory.clone();
        let server = UnixServer::start(&name, "mc-shm", limits, move |stream| {
            let mut pins = None;
            if let Err(e) = serve(stream, &shared, &mut pins) {
                log::debug!("same-host connection closed: {e}");
            }
            if let Some(table) = pins {
                shared.memory.pin_tables().close(&table);
            }
        })?;
        Ok(SameHostTarget { server, memory })
    }

    /// The abstract socket name peers connect to.
    pub fn socket_name(&self) -> &str {
        self.server.name()
    }

    /// Ends every lease (waiting for copies under way), stops accepting, closes every
    /// connection and joins every thread, so no registered memory is touched after
    /// this returns.
    pub fn stop(&mut self) {
        self.memory.end_leases();
        self.server.stop();
    }
}

impl Drop for SameHostTarget {
    /// A target dropped without [`SameHostTarget::stop`] ends its leases too: its
    /// peers must not copy on their own into memory it no longer serves.
    fn drop(&mut self) {
        self.stop();
    }
}

/// Serves one connection; `pins` is its pin table once it leased a region.
fn serve(
    mut stream: &UnixStream,
    shared: &Shared,
    pins: &mut Option<Arc<PinTable>>,
) -> io::Result<()> {
    let peer_uid = fd_passing::peer_credentials(stream)?.uid;
    let mut head = [0u8; BATCH_HEADER_LEN];
    let mut raw = vec![0u8; REQUEST_LEN];
    loop {
        if stream.read_exact(&mut head).is_err() {
            return Ok(());
        }
        let count = match decode_header(&head) {
            Some(Header::Batch(count)) => count,
            Some(Header::Share) => {
                let mut addr = [0u8; 8];
                stream.read_exact(&mut addr)?;
                share(stream, shared, u64::from_le_bytes(addr), peer_uid, pins)?;
                continue;
            }
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "bad batch header",
                ))
            }
        };
        let mut granted: Vec<Arc<Region>> = Vec::new();
        let mut replies = Vec::with_capacity(count as usize * STATUS_LEN);
        raw.resize(count as usize * REQUEST_LEN, 0);
        stream.read_exact(&mut raw)?;
        for chunk in raw.chunks_exact(REQUEST_LEN) {
            let mut one = [0u8; REQUEST_LEN];
            one.copy_from_slice(chunk);
            let Some(req) = Request::decode(&one) else {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "bad request"));
            };
            let code = match shared.memory.accessible(req.remote, req.len) {
                // GPU memory is staged through the GPU runtime by the TCP target.
                Some(region) if region.device.is_some() => USE_TCP,
                Some(region) => {
                    granted.push(region);
                    OK
                }
                None => REJECTED,
            };
            replies.extend_from_slice(&encode_status(code));
        }
        // Pinned from the grant until the release: the initiator copies meanwhile.
        // Each region once (a second read lock could wait behind an unregister).
        granted.sort_by_key(|r| Arc::as_ptr(r) as usize);
        granted.dedup_by(|a, b| Arc::ptr_eq(a, b));
        let mut pins: Vec<_> = granted.iter().map(|r| r.pin()).collect();
        if pins.iter().any(Option::is_none) {
            // Unregistered between the check and the pin: refuse the whole batch.
            pins.clear();
            let refused: Vec<u8> = (0..count).flat_map(|_| encode_status(REJECTED)).collect();
            stream.write_all(&refused)?;
        } else {
            stream.write_all(&replies)?;
        }
        // No deadline while pins are held: a region the initiator may still be
        // copying into must not be given back before it says so or is gone.
        stream.set_read_timeout(None)?;
        let mut release = [0u8; STATUS_LEN];
        let released = stream.read_exact(&mut release);
        drop(pins);
        released?;
        if decode_status(&release) != Some(RELEASE) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad release"));
        }
    }
}

/// Answers a share request for the region holding `addr`, for peers of this process's
/// user: a shared (file-backed) region's files, or a lease on other remotely
/// accessible host memory (with this connection's pin table); otherwise the reply
/// says where the region is, or nothing.
fn share(
    stream: &UnixStream,
    shared: &Shared,
    addr: u64,
    peer_uid: u32,
    pins: &mut Option<Arc<PinTable>>,
) -> io::Result<()> {
    let region = shared.memory.find(addr, 1).filter(|r| r.remote_accessible);
    let Some(region) = region else {
        let none = ShareReply {
            kind: ShareKind::No,
            base: 0,
            len: 0,
            offset: 0,
            slot: 0,
            gen: 0,
        };
        return (&*stream).write_all(&none.encode());
    };
    let mut reply = ShareReply {
        kind: ShareKind::No,
        base: region.addr,
        len: region.len,
        offset: 0,
        slot: 0,
        gen: 0,
    };
    // SAFETY: geteuid has no preconditions.
    let same_user = peer_uid == unsafe { libc::geteuid() };
    if !same_user || region.device.is_some() {
        return (&*stream).write_all(&reply.encode());
    }
    if let (Some(s), Some(epochs)) = (region.share.get(), shared.memory.epochs()) {
        reply.kind = ShareKind::Mapped;
        reply.offset = s.offset;
        reply.slot = s.slot;
        reply.gen = s.gen;
        return fd_passing::send_with_fds(stream, &reply.encode(), &[&s.file, epochs.file()]);
    }
    if !shared.leases {
        return (&*stream).write_all(&reply.encode());
    }
    let table = match pins {
        Some(t) => Some(t.clone()),
        None => match shared.memory.pin_tables().open() {
            Ok(t) => {
                *pins = Some(t.clone());
                Some(t)
            }
            Err(e) => {
                log::warn!("same-host: creating a pin table: {e}; peers ask per batch");
                None
            }
        },
    };
    let lease = table.and_then(|t| Some((t, shared.memory.lease(&region)?)));
    match (lease, shared.memory.epochs()) {
        (Some((table, (slot, gen))), Some(epochs)) => {
            reply.kind = ShareKind::Leased;
            reply.slot = slot;
            reply.gen = gen;
            fd_passing::send_with_fds(stream, &reply.encode(), &[epochs.file(), table.file()])
        }
        _ => (&*stream).write_all(&reply.encode()),
    }
}
