//! Clients' local disks (spec tiers-events-conductor.md §1.3): which clients keep
//! objects on a disk of their own, the offload tasks queued for each, the tasks handed
//! out and not yet reported, and the flags and figures they report.
//!
//! Every mount gets a [`DiskMount`] shared by the LOCAL_DISK replicas on it; unmounting
//! flips its `alive` flag, so those replicas stop being handed out at once (as with
//! memory segments). Lock order: an object shard's lock may be held while taking this
//! table's lock, never the other way round.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::wire::disk_tier_api::{OffloadTaskItem, PromotionTaskItem};
use crate::wire::master_api::{ErrorCode, MasterResult, ReplicaDescriptor, ReplicaLocation};
use crate::wire::master_api::{ReplicaStatus, Uuid};

/// One client's mounted local disk, shared by the replicas on it.
#[derive(Debug)]
pub(crate) struct DiskMount {
    /// The client whose disk it is.
    pub client: Uuid,
    alive: AtomicBool,
}

impl DiskMount {
    /// Whether the disk is still mounted.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }
}

/// Shared handle to a disk mount.
pub(crate) type DiskRef = Arc<DiskMount>;

/// One object's copy on a client's local disk.
#[derive(Debug, Clone)]
pub(crate) struct DiskReplica {
    /// Global replica id.
    pub id: u64,
    /// The disk it is on.
    pub disk: DiskRef,
    /// Bytes stored.
    pub size: u64,
    /// The owner's offload RPC address, where readers fetch it.
    pub endpoint: Box<str>,
}

impl DiskReplica {
    /// Whether it can be read (its disk is still mounted).
    pub fn is_readable(&self) -> bool {
        self.disk.is_alive()
    }

    /// The wire descriptor (always COMPLETE: it is registered once written).
    pub fn descriptor(&self) -> ReplicaDescriptor {
        ReplicaDescriptor {
            id: self.id,
            location: ReplicaLocation::LocalDisk {
                client_id: self.disk.client,
                object_size: self.size,
                transport_endpoint: self.endpoint.to_string(),
            },
            status: ReplicaStatus::Complete,
        }
    }
}

/// An object, named by tenant and key.
pub(crate) type ObjectKey = (String, String);

/// What the master knows of one client's disk.
struct DiskClient {
    mount: DiskRef,
    enable_offloading: bool,
    /// Offload tasks waiting for the client's next heartbeat, each with the start
    /// time of the put it copies.
    queued: VecDeque<(OffloadTaskItem, u64)>,
    /// Tasks handed out and not reported yet, with the start time of their put.
    in_flight: HashMap<ObjectKey, u64>,
    /// Promotion tasks waiting for the client's next heartbeat.
    promotions: VecDeque<PromotionTaskItem>,
    /// Bytes the client said its disk may hold.
    capacity: i64,
    /// A `RemoveAll` happened since the client last polled.
    remove_all: bool,
}

impl DiskClient {
    fn new(client: Uuid, enable_offloading: bool) -> DiskClient {
        DiskClient {
            mount: Arc::new(DiskMount {
                client,
                alive: AtomicBool::new(true),
            }),
            enable_offloading,
            queued: VecDeque::new(),
            in_flight: HashMap::new(),
            promotions: VecDeque::new(),
            capacity: 0,
            remove_all: false,
        }
    }

    /// Every task queued or handed out (whose objects wait for it).
    fn pending_keys(&mut self) -> Vec<ObjectKey> {
        let queued = self.queued.drain(..).map(|(t, _)| (t.tenant_id, t.key));
        let mut keys: Vec<ObjectKey> = queued.collect();
        keys.extend(self.in_flight.drain().map(|(k, _)| k));
        keys
    }
}

/// A summary of one mounted disk (admin service, metrics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalDiskSummary {
    /// The client.
    pub client: Uuid,
    /// Whether offload tasks are queued for it.
    pub enable_offloading: bool,
    /// Tasks waiting for its next heartbeat.
    pub queued: usize,
    /// Tasks handed out, not reported yet.
    pub in_flight: usize,
    /// Reported capacity in bytes.
    pub capacity: i64,
}

/// What became of a promotion task offered to a client's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Enqueued {
    /// Queued for the client's next promotion heartbeat.
    Queued,
    /// The same task is queued already.
    AlreadyQueued,
    /// The client's queue holds `--promotion_queue_limit` tasks.
    Full,
    /// The client has no disk mounted.
    NotMounted,
}

/// The mounted local disks.
pub(crate) struct LocalDisks {
    inner: Mutex<HashMap<Uuid, DiskClient>>,
    /// Offload tasks queued per client at most (`--offloading_queue_limit`).
    queue_limit: usize,
    /// Promotion tasks queued per client at most (`--promotion_queue_limit`).
    promotion_limit: usize,
}

