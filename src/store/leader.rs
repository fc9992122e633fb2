//! Following the master leader named in etcd (or Redis): with `master_server_addr =
//! "etcd://ep1;ep2"` (or `"redis://host:port"`) the client reads the leader's `ip:port` from
//! `mooncake-store/<cluster_id>/master_view` (`MC_STORE_CLUSTER_ID`, default
//! `mooncake_cluster`; upstream's key and value), connects to it, watches the key, and
//! moves to a new leader when the view changes or the leader stops answering. A call
//! that meets a dead leader is retried on the next one within its own deadline
//! (`MC_RPC_TIMEOUT_MS`) instead of failing, so a failover is a pause, not an error.
//! Moving closes the connections to the old leader: calls hanging on one that stopped
//! without dying (SIGSTOP keeps its sockets open) fail at once and are sent again to
//! the new one, which a resumed old leader cannot contradict (it answers nothing once
//! its lease has lapsed). A call that timed out on a leader still in office is not
//! repeated (it may have been carried out).

use crate::metadata::etcd::EtcdMetadataStore;
use crate::metadata::redis::{RedisAuth, RedisMetadataStore};
use crate::metadata::MetadataStore;
use crate::wire::disk_tier_api::*;
use crate::wire::master_api::*;
use crate::wire::master_rpcs::{both_apis, master_rpcs};
use crate::wire::master_view::master_view_key;
use crate::wire::rpc_client::MasterRpcClient;
use parking_lot::{Mutex, RwLock};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How often the view is read while waiting for a leader.
const VIEW_POLL: Duration = Duration::from_millis(100);
/// How often the watcher checks the view for a change.
const WATCH_PERIOD: Duration = Duration::from_secs(1);

/// The `master_view` key of a cluster in etcd or Redis.
pub struct MasterView {
    store: Box<dyn MetadataStore>,
    key: String,
}

impl MasterView {
    /// The view of cluster `cluster_id` in the etcd at `endpoints` (`etcd://ep1;ep2`),
    /// or in Redis (`redis://host:port`, credentials from `MC_REDIS_*`).
    pub fn new(endpoints: &str, cluster_id: &str) -> Result<MasterView, ErrorCode> {
        let store: crate::error::Result<Box<dyn MetadataStore>> =
            if endpoints.starts_with("redis://") {
                RedisMetadataStore::new(endpoints, RedisAuth::from_env())
                    .map(|r| Box::new(r) as Box<dyn MetadataStore>)
            } else {
                EtcdMetadataStore::new(endpoints).map(|e| Box::new(e) as Box<dyn MetadataStore>)
            };
        let store = store.map_err(|e| {
            log::error!("store: master view in {endpoints}: {e}");
            ErrorCode::INVALID_PARAMS
        })?;
        Ok(MasterView {
            store,
            key: master_view_key(cluster_id),
        })
    }

    /// The current leader's `ip:port`, `None` while there is none (an election).
    pub fn leader(&self) -> Option<String> {
        match self.store.get(&self.key) {
            Ok(Some(v)) => {
                let addr = String::from_utf8_lossy(&v).trim().to_string();
                (!addr.is_empty()).then_some(addr)
            }
            Ok(None) => None,
            Err(e) => {
                log::warn!("store: reading the master view: {e}");
                None
            }
        }
    }

    /// Polls until a leader is named, or `deadline` passes.
    fn wait_for_leader(&self, deadline: Instant) -> Option<String> {
        loop {
            if let Some(addr) = self.leader() {
                return Some(addr);
            }
            if Instant::now() + VIEW_POLL > deadline {
                return None;
            }
            std::thread::sleep(VIEW_POLL);
        }
    }
}

/// A master client that follows the leader.
pub struct FollowingMaster {
    view: MasterView,
    rpc_timeout: Duration,
    connect_timeout: Duration,
    current: RwLock<(String, Arc<MasterRpcClient>)>,
    /// One switch at a time.
    switching: Mutex<()>,
    on_new_leader: RwLock<Option<OnNewLeader>>,
}

/// How long a probe of a silent leader waits for its answer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Whether the master at `addr` answers `ServiceReady` on a fresh connection within
/// [`PROBE_TIMEOUT`] (and before `deadline`). A connection alone proves nothing: the
/// kernel completes connects to a stopped (SIGSTOPped) process's listening socket.
fn answers(addr: &str, deadline: Instant) -> bool {
    let wait = PROBE_TIMEOUT.min(deadline.saturating_duration_since(Instant::now()));
    if wait.is_zero() {
        return false;
    }
    MasterRpcClient::new_unchecked(addr, wait, wait, 1)
        .service_ready()
        .is_ok()
}

