//! [`Group`]: one rank's view of a process group — rendezvous in a [`Kv`], the
//! collectives over its [`Links`], and membership as upstream's Mooncake PG defines it.
//!
//! **Rank slots.** A group reserves `max_group_size` slots; `active` says which take
//! part. Ranks are never renumbered: a deactivated rank leaves a hole, and `size` is
//! one past the highest active rank.
//!
//! **Membership changes** are decided by a fold over reports in the store, for epoch
//! `e` of the view: every rank that takes part writes its report
//! (`<id>/change/<e>/<rank>`: ranks to deactivate explicitly, ranks it suspects after
//! a failure, ranks to activate) and raises `<id>/change/<e>`, which makes ranks
//! waiting inside an operation abandon it and report too (with nothing to say, which
//! proves they are alive). Once every active rank reported or was suspected by a
//! reporter (or one timeout passed), the lowest reporting rank writes view `e + 1`:
//! the active ranks, less those deactivated explicitly and those suspected that never
//! reported, plus those to activate that wait in `join_group`. Everyone adopts that
//! view. The decision needs no particular rank: if the lowest reporter dies before
//! writing, the next one writes after another timeout. So the coordinator's job
//! survives any rank's death; it does not survive the store's (torch's TCPStore
//! lives in rank 0's process, an HTTP metadata server or etcd elsewhere).
//!
//! Every chunk carries the epoch of its sender's view: a receiver drops chunks of
//! older epochs (the remains of an abandoned operation) and stops at a newer one,
//! adopts the newer view and fails the operation with `MembershipChanged`.

use super::algo::Ring;
use super::channel::Channel;
use super::dtype::{DType, ReduceOp};
use super::error::{PgError, PgErrorKind, PgResult};
use super::kv::Kv;
use super::link::{Interrupt, LinkChannel, Links, PeerAddr};
use crate::te::transport::same_host::identity::host_identity;
use crate::te::TransferEngine;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a group is created.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    /// Rank slots the group reserves (at least its declared size).
    pub max_group_size: usize,
    /// A process that enters an existing group through [`Group::join_group`].
    pub is_extension: bool,
    /// After an operation fails because of peers, take them out of the group (the
    /// fold above) before returning the error, so the next operation runs with the
    /// survivors.
    pub auto_deactivate_on_failure: bool,
    /// How long an operation, a rendezvous or a membership change may wait.
    pub timeout: Duration,
}

impl GroupOptions {
    /// Defaults for a group of `size`: no extra slots, automatic deactivation, a
    /// timeout from `MC_PG_TIMEOUT_MS` or 30 s.
    pub fn new(size: usize) -> GroupOptions {
        GroupOptions {
            max_group_size: size,
            is_extension: false,
            auto_deactivate_on_failure: true,
            timeout: default_timeout(),
        }
    }
}

/// `MC_PG_TIMEOUT_MS`, or 30 s.
pub fn default_timeout() -> Duration {
    std::env::var("MC_PG_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(30), Duration::from_millis)
}

/// What a rank publishes about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Endpoint {
    segment: String,
    region: u64,
    pid: u32,
    host: String,
    tag: u32,
}

/// A committed membership.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct View {
    epoch: u64,
    active: Vec<usize>,
}

/// One rank's report for a membership change.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Report {
    deactivate: Vec<usize>,
    suspects: Vec<usize>,
    activate: Vec<usize>,
}

/// One rank of a process group.
pub struct Group {
    kv: Arc<dyn Kv>,
    /// `mooncake/pg/<name>/`.
    prefix: String,
    /// The founding members' group id (keys of membership live under it).
    id: String,
    rank: usize,
    declared_size: usize,
    options: GroupOptions,
    links: Links,
    view: View,
    tag: u32,
}

