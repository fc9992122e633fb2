//! The initiator's mappings of peers' shared regions: per peer socket, the regions it
//! shared (mapped once, with their epoch slots), the regions it leased (copied with
//! `process_vm_*`, see `leased.rs`) with the connection those leases live on, and the
//! regions it said it cannot share. A copy through a mapping checks the region's
//! generation before and after; a peer that exited has its mappings dropped (so its
//! memory is freed) at the next sweep.

use super::leased::{LeasedRegion, PeerLease};
use super::premap::{Premappable, Premapper};
use super::wire::{Request, ShareKind, ShareReply};
use crate::host::mapping::{page_size, Mapping};
use crate::te::region_leases::PeerPins;
use crate::te::shared_regions::PeerEpochs;
use crate::te::transport::local::copy_bytes;
use crate::te::transport::request::Op;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Regions remembered as not shareable, per peer (then forgotten all at once).
const MAX_UNSHARED: usize = 1024;
/// How often peers' liveness is checked.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Writes at least this long first map the pages they cover in one call, instead of
/// one fault per page (a fresh mapping of a peer's segment has none mapped).
const POPULATE_MIN: u64 = 64 << 10;

/// One peer region mapped here.
pub struct MappedRegion {
    /// Keeps the mapping alive.
    mapping: Mapping,
    /// The region's first byte here.
    here: u64,
    /// Its base address in the peer.
    base: u64,
    len: u64,
    slot: u64,
    gen: u64,
    epochs: Arc<PeerEpochs>,
}

impl MappedRegion {
    fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.base
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.base + self.len)
    }

    fn is_live(&self) -> bool {
        self.epochs.is_live(self.slot, self.gen)
    }
}

impl Premappable for MappedRegion {
    /// The region's pages here: the address of its first byte's page, and the bytes
    /// from there to the end of its last whole page.
    fn live_pages(&self) -> Option<(u64, u64)> {
        let page = page_size();
        let start = self.here & !(page - 1);
        let end = (self.here + self.len) & !(page - 1);
        self.is_live().then(|| (start, end.saturating_sub(start)))
    }
}

struct Peer {
    process: PeerProcess,
    epochs: Option<Arc<PeerEpochs>>,
    regions: BTreeMap<u64, Arc<MappedRegion>>,
    /// The connection the peer's leases live on, once it leased one.
    lease: Option<Arc<PeerLease>>,
    leased: BTreeMap<u64, Arc<LeasedRegion>>,
    /// Regions the peer cannot share: base → length.
    unshared: BTreeMap<u64, u64>,
}

/// What is known about the peer memory a request names.
pub enum Lookup {
    /// A mapped region holds all of it.
    Mapped(Arc<MappedRegion>),
    /// A region leased to this process holds all of it.
    Leased(Arc<LeasedRegion>),
    /// The region holding its first byte is known: not shareable, or too short.
    Unshared,
    /// Nothing: worth asking the peer to share.
    Unknown,
}

/// Every peer's mapped regions.
#[derive(Default)]
pub struct MappedPeers {
    peers: RwLock<HashMap<String, Peer>>,
    last_sweep: Mutex<Option<Instant>>,
    /// Maps the pages peers already back in new regions ahead of the copies.
    premap: Premapper,
}

/// What a copy through a mapping did.
pub enum Copied {
    /// The bytes moved while the region was registered.
    Done,
    /// The region was unregistered before or during the copy: nothing is claimed.
    Stale,
    /// The local side could not be copied (GPU memory the runtime refused).
    Failed(String),
}

impl MappedPeers {
    /// What is known about `[addr, addr + len)` at `socket`'s peer.
    pub fn lookup(&self, socket: &str, addr: u64, len: u64) -> Lookup {
        let peers = self.peers.read();
        let Some(peer) = peers.get(socket) else {
            return Lookup::Unknown;
        };
        if let Some((_, r)) = peer.regions.range(..=addr).next_back() {
            if r.contains(addr, len) {
                return Lookup::Mapped(r.clone());
            }
            if r.contains(addr, 1) {
                return Lookup::Unshared;
            }
        }
        if let Some((_, r)) = peer.leased.range(..=addr).next_back() {
            if r.contains(addr, len) {
                return Lookup::Leased(r.clone());
            }
            if r.contains(addr, 1) {
                return Lookup::Unshared;
            }
        }
        match peer.unshared.range(..=addr).next_back() {
            Some((&base, &n)) if addr - base < n => Lookup::Unshared,
            _ => Lookup::Unknown,
        }
    }

    /// The connection `socket`'s leases live on (a second handle to it) and the
    /// peer's pid, once it leased a region: share requests to a leasing peer go there.
    pub fn lease_connection(&self, socket: &str) -> Option<(UnixStream, i32)> {
        let peers = self.peers.read();
        let peer = peers.get(socket)?;
        let conn = peer.lease.as_ref()?.connection().try_clone().ok()?;
        Some((conn, peer.process.pid))
    }

