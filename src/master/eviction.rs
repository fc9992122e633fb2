//! Eviction and zombie cleanup (spec store.md §2.5), run by the eviction thread.
//!
//! Trigger: used ratio > `eviction_high_watermark_ratio`, or the need-eviction flag set
//! by an allocation failure (when `eviction_ratio` > 0). Target fraction
//! `t = max(ratio, used - hw + ratio)`, lower bound `max(t / 2, used - hw)`.
//! Candidates: not hard-pinned, lease expired, with a readable (COMPLETE) memory
//! replica. First pass: the `ceil(#evictable x t)` non-soft-pinned candidates with the
//! oldest lease (PutEnd sets it to the put's end, so an object never read since ranks
//! by when it was written). Second pass, only when the first fell short of the lower
//! bound: the remaining non-soft-pinned candidates, then soft-pinned ones (if
//! allowed), oldest first. Grouped objects are evicted together, and only when no
//! member is leased.
//!
//! An evicted object that is gone entirely (no replica left) is announced as a KV
//! `removed` event; zombie cleanup announces nothing.
//!
//! With the disk tier (`offload`), eviction frees memory replicas only: an object with
//! a disk copy stays (readable from disk, no event). An object without one whose owner
//! takes offload tasks is not dropped: a task is queued for it instead (at most
//! `offload_cap_ratio x offloading_queue_limit` per run) and it stays in memory until
//! the copy lands; only `--offload_force_evict` drops one that cannot be queued.
//!
//! Zombies: puts unfinished after `put_start_release_timeout_sec` lose their PROCESSING
//! buffers; buffers of preempted puts wait in the discarded list until their release
//! time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::object::Object;
use super::objects::{ShardGuard, NUM_SHARDS};
use super::offload::DiskTier;
use super::segments::Buffer;
use super::tables::{dur_ns, Tables};
use crate::wire::master_api::ReplicaStatus;

/// An eviction candidate.
pub(super) struct Candidate {
    shard: usize,
    tenant: String,
    key: String,
    /// Read lease deadline when counted (the eviction order: oldest first).
    pub lease: u64,
    /// Bytes its readable replicas held when counted.
    pub bytes: u64,
}

/// The evictable objects at one instant.
pub(super) struct Census {
    /// Objects with a readable replica that are not hard-pinned (the ratio's base).
    pub base: usize,
    /// Unleased, not soft-pinned candidates.
    pub no_pin: Vec<Candidate>,
    /// Unleased soft-pinned candidates (only when those may be evicted).
    pub soft: Vec<Candidate>,
}

/// Eviction and zombie cleanup: the buffers parked until their release time and the
/// pacing of eviction runs.
pub(super) struct Eviction {
    pub(super) t: Arc<Tables>,
    disk: Arc<DiskTier>,
    /// Buffers of preempted puts, each with the time (ns) it may be freed.
    discarded: Mutex<Vec<(Vec<Buffer>, u64)>>,
    /// No eviction run before this time (ns) after a run that freed nothing.
    evict_backoff_until: AtomicU64,
    /// When zombies were last cleaned up (ns).
    last_discard: AtomicU64,
}

impl Eviction {
    /// Nothing parked, no run yet.
    pub fn new(t: Arc<Tables>, disk: Arc<DiskTier>) -> Eviction {
        Eviction {
            t,
            disk,
            discarded: Mutex::new(Vec::new()),
            evict_backoff_until: AtomicU64::new(0),
            last_discard: AtomicU64::new(0),
        }
    }