/// Whether `e` says the master could not be reached (rather than answering no).
fn unreachable(e: ErrorCode) -> bool {
    e == ErrorCode::RPC_FAIL || e == ErrorCode::RPC_TIMEOUT
}

impl FollowingMaster {
    /// Finds the leader of `cluster_id` in the etcd at `endpoints` (waiting up to
    /// `connect_timeout` for an election) and connects to it; starts the watcher.
    pub fn connect(
        endpoints: &str,
        cluster_id: &str,
        rpc_timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Arc<FollowingMaster>, ErrorCode> {
        let view = MasterView::new(endpoints, cluster_id)?;
        let deadline = Instant::now() + connect_timeout;
        let (addr, client) = loop {
            let addr = view.wait_for_leader(deadline).ok_or_else(|| {
                log::error!("store: no master leader in {endpoints} (cluster {cluster_id})");
                ErrorCode::RPC_FAIL
            })?;
            match MasterRpcClient::connect(&addr, rpc_timeout, connect_timeout) {
                Ok(c) => break (addr, c),
                Err(e) if unreachable(e) && Instant::now() < deadline => {
                    std::thread::sleep(VIEW_POLL);
                }
                Err(e) => return Err(e),
            }
        };
        log::info!("store: master leader is {addr} (from {endpoints})");
        let master = Arc::new(FollowingMaster {
            view,
            rpc_timeout,
            connect_timeout,
            current: RwLock::new((addr, Arc::new(client))),
            switching: Mutex::new(()),
            on_new_leader: RwLock::new(None),
        });
        spawn_watcher(Arc::downgrade(&master));
        Ok(master)
    }

    /// The leader in use.
    pub fn leader(&self) -> String {
        self.current.read().0.clone()
    }

    /// Moves to the leader the view names now if it is not `from` and answers;
    /// returns whether the client in use changed (here or by another caller). The
    /// old leader's connections are closed: calls still waiting on it (a stopped
    /// process answers nothing, and its kernel keeps the connections open) fail at
    /// once and are sent to the new leader.
    fn follow_view(&self, from: &str) -> bool {
        let old = {
            let _one = self.switching.lock();
            if self.current.read().0 != from {
                return true;
            }
            match self.switch_to_view(from) {
                Some(old) => old,
                None => return false,
            }
        };
        old.close();
        true
    }

    /// [`FollowingMaster::follow_view`] under the switch lock: the client replaced.
    fn switch_to_view(&self, from: &str) -> Option<Arc<MasterRpcClient>> {
        let addr = self.view.leader().filter(|a| a != from)?;
        let client = match MasterRpcClient::connect(&addr, self.rpc_timeout, self.connect_timeout) {
            Ok(c) => c,
            Err(e) => {
                log::debug!("store: new master leader {addr} not reachable yet: {e}");
                return None;
            }
        };
        if let Some(hook) = self.on_new_leader.read().as_ref() {
            if let Err(e) = hook(&client) {
                log::warn!("store: preparing the new master leader {addr}: {e}");
                return None;
            }
        }
        log::warn!("store: master leader moved from {from} to {addr}");
        let (_, old) = std::mem::replace(&mut *self.current.write(), (addr, Arc::new(client)));
        Some(old)
    }

    /// Runs `f` on the leader. A leader that stops answering is waited out: the call
    /// goes to the next leader the view names, or to the same one once it answers
    /// again, until the call's deadline. A timeout on a leader that still answers is
    /// returned (the request may have been carried out).
    fn call<T>(&self, f: impl Fn(&MasterRpcClient) -> MasterResult<T>) -> MasterResult<T> {
        self.call_tracked(f).0
    }

    /// [`FollowingMaster::call`], also saying whether the call was sent again after a
    /// leader stopped answering (the first attempt may have been carried out).
    fn call_tracked<T>(
        &self,
        f: impl Fn(&MasterRpcClient) -> MasterResult<T>,
    ) -> (MasterResult<T>, bool) {
        let deadline = Instant::now() + self.rpc_timeout;
        let mut resent = false;
        'attempt: loop {
            let (addr, client) = self.current.read().clone();
            let e = match f(&client) {
                Err(e) if unreachable(e) => e,
                other => return (other, resent),
            };
            while Instant::now() < deadline {
                if self.follow_view(&addr) {
                    resent = true;
                    continue 'attempt;
                }
                if answers(&addr, deadline) {
                    if e == ErrorCode::RPC_FAIL {
                        resent = true;
                        continue 'attempt;
                    }
                    return (Err(e), resent);
                }
                std::thread::sleep(VIEW_POLL);
            }
            return (Err(e), resent);
        }
    }

