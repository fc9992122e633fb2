//! One object's metadata ([`Object`]): its replicas, lease and read tracking, pins,
//! checksum, group and disk copies, packed so that most objects are 80 bytes; and its
//! replicated form ([`Object::state`], [`Object::from_state`]).

use super::ha::record::{DiskReplicaState, ObjectState, ReplicaState};
use super::local_disk::DiskReplica;
use super::replica::{Replica, Replicas};
use super::segments::Buffer;
use crate::wire::master_api::{ErrorCode, ReplicaDescriptor, ReplicaStatus, SoftPinAction, Uuid};

/// A soft-pin request waiting for the object's first COMPLETE replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PendingPin {
    /// What to do.
    pub action: SoftPinAction,
    /// TTL for `Enable` (0 = no pin).
    pub ttl_ns: u64,
}

/// The attributes most objects do not have, boxed behind one pointer (absent while all
/// are unset).
#[derive(Debug, Clone, Default)]
struct Extra {
    soft_pin: Option<u64>,
    pending_pin: Option<PendingPin>,
    checksum: Option<u64>,
    group_id: Box<str>,
    hard_pin: bool,
    /// Copies on clients' local disks.
    disk: Vec<DiskReplica>,
    /// Queued to (or being written by) its owner for a disk copy: its memory replica
    /// stays until that is done.
    offload_pending: bool,
}

impl Extra {
    fn is_unset(&self) -> bool {
        self.soft_pin.is_none()
            && self.pending_pin.is_none()
            && self.checksum.is_none()
            && self.group_id.is_empty()
            && !self.hard_pin
            && self.disk.is_empty()
            && !self.offload_pending
    }
}

/// Object metadata. Times are nanoseconds on the service clock; a lease of 0 is "never
/// read" (evicted first). Pins, the group, the checksum and a pending soft-pin action
/// are set on few objects and live in a separate box (see the accessors).
#[derive(Debug, Clone)]
pub(crate) struct Object {
    /// Writer of the current put.
    pub client: Uuid,
    /// When the current put started.
    pub put_start: u64,
    /// The value size (low 48 bits) and the number of tracked reads in flight (high
    /// 16 bits, see [`Object::begin_read`]): one word, so tracking costs no memory.
    size_reads: u64,
    /// Read lease deadline.
    pub lease_timeout: u64,
    /// Replicas.
    pub replicas: Replicas,
    extra: Option<Box<Extra>>,
}

/// Bits of [`Object::size_reads`] holding the size: the largest object is 256 TiB - 1.
const SIZE_BITS: u32 = 48;
/// The largest object size.
pub(crate) const MAX_OBJECT_SIZE: u64 = (1 << SIZE_BITS) - 1;