impl LocalDisks {
    /// An empty table.
    pub fn new(queue_limit: u64, promotion_limit: u64) -> LocalDisks {
        LocalDisks {
            inner: Mutex::new(HashMap::new()),
            queue_limit: usize::try_from(queue_limit).unwrap_or(usize::MAX),
            promotion_limit: usize::try_from(promotion_limit).unwrap_or(usize::MAX),
        }
    }

    /// Mounts `client`'s disk (idempotent: a mounted one only has its flag updated).
    pub fn mount(&self, client: Uuid, enable_offloading: bool) -> DiskRef {
        let mut inner = self.inner.lock();
        let d = inner
            .entry(client)
            .or_insert_with(|| DiskClient::new(client, enable_offloading));
        d.enable_offloading = enable_offloading;
        d.mount.clone()
    }

    /// The mount of `client`'s disk for a replica restored from a replica of the
    /// state (a snapshot or a former leader): mounted now if it is not, offloading off
    /// until the client's next heartbeat says otherwise.
    pub fn restored(&self, client: Uuid) -> DiskRef {
        let mut inner = self.inner.lock();
        let d = inner
            .entry(client)
            .or_insert_with(|| DiskClient::new(client, false));
        d.mount.clone()
    }

    /// The mount of `client`'s disk, if mounted.
    pub fn get(&self, client: Uuid) -> Option<DiskRef> {
        self.inner.lock().get(&client).map(|d| d.mount.clone())
    }

    /// Whether offload tasks may be queued for `client`.
    pub fn offloading(&self, client: Uuid) -> bool {
        self.inner
            .lock()
            .get(&client)
            .is_some_and(|d| d.enable_offloading)
    }

    /// Unmounts `client`'s disk; the objects whose offload was queued or handed out
    /// (they no longer wait for it), or `None` when it was not mounted.
    pub fn unmount(&self, client: Uuid) -> Option<Vec<ObjectKey>> {
        let mut d = self.inner.lock().remove(&client)?;
        d.mount.alive.store(false, Ordering::Release);
        Some(d.pending_keys())
    }

    /// Queues an offload task for `client`, copying the value written by the put
    /// started at `put_start`; false when its disk is not mounted, takes no offload,
    /// or its queue is full.
    pub fn enqueue(&self, client: Uuid, task: OffloadTaskItem, put_start: u64) -> bool {
        let mut inner = self.inner.lock();
        let Some(d) = inner.get_mut(&client) else {
            return false;
        };
        if !d.enable_offloading || d.queued.len() >= self.queue_limit {
            return false;
        }
        d.queued.push_back((task, put_start));
        true
    }

    /// `OffloadObjectHeartbeat`: sets the flag and drains the queue. Returns the tasks
    /// handed out, and the objects whose tasks were cancelled (offloading off).
    pub fn drain(
        &self,
        client: Uuid,
        enable_offloading: bool,
    ) -> MasterResult<(Vec<OffloadTaskItem>, Vec<ObjectKey>)> {
        let mut inner = self.inner.lock();
        let d = inner.get_mut(&client).ok_or(ErrorCode::SEGMENT_NOT_FOUND)?;
        d.enable_offloading = enable_offloading;
        if !enable_offloading {
            let cancelled = d.queued.drain(..).map(|(t, _)| (t.tenant_id, t.key));
            return Ok((Vec::new(), cancelled.collect()));
        }
        let mut tasks = Vec::with_capacity(d.queued.len());
        for (t, put_start) in d.queued.drain(..) {
            d.in_flight
                .insert((t.tenant_id.clone(), t.key.clone()), put_start);
            tasks.push(t);
        }
        Ok((tasks, Vec::new()))
    }

    /// A handed-out task of `client` was reported (done or failed): the start time
    /// of the put it was queued for, `None` when no such task was handed out.
    pub fn settle(&self, client: Uuid, key: &ObjectKey) -> Option<u64> {
        self.inner.lock().get_mut(&client)?.in_flight.remove(key)
    }

    /// `ReportSsdCapacity`.
    pub fn set_capacity(&self, client: Uuid, bytes: i64) -> MasterResult<()> {
        let mut inner = self.inner.lock();
        let d = inner.get_mut(&client).ok_or(ErrorCode::SEGMENT_NOT_FOUND)?;
        d.capacity = bytes;
        Ok(())
    }

    /// A `RemoveAll` happened: every mounted disk is told at its next poll.
    pub fn request_remove_all(&self) {
        for d in self.inner.lock().values_mut() {
            d.remove_all = true;
        }
    }

    /// `PollRemoveAll`: returns and clears the flag.
    pub fn poll_remove_all(&self, client: Uuid) -> MasterResult<bool> {
        let mut inner = self.inner.lock();
        let d = inner.get_mut(&client).ok_or(ErrorCode::SEGMENT_NOT_FOUND)?;
        Ok(std::mem::take(&mut d.remove_all))
    }

