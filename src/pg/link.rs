//! [`Links`]: the [`Channel`] over the Transfer Engine — each ordered pair of ranks
//! is a mailbox of `DEPTH` chunk slots in the receiver's registered region, with
//! credit words so a sender never overwrites a slot the receiver has not consumed.
//!
//! Each rank's region (one shared-memory mapping, registered with the engine and
//! shared with same-host peers, so between processes of one host a transfer is a
//! copy into a mapping):
//!
//! ```text
//! flags:  delivered[p]  chunks p delivered here          (written by p)
//!         consumed[p]   chunks of mine p consumed        (written by p)
//!         seq_src[p], ack_src[p]   the words this rank writes into p
//! slots:  slot[p][k]    64-byte header + payload, from p (written by p)
//! stage:  stage[p][k]   header + payload staged here before a write into p
//! ```
//!
//! A chunk moves as: wait until `consumed[p]` leaves slot k free, stage it, write it
//! into `slot[me][k]` of p, then write the new count into p's `delivered[me]`; the
//! receiver polls `delivered[p]`, checks the header (operation, length, membership
//! epoch), hands the payload on and writes its count into p's `consumed[me]`. Every
//! write of one round (one chunk to or from each peer) goes in one engine batch.
//!
//! Waiting polls with backoff (spin, yield, then short sleeps); a wait gives up at the
//! operation's deadline, and sooner when a same-host peer's process is gone
//! (`PeerFailed` naming it) or `interrupt` says the membership is changing.

use super::channel::{Channel, OpKind, Recv, Send};
use super::error::{PgError, PgErrorKind, PgResult};
use crate::host::mapping::Mapping;
use crate::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Slots per ordered pair: a sender may run this many chunks ahead of its receiver.
pub const DEPTH: usize = 2;
/// Bytes of a chunk's header.
const HEADER: usize = 64;
/// Bytes per flag word (one cache line, so peers' writes do not share lines).
const FLAG_STRIDE: usize = 64;
/// Marks a written header.
const MAGIC: u32 = 0x4d43_5047; // "MCPG"
/// The largest chunk payload.
const MAX_CHUNK: usize = 512 << 10;
/// The smallest chunk payload.
const MIN_CHUNK: usize = 16 << 10;
/// What the mailboxes of one rank may take in all (receive slots plus staging).
const REGION_BUDGET: usize = 64 << 20;

/// Where a peer's region is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAddr {
    /// The engine's segment name.
    pub segment: String,
    /// The region's address in the peer's process.
    pub region: u64,
    /// The peer's pid, checked for liveness when `same_host`.
    pub pid: u32,
    /// Whether the peer runs on this host (same boot and namespaces).
    pub same_host: bool,
    /// Tells this process from an earlier one in the same rank slot: every flag word
    /// a process writes carries its tag, so words left by a predecessor read as 0.
    pub tag: u32,
}

/// Bits of a flag word that count chunks; the bits above hold the writer's tag.
const COUNT_BITS: u32 = 40;

/// A flag word: the writer's tag and a count.
fn flag_value(tag: u32, count: u64) -> u64 {
    (u64::from(tag & 0xff_ffff) << COUNT_BITS) | (count & ((1 << COUNT_BITS) - 1))
}

/// The count in a flag word written by the process with `tag` (0 for another's).
fn flag_count(word: u64, tag: u32) -> u64 {
    if (word >> COUNT_BITS) as u32 == tag & 0xff_ffff {
        word & ((1 << COUNT_BITS) - 1)
    } else {
        0
    }
}

/// The layout of a region for `slots` ranks.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    slots: usize,
    chunk: usize,
}

impl Layout {
    /// The layout for a group of `slots` rank slots.
    pub fn new(slots: usize) -> Layout {
        let per_slot = REGION_BUDGET / (2 * DEPTH * slots.max(1));
        let chunk = per_slot
            .saturating_sub(HEADER)
            .clamp(MIN_CHUNK, MAX_CHUNK)
            .next_power_of_two()
            .min(MAX_CHUNK);
        Layout { slots, chunk }
    }

