//! Master high availability (`--enable_ha`) and snapshots (`--enable_snapshot`).
//!
//! Election is upstream's: the leader holds `mooncake-store/<cluster_id>/master_view`
//! in etcd under a lease ([`election`]). Replication is ours: standbys do not read an
//! op log from etcd; each keeps a live copy of the leader's metadata, streamed from
//! the leader over TCP ([`stream`]) as records of whole objects and segments
//! ([`record`], [`mirror`]). Every RPC that changes metadata answers only after each
//! standby in sync (and the snapshot writer) has acknowledged the change ([`log`]),
//! so whatever a client was told is held by the next leader. A standby promoted
//! restores its copy into a fresh service ([`MasterService::restore`]) and serves at
//! once; standbys do not open the RPC port, as upstream.
//!
//! A leader that cannot renew its lease for longer than the lease's TTL stops serving
//! (closes its RPC port) until it can; if the lease is gone it becomes a standby.
//! Independently, every RPC is fenced by the lease ([`MasterService::serve_until`]):
//! a leader answers only until shortly before its lease could have expired, counted
//! on the monotonic clock from its last successful renewal, so one stopped (SIGSTOP)
//! past its lease answers nothing when it resumes, before its renewal thread notices.

pub(crate) mod changelog;
pub mod election;
pub mod mirror;
pub mod record;
pub mod snapshot;
pub(super) mod state;
pub mod stream;

use crate::master::admin::{self, AdminHandler};
use crate::master::admin_runtime::{RuntimeState, RuntimeView};
use crate::master::kv_events::KvEvents;
use crate::master::metadata_cleanup::MetadataCleanup;
use crate::master::rpc_server::{RpcLimits, RpcServer};
use crate::master::{MasterConfig, MasterService};
use crate::metadata::etcd::LeaseState;
use crate::runtime::http_server::{HttpHandler, HttpReply};
use election::{Election, Leader, Term};
use mirror::Mirror;
use parking_lot::RwLock;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Upstream's view-lease TTL is 5 s; ours is shorter so a failover takes less.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(3);
/// How often the view is polled while following or waiting.
const POLL: Duration = Duration::from_millis(100);

/// Why an HA master stopped: what it could not start, and where.
#[derive(Debug, thiserror::Error)]
pub enum HaError {
    /// The election backend (etcd or redis) could not be set up.
    #[error("HA backend {backend}: {source}")]
    Backend {
        /// The backend as given: etcd endpoints or `redis://host:port`.
        backend: String,
        /// What the backend said.
        source: crate::error::Error,
    },
    /// The leader's replication listener could not be bound.
    #[error("replication listener on {bind}: {source}")]
    ReplicationListener {
        /// Where it was to listen.
        bind: SocketAddr,
        /// The bind error.
        source: io::Error,
    },
    /// The leader's RPC server could not be started.
    #[error("master RPC on {bind}: {source}")]
    Rpc {
        /// Where it was to listen.
        bind: SocketAddr,
        /// The bind error.
        source: io::Error,
    },
    /// The leader's snapshot writer could not be started.
    #[error("snapshot in {}: {source}", dir.display())]
    Snapshot {
        /// `--snapshot_backup_dir`.
        dir: PathBuf,
        /// The file-system error.
        source: io::Error,
    },
}

/// What an HA master needs beyond the service configuration.
#[derive(Debug, Clone)]
pub struct HaSettings {
    /// Where the election runs: etcd endpoints (`h1:2379,h2:2379`) or
    /// `redis://host:port`.
    pub backend: String,
    /// `--cluster_id` (default `mooncake_cluster`).
    pub cluster_id: String,
    /// Where the RPC server binds when leading.
    pub rpc_bind: SocketAddr,
    /// The `ip:port` clients are told (the view's value).
    pub rpc_advertised: String,
    /// Lease TTL (whole seconds).
    pub lease_ttl: Duration,
    /// `--rpc_conn_timeout_seconds`, `--rpc_max_connections[_per_peer]`.
    pub rpc_limits: RpcLimits,
    /// `--snapshot_backup_dir` when `--enable_snapshot`: the leader keeps a snapshot
    /// (and its point-in-time copies).
    pub snapshot: Option<snapshot::SnapshotPlan>,
}