    /// Bytes of peers' regions mapped ahead of the copies so far (pages the peers
    /// already backed when their regions were mapped here).
    pub fn bytes_premapped(&self) -> u64 {
        self.premap.bytes_mapped()
    }

    /// The pid of `socket`'s peer, once something of it is recorded.
    pub fn peer_pid(&self, socket: &str) -> Option<i32> {
        self.peers.read().get(socket).map(|p| p.process.pid)
    }

    /// Records a share reply from `socket`'s peer (pid `pid`) with the files that came
    /// with it: maps a shared region, records a leased one, or remembers an
    /// unshareable one. `conn` is the connection it came on, `None` for the peer's
    /// lease connection; it is handed back unless a first lease keeps it.
    pub fn record(
        &self,
        socket: &str,
        pid: i32,
        reply: &ShareReply,
        files: Vec<OwnedFd>,
        conn: Option<UnixStream>,
    ) -> Option<UnixStream> {
        if reply.len == 0 {
            return conn;
        }
        let mut peers = self.peers.write();
        let peer = peers.entry(socket.to_string()).or_insert_with(|| Peer {
            process: PeerProcess::open(pid),
            epochs: None,
            regions: BTreeMap::new(),
            lease: None,
            leased: BTreeMap::new(),
            unshared: BTreeMap::new(),
        });
        let mut files = files.into_iter();
        let (first, second) = (files.next(), files.next());
        let mut conn = conn;
        let recorded = match (reply.kind, first, second) {
            (ShareKind::Mapped, Some(region_file), Some(epoch_file)) => {
                map_region(peer, reply, region_file, epoch_file)
                    .map(|region| {
                        let region = Arc::new(region);
                        self.premap.queue(&region);
                        peer.regions.insert(reply.base, region)
                    })
                    .is_some()
            }
            (ShareKind::Leased, Some(epoch_file), Some(pin_file)) => {
                lease_region(peer, reply, epoch_file, pin_file, &mut conn)
            }
            _ => false,
        };
        if !recorded {
            if peer.unshared.len() >= MAX_UNSHARED {
                peer.unshared.clear();
            }
            peer.unshared.insert(reply.base, reply.len);
        }
        conn
    }

    /// Forgets a leased region (unregistered at the peer).
    pub fn forget_leased(&self, socket: &str, region: &LeasedRegion) {
        if let Some(peer) = self.peers.write().get_mut(socket) {
            remove_if_same(&mut peer.leased, region.base, region);
        }
    }

    /// Forgets a mapped region (unregistered at the peer).
    pub fn forget(&self, socket: &str, region: &MappedRegion) {
        if let Some(peer) = self.peers.write().get_mut(socket) {
            remove_if_same(&mut peer.regions, region.base, region);
        }
    }

    /// Drops everything known about `socket`'s peer (its socket is gone).
    pub fn forget_peer(&self, socket: &str) {
        self.peers.write().remove(socket);
    }

    /// Drops what is kept of peers that exited, and of peers that closed the
    /// connection their leases live on (they stopped serving: an engine dropped in a
    /// process that goes on), at most once per second; whether it looked this time.
    pub fn sweep(&self) -> bool {
        {
            let mut last = self.last_sweep.lock();
            if last.is_some_and(|t| t.elapsed() < SWEEP_EVERY) {
                return false;
            }
            *last = Some(Instant::now());
        }
        self.peers.write().retain(|_, p| {
            p.process.is_alive()
                && !p
                    .lease
                    .as_ref()
                    .is_some_and(|l| crate::host::fd_passing::hung_up(l.connection()))
        });
        true
    }

    /// Whether `socket`'s peer still runs; one that exited has its mappings dropped.
    /// Unknown peers count as alive (nothing is mapped from them).
    pub fn peer_alive(&self, socket: &str) -> bool {
        let alive = self
            .peers
            .read()
            .get(socket)
            .map_or(true, |p| p.process.is_alive());
        if !alive {
            self.peers.write().remove(socket);
        }
        alive
    }
}

/// A peer process, watched through a pidfd (exit makes it readable), or by pid where
/// pidfds are not available.
struct PeerProcess {
    pid: i32,
    pidfd: Option<OwnedFd>,
}

impl PeerProcess {
    fn open(pid: i32) -> PeerProcess {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags; a non-negative result is a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let pidfd = (fd >= 0).then(|| {
            // SAFETY: the descriptor was just created and is owned by nothing else.
            unsafe { OwnedFd::from_raw_fd(fd as i32) }
        });
        PeerProcess { pid, pidfd }
    }

    fn is_alive(&self) -> bool {
        use std::os::fd::AsRawFd;
        match &self.pidfd {
            Some(fd) => {
                let mut pfd = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, no waiting.
                unsafe { libc::poll(&mut pfd, 1, 0) == 0 }
            }
            // SAFETY: kill with signal 0 only checks that the process exists.
            None => unsafe { libc::kill(self.pid, 0) == 0 },
        }
    }
}