    /// Payload bytes per chunk.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    fn flags_len(&self) -> usize {
        (4 * self.slots * FLAG_STRIDE).next_multiple_of(4096)
    }

    fn slot_len(&self) -> usize {
        HEADER + self.chunk
    }

    fn delivered(&self, p: usize) -> usize {
        p * FLAG_STRIDE
    }

    fn consumed(&self, p: usize) -> usize {
        (self.slots + p) * FLAG_STRIDE
    }

    fn seq_src(&self, p: usize) -> usize {
        (2 * self.slots + p) * FLAG_STRIDE
    }

    fn ack_src(&self, p: usize) -> usize {
        (3 * self.slots + p) * FLAG_STRIDE
    }

    fn slot(&self, from: usize, k: usize) -> usize {
        self.flags_len() + (from * DEPTH + k) * self.slot_len()
    }

    fn stage(&self, to: usize, k: usize) -> usize {
        self.flags_len() + (self.slots * DEPTH + to * DEPTH + k) * self.slot_len()
    }

    /// The region's size in bytes.
    pub fn len(&self) -> usize {
        self.flags_len() + 2 * self.slots * DEPTH * self.slot_len()
    }

    /// Whether the region is empty (never: there are always flag words).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// A chunk's header, as the sender writes it before the payload (peers write it into
/// this rank's memory: [`Header::decode`] trusts none of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The operation's [`OpKind`] code.
    pub kind: u32,
    /// The sender's membership epoch.
    pub epoch: u64,
    /// The whole message's length.
    pub total: u64,
    /// Where in the message this chunk starts.
    pub offset: u64,
    /// The chunk's payload length.
    pub len: u32,
}

impl Header {
    /// Bytes a header takes at the start of a slot.
    pub const LEN: usize = HEADER;

    /// Writes the header into the first [`Header::LEN`] bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&self.kind.to_le_bytes());
        out[8..16].copy_from_slice(&self.epoch.to_le_bytes());
        out[16..24].copy_from_slice(&self.total.to_le_bytes());
        out[24..32].copy_from_slice(&self.offset.to_le_bytes());
        out[32..36].copy_from_slice(&self.len.to_le_bytes());
        out[36..HEADER].fill(0);
    }

    /// Reads a header; `None` for fewer than [`Header::LEN`] bytes or no magic.
    pub fn decode(bytes: &[u8]) -> Option<Header> {
        let head = bytes.get(..HEADER)?;
        let u32_at =
            |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | (u64::from(u32_at(i + 4)) << 32);
        if u32_at(0) != MAGIC {
            return None;
        }
        Some(Header {
            kind: u32_at(4),
            epoch: u64_at(8),
            total: u64_at(16),
            offset: u64_at(24),
            len: u32_at(32),
        })
    }
}

/// Says whether a wait should stop early (the membership is changing).
pub trait Interrupt {
    /// `Some(reason)` to abandon the operation now.
    fn check(&mut self) -> Option<PgError>;
}

/// One rank's mailboxes to and from every peer.
pub struct Links {
    engine: Arc<TransferEngine>,
    region: Mapping,
    layout: Layout,
    me: usize,
    /// This process's tag (see [`PeerAddr::tag`]).
    tag: u32,
    peers: Vec<Option<PeerLink>>,
    /// The membership epoch written into every chunk sent.
    pub epoch: u64,
    /// How long one operation may wait for its peers.
    pub timeout: Duration,
}

/// What this rank knows of one peer.
struct PeerLink {
    addr: PeerAddr,
    segment: i32,
    /// Chunks sent to the peer.
    sent: u64,
    /// Chunks received from the peer (a cell: stale chunks are drained during waits).
    received: std::cell::Cell<u64>,
}

/// One message's progress within an exchange.
struct Progress {
    peer: usize,
    len: usize,
    done: usize,
    started: bool,
}

impl Progress {
    fn pending(&self) -> bool {
        !self.started || self.done < self.len
    }
}