/// A master's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Not yet part of the cluster.
    Starting,
    /// Copying the leader's metadata.
    Standby,
    /// Serving.
    Leader,
    /// The leader, not serving while its lease cannot be renewed.
    Suspended,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Starting => "starting",
            Role::Standby => "standby",
            Role::Leader => "leader",
            Role::Suspended => "suspended",
        }
    }
}

#[derive(Default)]
struct StatusInner {
    role: Option<Role>,
    leader: Option<String>,
    view_version: Option<i64>,
    master: Option<Arc<MasterService>>,
    /// A standby holding a whole, current copy of the leader's metadata.
    in_sync: bool,
}

/// The HA state shared with the admin service.
#[derive(Default)]
pub struct HaStatus(RwLock<StatusInner>);

impl HaStatus {
    /// The current role.
    pub fn role(&self) -> Role {
        self.0.read().role.unwrap_or(Role::Starting)
    }

    /// The service while leading.
    pub fn master(&self) -> Option<Arc<MasterService>> {
        self.0.read().master.clone()
    }

    /// The leader's RPC address as last seen.
    pub fn leader(&self) -> Option<String> {
        self.0.read().leader.clone()
    }

    fn set_in_sync(&self, in_sync: bool) {
        self.0.write().in_sync = in_sync;
    }

    fn set(&self, role: Role, leader: Option<String>, master: Option<Arc<MasterService>>) {
        let mut s = self.0.write();
        if s.role != Some(role) || s.leader != leader {
            log::info!(
                "master ha: {} (leader {})",
                role.name(),
                leader.as_deref().unwrap_or("none")
            );
        }
        s.role = Some(role);
        s.leader = leader;
        s.in_sync = false;
        if role != Role::Leader && role != Role::Suspended {
            s.view_version = None;
        }
        s.master = master;
    }
}

/// The admin HTTP service of an HA master: `/health`, `/role`, `/ha_status` and
/// `/leader` tell its runtime state in upstream's words (a leader whose lease cannot
/// be renewed is a `candidate`), and `/kv_events/status` the process's KV-event
/// publisher (published to while leading); everything else is the leader's admin
/// service, 503 elsewhere.
pub struct HaAdminHandler(pub Arc<HaStatus>, pub Arc<KvEvents>);

impl HttpHandler for HaAdminHandler {
    fn handle(&self, method: &str, target: &str, body: &[u8]) -> HttpReply {
        let path = target.split_once('?').map_or(target, |(p, _)| p);
        if path == "/kv_events/status" && method == "GET" {
            return admin::kv_events_status(&self.1);
        }
        let master = self.0.master();
        // A leader whose serving time ran out (its lease not renewed) answers nothing:
        // it says so before its renewal attempt gives up.
        let role = match (self.0.role(), &master) {
            (Role::Leader, Some(m)) if !m.is_serving() => Role::Suspended,
            (role, _) => role,
        };
        if method == "GET" {
            let s = self.0 .0.read();
            let serving = role == Role::Leader && master.is_some();
            let view = RuntimeView {
                state: match role {
                    Role::Starting => RuntimeState::Starting,
                    Role::Standby => RuntimeState::Standby,
                    Role::Leader if serving => RuntimeState::Serving,
                    Role::Leader | Role::Suspended => RuntimeState::Candidate,
                },
                leader: s.leader.clone(),
                view_version: s.view_version,
                in_sync: Some(serving || s.in_sync),
            };
            if let Some(reply) = view.route(path) {
                return reply;
            }
        }
        match master {
            Some(m) if role == Role::Leader => AdminHandler(m).handle(method, target, body),
            _ => HttpReply::text(503, &format!("this master is {}", role.name())),
        }
    }
}

/// How a term as leader ended.
enum TermEnd {
    /// Another master holds the view.
    NotElected,
    /// The lease was lost; the state as it was then.
    Lost(Mirror),
    /// Asked to stop.
    Stopped,
}

