//! Client liveness (spec store.md §2.4): `MountSegment` and `Ping` set a deadline of
//! now + `client_ttl`; `Ping` answers OK only for clients marked OK by `ReMountSegment`
//! (so the first ping after a plain mount answers NEED_REMOUNT, as upstream does). The
//! monitor expires clients past their deadline: their segments and local disk are
//! unmounted and every replica on them is dropped; objects left without replicas are
//! erased.
//!
//! Beyond upstream, the RPC server reports which connections carry a client's pings and
//! mounts ([`Liveness::client_connected`]). When the last of them is closed or
//! reset by the peer — the owner process died, its kernel closed its sockets — its
//! segments become unreachable at once: no new allocations there, and their replicas
//! are no longer handed to readers (who then see -704, not transfer failures). A ping
//! (over a new connection) makes them reachable again; a client still without a
//! connection after [`DISCONNECT_GRACE`] is expired like one past its TTL.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use super::metadata_cleanup::MetadataCleanup;
use super::offload::DiskTier;
use super::tables::{dur_ns, Tables};
use crate::host::addr::host_without_port;
use crate::wire::master_api::{ClientStatus, Uuid, DEFAULT_RPC_TIMEOUT};

/// How long a client whose connections are all gone keeps its segments (unreachable)
/// before it is expired; a live client reconnects with its next ping (every second).
pub const DISCONNECT_GRACE: Duration = Duration::from_secs(3);

/// What a restored client (a promoted standby's, a snapshot restart's) gets beyond
/// `client_ttl` to reach this master before it expires: a client whose calls hang on a
/// paused old leader moves here only when they fail, after at most one call deadline.
pub const RESTORED_CLIENT_GRACE: Duration = DEFAULT_RPC_TIMEOUT;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    /// Liveness deadline (ns), `None` while the client has not pinged or mounted since
    /// it last expired (then it is OK-marked only).
    deadline: Option<u64>,
    ok: bool,
    /// Open RPC connections that carried its pings or mounts.
    connections: u32,
    /// When the peer closed the last of them (ns), while no new one came.
    lost_at: Option<u64>,
}

/// The liveness table.
pub(crate) struct Clients {
    inner: Mutex<HashMap<Uuid, Entry>>,
    ok_count: AtomicUsize,
}

impl Clients {
    /// An empty table.
    pub fn new() -> Clients {
        Clients {
            inner: Mutex::new(HashMap::new()),
            ok_count: AtomicUsize::new(0),
        }
    }

    /// Moves `client`'s deadline to `now + ttl` unless it is later already (a
    /// restored client keeps its grace, see [`RESTORED_CLIENT_GRACE`]).
    pub fn touch(&self, client: Uuid, now: u64, ttl: u64) {
        let mut inner = self.inner.lock();
        let e = inner.entry(client).or_default();
        let until = now.saturating_add(ttl);
        e.deadline = Some(e.deadline.map_or(until, |d| d.max(until)));
    }