impl Group {
    /// Creates rank `rank` of group `name` with `size` founding ranks, meeting the
    /// others in `kv`. Founding ranks wait (up to the timeout) until all `size` have
    /// published; an extension rank waits until the group exists and stays inactive
    /// until [`Group::join_group`].
    pub fn new(
        engine: Arc<TransferEngine>,
        kv: Arc<dyn Kv>,
        name: &str,
        rank: usize,
        size: usize,
        options: GroupOptions,
    ) -> PgResult<Group> {
        if size == 0 || rank >= options.max_group_size.max(size) {
            return Err(PgError::invalid(format!(
                "rank {rank} is outside a group of {size} (max_group_size {})",
                options.max_group_size
            )));
        }
        if options.max_group_size < size {
            return Err(PgError::invalid(format!(
                "max_group_size {} is below the group's size {size}",
                options.max_group_size
            )));
        }
        if !options.is_extension && rank >= size {
            return Err(PgError::invalid(format!(
                "founding rank {rank} is not below the group's size {size}; ranks past it join as extensions"
            )));
        }
        let tag = loop {
            let t = fastrand::u32(1..=0xff_ffff);
            if t != 0 {
                break t;
            }
        };
        let links = Links::new(engine, options.max_group_size, rank, tag, options.timeout)?;
        let prefix = format!("mooncake/pg/{name}/");
        let endpoint = Endpoint {
            segment: links.segment_name(),
            region: links.region_addr(),
            pid: std::process::id(),
            host: host_identity().unwrap_or("").to_string(),
            tag,
        };
        let json = serde_json::to_vec(&endpoint)
            .map_err(|e| PgError::internal(format!("encoding the endpoint: {e}")))?;
        kv.set(&format!("{prefix}ep/{rank}"), &json)?;
        let mut group = Group {
            kv,
            prefix,
            id: String::new(),
            rank,
            declared_size: size,
            links,
            view: View {
                epoch: 0,
                active: Vec::new(),
            },
            tag,
            options,
        };
        if group.options.is_extension {
            group.find_existing_group()?;
        } else {
            group.found(size)?;
        }
        Ok(group)
    }