/// Runs an HA master until `stop` returns true: follows the leader as a standby,
/// campaigns when there is none, serves while leading. `initial` is the state to lead
/// with if elected before following anyone (a snapshot, or empty). Only a leading
/// master announces KV events to `kv_events` (a standby copying the leader's state,
/// or a promotion restoring it, announces nothing). While leading, expired clients'
/// metadata is removed with `metadata_cleanup`, if given.
pub fn run(
    settings: &HaSettings,
    config: &MasterConfig,
    kv_events: &Arc<KvEvents>,
    status: &HaStatus,
    initial: Mirror,
    metadata_cleanup: Option<&Arc<MetadataCleanup>>,
    stop: &dyn Fn() -> bool,
) -> Result<(), HaError> {
    let election = Election::new(&settings.backend, &settings.cluster_id, settings.lease_ttl)
        .map_err(|source| HaError::Backend {
            backend: settings.backend.clone(),
            source,
        })?;
    let node = Node {
        election,
        settings,
        config,
        kv_events,
        status,
        metadata_cleanup,
        stop,
    };
    node.run(initial)
}

/// One HA master from start to stop: its election and what it serves with.
struct Node<'a> {
    election: Election,
    settings: &'a HaSettings,
    config: &'a MasterConfig,
    kv_events: &'a Arc<KvEvents>,
    status: &'a HaStatus,
    /// Where a leader removes expired clients' metadata, if anywhere.
    metadata_cleanup: Option<&'a Arc<MetadataCleanup>>,
    stop: &'a dyn Fn() -> bool,
}