    /// One tick of the eviction thread.
    pub(super) fn tick(&self) {
        let now = self.t.now();
        let due = self.t.segments.due_graceful(now);
        if !due.is_empty() {
            for id in due {
                self.t.segments.unmount(id);
            }
            self.t.sweep_dead_replicas();
        }

        let used = self.t.segments.used_ratio();
        let hw = self.t.config.eviction_high_watermark_ratio;
        let ratio = self.t.config.eviction_ratio;
        let need = self.t.need_eviction.load(Ordering::Acquire);
        if used > hw || (need && ratio > 0.0) {
            // After a run that freed nothing (everything leased or pinned), wait ten
            // periods before scanning the whole table again.
            if now >= self.evict_backoff_until.load(Ordering::Relaxed) {
                let target = ratio.max(used - hw + ratio);
                let lower = (target * 0.5).max(used - hw).min(target);
                if !self.batch_evict(target, lower, now) {
                    let pause = dur_ns(self.t.config.eviction_interval).saturating_mul(10);
                    self.evict_backoff_until
                        .store(now.saturating_add(pause), Ordering::Relaxed);
                }
                self.last_discard.store(now, Ordering::Relaxed);
            }
        } else if now.saturating_sub(self.last_discard.load(Ordering::Relaxed)) > self.t.release_ns
        {
            for i in 0..NUM_SHARDS {
                let mut shard = self.t.objects.lock(i);
                self.discard_expired_processing(&mut shard, now);
            }
            self.release_expired_discarded(now);
            self.last_discard.store(now, Ordering::Relaxed);
        }
    }

    /// Runs one eviction with target fraction `target` and lower bound `lower`;
    /// returns whether anything was evicted or released.
    pub(super) fn batch_evict(&self, target: f64, lower: f64, now: u64) -> bool {
        self.t.metrics.eviction_runs.fetch_add(1, Ordering::Relaxed);
        let made_room = self.evict_run(target, lower, now);
        if made_room {
            self.t
                .metrics
                .successful_evictions
                .fetch_add(1, Ordering::Relaxed);
        }
        made_room
    }

    /// The body of [`Eviction::batch_evict`].
    fn evict_run(&self, target: f64, lower: f64, now: u64) -> bool {
        self.disk.refill_offload_budget();
        let Census { base, no_pin, soft } = self.census(now);
        if base == 0 {
            self.t.need_eviction.store(false, Ordering::Release);
            return self.release_expired_discarded(now) > 0;
        }

        let ideal = (base as f64 * target).ceil() as usize;
        let mut evicted = 0usize;
        let mut remaining: Vec<Candidate> = Vec::new();
        for c in no_pin {
            if evicted >= ideal {
                remaining.push(c);
                continue;
            }
            match self.try_evict(&c, false, now) {
                0 => remaining.push(c),
                n => evicted += n,
            }
        }

        let released = self.release_expired_discarded(now);
        let floor = (base as f64 * lower).ceil() as i64;
        let mut left =
            (floor - evicted as i64 - released as i64).min((remaining.len() + soft.len()) as i64);
        let second_pass = remaining
            .iter()
            .map(|c| (c, false))
            .chain(soft.iter().map(|c| (c, true)));
        for (c, allow_soft) in second_pass {
            if left <= 0 {
                break;
            }
            let n = self.try_evict(c, allow_soft, now);
            evicted += n;
            left -= n as i64;
        }

        log::debug!(
            "action=evict_objects, evicted_count={evicted}, eviction_base={base}, released_discarded={released}, target_evict_ratio={target}"
        );
        if evicted > 0 || released > 0 {
            self.t.need_eviction.store(false, Ordering::Release);
            return true;
        }
        false
    }

    /// Counts the evictable objects (dropping expired PROCESSING buffers on the way);
    /// both candidate lists are sorted oldest lease first.
    pub(super) fn census(&self, now: u64) -> Census {
        let allow_soft = self.t.config.allow_evict_soft_pinned_objects;
        let mut census = Census {
            base: 0,
            no_pin: Vec::new(),
            soft: Vec::new(),
        };
        for i in 0..NUM_SHARDS {
            let mut shard = self.t.objects.lock(i);
            self.discard_expired_processing(&mut shard, now);
            shard.for_each(|t, k, o| {
                if o.hard_pin() || !o.has_readable_memory() {
                    return;
                }
                census.base += 1;
                if o.held(now, self.t.lease_ns) || o.offload_pending() {
                    return;
                }
                let readable = o.replicas.iter().filter(|r| r.is_readable()).count();
                let c = Candidate {
                    shard: i,
                    tenant: t.to_string(),
                    key: k.to_string(),
                    lease: o.lease_timeout,
                    bytes: o.size().saturating_mul(readable as u64),
                };
                if !o.soft_pinned(now) {
                    census.no_pin.push(c);
                } else if allow_soft {
                    census.soft.push(c);
                }
            });
        }
        census.no_pin.sort_by_key(|c| c.lease);
        census.soft.sort_by_key(|c| c.lease);
        census
    }

