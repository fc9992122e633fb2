//! Copying and moving replicas between segments (spec tasks §2.3, §2.5):
//! `CreateCopyTask`/`CreateMoveTask` check the request and queue a task for the owner
//! of the source segment; that client then runs `CopyStart`/`MoveStart` (new
//! PROCESSING replicas on the targets, the key locked for the copy), writes the bytes
//! and ends with `CopyEnd`/`MoveEnd` (the targets become COMPLETE; a move drops its
//! source) or `CopyRevoke`/`MoveRevoke`.
//!
//! A copy in flight keeps its object from eviction and removal (its targets are
//! PROCESSING); one whose client never ends it is cleared with the put zombies after
//! the release timeout (`o.put_start` is the copy's start). The per-key locks are not
//! replicated to HA followers: after a failover the copy's end answers -709 and the
//! task is reported failed, while the zombie sweep frees its targets.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::config::DynamicMode;
use super::eviction::Eviction;
use super::heat::{Heat, HotKey};
pub(super) use super::leases::Token;
use super::leases::{plan, Leases};
use super::object::Object;
use super::placement::random_index;
use super::replica::Replica;
use super::segments::Buffer;
use super::tables::Tables;
use super::tasks::Tasks;
use super::tenants::TENANT_QUOTA_EXCEEDED;
use crate::wire::master_api::{
    CopyStartResponse, ErrorCode, MasterResult, MoveStartResponse, QueryTaskResponse,
    ReplicaDescriptor, ReplicaStatus, TaskAssignment, TaskCompleteRequest, Uuid, TASK_REPLICA_COPY,
    TASK_REPLICA_MOVE,
};
use crate::wire::task_payload::{to_json, CopyPayload, MovePayload};

/// Copy or move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Copy,
    Move,
}

/// A copy or move between its start and its end: at most one per key.
#[derive(Debug, Clone)]
struct Lock {
    client: Uuid,
    kind: Kind,
    source: u64,
    /// Ids of the new replicas.
    targets: Vec<u64>,
    /// ns on the master's clock.
    started: u64,
    /// A dynamic copy's (lease, version epoch); zeros for any other.
    token: Token,
}

/// The copy and move paths, and the tasks that drive them.
pub(super) struct Copies {
    t: Arc<Tables>,
    eviction: Arc<Eviction>,
    tasks: Tasks,
    locks: Mutex<HashMap<(String, String), Lock>>,
    /// Read heat (dynamic replication), shared with the read path.
    heat: Arc<Heat>,
    /// Dynamic replication's leases and cooldowns (taken after `locks`).
    leases: Leases,
    /// When the slow part of `tick` last ran (ns).
    last_sweep: AtomicU64,
}

/// Hot keys turned into proposals per tick.
const PROPOSALS_PER_TICK: usize = 64;
/// The message of a task whose lease ran out before it was fetched.
const LEASE_EXPIRED: &str = "dynamic replica lease expired";

/// How often `tick`'s slow part runs (ns).
const SWEEP_NS: u64 = 1_000_000_000;

/// Now, in ms since the epoch (the tasks' timestamps).
fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The name of the segment a replica lives in.
fn segment_name(r: &Replica) -> &str {
    &r.seg.segment.name
}

impl Copies {
    /// No copy in flight; hot keys come from `heat`.
    pub fn new(t: Arc<Tables>, eviction: Arc<Eviction>, tasks: Tasks, heat: Arc<Heat>) -> Copies {
        Copies {
            heat,
            t,
            eviction,
            tasks,
            locks: Mutex::new(HashMap::new()),
            leases: Leases::default(),
            last_sweep: AtomicU64::new(0),
        }
    }

    /// Whether a copy or move of `key` is in flight at `now`.
    fn is_copying(&self, key: &(String, String), now: u64) -> bool {
        self.locks
            .lock()
            .get(key)
            .is_some_and(|l| l.started.saturating_add(self.t.release_ns) >= now)
    }

    /// Checks that segment `name` is mounted (`unknown` otherwise) and takes
    /// allocations (-1010 otherwise).
    fn check_target(&self, name: &str, unknown: ErrorCode) -> MasterResult<()> {
        match self.t.segments.named(name) {
            None => Err(unknown),
            Some(s) if !s.allocatable => Err(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS),
            Some(_) => Ok(()),
        }
    }

    /// The client that owns segment `name`; -1 when none does.
    fn owner(&self, name: &str) -> MasterResult<Uuid> {
        self.t
            .segments
            .named(name)
            .map(|s| s.client)
            .ok_or(ErrorCode::INTERNAL_ERROR)
    }