    /// A PutStart sent again after a failover may find the object its first attempt
    /// created (replicated before the old leader died): the key "exists", yet nothing
    /// was written. That object is this client's unfinished put: revoke it and start
    /// again, so the put completes instead of being reported done with no data.
    fn restart_own_put(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        start: impl Fn() -> MasterResult<Vec<ReplicaDescriptor>>,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        match self.call(|m| m.put_revoke(client, key, ReplicaType::All, tenant)) {
            Ok(()) => start(),
            // Not ours, or already complete: the key really exists.
            Err(_) => Err(ErrorCode::OBJECT_ALREADY_EXISTS),
        }
    }
}

/// Reads the view every [`WATCH_PERIOD`] and moves to a new leader as soon as one is
/// named; ends with the client.
fn spawn_watcher(master: Weak<FollowingMaster>) {
    let spawned = std::thread::Builder::new()
        .name("mc-master-view".into())
        .spawn(move || loop {
            std::thread::sleep(WATCH_PERIOD);
            let Some(m) = master.upgrade() else { return };
            let current = m.leader();
            if m.view.leader().is_some_and(|named| named != current) {
                m.follow_view(&current);
            }
        });
    if let Err(e) = spawned {
        log::warn!("store: no master view watcher ({e}); failovers are found on errors");
    }
}

/// One row of the RPC table as a forwarded call: sent to the leader, or for a
/// `PutStart`, `BatchPutStart` or `Remove` through the care a resent request needs.
macro_rules! follow_row {
    ({ $(#[$doc:meta])* PutStart: $($rest:tt)* }) => {
        follow_row!(@special put_start_following { $($rest)* });
    };
    ({ $(#[$doc:meta])* BatchPutStart: $($rest:tt)* }) => {
        follow_row!(@special batch_put_start_following { $($rest)* });
    };
    ({ $(#[$doc:meta])* Remove: $($rest:tt)* }) => {
        follow_row!(@special remove_following { $($rest)* });
    };
    ({ $(#[$doc:meta])* $m:ident: $args:ty => $wret:ty; [$($kind:tt)*]
       fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; }) => {
        fn $name(&self $(, $arg: $ty)*) -> $ret {
            self.call(|m| m.$name($($arg),*))
        }
    };
    (@special $inherent:ident { $args:ty => $wret:ty; [$($kind:tt)*]
       fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; }) => {
        fn $name(&self $(, $arg: $ty)*) -> $ret {
            self.$inherent($($arg),*)
        }
    };
}

// The forwarder's half of the RPC table: both traits, each call to the leader.
master_rpcs!(both_apis FollowingMaster, follow_row, {
    fn on_new_leader(&self, hook: OnNewLeader) {
        *self.on_new_leader.write() = Some(hook);
    }
});

impl FollowingMaster {
    /// `PutStart` on the leader; an "already exists" after a resend is this client's
    /// own first attempt ([`FollowingMaster::restart_own_put`]).
    fn put_start_following(
        &self,
        client: Uuid,
        key: &str,
        len: u64,
        config: &ReplicateConfig,
        tenant: &str,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        let start = || self.call(|m| m.put_start(client, key, len, config, tenant));
        match self.call_tracked(|m| m.put_start(client, key, len, config, tenant)) {
            (Err(ErrorCode::OBJECT_ALREADY_EXISTS), true) => {
                self.restart_own_put(client, key, tenant, start)
            }
            (r, _) => r,
        }
    }

    /// `BatchPutStart` on the leader, each resent "already exists" handled as in
    /// [`FollowingMaster::put_start_following`].
    fn batch_put_start_following(
        &self,
        client: Uuid,
        keys: &[String],
        lens: &[u64],
        config: &ReplicateConfig,
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<Vec<ReplicaDescriptor>>>> {
        let (r, resent) =
            self.call_tracked(|m| m.batch_put_start(client, keys, lens, config, tenant));
        let mut results = r?;
        if resent {
            for (i, slot) in results.iter_mut().enumerate() {
                if *slot == Err(ErrorCode::OBJECT_ALREADY_EXISTS) {
                    let (key, len) = (&keys[i], lens.get(i).copied().unwrap_or(0));
                    *slot = self.restart_own_put(client, key, tenant, || {
                        self.call(|m| m.put_start(client, key, len, config, tenant))
                    });
                }
            }
        }
        Ok(results)
    }

    /// `Remove` on the leader; "not found" after a resend means the first attempt
    /// removed it.
    fn remove_following(&self, key: &str, force: bool, tenant: &str) -> MasterResult<()> {
        match self.call_tracked(|m| m.remove(key, force, tenant)) {
            (Err(ErrorCode::OBJECT_NOT_FOUND), true) => Ok(()),
            (r, _) => r,
        }
    }
}