    /// Evicts `tenant`'s evictable objects (unpinned first, then soft-pinned ones when
    /// allowed), shard by shard from a random one, until `want` bytes of memory
    /// replicas are freed or none is left; the bytes freed (counted for the tenant).
    pub(super) fn evict_tenant(&self, tenant: &str, want: u64) -> u64 {
        let now = self.t.now();
        let start = super::placement::random_index(NUM_SHARDS);
        let mut freed = 0u64;
        let passes: &[bool] = if self.t.config.allow_evict_soft_pinned_objects {
            &[false, true]
        } else {
            &[false]
        };
        'passes: for &allow_soft in passes {
            for i in 0..NUM_SHARDS {
                let idx = (start + i) % NUM_SHARDS;
                let mut found = Vec::new();
                self.t.objects.lock(idx).for_each(|t, k, o| {
                    if t == tenant && evictable(o, allow_soft, now, self.t.lease_ns) {
                        let readable = o.replicas.iter().filter(|r| r.is_readable()).count();
                        found.push(Candidate {
                            shard: idx,
                            tenant: t.to_string(),
                            key: k.to_string(),
                            lease: o.lease_timeout,
                            bytes: o.size().saturating_mul(readable as u64),
                        });
                    }
                });
                for c in found {
                    if self.try_evict(&c, allow_soft, now) > 0 {
                        freed = freed.saturating_add(c.bytes);
                        if freed >= want {
                            break 'passes;
                        }
                    }
                }
            }
        }
        if freed > 0 {
            self.t.tenants.note_evicted(tenant, freed);
        }
        freed
    }

    /// Evicts candidate `c` (or its whole group); returns the number of objects evicted,
    /// which the metrics count at once (so they never lag the table).
    pub(super) fn try_evict(&self, c: &Candidate, allow_soft: bool, now: u64) -> usize {
        let n = self.evict_candidate(c, allow_soft, now);
        self.t
            .metrics
            .evicted_objects
            .fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    fn evict_candidate(&self, c: &Candidate, allow_soft: bool, now: u64) -> usize {
        let mut shard = self.t.objects.lock(c.shard);
        let Some(o) = shard.get_mut(&c.tenant, &c.key) else {
            return 0;
        };
        if !evictable(o, allow_soft, now, self.t.lease_ns) {
            return 0;
        }
        if !o.group_id().is_empty() {
            let group = o.group_id().to_string();
            drop(shard);
            return self.evict_group(&c.tenant, &group, allow_soft, now);
        }
        let Some(bufs) = self.evict_memory(&mut shard, &c.tenant, &c.key, "") else {
            return 0;
        };
        drop(shard);
        self.t.segments.release(bufs);
        1
    }

    /// Frees the readable memory replicas of (tenant, key) — unless its owner takes
    /// offload tasks and it has no disk copy yet: then a copy is asked for and `None`
    /// returned (or, with `--offload_force_evict`, it goes when none can be queued).
    /// An object left with no replica is erased and announced.
    fn evict_memory(
        &self,
        shard: &mut ShardGuard<'_>,
        tenant: &str,
        key: &str,
        group: &str,
    ) -> Option<Vec<Buffer>> {
        let o = shard.get_mut(tenant, key)?;
        let on_disk = o.disk_replicas().iter().any(|r| r.is_readable());
        if !on_disk && self.t.config.enable_offload && self.disk.owner_offloads(o) {
            if self.disk.take_offload_budget() {
                if self.disk.queue_offload(tenant, key, o) {
                    return None;
                }
                self.disk.return_offload_budget();
            }
            if !self.t.config.offload_force_evict {
                return None;
            }
        }
        let bufs = o.take_replicas(|r| r.is_readable());
        let bytes = buffer_bytes(&bufs);
        self.t
            .metrics
            .evicted_bytes
            .fetch_add(bytes, Ordering::Relaxed);
        if on_disk {
            self.t
                .metrics
                .evicted_to_disk
                .fetch_add(1, Ordering::Relaxed);
        }
        if shard.remove_if_empty(tenant, key) {
            self.t.announce_removed(tenant, key, group);
        }
        Some(bufs)
    }

    /// Evicts every evictable member of a group, unless one of them is leased.
    fn evict_group(&self, tenant: &str, group: &str, allow_soft: bool, now: u64) -> usize {
        let members = self.t.objects.group_members(tenant, group);
        for m in &members {
            let shard = self.t.objects.lock_key(tenant, m);
            if shard
                .get(tenant, m)
                .is_some_and(|o| o.held(now, self.t.lease_ns))
            {
                return 0;
            }
        }
        let mut n = 0;
        for m in &members {
            let mut shard = self.t.objects.lock_key(tenant, m);
            let Some(o) = shard.get_mut(tenant, m) else {
                continue;
            };
            if !evictable(o, allow_soft, now, self.t.lease_ns) {
                continue;
            }
            let Some(bufs) = self.evict_memory(&mut shard, tenant, m, group) else {
                continue;
            };
            drop(shard);
            self.t.segments.release(bufs);
            n += 1;
        }
        n
    }

    /// Moves the PROCESSING buffers of puts older than the release timeout to the
    /// discarded list (due now); objects left without replicas are erased.
    pub(super) fn discard_expired_processing(&self, shard: &mut ShardGuard<'_>, now: u64) {
        let release_ns = self.t.release_ns;
        let mut zombies: Vec<(Vec<Buffer>, u64)> = Vec::new();
        let mut freed = Vec::new();
        shard.retain(
            None,
            |_, _, o| {
                let due = o.put_start.saturating_add(release_ns);
                if due < now && o.any_processing() {
                    let bufs = o.take_replicas(|r| r.status == ReplicaStatus::Processing);
                    zombies.push((bufs, due));
                    if o.replicas.is_empty() {
                        o.set_pending_pin(None);
                    }
                }
                !o.is_empty()
            },
            &mut freed,
        );
        self.t.segments.release(freed);
        if !zombies.is_empty() {
            for (bufs, _) in &zombies {
                self.count_discarded(bufs);
            }
            self.discarded.lock().extend(zombies);
        }
    }

    /// Parks `bufs` until `release_at` (ns).
    pub(super) fn discard(&self, bufs: Vec<Buffer>, release_at: u64) {
        if !bufs.is_empty() {
            self.count_discarded(&bufs);
            self.discarded.lock().push((bufs, release_at));
        }
    }

    /// Counts the buffers of one discarded put (`master_put_start_discard_cnt` and the
    /// staging bytes they hold until released).
    fn count_discarded(&self, bufs: &[Buffer]) {
        let m = &self.t.metrics;
        m.put_start_discards.fetch_add(1, Ordering::Relaxed);
        m.discarded_staging_bytes
            .fetch_add(buffer_bytes(bufs), Ordering::Relaxed);
    }

    /// Frees discarded buffers whose release time has come; returns how many parked
    /// entries were released.
    pub(super) fn release_expired_discarded(&self, now: u64) -> usize {
        let due: Vec<(Vec<Buffer>, u64)> = {
            let mut list = self.discarded.lock();
            if list.is_empty() {
                return 0;
            }
            let (due, keep): (Vec<_>, Vec<_>) = list.drain(..).partition(|(_, at)| *at <= now);
            *list = keep;
            due
        };
        let n = due.len();
        let bytes = due.iter().fold(0u64, |sum, (b, _)| sum + buffer_bytes(b));
        let m = &self.t.metrics;
        m.put_start_releases.fetch_add(n as u64, Ordering::Relaxed);
        m.discarded_staging_bytes
            .fetch_sub(bytes, Ordering::Relaxed);
        self.t
            .segments
            .release(due.into_iter().flat_map(|(b, _)| b));
        n
    }
}

/// Total size of `bufs`.
fn buffer_bytes(bufs: &[Buffer]) -> u64 {
    bufs.iter().fold(0u64, |sum, b| sum.saturating_add(b.size))
}

/// Whether `o`'s memory replicas may be evicted now (`ttl`: the lease TTL): not while
/// a disk copy it waits for is being written, nor while replicas of it are (a copy
/// reads its source meanwhile).
fn evictable(o: &Object, allow_soft: bool, now: u64, ttl: u64) -> bool {
    !o.hard_pin()
        && !o.held(now, ttl)
        && !o.any_processing()
        && (allow_soft || !o.soft_pinned(now))
        && o.has_readable_memory()
        && !o.offload_pending()
}