    /// Names of the segments holding a memory replica of `o` (any status).
    fn holders(o: &Object) -> Vec<String> {
        o.replicas
            .iter()
            .filter(|r| r.seg.is_alive())
            .map(|r| segment_name(r).to_string())
            .collect()
    }

    /// The object's segments that may serve as a source, -704 when it does not
    /// exist or has no live replica.
    fn sources(&self, tenant: &str, key: &str) -> MasterResult<Vec<String>> {
        let shard = self.t.objects.lock_key(tenant, key);
        let o = shard.get(tenant, key).ok_or(ErrorCode::OBJECT_NOT_FOUND)?;
        let holders = Self::holders(o);
        if o.size() == 0 || holders.is_empty() {
            return Err(ErrorCode::OBJECT_NOT_FOUND);
        }
        Ok(holders)
    }

    /// `CreateCopyTask`: -600 for no targets or an unknown one, -704 for a missing
    /// object, -1010 for a draining target; the task goes to the owner of a source
    /// picked at random among the object's replicas.
    pub fn create_copy_task(
        &self,
        key: &str,
        tenant: &str,
        targets: &[String],
    ) -> MasterResult<Uuid> {
        let tenant = self.t.write_tenant(tenant)?;
        if targets.is_empty() {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        let holders = self.sources(tenant, key)?;
        for target in targets {
            self.check_target(target, ErrorCode::INVALID_PARAMS)?;
        }
        let source = holders[random_index(holders.len())].clone();
        let client = self.owner(&source)?;
        let payload = CopyPayload {
            tenant_id: tenant.to_string(),
            key: key.to_string(),
            source,
            targets: targets.to_vec(),
            dynamic_replication_lease_id_high: 0,
            dynamic_replication_lease_id_low: 0,
            dynamic_replication_version_epoch: 0,
        };
        self.tasks
            .submit(client, TASK_REPLICA_COPY, to_json(&payload), epoch_ms())
    }

    /// `CreateMoveTask`: -704 for a missing object, -600 when `source` is `target`,
    /// `target` is unknown or `source` holds no replica of the object, -1010 for a
    /// draining target; the task goes to the owner of `source`.
    pub fn create_move_task(
        &self,
        key: &str,
        tenant: &str,
        source: &str,
        target: &str,
    ) -> MasterResult<Uuid> {
        let tenant = self.t.write_tenant(tenant)?;
        let holders = self.sources(tenant, key)?;
        if source == target {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        self.check_target(target, ErrorCode::INVALID_PARAMS)?;
        if !holders.iter().any(|h| h == source) {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        let client = self.owner(source)?;
        let payload = MovePayload {
            tenant_id: tenant.to_string(),
            key: key.to_string(),
            source: source.to_string(),
            target: target.to_string(),
        };
        self.tasks
            .submit(client, TASK_REPLICA_MOVE, to_json(&payload), epoch_ms())
    }

    /// `FetchTasks`.
    pub fn fetch_tasks(&self, client: Uuid, batch: u64) -> Vec<TaskAssignment> {
        self.tasks.fetch(client, batch, epoch_ms())
    }

    /// Turns hot keys into copy tasks; once a second also ends timed-out tasks,
    /// forgets old ones, drops copy locks older than the release timeout (their
    /// replicas go with the put zombies) and expired leases and heat.
    pub fn tick(&self) {
        self.propose_hot();
        let now = self.t.now();
        let last = self.last_sweep.load(Ordering::Relaxed);
        if now.saturating_sub(last) < SWEEP_NS && last != 0 {
            return;
        }
        self.last_sweep.store(now.max(1), Ordering::Relaxed);
        self.tasks.sweep(epoch_ms());
        let release = self.t.release_ns;
        self.locks
            .lock()
            .retain(|_, l| l.started.saturating_add(release) >= now);
        self.heat.sweep(now);
        for task in self.leases.sweep(now) {
            self.tasks.fail_if_pending(task, LEASE_EXPIRED, epoch_ms());
        }
    }

    /// The start shared by copy and move: checks, then allocates one buffer on each
    /// of `targets` that holds no replica of the object yet, and locks the key. A
    /// dynamic copy (`token`) is checked against its lease instead of up front (see
    /// `leases`).
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        source: &str,
        targets: &[String],
        kind: Kind,
        token: Token,
    ) -> MasterResult<(ReplicaDescriptor, Vec<ReplicaDescriptor>)> {
        let dynamic = token != Token::PLAIN;
        if !dynamic {
            for target in targets {
                self.check_target(target, ErrorCode::SEGMENT_NOT_FOUND)?;
            }
        }
        let tenant = self.t.write_tenant(tenant)?;
        let now = self.t.now();
        let mut shard = self.t.objects.lock_key(tenant, key);
        let o = shard.existing_mut(tenant, key)?;
        let lock_key = (tenant.to_string(), key.to_string());
        let mut locks = self.locks.lock();
        if let Some(l) = locks.get(&lock_key) {
            if l.started.saturating_add(self.t.release_ns) >= now {
                return Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK);
            }
        }
        if o.any_processing() {
            // A write of the object is in flight.
            return Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK);
        }
        let held: Vec<String> = o
            .replicas
            .iter()
            .map(|r| segment_name(r).to_string())
            .collect();
        let fresh = targets.iter().filter(|t| !held.contains(t)).count() as u64;
        if dynamic {
            let owner = |name: &str| self.owner(name).ok();
            self.leases.check(
                &lock_key,
                client,
                o.put_start,
                source,
                targets,
                token,
                fresh,
                now,
                owner,
            )?;
        } else {
            self.leases.check_none(&lock_key, now)?;
        }
        let checked = match dynamic {
            true => targets
                .iter()
                .try_for_each(|t| self.check_target(t, ErrorCode::SEGMENT_NOT_FOUND)),
            false => Ok(()),
        };
        let placed = checked.and_then(|()| self.place(o, tenant, source, targets, &held, fresh));
        let (source_desc, source_id, new) = match placed {
            Ok(p) => p,
            Err(e) => {
                if dynamic {
                    self.leases.clear(&lock_key);
                }
                return Err(e);
            }
        };
        o.put_start = now;
        locks.insert(
            lock_key,
            Lock {
                client,
                kind,
                source: source_id,
                targets: new.iter().map(|r| r.id).collect(),
                started: now,
                token,
            },
        );
        let size = o.size();
        Ok((
            source_desc,
            new.iter().map(|r| r.descriptor(size)).collect(),
        ))
    }

