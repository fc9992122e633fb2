//! Reads that hold an object only while they run.
//!
//! Upstream's `GetReplicaList` leases an object for `default_kv_lease_ttl` (10 s): long
//! after the bytes have been read it can be neither evicted nor removed. A store whose
//! objects are read often is then mostly leased, and puts into a full pool fail for
//! want of anything to evict. Against a mooncake-rs master, reads use the
//! `BatchBeginRead` / `BatchEndRead` extension instead: the object is held from
//! `BatchBeginRead` until the read ends, by `BatchEndRead`, or by the lease TTL if this
//! client dies first. Ending is asynchronous: a [`ReadTicket`] queues its reads when
//! dropped and one thread per client sends them in batches, so a read costs no extra
//! round trip. Against a master without the extension (upstream's answers "function
//! not registered", `NOT_SUPPORTED` here) the client falls back to `BatchGetReplicaList`
//! for good, with upstream's lease semantics.

use super::disk_stage::{self, StagedDiskReads};
use crate::wire::master_api::{ErrorCode, GetReplicaListResponse, MasterApi, MasterResult};
use crate::wire::rpc_client;
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

/// Whether the master has the extension: not known yet.
const UNKNOWN: u8 = 0;
/// The master has it.
const SUPPORTED: u8 = 1;
/// It has not (reads lease as upstream's do).
const UNSUPPORTED: u8 = 2;

/// Most reads ended by one `BatchEndRead`.
const MAX_BATCH: usize = 4096;
/// How long the ending thread gathers reads before sending them: it is then woken
/// (and the master called) at most once per window, not once per read, which on a
/// busy host frees CPU for the reads themselves. Objects stay held that much longer.
const GATHER: std::time::Duration = std::time::Duration::from_millis(1);

/// The per-client state of tracked reads.
pub(crate) struct ReadLeases {
    master: Arc<dyn MasterApi>,
    /// The tenant the reads name.
    tenant: String,
    support: AtomicU8,
    /// The ending thread's queue, started with the first tracked read.
    ender: OnceLock<Sender<Vec<(String, u64)>>>,
    thread: parking_lot::Mutex<Option<JoinHandle<()>>>,
    /// Staging calls made to disk owners (upstream's offload RPC read count).
    offload_reads: AtomicU64,
}

/// The replica lists of one batch of reads, as `BatchGetReplicaList` returns them.
pub(crate) type ReplicaLists = MasterResult<Vec<MasterResult<GetReplicaListResponse>>>;

/// Ends the reads it was given when dropped (after the transfers), and releases what
/// disk owners staged for them.
pub(crate) struct ReadTicket<'a> {
    leases: &'a ReadLeases,
    reads: Vec<(String, u64)>,
    staged: StagedDiskReads,
    leased_at: Instant,
}

impl ReadTicket<'_> {
    /// When the leases began at the latest: the send of the request that was
    /// answered (a call resent to a new leader counts from its resend).
    pub(crate) fn leased_at(&self) -> Instant {
        self.leased_at
    }

    /// The reads, to be ended later with [`ReadLeases::end`] (not when this drops).
    pub(crate) fn into_reads(mut self) -> Vec<(String, u64)> {
        std::mem::take(&mut self.reads)
    }
}

impl Drop for ReadTicket<'_> {
    fn drop(&mut self) {
        if !self.reads.is_empty() {
            self.leases.end(std::mem::take(&mut self.reads));
        }
    }
}

impl ReadLeases {
    /// Tracked reads of `tenant`'s objects against `master` (probed on first use).
    pub fn new(master: Arc<dyn MasterApi>, tenant: &str) -> ReadLeases {
        ReadLeases {
            master,
            tenant: tenant.to_string(),
            support: AtomicU8::new(UNKNOWN),
            ender: OnceLock::new(),
            thread: parking_lot::Mutex::new(None),
            offload_reads: AtomicU64::new(0),
        }
    }

    /// How many times reads asked a disk owner to stage objects only its disk holds
    /// (one call per owner per batch of reads, as upstream counts its offload RPCs).
    pub fn offload_rpc_reads(&self) -> u64 {
        self.offload_reads.load(Ordering::Relaxed)
    }

