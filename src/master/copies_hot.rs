//! Dynamic (hot-object) replication on top of copy tasks (spec dynamic-replication
//! §2.3-§3.5): a key found hot (`heat`) with fewer readable memory replicas than the
//! cap gets one copy task to one more segment, with a lease (30 s) and the object's
//! version epoch; the source owner runs it with `DynamicReplicaCopyStart`, which
//! checks the lease in upstream's order, and the usual end. A key gets at most one
//! proposal per 30 s, and none for 60 s after a dynamic copy's replicas were dropped.
//! Nothing removes a replica when a key cools down: eviction does, as for any.

use std::collections::HashMap;

use super::config::DynamicMode;
use super::copies::{epoch_ms, segment_name, Copies, Kind, Token};
use super::heat::{stable_score, HotKey};
use super::object::Object;
use super::replica::Replica;
use crate::wire::master_api::{
    CopyStartResponse, ErrorCode, MasterResult, Uuid, TASK_REPLICA_COPY,
};
use crate::wire::task_payload::{to_json, CopyPayload};

/// How long a lease waits for its copy to start (ns).
const LEASE_NS: u64 = 30_000_000_000;
/// How long after a proposal a key gets no other (ns).
const ACTION_COOLDOWN_NS: u64 = 30_000_000_000;
/// How long after a dynamic copy's replicas were dropped a key gets no other (ns).
const RECREATE_COOLDOWN_NS: u64 = 60_000_000_000;
/// Hot keys turned into proposals per tick.
const PROPOSALS_PER_TICK: usize = 64;
/// A target must stay below this fill ratio with the copy.
const TARGET_HIGH_WATERMARK: f64 = 0.85;
/// The message of a task whose lease ran out before it was fetched.
const LEASE_EXPIRED: &str = "dynamic replica lease expired";

/// A lease handed out with a task, until its copy starts.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    token: Token,
    source: String,
    target: String,
    /// ns on the master's clock.
    expires: u64,
    task: Uuid,
}

/// Leases, and the cooldowns per key.
#[derive(Default)]
pub(super) struct HotState {
    pending: HashMap<HotKey, Pending>,
    cooldown: HashMap<HotKey, u64>,
    recreate_after: HashMap<HotKey, u64>,
}

/// A fresh random lease id (never zero).
fn random_lease() -> Uuid {
    Uuid {
        first: fastrand::u64(1..),
        second: fastrand::u64(..),
    }
}

impl Copies {
    /// Forgets the key's lease and action cooldown (a copy ended, or its object).
    pub(super) fn clear_hot(&self, key: &HotKey) {
        let mut hot = self.hot.lock();
        hot.pending.remove(key);
        hot.cooldown.remove(key);
    }

    /// Keeps the key from another dynamic copy for a while (its replicas were dropped).
    pub(super) fn hold_off_recreate(&self, key: &HotKey, now: u64) {
        let until = now.saturating_add(RECREATE_COOLDOWN_NS);
        let mut hot = self.hot.lock();
        let e = hot.recreate_after.entry(key.clone()).or_insert(0);
        *e = (*e).max(until);
    }

    /// A plain copy's start: -708 while the key holds an unexpired lease (an expired
    /// one is forgotten).
    pub(super) fn check_no_lease(&self, key: &HotKey, now: u64) -> MasterResult<()> {
        let mut hot = self.hot.lock();
        match hot.pending.get(key) {
            Some(p) if p.expires > now => Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK),
            Some(_) => {
                hot.pending.remove(key);
                hot.cooldown.remove(key);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// A dynamic copy's start checked against its lease, in upstream's order: -1010
    /// without a lease (or an expired one, forgotten); -300 when the object was
    /// written since (forgotten) or the token is not the lease's; -708 for another
    /// source or targets; -101 / -601 unless `client` owns the source; with nothing
    /// to copy (`fresh` 0) -705, the lease used up.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_lease(
        &self,
        key: &HotKey,
        client: Uuid,
        o: &Object,
        source: &str,
        targets: &[String],
        token: Token,
        fresh: u64,
        now: u64,
    ) -> MasterResult<()> {
        let mut hot = self.hot.lock();
        let verdict = match hot.pending.get(key) {
            None => Err(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS),
            Some(p) if p.expires <= now => {
                hot.pending.remove(key);
                hot.cooldown.remove(key);
                return Err(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
            }
            Some(p) if p.token.1 != o.put_start => {
                hot.pending.remove(key);
                hot.cooldown.remove(key);
                return Err(ErrorCode::INVALID_VERSION);
            }
            Some(p) if p.token != token => Err(ErrorCode::INVALID_VERSION),
            Some(p) if p.source != source || targets != std::slice::from_ref(&p.target) => {
                Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK)
            }
            Some(p) => match self.owner(&p.source) {
                Err(_) => Err(ErrorCode::SEGMENT_NOT_FOUND),
                Ok(owner) if owner != client => Err(ErrorCode::ILLEGAL_CLIENT),
                Ok(_) => Ok(()),
            },
        };
        if fresh == 0 && verdict.is_ok() {
            hot.pending.remove(key);
            hot.cooldown.remove(key);
            return Err(ErrorCode::OBJECT_ALREADY_EXISTS);
        }
        verdict?;
        hot.pending.remove(key);
        Ok(())
    }

    /// `DynamicReplicaCopyStart`: `CopyStart` for the lease `token` (see
    /// [`Copies::check_lease`]); with a zero lease, a plain `CopyStart`.
    pub fn dynamic_copy_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        source: &str,
        targets: &[String],
        token: Token,
    ) -> MasterResult<CopyStartResponse> {
        if token.0
            == (Uuid {
                first: 0,
                second: 0,
            })
        {
            return self.copy_start(client, key, tenant, source, targets);
        }
        let (source, new) = self.start(client, key, tenant, source, targets, Kind::Copy, token)?;
        Ok(CopyStartResponse {
            source,
            targets: new.iter().map(Replica::descriptor).collect(),
        })
    }