impl Links {
    /// Allocates and registers the region for `slots` rank slots, as rank `me`.
    pub fn new(
        engine: Arc<TransferEngine>,
        slots: usize,
        me: usize,
        tag: u32,
        timeout: Duration,
    ) -> PgResult<Links> {
        let layout = Layout::new(slots);
        let region = Mapping::shared(layout.len() as u64)
            .or_else(|_| Mapping::zeroed(layout.len() as u64))
            .map_err(|e| PgError::internal(format!("allocating the PG region: {e}")))?;
        engine
            .register_memory(region.addr(), region.len(), "cpu:0", true)
            .map_err(|e| PgError::internal(format!("registering the PG region: {e}")))?;
        if let Some(Ok(file)) = region.shared_file().map(|f| f.try_clone()) {
            if let Err(e) = engine.share_memory(region.addr(), file, 0) {
                log::warn!("pg: the region is not shared with same-host peers: {e}");
            }
        }
        Ok(Links {
            engine,
            region,
            layout,
            me,
            tag,
            peers: (0..slots).map(|_| None).collect(),
            epoch: 0,
            timeout,
        })
    }

    /// The region's address (what peers write into).
    pub fn region_addr(&self) -> u64 {
        self.region.addr()
    }

    /// The engine's segment name.
    pub fn segment_name(&self) -> String {
        self.engine.segment_name().to_string()
    }

    /// Whether `rank`'s link is known.
    pub fn has_peer(&self, rank: usize) -> bool {
        self.peers.get(rank).is_some_and(|p| p.is_some())
    }

    /// Connects to `rank` at `addr`; a new process in the slot (another tag) starts
    /// over with fresh counters on both sides (its predecessor's words read as 0).
    pub fn connect(&mut self, rank: usize, addr: PeerAddr) -> PgResult<()> {
        if rank >= self.peers.len() || rank == self.me {
            return Err(PgError::invalid(format!("no rank slot {rank} to connect")));
        }
        if let Some(known) = &self.peers[rank] {
            if known.addr == addr {
                return Ok(());
            }
        }
        let segment = self
            .engine
            .open_segment(&addr.segment)
            .map_err(|e| PgError::peer(rank, format!("opening rank {rank}'s segment: {e}")))?;
        self.peers[rank] = Some(PeerLink {
            addr,
            segment,
            sent: 0,
            received: std::cell::Cell::new(0),
        });
        Ok(())
    }