/// Removes the entry at `base` when it is `region` itself (not a newer one recorded
/// since at the same address).
fn remove_if_same<T>(map: &mut BTreeMap<u64, Arc<T>>, base: u64, region: &T) {
    if map
        .get(&base)
        .is_some_and(|r| std::ptr::eq(Arc::as_ptr(r), region))
    {
        map.remove(&base);
    }
}

/// The peer's epoch table, mapped from `file` the first time.
fn peer_epochs(peer: &mut Peer, file: OwnedFd) -> Option<Arc<PeerEpochs>> {
    if let Some(e) = &peer.epochs {
        return Some(e.clone());
    }
    let e = Arc::new(
        PeerEpochs::map(file)
            .map_err(|e| log::warn!("same-host: mapping a peer's epoch table: {e}"))
            .ok()?,
    );
    peer.epochs = Some(e.clone());
    Some(e)
}

/// Records a leased region; a peer's first lease keeps the connection it came on
/// (taken out of `conn`), later ones must come on that connection (`conn` is `None`).
fn lease_region(
    peer: &mut Peer,
    reply: &ShareReply,
    epoch_file: OwnedFd,
    pin_file: OwnedFd,
    conn: &mut Option<UnixStream>,
) -> bool {
    let lease = match (&peer.lease, conn.is_some()) {
        (Some(lease), false) => lease.clone(),
        (None, true) => {
            let pins = match PeerPins::map(pin_file) {
                Ok(p) => p,
                Err(e) => {
                    log::warn!("same-host: mapping a peer's pin table: {e}");
                    return false;
                }
            };
            let Some(control) = conn.take() else {
                return false;
            };
            let lease = Arc::new(PeerLease::new(control, pins));
            peer.lease = Some(lease.clone());
            lease
        }
        // A lease on another connection than the peer's lease connection: its pins
        // would count on a connection this process may close. Asked again later.
        _ => return false,
    };
    let Some(epochs) = peer_epochs(peer, epoch_file) else {
        return false;
    };
    let region = LeasedRegion::new(
        reply.base,
        reply.len,
        (reply.slot, reply.gen),
        epochs,
        lease,
    );
    peer.leased.insert(reply.base, Arc::new(region));
    true
}

fn map_region(
    peer: &mut Peer,
    reply: &ShareReply,
    region_file: OwnedFd,
    epoch_file: OwnedFd,
) -> Option<MappedRegion> {
    let epochs = peer_epochs(peer, epoch_file)?;
    let mapping = Mapping::from_shared_file(region_file, reply.offset + reply.len)
        .map_err(|e| log::warn!("same-host: mapping a peer's region: {e}"))
        .ok()?;
    Some(MappedRegion {
        here: mapping.addr() + reply.offset,
        mapping,
        base: reply.base,
        len: reply.len,
        slot: reply.slot,
        gen: reply.gen,
        epochs,
    })
}

/// Maps the pages of `[addr, addr + len)` (inside a shared mapping of this process)
/// for writing in one call; a kernel without `MADV_POPULATE_WRITE` (before 5.14) just
/// takes the faults during the copy.
fn populate_for_write(addr: u64, len: u64) {
    let page = page_size();
    let start = addr & !(page - 1);
    let end = (addr + len + page - 1) & !(page - 1);
    // SAFETY: the range lies inside a live shared mapping of this process (rounded to
    // its pages); populating changes no contents.
    unsafe {
        libc::madvise(
            start as usize as *mut libc::c_void,
            (end - start) as usize,
            libc::MADV_POPULATE_WRITE,
        );
    }
}

/// Copies `r` through `region` (which holds all of its target range), checking the
/// region's generation before and after.
///
/// # Safety
/// `r.local` must be valid for `r.len` bytes in the direction of `r.op` (as for every
/// transport), and not overlap the mapping.
pub unsafe fn copy(region: &MappedRegion, r: &Request) -> Copied {
    if !region.is_live() {
        return Copied::Stale;
    }
    let _keep = &region.mapping;
    let theirs = region.here + (r.remote - region.base);
    let (dst, src) = match r.op {
        Op::Write => (theirs, r.local),
        Op::Read => (r.local, theirs),
    };
    if r.op == Op::Write && r.len >= POPULATE_MIN {
        populate_for_write(theirs, r.len);
    }
    // SAFETY: `theirs..+len` is inside this process's live mapping of the region (the
    // caller checked `contains`); the local range is the caller's, per the contract
    // (GPU memory goes through the GPU runtime). The peer may write the same bytes
    // concurrently, as with any transport.
    if let Err(e) = unsafe { copy_bytes(dst, src, r.len) } {
        return Copied::Failed(e.to_string());
    }
    if region.is_live() {
        Copied::Done
    } else {
        Copied::Stale
    }
}