    /// Turns up to [`PROPOSALS_PER_TICK`] hot keys into copy tasks (enforce mode).
    pub(super) fn propose_hot(&self) {
        if self.heat.mode() != DynamicMode::Enforce {
            return;
        }
        for key in self.heat.take_hot(PROPOSALS_PER_TICK) {
            if let Err(e) = self.propose(&key) {
                log::debug!(
                    "dynamic_replication_auto_proposal_rejected key={}, error_code={}",
                    key.1,
                    e.name()
                );
            }
        }
    }

    /// One proposal: a lease and a copy task to one more segment for `key`.
    fn propose(&self, key: &HotKey) -> MasterResult<()> {
        let now = self.t.now();
        if !self.heat.is_hot(key, now) {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        let (tenant, name) = (key.0.as_str(), key.1.as_str());
        let tenant = self.t.write_tenant(tenant)?;
        let shard = self.t.objects.lock_key(tenant, name);
        let o = shard.get(tenant, name).ok_or(ErrorCode::OBJECT_NOT_FOUND)?;
        if self.is_copying(key, now) || o.any_processing() {
            return Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK);
        }
        let mut hot = self.hot.lock();
        if hot.cooldown.get(key).is_some_and(|t| *t > now) {
            return Err(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
        }
        match hot.pending.get(key) {
            Some(p) if p.expires > now => return Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK),
            Some(_) => {
                hot.pending.remove(key);
            }
            None => {}
        }
        if hot.recreate_after.get(key).is_some_and(|t| *t > now) {
            return Err(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
        }
        let (source, target) = self
            .plan(name, o)
            .ok_or(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS)?;
        let owner = self
            .owner(&source)
            .map_err(|_| ErrorCode::SEGMENT_NOT_FOUND)?;
        let token = Token(random_lease(), o.put_start);
        let payload = CopyPayload {
            tenant_id: tenant.to_string(),
            key: name.to_string(),
            source: source.clone(),
            targets: vec![target.clone()],
            dynamic_replication_lease_id_high: token.0.first,
            dynamic_replication_lease_id_low: token.0.second,
            dynamic_replication_version_epoch: token.1,
        };
        let task = self
            .tasks
            .submit(owner, TASK_REPLICA_COPY, to_json(&payload), epoch_ms())?;
        hot.pending.insert(
            key.clone(),
            Pending {
                token,
                source,
                target,
                expires: now.saturating_add(LEASE_NS),
                task,
            },
        );
        hot.cooldown
            .insert(key.clone(), now.saturating_add(ACTION_COOLDOWN_NS));
        Ok(())
    }

    /// Where one more replica of `o` goes: from the replica segment with the lowest
    /// stable score, to the allocatable segment without one that stays below 85 %
    /// full, preferring another host, then the emptiest, then the lowest score; none
    /// at the cap.
    fn plan(&self, key: &str, o: &Object) -> Option<(String, String)> {
        let readable: Vec<&Replica> = o.replicas.iter().filter(|r| r.is_readable()).collect();
        if readable.is_empty() || readable.len() >= self.heat.max_replicas {
            return None;
        }
        let source = readable
            .iter()
            .map(|r| segment_name(r))
            .min_by_key(|s| stable_score(key, s))?
            .to_string();
        let hosts: Vec<&str> = readable
            .iter()
            .map(|r| r.seg.segment.host_id.as_str())
            .filter(|h| !h.is_empty())
            .collect();
        let size = o.size();
        let target = self
            .t
            .segments
            .loads()
            .into_iter()
            .filter(|s| {
                s.allocatable
                    && s.capacity > 0
                    && s.used < s.capacity
                    && s.capacity - s.used >= size
                    && (s.used.saturating_add(size) as f64) / (s.capacity as f64)
                        < TARGET_HIGH_WATERMARK
                    && !readable.iter().any(|r| segment_name(r) == s.name)
            })
            .min_by(|a, b| {
                let other_host = |h: &str| h.is_empty() || hosts.is_empty() || !hosts.contains(&h);
                let fill = |s: &super::segments::SegmentLoad| s.used as f64 / s.capacity as f64;
                other_host(&b.host_id)
                    .cmp(&other_host(&a.host_id))
                    .then(fill(a).total_cmp(&fill(b)))
                    .then(stable_score(key, &a.name).cmp(&stable_score(key, &b.name)))
            })?;
        Some((source, target.name))
    }

    /// Fails tasks whose lease ran out before they were fetched, and forgets expired
    /// leases, cooldowns and heat.
    pub(super) fn sweep_hot(&self, now: u64) {
        self.heat.sweep(now);
        let expired: Vec<Uuid> = {
            let mut hot = self.hot.lock();
            let mut tasks = Vec::new();
            hot.pending.retain(|_, p| {
                let keep = p.expires > now;
                if !keep {
                    tasks.push(p.task);
                }
                keep
            });
            hot.cooldown.retain(|_, t| *t > now);
            hot.recreate_after.retain(|_, t| *t > now);
            tasks
        };
        for task in expired {
            self.tasks.fail_if_pending(task, LEASE_EXPIRED, epoch_ms());
        }
    }
}