    /// The placing part of a start on `o`: the source replica (-710 unless readable),
    /// the tenant's admission for `fresh` new replicas, one buffer on each target not
    /// in `held`, appended PROCESSING.
    fn place(
        &self,
        o: &mut Object,
        tenant: &str,
        source: &str,
        targets: &[String],
        held: &[String],
        fresh: u64,
    ) -> MasterResult<(ReplicaDescriptor, u64, Vec<Replica>)> {
        let src = o
            .replicas
            .iter()
            .find(|r| segment_name(r) == source)
            .filter(|r| r.is_readable())
            .ok_or(ErrorCode::REPLICA_NOT_FOUND)?;
        let size = o.size();
        let source_desc = src.descriptor(size);
        let source_id = src.id;
        let tenants = &self.t.tenants;
        let _reservation = tenants
            .admit(
                tenant,
                size.saturating_mul(fresh),
                self.t.segments.total_capacity(),
            )
            .map_err(|(e, _)| {
                if e == TENANT_QUOTA_EXCEEDED {
                    tenants.note_reject(tenant);
                }
                e
            })?;
        let mut bufs: Vec<Buffer> = Vec::new();
        for target in targets.iter().filter(|t| !held.contains(t)) {
            match self.t.segments.allocate_on(target, size) {
                Ok(b) => bufs.push(b),
                Err(e) => {
                    self.t.segments.release(bufs);
                    return Err(e);
                }
            }
        }
        let new: Vec<Replica> = bufs
            .into_iter()
            .map(|b| Replica::new(self.t.next_replica_id(), ReplicaStatus::Processing, b))
            .collect();
        for r in &new {
            o.replicas.push(r.clone());
        }
        Ok((source_desc, source_id, new))
    }