    /// The flag word at `offset` of the region.
    fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset % 8 == 0 && offset + 8 <= self.layout.flags_len());
        // SAFETY: the offset is inside the region's flag area and 8-aligned (the
        // region is page-aligned); the mapping lives as long as `self`; peers write
        // these words only through the engine, as whole aligned 8-byte stores.
        unsafe { &*((self.region.addr() as usize + offset) as *const AtomicU64) }
    }

    /// `len` bytes of the region at `offset`.
    fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        debug_assert!(offset + len <= self.layout.len());
        // SAFETY: inside the mapping, which lives as long as `self`. Slot bytes are
        // read only after the peer's delivered count says its write completed, and
        // the peer writes that slot again only after this rank's consumed count.
        unsafe {
            std::slice::from_raw_parts((self.region.addr() as usize + offset) as *const u8, len)
        }
    }

    /// `len` writable bytes of the region at `offset` (a staging slot).
    #[allow(clippy::mut_from_ref)]
    fn bytes_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        debug_assert!(offset + len <= self.layout.len());
        // SAFETY: inside the mapping; staging slots are written only by this rank's
        // one operation thread, and read by the engine only during a write this
        // rank waits for before touching the slot again.
        unsafe {
            std::slice::from_raw_parts_mut((self.region.addr() as usize + offset) as *mut u8, len)
        }
    }

    fn peer(&self, rank: usize) -> PgResult<&PeerLink> {
        self.peers
            .get(rank)
            .and_then(|p| p.as_ref())
            .ok_or_else(|| PgError::invalid(format!("rank {rank} is not connected")))
    }

    /// Runs one batch of writes `(peer, local offset, remote offset, len)`, failing
    /// with every peer whose write failed.
    fn write_all(
        &self,
        writes: &[(usize, usize, usize, usize)],
        deadline: Instant,
    ) -> PgResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let mut requests = Vec::with_capacity(writes.len());
        for &(peer, local, remote, len) in writes {
            let link = self.peer(peer)?;
            requests.push(TransferRequest::new(
                Op::Write,
                self.region.addr() + local as u64,
                link.segment,
                link.addr.region + remote as u64,
                len as u64,
            ));
        }
        let batch = self.engine.allocate_batch(requests.len());
        let failed = |peers: Vec<usize>, why: String| PgError {
            kind: PgErrorKind::PeerFailed,
            message: why,
            suspects: peers,
        };
        if let Err(e) = self.engine.submit(batch, &requests) {
            let _ = self.engine.discard_batch(batch);
            let peers = writes.iter().map(|w| w.0).collect();
            return Err(failed(peers, format!("writing to peers failed: {e}")));
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .engine
                .wait_batch(batch, left.min(Duration::from_millis(100)))
            {
                Ok(true) => break,
                Ok(false) if left.is_zero() => {
                    let _ = self.engine.discard_batch(batch);
                    let peers = writes.iter().map(|w| w.0).collect();
                    return Err(failed(
                        peers,
                        "writes to peers did not complete in time".into(),
                    ));
                }
                Ok(false) => {}
                Err(e) => return Err(PgError::internal(format!("waiting for writes: {e}"))),
            }
        }
        // The whole batch in one fold; the per-task list only when something failed.
        let whole = self.engine.batch_status(batch);
        if matches!(whole, Ok((TaskStatus::Completed, _))) {
            let _ = self.engine.free_batch(batch);
            return Ok(());
        }
        let statuses = self.engine.task_statuses(batch);
        let _ = self.engine.free_batch(batch);
        let statuses = statuses.map_err(|e| PgError::internal(format!("write status: {e}")))?;
        let bad: Vec<usize> = statuses
            .iter()
            .zip(writes)
            .filter(|((s, _), _)| *s != TaskStatus::Completed)
            .map(|(_, w)| w.0)
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            let message = format!("a transfer to rank {} failed", bad[0]);
            Err(failed(bad, message))
        }
    }

    /// Consumes every delivered chunk of an older membership epoch (the remains of
    /// an operation abandoned when the membership changed), from every peer, and
    /// returns their credit.
    fn drain_stale(&self, deadline: Instant) {
        let mut credits = Vec::new();
        for (rank, link) in self.peers.iter().enumerate() {
            let Some(link) = link else { continue };
            let delivered = flag_count(
                self.word(self.layout.delivered(rank))
                    .load(Ordering::Acquire),
                link.addr.tag,
            );
            let mut received = link.received.get();
            while received < delivered {
                let k = (received % DEPTH as u64) as usize;
                let stale = Header::decode(self.bytes(self.layout.slot(rank, k), HEADER))
                    .is_some_and(|h| h.epoch < self.epoch);
                if !stale {
                    break;
                }
                received += 1;
            }
            if received != link.received.get() {
                link.received.set(received);
                let src = self.layout.ack_src(rank);
                self.word(src)
                    .store(flag_value(self.tag, received), Ordering::Relaxed);
                credits.push((rank, src, self.layout.consumed(self.me), 8));
            }
        }
        if let Err(e) = self.write_all(&credits, deadline) {
            log::debug!("pg: returning credit failed: {e}");
        }
    }

    /// Waits until `word` reaches `target`, for `peer`.
    fn wait_word(
        &self,
        offset: usize,
        target: u64,
        peer: usize,
        what: Awaited,
        deadline: Instant,
        interrupt: &mut dyn Interrupt,
    ) -> PgResult<()> {
        let word = self.word(offset);
        let tag = self.peer(peer)?.addr.tag;
        let mut spins = 0u32;
        let started = Instant::now();
        let mut next_check = started + Duration::from_millis(10);
        loop {
            if flag_count(word.load(Ordering::Acquire), tag) >= target {
                return Ok(());
            }
            spins += 1;
            if spins < 256 {
                std::hint::spin_loop();
                continue;
            }
            let now = Instant::now();
            if now < started + Duration::from_micros(200) {
                std::thread::yield_now();
                continue;
            }
            if now >= next_check {
                next_check = now + Duration::from_millis(10);
                // Peers may wait for credit that only chunks of an abandoned
                // operation hold: consume those whatever this wait is for.
                self.drain_stale(deadline);
                let link = self.peer(peer)?;
                if link.addr.same_host && !process_alive(link.addr.pid) {
                    return Err(PgError::peer(
                        peer,
                        format!(
                            "rank {peer} (pid {}) exited while this rank waited for its {what}",
                            link.addr.pid
                        ),
                    ));
                }
                if let Some(e) = interrupt.check() {
                    return Err(e);
                }
                if now >= deadline {
                    return Err(PgError::peer(
                        peer,
                        format!(
                            "rank {peer} did not send its {what} within {:?}",
                            self.timeout
                        ),
                    ));
                }
            }
            let waited = now - started;
            std::thread::sleep(if waited < Duration::from_millis(2) {
                Duration::from_micros(20)
            } else {
                Duration::from_micros(200)
            });
        }
    }
}

