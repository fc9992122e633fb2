//! The leases of dynamic (hot-object) replication (spec dynamic-replication
//! §2.3-§3.5): a key found hot gets one copy task to one more segment ([`plan`]),
//! with a lease (30 s) and the object's version epoch, which
//! `DynamicReplicaCopyStart` checks in upstream's order ([`Leases::check`]). A key
//! gets at most one proposal per 30 s, and none for 60 s after a dynamic copy's
//! replicas were dropped. Nothing removes a replica when a key cools down: eviction
//! does, as for any.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::heat::{stable_score, HotKey};
use super::object::Object;
use super::replica::Replica;
use super::segments::SegmentLoad;
use crate::wire::master_api::{ErrorCode, MasterResult, Uuid};

/// How long a lease waits for its copy to start (ns).
const LEASE_NS: u64 = 30_000_000_000;
/// How long after a proposal a key gets no other (ns).
const ACTION_COOLDOWN_NS: u64 = 30_000_000_000;
/// How long after a dynamic copy's replicas were dropped a key gets no other (ns).
const RECREATE_COOLDOWN_NS: u64 = 60_000_000_000;
/// A target must stay below this fill ratio with the copy.
const TARGET_HIGH_WATERMARK: f64 = 0.85;

/// A dynamic copy's lease and version epoch; `Token::PLAIN` for other copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Token(pub Uuid, pub u64);

impl Token {
    /// The token of a copy the master did not ask for.
    pub const PLAIN: Token = Token(
        Uuid {
            first: 0,
            second: 0,
        },
        0,
    );

    /// A fresh lease (never zero) for an object at version `epoch`.
    pub fn fresh(epoch: u64) -> Token {
        Token(
            Uuid {
                first: fastrand::u64(1..),
                second: fastrand::u64(..),
            },
            epoch,
        )
    }
}

/// A lease handed out with a task, until its copy starts.
#[derive(Debug, Clone)]
struct Pending {
    token: Token,
    source: String,
    target: String,
    /// ns on the master's clock.
    expires: u64,
    task: Uuid,
}

#[derive(Default)]
struct State {
    pending: HashMap<HotKey, Pending>,
    cooldown: HashMap<HotKey, u64>,
    recreate_after: HashMap<HotKey, u64>,
}

/// Leases and cooldowns per key (a leaf lock: taken last).
#[derive(Default)]
pub(super) struct Leases(Mutex<State>);

impl Leases {
    /// Forgets the key's lease and action cooldown (its copy ended, or its object).
    pub fn clear(&self, key: &HotKey) {
        let mut s = self.0.lock();
        s.pending.remove(key);
        s.cooldown.remove(key);
    }

    /// Keeps the key from another dynamic copy for a while (its replicas were dropped).
    pub fn hold_off(&self, key: &HotKey, now: u64) {
        let until = now.saturating_add(RECREATE_COOLDOWN_NS);
        let mut s = self.0.lock();
        let e = s.recreate_after.entry(key.clone()).or_insert(0);
        *e = (*e).max(until);
    }