    /// `CopyStart`: -101 for an unknown target, -1010 for a draining one, -704,
    /// -708 when the key is being copied or written, -710 when `source` holds no
    /// readable replica, -200 when a target has no room.
    pub fn copy_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        source: &str,
        targets: &[String],
    ) -> MasterResult<CopyStartResponse> {
        let (source, new) = self.start(
            client,
            key,
            tenant,
            source,
            targets,
            Kind::Copy,
            Token::PLAIN,
        )?;
        Ok(CopyStartResponse {
            source,
            targets: new,
        })
    }

    /// `MoveStart`: as `CopyStart` with one target, and -600 when it is the source.
    pub fn move_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        source: &str,
        target: &str,
    ) -> MasterResult<MoveStartResponse> {
        if source == target {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        let targets = [target.to_string()];
        let (source, new) = self.start(
            client,
            key,
            tenant,
            source,
            &targets,
            Kind::Move,
            Token::PLAIN,
        )?;
        Ok(MoveStartResponse {
            source,
            target: new.into_iter().next(),
        })
    }

    /// The end of a copy or move by `client`: `done` commits it, otherwise it is
    /// revoked. -704 (the lock goes with the object), -709 without a copy in flight,
    /// -601 for another client's, -600 for the other kind's, -300 when `token` is
    /// not the copy's (a plain end of a dynamic copy, or the other way round); -712
    /// when the source or a target was lost meanwhile (targets that survived stay
    /// committed). Any end clears the key's dynamic replication state; a dynamic copy
    /// whose replicas were dropped keeps the key from another for a while.
    pub fn end(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        is_move: bool,
        done: bool,
        token: Token,
    ) -> MasterResult<()> {
        let kind = if is_move { Kind::Move } else { Kind::Copy };
        let tenant = self.t.read_tenant(tenant)?;
        let now = self.t.now();
        let lock_key = (tenant.to_string(), key.to_string());
        let mut shard = self.t.objects.lock_key(tenant, key);
        let mut locks = self.locks.lock();
        let Some(o) = shard.get_mut(tenant, key) else {
            locks.remove(&lock_key);
            return Err(ErrorCode::OBJECT_NOT_FOUND);
        };
        let lock = locks
            .get(&lock_key)
            .ok_or(ErrorCode::OBJECT_NO_REPLICATION_TASK)?;
        if lock.client != client {
            return Err(ErrorCode::ILLEGAL_CLIENT);
        }
        if lock.kind != kind {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        if lock.token != token {
            return Err(ErrorCode::INVALID_VERSION);
        }
        let lock = locks.remove(&lock_key).expect("checked above");
        drop(locks);
        self.leases.clear(&lock_key);
        let is_target = |r: &Replica| lock.targets.contains(&r.id);
        let source_ok = o
            .replicas
            .iter()
            .any(|r| r.id == lock.source && r.is_readable());
        let mut result = Ok(());
        let released;
        let mut parked = Vec::new();
        if !done || !source_ok {
            released = o.take_replicas(is_target);
            if done {
                result = Err(ErrorCode::REPLICA_IS_GONE);
            }
        } else {
            released = o.take_replicas(|r| is_target(r) && !r.seg.is_alive());
            let kept = o.replicas.iter().filter(|r| is_target(r)).count();
            if kept < lock.targets.len() {
                result = Err(ErrorCode::REPLICA_IS_GONE);
            }
            for r in o
                .replicas
                .iter_mut()
                .filter(|r| lock.targets.contains(&r.id))
            {
                r.status = ReplicaStatus::Complete;
            }
            if kind == Kind::Move && result.is_ok() {
                // Readers may still hold the old descriptor: its buffer is parked.
                parked = o.take_replicas(|r| r.id == lock.source);
            }
        }
        if lock.token != Token::PLAIN && !released.is_empty() {
            self.leases.hold_off(&lock_key, now);
        }
        shard.remove_if_empty(tenant, key);
        drop(shard);
        self.t.segments.release(released);
        self.eviction
            .discard(parked, now.saturating_add(self.t.release_ns));
        result
    }

    /// `DynamicReplicaCopyStart`: `CopyStart` under the lease `token` (see
    /// `Leases::check`); with a zero lease, a plain `CopyStart`.
    pub fn dynamic_copy_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        source: &str,
        targets: &[String],
        token: Token,
    ) -> MasterResult<CopyStartResponse> {
        if token.0 == Token::PLAIN.0 {
            return self.copy_start(client, key, tenant, source, targets);
        }
        let (source, new) = self.start(client, key, tenant, source, targets, Kind::Copy, token)?;
        Ok(CopyStartResponse {
            source,
            targets: new,
        })
    }

    /// Turns up to [`PROPOSALS_PER_TICK`] hot keys into copy tasks (enforce mode).
    fn propose_hot(&self) {
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
        let tenant = self.t.write_tenant(&key.0)?;
        let name = key.1.as_str();
        let shard = self.t.objects.lock_key(tenant, name);
        let o = shard.get(tenant, name).ok_or(ErrorCode::OBJECT_NOT_FOUND)?;
        if self.is_copying(key, now) || o.any_processing() {
            return Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK);
        }
        self.leases.may_propose(key, now)?;
        let (source, target) = plan(name, o, self.t.segments.loads(), self.heat.max_replicas)
            .ok_or(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS)?;
        let owner = self
            .owner(&source)
            .map_err(|_| ErrorCode::SEGMENT_NOT_FOUND)?;
        let token = Token::fresh(o.put_start);
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
        self.leases.grant(key, token, source, target, task, now);
        Ok(())
    }

    /// `QueryTask`.
    pub fn query_task(&self, id: Uuid) -> MasterResult<QueryTaskResponse> {
        self.tasks.query(id)
    }

    /// `MarkTaskToComplete`.
    pub fn mark_task_to_complete(
        &self,
        client: Uuid,
        report: &TaskCompleteRequest,
    ) -> MasterResult<()> {
        self.tasks.complete(client, report, epoch_ms())
    }
}