    /// Marks `client` OK (after a remount).
    pub fn mark_ok(&self, client: Uuid) {
        let mut inner = self.inner.lock();
        let e = inner.entry(client).or_default();
        if !e.ok {
            e.ok = true;
            self.ok_count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A heartbeat: refreshes the deadline and reports the client's status.
    pub fn ping(&self, client: Uuid, now: u64, ttl: u64) -> ClientStatus {
        let mut inner = self.inner.lock();
        let e = inner.entry(client).or_default();
        e.deadline = Some(now.saturating_add(ttl));
        if e.ok {
            ClientStatus::Ok
        } else {
            ClientStatus::NeedRemount
        }
    }

    /// A connection carries `client`; true if the client had been lost (all its
    /// connections closed by the peer) and is back.
    pub fn connected(&self, client: Uuid) -> bool {
        let mut inner = self.inner.lock();
        let e = inner.entry(client).or_default();
        e.connections = e.connections.saturating_add(1);
        e.lost_at.take().is_some()
    }

    /// A connection that carried `client` ended; `peer_gone` when the peer closed or
    /// reset it. True if that was its last connection and the peer is gone: the
    /// client is now lost (since `now`).
    pub fn disconnected(&self, client: Uuid, peer_gone: bool, now: u64) -> bool {
        let mut inner = self.inner.lock();
        let Some(e) = inner.get_mut(&client) else {
            return false;
        };
        e.connections = e.connections.saturating_sub(1);
        if e.connections == 0 && peer_gone && e.lost_at.is_none() {
            e.lost_at = Some(now);
            return true;
        }
        false
    }

    /// Removes and returns the clients whose deadline has passed or that have been
    /// lost for longer than `grace` (ns).
    pub fn take_expired(&self, now: u64, grace: u64) -> Vec<Uuid> {
        let mut inner = self.inner.lock();
        let expired: Vec<Uuid> = inner
            .iter()
            .filter(|(_, e)| {
                e.deadline.is_some_and(|d| d < now)
                    || e.lost_at.is_some_and(|t| t.saturating_add(grace) < now)
            })
            .map(|(c, _)| *c)
            .collect();
        for c in &expired {
            let Some(e) = inner.get_mut(c) else { continue };
            if e.ok {
                self.ok_count.fetch_sub(1, Ordering::Relaxed);
            }
            if e.connections == 0 {
                inner.remove(c);
            } else {
                // Forget its state, but keep counting the connections still open.
                *e = Entry {
                    connections: e.connections,
                    ..Entry::default()
                };
            }
        }
        expired
    }

    /// Number of clients marked OK.
    pub fn ok_count(&self) -> usize {
        self.ok_count.load(Ordering::Relaxed)
    }
}

/// Client liveness: the table, and what an expired or lost client takes with it.
pub(super) struct Liveness {
    t: Arc<Tables>,
    disk: Arc<DiskTier>,
    /// Who is alive, until when.
    pub(super) clients: Clients,
    /// Where an expired client's Transfer Engine metadata is removed, if anywhere.
    pub(super) metadata_cleanup: OnceLock<Arc<MetadataCleanup>>,
}

impl Liveness {
    /// No client known yet.
    pub fn new(t: Arc<Tables>, disk: Arc<DiskTier>) -> Liveness {
        Liveness {
            t,
            disk,
            clients: Clients::new(),
            metadata_cleanup: OnceLock::new(),
        }
    }

    /// One pass of the client monitor: expire clients past their deadline or lost for
    /// longer than the grace period. A master not serving (an HA leader past its
    /// lease) expires no one: it cannot hear their pings.
    pub(super) fn monitor_tick(&self) {
        if !self.t.is_serving() {
            return;
        }
        let now = self.t.now();
        let grace = dur_ns(DISCONNECT_GRACE.min(self.t.config.client_ttl));
        let expired = self.clients.take_expired(now, grace);
        if expired.is_empty() {
            return;
        }
        let mut dead = 0;
        for client in &expired {
            self.disk.unmount_local_disk(*client);
            let segs = self.t.segments.unmount_client(*client);
            for s in &segs {
                log::info!(
                    "client_id={client}, segment_name={}, action=unmount_expired_mem_segment",
                    s.segment.name
                );
                if let Some(cleanup) = self.metadata_cleanup.get() {
                    let (t, name) = (self.t.clone(), s.segment.name.clone());
                    let still_gone = Box::new(move || t.segments.named(&name).is_none());
                    cleanup.segment_expired(&s.segment.name, still_gone);
                }
            }
            dead += segs.len();
        }
        log::info!(
            "expired {} client(s), {dead} segment(s) unmounted",
            expired.len()
        );
        if dead > 0 {
            self.t.sweep_dead_replicas();
        }
    }

    /// A connection of the RPC server carries `client` (it pinged or mounted over it):
    /// a lost client is reachable again.
    pub(super) fn client_connected(&self, client: Uuid) {
        if self.clients.connected(client) {
            let n = self.t.segments.set_client_reachable(client, true);
            log::info!("client_id={client}: reconnected; {n} segment(s) reachable again");
        }
    }

    /// A connection that carried `client` ended (`peer_gone`: closed or reset by the
    /// peer, not by this master). When it was the client's last, its segments take no
    /// allocations and serve no reads until it pings again, and it expires after
    /// [`DISCONNECT_GRACE`] unless it does.
    pub(super) fn client_disconnected(&self, client: Uuid, peer_gone: bool) {
        if self.clients.disconnected(client, peer_gone, self.t.now()) {
            let n = self.t.segments.set_client_reachable(client, false);
            if n > 0 {
                log::info!(
                    "client_id={client}: every connection closed by the peer; {n} segment(s) \
                     unreachable until it pings again"
                );
            }
        }
    }

    /// `BatchQueryIp`: for each known client, the distinct hosts of its segments'
    /// endpoints (clients without segments are left out).
    pub(super) fn batch_query_ip_impl(&self, clients: &[Uuid]) -> Vec<(Uuid, Vec<String>)> {
        let mut out: Vec<(Uuid, Vec<String>)> = Vec::new();
        for c in clients {
            if out.iter().any(|(seen, _)| seen == c) {
                continue;
            }
            let segs = self.t.segments.client_segments(*c);
            if segs.is_empty() {
                continue;
            }
            let mut ips: Vec<String> = Vec::new();
            for s in segs {
                let ep = if s.te_endpoint.is_empty() {
                    &s.name
                } else {
                    &s.te_endpoint
                };
                if ep.is_empty() {
                    continue;
                }
                let host = host_without_port(ep);
                if !ips.contains(&host) {
                    ips.push(host);
                }
            }
            out.push((*c, ips));
        }
        out
    }
}