impl Object {
    /// A new object; `pending_pin` is applied when the first replica completes.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Uuid,
        put_start: u64,
        size: u64,
        replicas: Replicas,
        hard_pin: bool,
        soft_pin: Option<u64>,
        pending_pin: PendingPin,
        group_id: &str,
    ) -> Object {
        let mut o = Object {
            client,
            put_start,
            lease_timeout: 0,
            replicas,
            extra: None,
            size_reads: size.min(MAX_OBJECT_SIZE),
        };
        let extra = Extra {
            soft_pin,
            pending_pin: None,
            checksum: None,
            group_id: group_id.into(),
            hard_pin,
            disk: Vec::new(),
            offload_pending: false,
        };
        if !extra.is_unset() {
            o.extra = Some(Box::new(extra));
        }
        o.set_pending_pin(Some(pending_pin));
        o
    }

    /// Applies `f` to the extra attributes, dropping the box when all end up unset.
    fn update_extra(&mut self, f: impl FnOnce(&mut Extra)) {
        let e = self.extra.get_or_insert_with(Box::default);
        f(e);
        if e.is_unset() {
            self.extra = None;
        }
    }

    /// Never evicted.
    pub fn hard_pin(&self) -> bool {
        self.extra.as_ref().is_some_and(|e| e.hard_pin)
    }

    /// Soft-pin deadline.
    pub fn soft_pin(&self) -> Option<u64> {
        self.extra.as_ref().and_then(|e| e.soft_pin)
    }

    /// Checksum given at PutEnd.
    pub fn checksum(&self) -> Option<u64> {
        self.extra.as_ref().and_then(|e| e.checksum)
    }

    /// Sets the checksum.
    pub fn set_checksum(&mut self, checksum: Option<u64>) {
        if checksum.is_some() || self.extra.is_some() {
            self.update_extra(|e| e.checksum = checksum);
        }
    }

    /// Group id ("" when none).
    pub fn group_id(&self) -> &str {
        self.extra.as_ref().map_or("", |e| &e.group_id)
    }

    /// The soft-pin action waiting for the put to complete.
    pub fn pending_pin(&self) -> Option<PendingPin> {
        self.extra.as_ref().and_then(|e| e.pending_pin)
    }

    /// Its copies on clients' local disks.
    pub fn disk_replicas(&self) -> &[DiskReplica] {
        self.extra.as_ref().map_or(&[], |e| &e.disk)
    }

    /// Adds a disk copy.
    pub fn add_disk_replica(&mut self, r: DiskReplica) {
        self.update_extra(|e| e.disk.push(r));
    }

    /// Applies `f` to the disk copies (which it may change, add or remove).
    pub fn update_disk_replicas(&mut self, f: impl FnOnce(&mut Vec<DiskReplica>)) {
        if self.extra.is_some() {
            self.update_extra(|e| f(&mut e.disk));
        }
    }

    /// Removes the disk copies matching `pred`; how many.
    pub fn drop_disk_replicas(&mut self, pred: impl Fn(&DiskReplica) -> bool) -> usize {
        let mut n = 0;
        self.update_disk_replicas(|disk| {
            let before = disk.len();
            disk.retain(|r| !pred(r));
            n = before - disk.len();
        });
        n
    }

    /// Whether its owner was asked for a disk copy that has not landed yet.
    pub fn offload_pending(&self) -> bool {
        self.extra.as_ref().is_some_and(|e| e.offload_pending)
    }

    /// Sets or clears [`Object::offload_pending`].
    pub fn set_offload_pending(&mut self, pending: bool) {
        if pending || self.extra.is_some() {
            self.update_extra(|e| e.offload_pending = pending);
        }
    }

    /// The replicated form of this object at service time `now`.
    pub fn state(&self, now: u64) -> ObjectState {
        ObjectState {
            client: self.client,
            age_ns: now.saturating_sub(self.put_start),
            size: self.size(),
            replicas: self
                .replicas
                .iter()
                .map(|r| ReplicaState {
                    id: r.id,
                    segment: r.seg.segment.id,
                    addr: r.addr,
                    size: self.size(),
                    status: r.status,
                })
                .collect(),
            hard_pin: self.hard_pin(),
            soft_pin_left_ns: self.soft_pin().map(|d| d.saturating_sub(now)),
            pending_pin: self.pending_pin().map(|p| (p.action, p.ttl_ns)),
            checksum: self.checksum(),
            group_id: self.group_id().to_string(),
            disk_replicas: self
                .disk_replicas()
                .iter()
                .map(|r| DiskReplicaState {
                    id: r.id,
                    client: r.disk.client,
                    size: r.size,
                    endpoint: r.endpoint.to_string(),
                })
                .collect(),
        }
    }

    /// An object restored from its replicated `state` at service time `now`, on
    /// `replicas` (those whose buffers could be re-established); its disk copies are
    /// added by the caller.
    pub fn from_state(state: &ObjectState, replicas: Replicas, now: u64) -> Object {
        let pending = state.pending_pin.map_or(
            PendingPin {
                action: SoftPinAction::Preserve,
                ttl_ns: 0,
            },
            |(action, ttl_ns)| PendingPin { action, ttl_ns },
        );
        let mut o = Object::new(
            state.client,
            now.saturating_sub(state.age_ns).max(1),
            state.size,
            replicas,
            state.hard_pin,
            state.soft_pin_left_ns.map(|left| now.saturating_add(left)),
            pending,
            &state.group_id,
        );
        o.set_checksum(state.checksum);
        o
    }

    /// Sets (or clears) the soft-pin action to apply when the put completes.
    pub fn set_pending_pin(&mut self, pin: Option<PendingPin>) {
        // `Preserve` does nothing when applied: the same as no pending action.
        let pin = pin.filter(|p| p.action != SoftPinAction::Preserve);
        if pin.is_some() || self.extra.is_some() {
            self.update_extra(|e| e.pending_pin = pin);
        }
    }

    /// Whether some replica, in memory or on disk, is readable.
    pub fn has_readable(&self) -> bool {
        self.has_readable_memory() || self.disk_replicas().iter().any(DiskReplica::is_readable)
    }

    /// Whether some memory replica is readable.
    pub fn has_readable_memory(&self) -> bool {
        self.replicas.iter().any(Replica::is_readable)
    }

    /// Whether a complete value exists: a COMPLETE memory replica or a disk copy.
    pub fn has_complete(&self) -> bool {
        self.has_complete_memory() || !self.disk_replicas().is_empty()
    }

    /// Whether some memory replica is COMPLETE.
    pub fn has_complete_memory(&self) -> bool {
        self.replicas
            .iter()
            .any(|r| r.status == ReplicaStatus::Complete)
    }

    /// Whether it has no replica at all, in memory or on disk.
    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty() && self.disk_replicas().is_empty()
    }

    /// Whether some replica is still being written.
    pub fn any_processing(&self) -> bool {
        self.replicas
            .iter()
            .any(|r| r.status == ReplicaStatus::Processing)
    }

    /// Whether every replica is COMPLETE.
    pub fn all_complete(&self) -> bool {
        self.replicas
            .iter()
            .all(|r| r.status == ReplicaStatus::Complete)
    }

    /// The value size.
    pub fn size(&self) -> u64 {
        self.size_reads & MAX_OBJECT_SIZE
    }

    /// Whether the read lease has run out (tracked reads aside: see [`Object::held`]).
    pub fn lease_expired(&self, now: u64) -> bool {
        now >= self.lease_timeout
    }

    /// Whether a lease or a tracked read in flight holds the object: then it may be
    /// neither evicted nor removed without force. `ttl` is the lease TTL, which also
    /// bounds a tracked read whose reader never ended it.
    pub fn held(&self, now: u64, ttl: u64) -> bool {
        !self.lease_expired(now) || self.being_read(now, ttl)
    }

    fn reads(&self) -> u64 {
        self.size_reads >> SIZE_BITS
    }

    fn set_reads(&mut self, n: u64) {
        self.size_reads = (n << SIZE_BITS) | self.size();
    }

    /// Whether a tracked read is in flight: begun, not ended, and begun less than
    /// `ttl` ago (the latest read's start is in `lease_timeout`).
    fn being_read(&self, now: u64, ttl: u64) -> bool {
        self.reads() > 0 && now < self.lease_timeout.saturating_add(ttl)
    }

    /// A tracked read begins: the object is held until the reader ends it (or `ttl`
    /// passes, should the reader die). Unlike a lease it holds the object only while
    /// the read runs; the access still counts for the eviction order (`lease_timeout`
    /// becomes at least `now`). False (nothing changed) when 65535 reads are already
    /// in flight: the caller leases instead.
    pub fn begin_read(&mut self, now: u64, ttl: u64) -> bool {
        let reads = if self.being_read(now, ttl) {
            self.reads()
        } else {
            0
        };
        if reads == u64::from(u16::MAX) {
            return false;
        }
        self.set_reads(reads + 1);
        self.lease_timeout = self.lease_timeout.max(now);
        true
    }

    /// A tracked read of this object ended.
    pub fn end_read(&mut self) {
        let reads = self.reads();
        self.set_reads(reads.saturating_sub(1));
    }

    /// Whether replica `id` is one of this object's.
    pub fn has_replica(&self, id: u64) -> bool {
        self.replicas.iter().any(|r| r.id == id) || self.disk_replicas().iter().any(|r| r.id == id)
    }

    /// Whether an unexpired soft pin is set.
    pub fn soft_pinned(&self, now: u64) -> bool {
        self.soft_pin().is_some_and(|d| now < d)
    }

    /// Extends the read lease to at least `now + ttl`.
    pub fn grant_lease(&mut self, now: u64, ttl: u64) {
        self.lease_timeout = self.lease_timeout.max(now.saturating_add(ttl));
    }

    /// Why nothing can be read: -704 when no replica is left on a mounted segment of a
    /// reachable owner (the object is as good as gone), -703 while a write is still in
    /// progress.
    pub fn unreadable_error(&self) -> ErrorCode {
        if self.replicas.iter().any(|r| r.seg.is_usable()) {
            ErrorCode::REPLICA_IS_NOT_READY
        } else {
            ErrorCode::OBJECT_NOT_FOUND
        }
    }

    /// Descriptors of readable replicas: memory first, then disk copies.
    pub fn readable_descriptors(&self) -> Vec<ReplicaDescriptor> {
        let memory = self.replicas.iter().filter(|r| r.is_readable());
        let disk = self.disk_replicas().iter().filter(|r| r.is_readable());
        memory
            .map(|r| r.descriptor(self.size()))
            .chain(disk.map(DiskReplica::descriptor))
            .collect()
    }

    /// Descriptors of every memory replica, in order.
    pub fn descriptors(&self) -> Vec<ReplicaDescriptor> {
        self.replicas
            .iter()
            .map(|r| r.descriptor(self.size()))
            .collect()
    }

    /// The buffers of every memory replica (the object is gone).
    pub fn into_buffers(self) -> Vec<Buffer> {
        let size = self.size();
        self.replicas
            .into_iter()
            .map(|r| r.into_buffer(size))
            .collect()
    }

    /// Applies the pending soft-pin action (when the first replica completes).
    pub fn commit_pending_pin(&mut self, now: u64) {
        if self.extra.is_none() {
            return;
        }
        self.update_extra(|e| {
            if e.soft_pin.is_some_and(|d| now >= d) {
                e.soft_pin = None;
            }
            let Some(p) = e.pending_pin.take() else {
                return;
            };
            match p.action {
                SoftPinAction::Preserve => {}
                SoftPinAction::Enable if p.ttl_ns == 0 => e.soft_pin = None,
                SoftPinAction::Enable => e.soft_pin = Some(now.saturating_add(p.ttl_ns)),
                SoftPinAction::Disable => e.soft_pin = None,
            }
        });
    }

    /// Removes the replicas matching `pred` and returns their buffers.
    pub fn take_replicas(&mut self, pred: impl Fn(&Replica) -> bool) -> Vec<Buffer> {
        let mut out = Vec::new();
        let size = self.size();
        self.replicas.retain(|r| {
            if pred(r) {
                out.push(r.buffer(size));
                false
            } else {
                true
            }
        });
        out
    }
}

#[cfg(test)]
#[path = "object_tests.rs"]
mod tests;