impl Node<'_> {
    /// [`run`] with the election set up.
    fn run(&self, initial: Mirror) -> Result<(), HaError> {
        let mut mirror = initial;
        // Whether this master may lead with what it holds: it has a whole copy, or it has
        // never seen another leader (a new cluster).
        let mut fresh = true;
        let mut leaderless_since: Option<Instant> = None;
        self.status.set(Role::Starting, None, None);
        while !(self.stop)() {
            let leader = match self.election.leader() {
                Ok(l) => l,
                Err(e) => {
                    log::warn!("master ha: reading the view: {e}");
                    std::thread::sleep(POLL);
                    continue;
                }
            };
            match leader {
                Some(l) if l.rpc == self.settings.rpc_advertised => {
                    // Our own view from before a restart: wait for its lease to expire.
                    self.status.set(Role::Standby, Some(l.rpc), None);
                    std::thread::sleep(POLL);
                }
                Some(l) => {
                    leaderless_since = None;
                    self.status.set(Role::Standby, Some(l.rpc.clone()), None);
                    self.follow_leader(&l, &mut mirror, &mut fresh);
                }
                None => {
                    let since = *leaderless_since.get_or_insert_with(Instant::now);
                    let waited_out = since.elapsed() > 3 * self.election.ttl();
                    if !(fresh || mirror.complete || waited_out) {
                        std::thread::sleep(POLL);
                        continue;
                    }
                    if waited_out && !(fresh || mirror.complete) {
                        log::error!(
                            "master ha: no leader for {:?} and no complete copy here; \
                             leading with a partial one",
                            since.elapsed()
                        );
                    }
                    match self.lead(&mirror)? {
                        TermEnd::NotElected => std::thread::sleep(POLL),
                        TermEnd::Lost(state) => {
                            mirror = state;
                            fresh = false;
                            leaderless_since = None;
                            self.status.set(Role::Standby, None, None);
                        }
                        TermEnd::Stopped => return Ok(()),
                    }
                }
            }
        }
        Ok(())
    }

    /// Streams the leader's state into `mirror` until the stream ends. A stream starts
    /// with a full dump: once that has arrived the copy replaces `mirror`; a stream that
    /// breaks before leaves `mirror` marked incomplete (it may have missed changes), and
    /// an unreachable leader leaves it as it was (the copy is as current as the leader).
    fn follow_leader(&self, leader: &Leader, mirror: &mut Mirror, fresh: &mut bool) {
        let Some(addr) = &leader.replication else {
            // An upstream leader: nothing to copy from.
            std::thread::sleep(POLL * 5);
            return;
        };
        let mut copy = Mirror::default();
        // The stream alone cannot tell that the view moved on: a leader cut off from
        // etcd but not from this standby keeps streaming after its lease expired. A
        // watcher re-reads the view every third of the TTL (on its own thread, so a
        // slow etcd never holds up the stream and the leader's writes waiting on it).
        let moved_on = AtomicBool::new(false);
        let following = AtomicBool::new(true);
        let end = std::thread::scope(|scope| {
            let election = &self.election;
            scope.spawn(|| watch_view(election, leader, &following, &moved_on));
            let end = stream::follow(addr, &mut copy, &|m| {
                self.status.set_in_sync(m.complete);
                !(self.stop)() && !moved_on.load(Ordering::Acquire)
            });
            following.store(false, Ordering::Release);
            end
        });
        if moved_on.load(Ordering::Acquire) {
            log::warn!(
                "master ha: the view no longer names {} as leader; leaving its stream",
                leader.rpc
            );
        }
        self.status.set_in_sync(false);
        if copy.complete {
            *mirror = copy;
            *fresh = false;
        } else if !matches!(end, stream::StreamEnd::Unreachable(_)) {
            mirror.complete = false;
            *fresh = false;
        }
        match end {
            stream::StreamEnd::Unreachable(e) | stream::StreamEnd::Lost(e) => {
                log::debug!("master ha: stream from {addr}: {e}");
                std::thread::sleep(POLL);
            }
            stream::StreamEnd::Corrupt => {
                log::error!("master ha: the stream from {addr} is corrupt; reconnecting");
                std::thread::sleep(POLL);
            }
            stream::StreamEnd::Stopped => {}
        }
    }

    /// Campaigns with `state`; when elected, serves until the lease is lost or `stop`.
    fn lead(&self, state: &Mirror) -> Result<TermEnd, HaError> {
        let master = MasterService::with_kv_events(self.config.clone(), self.kv_events.clone());
        if let Some(cleanup) = self.metadata_cleanup {
            master.set_metadata_cleanup(cleanup.clone());
        }
        // Nothing is answered before the lease is held.
        master.serve_until(Instant::now());
        let restored = master.restore(state);
        let repl_bind = SocketAddr::new(self.settings.rpc_bind.ip(), 0);
        let replication =
            stream::ReplicationServer::start(repl_bind, &master).map_err(|source| {
                HaError::ReplicationListener {
                    bind: repl_bind,
                    source,
                }
            })?;
        let repl_addr = format!(
            "{}:{}",
            advertised_host(&self.settings.rpc_advertised),
            replication.local_addr().port()
        );
        // The RPC port is open before the view names it: upstream clients watching the
        // view connect the moment it changes, and one refused waits for its next resync.
        let rpc = start_rpc(self.settings, &master)?;
        let asked = Instant::now();
        let term = match self
            .election
            .campaign(&self.settings.rpc_advertised, &repl_addr)
        {
            Ok(Some(t)) => {
                // Subscribers learn the new term, and what it holds, before any of its
                // own events.
                master.announce_term(t.revision);
                master.serve_until(asked + serving_span(self.election.ttl()));
                t
            }
            Ok(None) => {
                drop(rpc);
                master.shutdown();
                return Ok(TermEnd::NotElected);
            }
            Err(e) => {
                log::warn!("master ha: campaign: {e}");
                drop(rpc);
                master.shutdown();
                return Ok(TermEnd::NotElected);
            }
        };
        master.set_view_version(term.revision);
        log::warn!(
            "master ha: elected leader as {} (view version {}), {restored} objects restored",
            self.settings.rpc_advertised,
            term.revision
        );
        let _snapshot = match &self.settings.snapshot {
            Some(plan) => Some(snapshot::SnapshotWriter::start(plan, &master).map_err(
                |source| HaError::Snapshot {
                    dir: plan.dir.clone(),
                    source,
                },
            )?),
            None => None,
        };
        let end = self.serve_term(&master, &term, rpc);
        drop(replication);
        let end = match end {
            Ok(TermEnd::Lost(_)) => TermEnd::Lost(snapshot::copy_of(&master)),
            other => other?,
        };
        master.shutdown();
        Ok(end)
    }

    /// Serves RPCs (on `rpc`) and renews the lease every third of its TTL.
    fn serve_term(
        &self,
        master: &Arc<MasterService>,
        term: &Term,
        rpc: RpcServer,
    ) -> Result<TermEnd, HaError> {
        let mut rpc = Some(rpc);
        {
            let mut s = self.status.0.write();
            s.view_version = Some(term.revision);
        }
        self.status.set(
            Role::Leader,
            Some(self.settings.rpc_advertised.clone()),
            Some(master.clone()),
        );
        let renew_every = self.election.ttl() / 3;
        let mut last_renewed = Instant::now();
        let mut next_renewal = Instant::now() + renew_every;
        loop {
            if (self.stop)() {
                master.serve_until(Instant::now());
                drop(rpc);
                self.election.resign(term);
                return Ok(TermEnd::Stopped);
            }
            if Instant::now() < next_renewal {
                std::thread::sleep(POLL.min(renew_every));
                continue;
            }
            next_renewal = Instant::now() + renew_every;
            let asked = Instant::now();
            match self.election.keep_alive(term) {
                Ok(LeaseState::Alive(_)) => {
                    master.serve_until(asked + serving_span(self.election.ttl()));
                    last_renewed = Instant::now();
                    if rpc.is_none() {
                        log::warn!("master ha: lease renewed; serving again");
                        rpc = Some(start_rpc(self.settings, master)?);
                        self.status.set(
                            Role::Leader,
                            Some(self.settings.rpc_advertised.clone()),
                            Some(master.clone()),
                        );
                    }
                }
                Ok(LeaseState::Gone) => {
                    log::error!("master ha: the leader lease is gone; stepping down");
                    master.serve_until(Instant::now());
                    drop(rpc);
                    return Ok(TermEnd::Lost(Mirror::default()));
                }
                Err(e) => {
                    let silent = last_renewed.elapsed();
                    // Another master may be elected once the TTL has passed since the
                    // last renewal: self.stop serving a little before.
                    if rpc.is_some() && silent + renew_every >= self.election.ttl() {
                        log::error!(
                            "master ha: lease not renewed for {silent:?} ({e}); not serving \
                             until it is"
                        );
                        rpc = None;
                        self.status.set(
                            Role::Suspended,
                            Some(self.settings.rpc_advertised.clone()),
                            None,
                        );
                    } else {
                        log::warn!("master ha: renewing the lease: {e}");
                    }
                    next_renewal = Instant::now() + POLL * 2;
                }
            }
        }
    }
}