    /// Queues a promotion task for `client`.
    pub fn enqueue_promotion(&self, client: Uuid, task: PromotionTaskItem) -> Enqueued {
        let mut inner = self.inner.lock();
        let Some(d) = inner.get_mut(&client) else {
            return Enqueued::NotMounted;
        };
        if d.promotions.contains(&task) {
            return Enqueued::AlreadyQueued;
        }
        if d.promotions.len() >= self.promotion_limit {
            return Enqueued::Full;
        }
        d.promotions.push_back(task);
        Enqueued::Queued
    }

    /// `PromotionObjectHeartbeat`: up to `max` queued promotion tasks.
    pub fn drain_promotions(
        &self,
        client: Uuid,
        max: usize,
    ) -> MasterResult<Vec<PromotionTaskItem>> {
        let mut inner = self.inner.lock();
        let d = inner.get_mut(&client).ok_or(ErrorCode::SEGMENT_NOT_FOUND)?;
        let n = max.min(d.promotions.len());
        Ok(d.promotions.drain(..n).collect())
    }

    /// Every mounted disk.
    pub fn summaries(&self) -> Vec<LocalDiskSummary> {
        let inner = self.inner.lock();
        let mut out: Vec<LocalDiskSummary> = inner
            .values()
            .map(|d| LocalDiskSummary {
                client: d.mount.client,
                enable_offloading: d.enable_offloading,
                queued: d.queued.len(),
                in_flight: d.in_flight.len(),
                capacity: d.capacity,
            })
            .collect();
        out.sort_by_key(|s| (s.client.first, s.client.second));
        out
    }

    /// Number of mounted disks.
    pub fn len(&self) -> usize {
        self.inner.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Uuid = Uuid {
        first: 1,
        second: 2,
    };
    const B: Uuid = Uuid {
        first: 3,
        second: 4,
    };

    fn task(key: &str) -> OffloadTaskItem {
        OffloadTaskItem {
            tenant_id: "default".into(),
            key: key.into(),
            size: 10,
        }
    }

    #[test]
    fn queue_drain_settle_and_cancel() {
        let disks = LocalDisks::new(2, 1);
        assert!(!disks.enqueue(A, task("a"), 1), "not mounted");
        let mount = disks.mount(A, true);
        assert!(Arc::ptr_eq(&mount, &disks.mount(A, true)), "idempotent");
        assert!(disks.enqueue(A, task("a"), 7));
        assert!(disks.enqueue(A, task("b"), 8));
        assert!(!disks.enqueue(A, task("c"), 9), "queue full");
        let (tasks, cancelled) = disks.drain(A, true).unwrap();
        assert_eq!((tasks.len(), cancelled.len()), (2, 0));
        let a = ("default".to_string(), "a".to_string());
        assert_eq!(disks.settle(A, &a), Some(7), "the put it was queued for");
        assert_eq!(disks.settle(A, &a), None, "settled once");
        assert!(disks.enqueue(A, task("c"), 9));
        let (tasks, cancelled) = disks.drain(A, false).unwrap();
        assert!(tasks.is_empty());
        assert_eq!(cancelled, vec![("default".to_string(), "c".to_string())]);
        assert!(!disks.enqueue(A, task("d"), 10), "offloading off");
        // Unmounting hands back what was still in flight and kills the mount.
        let pending = disks.unmount(A).unwrap();
        assert_eq!(pending, vec![("default".to_string(), "b".to_string())]);
        assert!(!mount.is_alive());
        assert_eq!(disks.drain(A, true), Err(ErrorCode::SEGMENT_NOT_FOUND));
        assert!(disks.unmount(A).is_none());
    }

    #[test]
    fn remove_all_is_polled_once_and_promotions_are_bounded() {
        let disks = LocalDisks::new(10, 1);
        assert_eq!(disks.poll_remove_all(A), Err(ErrorCode::SEGMENT_NOT_FOUND));
        disks.mount(A, false);
        disks.request_remove_all();
        assert_eq!(disks.poll_remove_all(A), Ok(true));
        assert_eq!(disks.poll_remove_all(A), Ok(false));
        assert_eq!(disks.enqueue_promotion(A, task("p")), Enqueued::Queued);
        assert_eq!(
            disks.enqueue_promotion(A, task("p")),
            Enqueued::AlreadyQueued
        );
        assert_eq!(disks.enqueue_promotion(A, task("q")), Enqueued::Full);
        assert_eq!(disks.enqueue_promotion(B, task("q")), Enqueued::NotMounted);
        assert_eq!(disks.drain_promotions(A, 5).unwrap(), vec![task("p")]);
        assert!(disks.drain_promotions(A, 5).unwrap().is_empty());
    }
}