    /// A plain copy's start: -708 while the key holds an unexpired lease (an expired
    /// one is forgotten).
    pub fn check_none(&self, key: &HotKey, now: u64) -> MasterResult<()> {
        let mut s = self.0.lock();
        match s.pending.get(key) {
            Some(p) if p.expires > now => Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK),
            Some(_) => {
                s.pending.remove(key);
                s.cooldown.remove(key);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// A dynamic copy's start checked against its lease, in upstream's order: -1010
    /// without a lease (or an expired one, forgotten); -300 when the object was
    /// written since (forgotten) or the token is not the lease's; -708 for another
    /// source or targets; -101 / -601 unless `client` owns the source (`owner`
    /// names the owner of a segment); with nothing to copy (`fresh` 0) -705, the
    /// lease used up. A lease that passes is used up.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &self,
        key: &HotKey,
        client: Uuid,
        version: u64,
        source: &str,
        targets: &[String],
        token: Token,
        fresh: u64,
        now: u64,
        owner: impl Fn(&str) -> Option<Uuid>,
    ) -> MasterResult<()> {
        let mut s = self.0.lock();
        let verdict = match s.pending.get(key) {
            None => Err(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS),
            Some(p) if p.expires <= now => {
                s.pending.remove(key);
                s.cooldown.remove(key);
                return Err(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
            }
            Some(p) if p.token.1 != version => {
                s.pending.remove(key);
                s.cooldown.remove(key);
                return Err(ErrorCode::INVALID_VERSION);
            }
            Some(p) if p.token != token => Err(ErrorCode::INVALID_VERSION),
            Some(p) if p.source != source || targets != std::slice::from_ref(&p.target) => {
                Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK)
            }
            Some(p) => match owner(&p.source) {
                None => Err(ErrorCode::SEGMENT_NOT_FOUND),
                Some(o) if o != client => Err(ErrorCode::ILLEGAL_CLIENT),
                Some(_) => Ok(()),
            },
        };
        if fresh == 0 && verdict.is_ok() {
            s.pending.remove(key);
            s.cooldown.remove(key);
            return Err(ErrorCode::OBJECT_ALREADY_EXISTS);
        }
        verdict?;
        s.pending.remove(key);
        Ok(())
    }

    /// Whether a proposal for `key` may be made at `now`: -1010 during a cooldown,
    /// -708 while a lease is out (an expired one is forgotten).
    pub fn may_propose(&self, key: &HotKey, now: u64) -> MasterResult<()> {
        let mut s = self.0.lock();
        if s.cooldown.get(key).is_some_and(|t| *t > now)
            || s.recreate_after.get(key).is_some_and(|t| *t > now)
        {
            return Err(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
        }
        match s.pending.get(key) {
            Some(p) if p.expires > now => Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK),
            Some(_) => {
                s.pending.remove(key);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Records the lease `token` of `task` (a copy of `key` from `source` to
    /// `target`), and the key's action cooldown.
    pub fn grant(
        &self,
        key: &HotKey,
        token: Token,
        source: String,
        target: String,
        task: Uuid,
        now: u64,
    ) {
        let mut s = self.0.lock();
        s.pending.insert(
            key.clone(),
            Pending {
                token,
                source,
                target,
                expires: now.saturating_add(LEASE_NS),
                task,
            },
        );
        s.cooldown
            .insert(key.clone(), now.saturating_add(ACTION_COOLDOWN_NS));
    }

    /// Forgets expired leases and cooldowns; the tasks of the leases that ran out.
    pub fn sweep(&self, now: u64) -> Vec<Uuid> {
        let mut s = self.0.lock();
        let mut tasks = Vec::new();
        s.pending.retain(|_, p| {
            let keep = p.expires > now;
            if !keep {
                tasks.push(p.task);
            }
            keep
        });
        s.cooldown.retain(|_, t| *t > now);
        s.recreate_after.retain(|_, t| *t > now);
        tasks
    }
}

/// Where one more replica of `o` (key `key`) goes, given the segments' `loads` and
/// the cap of `max` readable memory replicas: from the replica segment with the
/// lowest stable score, to the allocatable segment without one that stays below
/// 85 % full, preferring another host, then the emptiest, then the lowest score.
pub(super) fn plan(
    key: &str,
    o: &Object,
    loads: Vec<SegmentLoad>,
    max: usize,
) -> Option<(String, String)> {
    let readable: Vec<&Replica> = o.replicas.iter().filter(|r| r.is_readable()).collect();
    if readable.is_empty() || readable.len() >= max {
        return None;
    }
    let name = |r: &Replica| r.seg.segment.name.clone();
    let source = readable
        .iter()
        .map(|r| name(r))
        .min_by_key(|s| stable_score(key, s))?;
    let hosts: Vec<&str> = readable
        .iter()
        .map(|r| r.seg.segment.host_id.as_str())
        .filter(|h| !h.is_empty())
        .collect();
    let size = o.size();
    let other_host = |h: &str| h.is_empty() || hosts.is_empty() || !hosts.contains(&h);
    let fill = |s: &SegmentLoad| s.used as f64 / s.capacity as f64;
    let target = loads
        .into_iter()
        .filter(|s| {
            s.allocatable
                && s.capacity > 0
                && s.used < s.capacity
                && s.capacity - s.used >= size
                && (s.used.saturating_add(size) as f64) / (s.capacity as f64)
                    < TARGET_HIGH_WATERMARK
                && !readable.iter().any(|r| r.seg.segment.name == s.name)
        })
        .min_by(|a, b| {
            other_host(&b.host_id)
                .cmp(&other_host(&a.host_id))
                .then(fill(a).total_cmp(&fill(b)))
                .then(stable_score(key, &a.name).cmp(&stable_score(key, &b.name)))
        })?;
    Some((source, target.name))
}