/// What a wait is for, named in its error (built only when it fails).
#[derive(Debug, Clone, Copy)]
enum Awaited {
    /// Room in the peer's mailbox.
    Credit,
    /// The next chunk of an operation.
    Data(OpKind),
}

impl std::fmt::Display for Awaited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Awaited::Credit => f.write_str("credit"),
            Awaited::Data(kind) => write!(f, "{} data", kind.name()),
        }
    }
}

/// Whether a process with this pid exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// A [`Links`] with the interrupt an operation checks while it waits.
pub struct LinkChannel<'a> {
    /// The mailboxes.
    pub links: &'a mut Links,
    /// Asked while waiting.
    pub interrupt: &'a mut dyn Interrupt,
}

impl Channel for LinkChannel<'_> {
    fn chunk_bytes(&self) -> usize {
        self.links.layout.chunk
    }

    fn exchange(
        &mut self,
        kind: OpKind,
        sends: &[Send<'_>],
        recvs: &[Recv],
        sink: &mut dyn FnMut(usize, usize, &[u8]),
    ) -> PgResult<()> {
        let links = &mut *self.links;
        let deadline = Instant::now() + links.timeout;
        let chunk = links.layout.chunk;
        let mut out: Vec<Progress> = sends
            .iter()
            .map(|(p, d)| Progress {
                peer: *p,
                len: d.len(),
                done: 0,
                started: false,
            })
            .collect();
        let mut inn: Vec<Progress> = recvs
            .iter()
            .map(|(p, l)| Progress {
                peer: *p,
                len: *l,
                done: 0,
                started: false,
            })
            .collect();
        for p in out.iter().chain(inn.iter()) {
            links.peer(p.peer)?;
        }
        let mut data = Vec::new();
        let mut flags = Vec::new();
        while out.iter().any(Progress::pending) || inn.iter().any(Progress::pending) {
            // One chunk to each peer still sending to.
            data.clear();
            flags.clear();
            for (i, o) in out.iter_mut().enumerate().filter(|(_, o)| o.pending()) {
                let link = links.peer(o.peer)?;
                let n = link.sent;
                let k = (n % DEPTH as u64) as usize;
                if n >= DEPTH as u64 {
                    let need = n + 1 - DEPTH as u64;
                    links.wait_word(
                        links.layout.consumed(o.peer),
                        need,
                        o.peer,
                        Awaited::Credit,
                        deadline,
                        self.interrupt,
                    )?;
                }
                let len = (o.len - o.done).min(chunk);
                let stage = links.layout.stage(o.peer, k);
                let slot = links.bytes_mut(stage, HEADER + len);
                Header {
                    kind: kind as u32,
                    epoch: links.epoch,
                    total: o.len as u64,
                    offset: o.done as u64,
                    len: len as u32,
                }
                .encode(&mut slot[..HEADER]);
                slot[HEADER..].copy_from_slice(&sends[i].1[o.done..o.done + len]);
                data.push((o.peer, stage, links.layout.slot(links.me, k), HEADER + len));
                o.done += len;
                o.started = true;
            }
            links.write_all(&data, deadline)?;
            for &(peer, ..) in &data {
                let link = links.peers[peer]
                    .as_mut()
                    .ok_or_else(|| PgError::internal("peer vanished"))?;
                link.sent += 1;
                let sent = link.sent;
                let src = links.layout.seq_src(peer);
                links
                    .word(src)
                    .store(flag_value(links.tag, sent), Ordering::Relaxed);
                flags.push((peer, src, links.layout.delivered(links.me), 8));
            }
            links.write_all(&flags, deadline)?;
            // One chunk from each peer still receiving from.
            flags.clear();
            for (i, m) in inn.iter_mut().enumerate().filter(|(_, m)| m.pending()) {
                loop {
                    let n = links.peer(m.peer)?.received.get();
                    links.wait_word(
                        links.layout.delivered(m.peer),
                        n + 1,
                        m.peer,
                        Awaited::Data(kind),
                        deadline,
                        self.interrupt,
                    )?;
                    let k = (n % DEPTH as u64) as usize;
                    let slot = links.layout.slot(m.peer, k);
                    let header = Header::decode(links.bytes(slot, HEADER)).ok_or_else(|| {
                        PgError::internal(format!(
                            "rank {} delivered a chunk without a header",
                            m.peer
                        ))
                    })?;
                    if header.epoch > links.epoch {
                        return Err(PgError::new(
                            PgErrorKind::MembershipChanged,
                            format!(
                                "rank {} already runs membership epoch {} (this rank: {})",
                                m.peer, header.epoch, links.epoch
                            ),
                        ));
                    }
                    let stale = header.epoch < links.epoch;
                    if !stale {
                        check_header(&header, kind, m, chunk)?;
                        let payload = links.bytes(slot + HEADER, header.len as usize);
                        sink(i, m.done, payload);
                        m.done += header.len as usize;
                        m.started = true;
                    }
                    let link = links.peers[m.peer]
                        .as_mut()
                        .ok_or_else(|| PgError::internal("peer vanished"))?;
                    let received = link.received.get() + 1;
                    link.received.set(received);
                    let src = links.layout.ack_src(m.peer);
                    links
                        .word(src)
                        .store(flag_value(links.tag, received), Ordering::Relaxed);
                    if stale {
                        // A chunk of an operation abandoned when the membership
                        // changed: consumed unread.
                        let credit = [(m.peer, src, links.layout.consumed(links.me), 8)];
                        if let Err(e) = links.write_all(&credit, deadline) {
                            log::debug!("pg: returning credit failed: {e}");
                        }
                        continue;
                    }
                    flags.push((m.peer, src, links.layout.consumed(links.me), 8));
                    break;
                }
            }
            // What arrived is complete; a credit that cannot be returned (a peer that
            // already left after its last send) only matters to that peer's next send.
            if let Err(e) = links.write_all(&flags, deadline) {
                log::debug!("pg: returning credit failed: {e}");
            }
        }
        Ok(())
    }
}

/// Checks a chunk against the message this rank expects from that peer.
fn check_header(h: &Header, kind: OpKind, m: &Progress, chunk: usize) -> PgResult<()> {
    let theirs = OpKind::from_code(h.kind).map_or("an unknown operation", OpKind::name);
    if h.kind != kind as u32 {
        return Err(PgError::mismatch(format!(
            "rank {} is in {theirs} while this rank is in {}: every rank must call the same collectives in the same order",
            m.peer,
            kind.name()
        )));
    }
    if h.total != m.len as u64 {
        return Err(PgError::mismatch(format!(
            "rank {} sent {} bytes for {} where this rank expects {}",
            m.peer,
            h.total,
            kind.name(),
            m.len
        )));
    }
    if h.offset != m.done as u64 || h.len as usize > chunk || m.done + h.len as usize > m.len {
        return Err(PgError::internal(format!(
            "rank {} sent a chunk out of order (offset {}, expected {})",
            m.peer, h.offset, m.done
        )));
    }
    Ok(())
}

impl Drop for Links {
    fn drop(&mut self) {
        let _ = self.engine.unregister_memory(self.region.addr());
    }
}