    /// Begins reading `keys`: their replica lists (objects only a disk holds staged
    /// in their owners' memory, see `disk_stage`), and a ticket to keep until the
    /// reads are over (dropping it ends them).
    pub fn begin(&self, keys: &[String]) -> (ReplicaLists, ReadTicket<'_>) {
        let (mut lists, mut ticket) = self.begin_listed(keys);
        if let Ok(lists) = &mut lists {
            ticket.staged = disk_stage::stage(&self.tenant, keys, lists, &self.offload_reads);
        }
        (lists, ticket)
    }

    /// The replica lists of `keys`, held for tracked reads when the master allows.
    fn begin_listed(&self, keys: &[String]) -> (ReplicaLists, ReadTicket<'_>) {
        let mut ticket = ReadTicket {
            leases: self,
            reads: Vec::new(),
            staged: StagedDiskReads::default(),
            leased_at: Instant::now(),
        };
        if self.support.load(Ordering::Relaxed) != UNSUPPORTED {
            let begun = self.master.batch_begin_read(keys, &self.tenant);
            ticket.leased_at = sent_since(ticket.leased_at);
            match begun {
                Err(ErrorCode::NOT_SUPPORTED) => {
                    log::info!(
                        "store: the master has no BatchBeginRead; reads take upstream's leases"
                    );
                    self.support.store(UNSUPPORTED, Ordering::Relaxed);
                }
                Ok(lists) => {
                    self.support.store(SUPPORTED, Ordering::Relaxed);
                    ticket.reads = keys
                        .iter()
                        .zip(&lists)
                        .filter_map(|(k, l)| {
                            let first = l.as_ref().ok()?.replicas.first()?;
                            Some((k.clone(), first.id))
                        })
                        .collect();
                    return (Ok(lists), ticket);
                }
                Err(e) => return (Err(e), ticket),
            }
        }
        ticket.leased_at = Instant::now();
        let lists = self.master.batch_get_replica_list(keys, &self.tenant);
        ticket.leased_at = sent_since(ticket.leased_at);
        (lists, ticket)
    }

    /// Queues `reads` for the ending thread (started on first use).
    pub(crate) fn end(&self, reads: Vec<(String, u64)>) {
        let tx = self.ender.get_or_init(|| {
            let (tx, rx) = crossbeam_channel::unbounded();
            let (master, tenant) = (self.master.clone(), self.tenant.clone());
            match std::thread::Builder::new()
                .name("mc-store-reads".into())
                .spawn(move || end_reads(&*master, &tenant, &rx))
            {
                Ok(h) => *self.thread.lock() = Some(h),
                Err(e) => log::warn!("store: cannot start the read-ending thread: {e}"),
            }
            tx
        });
        // Without the thread the reads simply run out at their deadline.
        let _ = tx.send(reads);
    }
}

impl Drop for ReadLeases {
    fn drop(&mut self) {
        drop(self.ender.take());
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }
}

/// When the call begun at `asked` was last sent to a master: `asked` itself for a
/// master in this process (no request sent since).
fn sent_since(asked: Instant) -> Instant {
    rpc_client::last_sent_on_this_thread()
        .filter(|&sent| sent >= asked)
        .unwrap_or(asked)
}

/// The ending thread: sends whatever is queued, in batches, until the client closes.
fn end_reads(master: &dyn MasterApi, tenant: &str, rx: &Receiver<Vec<(String, u64)>>) {
    while let Ok(first) = rx.recv() {
        // Sleeping (not waiting on the channel), so further reads do not wake it.
        std::thread::sleep(GATHER);
        let (mut keys, mut ids): (Vec<String>, Vec<u64>) = first.into_iter().unzip();
        while keys.len() < MAX_BATCH {
            let Ok(more) = rx.try_recv() else { break };
            for (k, id) in more {
                keys.push(k);
                ids.push(id);
            }
        }
        if let Err(e) = master.batch_end_read(&keys, &ids, tenant) {
            // The reads then end at their deadline.
            log::debug!("store: BatchEndRead of {} reads: {e}", keys.len());
        }
    }
}