    /// Founding: waits for every founding rank's endpoint, connects, and publishes the
    /// group id (the same on every rank: a hash of the founders' tags).
    fn found(&mut self, size: usize) -> PgResult<()> {
        let deadline = Instant::now() + self.options.timeout;
        let mut tags = Vec::with_capacity(size);
        for r in 0..size {
            if r == self.rank {
                tags.push(self.tag);
                continue;
            }
            // An endpoint left by an earlier run under the same name cannot be
            // reached: read it again until the live one appears.
            loop {
                let ep = self.wait_endpoint(r, deadline)?;
                let tag = ep.tag;
                match self.connect(r, ep) {
                    Ok(()) => {
                        tags.push(tag);
                        break;
                    }
                    Err(e) if Instant::now() >= deadline => return Err(e),
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        let mut bytes = Vec::with_capacity(tags.len() * 4);
        for t in &tags {
            bytes.extend_from_slice(&t.to_le_bytes());
        }
        self.id = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes));
        self.view = View {
            epoch: 0,
            active: (0..size).collect(),
        };
        self.kv
            .set(&format!("{}id", self.prefix), self.id.as_bytes())?;
        Ok(())
    }

    /// An extension: reads the group id and the newest view.
    fn find_existing_group(&mut self) -> PgResult<()> {
        let deadline = Instant::now() + self.options.timeout;
        let key = format!("{}id", self.prefix);
        let id = self.poll(deadline, "the group to exist", |g| g.kv.get(&key))?;
        self.id = String::from_utf8_lossy(&id).into_owned();
        self.view = View {
            epoch: 0,
            active: (0..self.declared_size).collect(),
        };
        while let Some(v) = self.read_view(self.view.epoch + 1)? {
            self.view = v;
        }
        Ok(())
    }

    /// Polls `f` until it yields a value or `deadline` passes.
    fn poll<T>(
        &self,
        deadline: Instant,
        what: &str,
        mut f: impl FnMut(&Self) -> PgResult<Option<T>>,
    ) -> PgResult<T> {
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(v) = f(self)? {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                return Err(PgError::new(
                    PgErrorKind::PeerFailed,
                    format!(
                        "rank {} waited {:?} for {what}",
                        self.rank, self.options.timeout
                    ),
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    fn read_endpoint(&self, rank: usize) -> PgResult<Option<Endpoint>> {
        let Some(bytes) = self.kv.get(&format!("{}ep/{rank}", self.prefix))? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| PgError::internal(format!("rank {rank}'s endpoint is malformed: {e}")))
    }

    fn wait_endpoint(&self, rank: usize, deadline: Instant) -> PgResult<Endpoint> {
        self.poll(
            deadline,
            &format!("rank {rank} to publish its endpoint"),
            |g| g.read_endpoint(rank),
        )
        .map_err(|mut e| {
            e.suspects = vec![rank];
            e
        })
    }

    fn connect(&mut self, rank: usize, ep: Endpoint) -> PgResult<()> {
        let same_host = !ep.host.is_empty() && host_identity() == Some(ep.host.as_str());
        self.links.connect(
            rank,
            PeerAddr {
                segment: ep.segment,
                region: ep.region,
                pid: ep.pid,
                same_host,
                tag: ep.tag,
            },
        )
    }

    fn key(&self, rest: &str) -> String {
        format!("{}{}/{rest}", self.prefix, self.id)
    }

    fn read_view(&self, epoch: u64) -> PgResult<Option<View>> {
        let Some(bytes) = self.kv.get(&self.key(&format!("view/{epoch}")))? else {
            return Ok(None);
        };
        let view: View = serde_json::from_slice(&bytes)
            .map_err(|e| PgError::internal(format!("view {epoch} is malformed: {e}")))?;
        if view.epoch != epoch
            || view
                .active
                .iter()
                .any(|&r| r >= self.options.max_group_size)
        {
            return Err(PgError::internal(format!(
                "view {epoch} in the store does not fit this group ({} slots): {view:?}",
                self.options.max_group_size
            )));
        }
        Ok(Some(view))
    }

    /// This rank's in-group rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// One past the highest active rank (the declared size for an extension that has
    /// not joined yet).
    pub fn size(&self) -> usize {
        if !self.is_active() {
            return self.declared_size;
        }
        self.view.active.last().map_or(0, |r| r + 1)
    }

    /// The group's rank slots.
    pub fn max_group_size(&self) -> usize {
        self.options.max_group_size
    }

    /// One flag per rank slot: whether the rank takes part.
    pub fn active_ranks(&self) -> Vec<bool> {
        let mut mask = vec![false; self.options.max_group_size];
        for &r in &self.view.active {
            mask[r] = true;
        }
        mask
    }

    /// Whether this rank takes part in operations.
    pub fn is_active(&self) -> bool {
        self.view.active.contains(&self.rank)
    }

    /// The membership epoch (0 at founding, one more per change).
    pub fn epoch(&self) -> u64 {
        self.view.epoch
    }

    /// Sets how long operations and membership changes may wait.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.options.timeout = timeout;
        self.links.timeout = timeout;
    }

    /// Runs `op` over the active members; on failure caused by peers, folds a
    /// membership change (when `auto_deactivate_on_failure`) before returning it.
    fn run<T>(
        &mut self,
        op: impl FnOnce(&mut Ring<'_, dyn Channel + '_>) -> PgResult<T>,
    ) -> PgResult<T> {
        if !self.is_active() {
            return Err(PgError::new(
                PgErrorKind::NotActive,
                format!(
                    "rank {} is not an active member of the group (epoch {})",
                    self.rank, self.view.epoch
                ),
            ));
        }
        let watch_key = self.key(&format!("change/{}", self.view.epoch));
        let members = &self.view.active;
        let me = members.iter().position(|&r| r == self.rank).unwrap_or(0);
        let mut watch = ChangeWatch {
            kv: &*self.kv,
            key: &watch_key,
            next: Instant::now() + WATCH_EVERY,
        };
        self.links.epoch = self.view.epoch;
        let result = {
            let mut ch = LinkChannel {
                links: &mut self.links,
                interrupt: &mut watch,
            };
            let ch: &mut (dyn Channel + '_) = &mut ch;
            let mut ring = Ring { ch, members, me };
            op(&mut ring)
        };
        let err = match result {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        match err.kind {
            // A mismatch leaves chunks nobody will read in some mailboxes: a change
            // with the same members moves everyone to a fresh epoch, whose first
            // operation drops them as stale.
            PgErrorKind::PeerFailed | PgErrorKind::MembershipChanged | PgErrorKind::Mismatch
                if self.options.auto_deactivate_on_failure =>
            {
                let report = Report {
                    suspects: err.suspects.clone(),
                    ..Report::default()
                };
                let before = self.view.active.clone();
                match self.change(report) {
                    Ok(()) => {
                        let removed: Vec<usize> = before
                            .into_iter()
                            .filter(|r| !self.view.active.contains(r))
                            .collect();
                        let mut suspects = err.suspects.clone();
                        suspects.extend(removed.iter().filter(|r| !err.suspects.contains(r)));
                        let left = match removed.as_slice() {
                            [] => "no rank was taken out".to_string(),
                            [r] => format!("rank {r} was taken out"),
                            many => format!("ranks {many:?} were taken out"),
                        };
                        let kind = if removed.is_empty() {
                            err.kind
                        } else {
                            PgErrorKind::PeerFailed
                        };
                        Err(PgError {
                            kind,
                            message: format!(
                                "{}; {left}: the group continues at epoch {} with ranks {:?}",
                                err.message, self.view.epoch, self.view.active
                            ),
                            suspects,
                        })
                    }
                    Err(e2) => Err(PgError {
                        message: format!("{}; and then: {}", err.message, e2.message),
                        ..err
                    }),
                }
            }
            _ => Err(err),
        }
    }

    /// Folds a membership change at the current epoch with this rank's `report`, and
    /// adopts the view it produces.
    fn change(&mut self, report: Report) -> PgResult<()> {
        let epoch = self.view.epoch;
        let json = serde_json::to_vec(&report)
            .map_err(|e| PgError::internal(format!("encoding a report: {e}")))?;
        self.kv
            .set(&self.key(&format!("change/{epoch}/{}", self.rank)), &json)?;
        self.kv
            .set(&self.key(&format!("change/{epoch}")), b"open")?;
        let start = Instant::now();
        let grace = self.options.timeout;
        loop {
            if let Some(v) = self.read_view(epoch + 1)? {
                return self.adopt(v);
            }
            let mut present = Vec::new();
            let mut merged = Report::default();
            for &r in &self.view.active {
                let Some(bytes) = self.kv.get(&self.key(&format!("change/{epoch}/{r}")))? else {
                    continue;
                };
                let rep: Report = serde_json::from_slice(&bytes).unwrap_or_default();
                present.push(r);
                merged.deactivate.extend(rep.deactivate);
                merged.suspects.extend(rep.suspects);
                merged.activate.extend(rep.activate);
            }
            let waiting = self
                .view
                .active
                .iter()
                .any(|r| !present.contains(r) && !merged.suspects.contains(r));
            let joiners_ready = self.joiners_ready(&merged.activate)?;
            let waited = start.elapsed();
            let settled = (!waiting && joiners_ready) || waited >= grace;
            // The lowest reporter decides; the next ones step in if it does not.
            let my_turn = present
                .iter()
                .position(|&r| r == self.rank)
                .is_some_and(|i| waited >= grace * i as u32);
            if settled && my_turn {
                let mut active: Vec<usize> = self
                    .view
                    .active
                    .iter()
                    .copied()
                    .filter(|r| {
                        !merged.deactivate.contains(r)
                            && (present.contains(r) || !merged.suspects.contains(r))
                    })
                    .collect();
                for r in merged.activate {
                    if !active.contains(&r) && self.awaiting(r)?.is_some() {
                        active.push(r);
                    }
                }
                active.sort_unstable();
                active.dedup();
                let view = View {
                    epoch: epoch + 1,
                    active,
                };
                // Another decider may have written meanwhile: the first one stands.
                if let Some(v) = self.read_view(epoch + 1)? {
                    return self.adopt(v);
                }
                let json = serde_json::to_vec(&view)
                    .map_err(|e| PgError::internal(format!("encoding a view: {e}")))?;
                self.kv
                    .set(&self.key(&format!("view/{}", epoch + 1)), &json)?;
                return self.adopt(view);
            }
            if waited >= grace * (present.len().max(1) as u32 + 1) {
                return Err(PgError::new(
                    PgErrorKind::MembershipChanged,
                    format!("no rank decided membership epoch {} in time", epoch + 1),
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The tag of rank `r` waiting in `join_group`, if it is.
    fn awaiting(&self, r: usize) -> PgResult<Option<u32>> {
        let Some(bytes) = self.kv.get(&self.key(&format!("join/{r}")))? else {
            return Ok(None);
        };
        Ok(String::from_utf8_lossy(&bytes).parse().ok())
    }

    fn joiners_ready(&self, ranks: &[usize]) -> PgResult<bool> {
        for &r in ranks {
            if !self.view.active.contains(&r) && self.awaiting(r)?.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Adopts `view`: connects to newly active ranks (their current endpoints). A rank
    /// linked already keeps its link unless another process took its slot; one whose
    /// endpoint is gone (it finished and left while this rank was behind) is not
    /// waited for: an operation with it fails naming it, as with any dead rank.
    fn adopt(&mut self, view: View) -> PgResult<()> {
        let deadline = Instant::now() + self.options.timeout;
        for &r in &view.active {
            if r == self.rank {
                continue;
            }
            let ep = if self.links.has_peer(r) {
                match self.read_endpoint(r)? {
                    Some(ep) => ep,
                    None => continue,
                }
            } else {
                self.wait_endpoint(r, deadline)?
            };
            self.connect(r, ep)?;
        }
        self.view = view;
        Ok(())
    }

    /// Catches up with every view committed after this rank's.
    fn catch_up(&mut self) -> PgResult<()> {
        while let Some(v) = self.read_view(self.view.epoch + 1)? {
            self.adopt(v)?;
        }
        Ok(())
    }

    /// What an idle rank does now and then (the [`super::agent::Agent`] thread calls
    /// it whenever no operation holds the group): adopts views committed meanwhile
    /// and, when another rank started a membership change, takes part in it (its
    /// report says it is alive), so a change never waits for idle ranks.
    pub fn tick(&mut self) -> PgResult<()> {
        self.catch_up()?;
        if !self.is_active() {
            return Ok(());
        }
        let epoch = self.view.epoch;
        if self
            .kv
            .get(&self.key(&format!("change/{epoch}")))?
            .is_some()
            && self
                .kv
                .get(&self.key(&format!("change/{epoch}/{}", self.rank)))?
                .is_none()
        {
            self.change(Report::default())?;
        }
        Ok(())
    }

    /// Takes `ranks` out of the group: a membership change every active rank takes
    /// part in (ranks inside an operation join it on their own, idle ones through
    /// their agent; one call from any active rank is enough).
    pub fn deactivate_ranks(&mut self, ranks: &[usize]) -> PgResult<()> {
        self.check_slots(ranks)?;
        self.catch_up()?;
        self.change(Report {
            deactivate: ranks.to_vec(),
            ..Report::default()
        })
    }

    /// Brings `ranks` (waiting in [`Group::join_group`]) into the group.
    pub fn activate_ranks(&mut self, ranks: &[usize]) -> PgResult<()> {
        self.check_slots(ranks)?;
        self.catch_up()?;
        if ranks.iter().all(|r| self.view.active.contains(r)) {
            return Ok(());
        }
        self.change(Report {
            activate: ranks.to_vec(),
            ..Report::default()
        })
    }

    fn check_slots(&self, ranks: &[usize]) -> PgResult<()> {
        if let Some(r) = ranks.iter().find(|&&r| r >= self.options.max_group_size) {
            return Err(PgError::invalid(format!(
                "rank {r} is outside the group's {} slots",
                self.options.max_group_size
            )));
        }
        Ok(())
    }

    /// Declares this rank ready and blocks until a view makes it active (up to the
    /// timeout, renewed while views keep coming).
    pub fn join_group(&mut self) -> PgResult<()> {
        self.kv.set(
            &self.key(&format!("join/{}", self.rank)),
            self.tag.to_string().as_bytes(),
        )?;
        let mut deadline = Instant::now() + self.options.timeout;
        loop {
            if let Some(v) = self.read_view(self.view.epoch + 1)? {
                self.adopt(v)?;
                deadline = Instant::now() + self.options.timeout;
                continue;
            }
            if self.is_active() {
                // Ready no more: a later activation needs a later join.
                let _ = self.kv.remove(&self.key(&format!("join/{}", self.rank)));
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(PgError::new(
                    PgErrorKind::NotActive,
                    format!(
                        "rank {} was not activated within {:?}",
                        self.rank, self.options.timeout
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Blocks until every active rank arrived.
    pub fn barrier(&mut self) -> PgResult<()> {
        self.run(|r| r.barrier())
    }

    /// Copies `root`'s `buf` into every active rank's.
    pub fn broadcast(&mut self, buf: &mut [u8], root: usize) -> PgResult<()> {
        let root = self.member_index(root)?;
        self.run(|r| r.broadcast(buf, root))
    }

    /// Reduces `buf` across the active ranks, in place everywhere.
    pub fn all_reduce(&mut self, buf: &mut [u8], dtype: DType, op: ReduceOp) -> PgResult<()> {
        self.run(|r| r.all_reduce(buf, dtype, op))
    }

    /// Reduces `buf` into `root`'s.
    pub fn reduce(
        &mut self,
        buf: &mut [u8],
        dtype: DType,
        op: ReduceOp,
        root: usize,
    ) -> PgResult<()> {
        let root = self.member_index(root)?;
        self.run(|r| r.reduce(buf, dtype, op, root))
    }

    /// Every active rank's `input` into `output` at `rank * input.len()`.
    pub fn all_gather(&mut self, input: &[u8], output: &mut [u8]) -> PgResult<()> {
        self.run(|r| r.all_gather(input, output))
    }

    /// Reduces `input` (one block per rank) and keeps this rank's block in `output`.
    pub fn reduce_scatter(
        &mut self,
        input: &[u8],
        output: &mut [u8],
        dtype: DType,
        op: ReduceOp,
    ) -> PgResult<()> {
        self.run(|r| r.reduce_scatter(input, output, dtype, op))
    }

    /// All-to-all with per-rank byte counts (indexed by rank).
    pub fn all_to_all(
        &mut self,
        input: &[u8],
        send_counts: &[usize],
        output: &mut [u8],
        recv_counts: &[usize],
    ) -> PgResult<()> {
        self.run(|r| r.all_to_all(input, send_counts, output, recv_counts))
    }

    /// Every active rank's `input` into `root`'s `output` at `rank * input.len()`.
    pub fn gather(&mut self, input: &[u8], output: &mut [u8], root: usize) -> PgResult<()> {
        let root = self.member_index(root)?;
        self.run(|r| r.gather(input, output, root))
    }

    /// `root`'s `input` (one block per rank) scattered into every `output`.
    pub fn scatter(&mut self, input: &[u8], output: &mut [u8], root: usize) -> PgResult<()> {
        let root = self.member_index(root)?;
        self.run(|r| r.scatter(input, output, root))
    }

    /// Sends `data` to active rank `to` (matched in order by its `recv`).
    pub fn send(&mut self, data: &[u8], to: usize) -> PgResult<()> {
        self.peer_member(to)?;
        self.run(|r| r.send(data, to))
    }

    /// Receives exactly `buf.len()` bytes from active rank `from`.
    pub fn recv(&mut self, buf: &mut [u8], from: usize) -> PgResult<()> {
        self.peer_member(from)?;
        self.run(|r| r.recv(buf, from))
    }

    fn member_index(&self, rank: usize) -> PgResult<usize> {
        self.view
            .active
            .iter()
            .position(|&r| r == rank)
            .ok_or_else(|| PgError::invalid(format!("root rank {rank} is not an active member")))
    }

    fn peer_member(&self, rank: usize) -> PgResult<()> {
        if rank == self.rank {
            return Err(PgError::invalid(
                "a rank cannot send to or receive from itself",
            ));
        }
        self.member_index(rank).map(|_| ())
    }
}

/// How often a waiting operation looks for a membership change in the store.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Interrupts an operation when another rank started a membership change.
struct ChangeWatch<'a> {
    kv: &'a dyn Kv,
    key: &'a str,
    next: Instant,
}

impl Interrupt for ChangeWatch<'_> {
    fn check(&mut self) -> Option<PgError> {
        let now = Instant::now();
        if now < self.next {
            return None;
        }
        self.next = now + WATCH_EVERY;
        match self.kv.get(self.key) {
            Ok(Some(_)) => Some(PgError::new(
                PgErrorKind::MembershipChanged,
                "another rank started a membership change",
            )),
            _ => None,
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = self.kv.remove(&format!("{}ep/{}", self.prefix, self.rank));
    }
}