/// While `following`, re-reads the view every third of the TTL and sets `moved_on`
/// once it names no leader or another one than `leader` (an unreadable view
/// changes nothing: without etcd this standby could not campaign anyway).
fn watch_view(election: &Election, leader: &Leader, following: &AtomicBool, moved_on: &AtomicBool) {
    let every = election.ttl() / 3;
    let mut next = Instant::now() + every;
    while following.load(Ordering::Acquire) {
        if Instant::now() < next {
            std::thread::sleep(POLL.min(every));
            continue;
        }
        next = Instant::now() + every;
        match election.leader() {
            Ok(Some(l)) if l == *leader => {}
            Ok(_) => {
                moved_on.store(true, Ordering::Release);
                return;
            }
            Err(e) => log::debug!("master ha: reading the view while following: {e}"),
        }
    }
}

/// How long after asking for its lease (or a renewal) a leader answers RPCs: the
/// lease cannot expire sooner than its TTL after it was asked for; half a renewal
/// period less, for margin. A leader paused past this answers nothing when it resumes.
fn serving_span(ttl: Duration) -> Duration {
    ttl.saturating_sub(ttl / 6)
}

fn advertised_host(addr: &str) -> &str {
    addr.rsplit_once(':').map_or(addr, |(h, _)| h)
}

/// The leader's RPC server.
fn start_rpc(settings: &HaSettings, master: &Arc<MasterService>) -> Result<RpcServer, HaError> {
    RpcServer::start_with_events(
        settings.rpc_bind,
        master.clone(),
        Some(master.clone()),
        settings.rpc_limits,
    )
    .map_err(|source| HaError::Rpc {
        bind: settings.rpc_bind,
        source,
    })
}
