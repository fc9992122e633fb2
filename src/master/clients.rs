//! Client liveness (spec store.md §2.4): `MountSegment` and `Ping` set a deadline of
//! now + `client_ttl`; `Ping` answers OK only for clients marked OK by `ReMountSegment`
//! (so the first ping after a plain mount answers NEED_REMOUNT, as upstream does). The
//! monitor expires clients past their deadline: their segments are unmounted and every
//! replica on them is dropped; objects left without replicas are erased.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::MasterService;
use crate::wire::master_api::{ClientStatus, Uuid};

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Liveness deadline (ns), `None` while the client has not pinged or mounted since
    /// it last expired (then it is OK-marked only).
    deadline: Option<u64>,
    ok: bool,
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

    /// Sets `client`'s deadline to `now + ttl`.
    pub fn touch(&self, client: Uuid, now: u64, ttl: u64) {
        let mut inner = self.inner.lock();
        let e = inner.entry(client).or_insert(Entry {
            deadline: None,
            ok: false,
        });
        e.deadline = Some(now.saturating_add(ttl));
    }

    /// Marks `client` OK (after a remount).
    pub fn mark_ok(&self, client: Uuid) {
        let mut inner = self.inner.lock();
        let e = inner.entry(client).or_insert(Entry {
            deadline: None,
            ok: false,
        });
        if !e.ok {
            e.ok = true;
            self.ok_count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A heartbeat: refreshes the deadline and reports the client's status.
    pub fn ping(&self, client: Uuid, now: u64, ttl: u64) -> ClientStatus {
        let mut inner = self.inner.lock();
        let e = inner.entry(client).or_insert(Entry {
            deadline: None,
            ok: false,
        });
        e.deadline = Some(now.saturating_add(ttl));
        if e.ok {
            ClientStatus::Ok
        } else {
            ClientStatus::NeedRemount
        }
    }

    /// Removes and returns the clients whose deadline has passed.
    pub fn take_expired(&self, now: u64) -> Vec<Uuid> {
        let mut inner = self.inner.lock();
        let expired: Vec<Uuid> = inner
            .iter()
            .filter(|(_, e)| e.deadline.is_some_and(|d| d < now))
            .map(|(c, _)| *c)
            .collect();
        for c in &expired {
            if let Some(e) = inner.remove(c) {
                if e.ok {
                    self.ok_count.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        expired
    }

    /// Number of clients marked OK.
    pub fn ok_count(&self) -> usize {
        self.ok_count.load(Ordering::Relaxed)
    }
}

impl MasterService {
    /// One pass of the client monitor: expire clients past their deadline.
    pub(super) fn client_monitor_tick(&self) {
        let now = self.now();
        let expired = self.clients.take_expired(now);
        if expired.is_empty() {
            return;
        }
        let mut dead = 0;
        for client in &expired {
            let segs = self.segments.unmount_client(*client);
            for s in &segs {
                log::info!(
                    "client_id={client}, segment_name={}, action=unmount_expired_mem_segment",
                    s.segment.name
                );
            }
            dead += segs.len();
        }
        log::info!(
            "expired {} client(s), {dead} segment(s) unmounted",
            expired.len()
        );
        if dead > 0 {
            self.sweep_dead_replicas();
        }
    }

    /// Drops every replica whose segment is no longer mounted; objects left without
    /// replicas are erased (upstream `ClearInvalidHandles`).
    pub(super) fn sweep_dead_replicas(&self) {
        let mut freed = Vec::new();
        for i in 0..super::objects::NUM_SHARDS {
            let mut shard = self.objects.lock(i);
            shard.retain(
                None,
                |_, _, obj| {
                    if obj.replicas.iter().any(|r| !r.seg.is_alive()) {
                        obj.replicas.retain(|r| r.seg.is_alive());
                    }
                    !obj.replicas.is_empty()
                },
                &mut freed,
            );
        }
        // Replicas of erased objects on live segments (none here by construction, but
        // keep the accounting exact).
        self.segments.release(freed);
    }

    /// `BatchQueryIp`: for each known client, the distinct hosts of its segments'
    /// endpoints (clients without segments are left out).
    pub(super) fn batch_query_ip_impl(&self, clients: &[Uuid]) -> Vec<(Uuid, Vec<String>)> {
        let mut out: Vec<(Uuid, Vec<String>)> = Vec::new();
        for c in clients {
            if out.iter().any(|(seen, _)| seen == c) {
                continue;
            }
            let segs = self.segments.client_segments(*c);
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

/// Upstream's `getHostNameWithoutPort`: `[v6]:port` -> `v6`, else up to the last `:`.
fn host_without_port(ep: &str) -> String {
    if let Some(rest) = ep.strip_prefix('[') {
        if let Some((host, _)) = rest.split_once(']') {
            return host.to_string();
        }
    }
    match ep.rfind(':') {
        Some(i) => ep[..i].to_string(),
        None => ep.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::host_without_port;

    #[test]
    fn hosts() {
        assert_eq!(host_without_port("10.0.0.1:1234"), "10.0.0.1");
        assert_eq!(host_without_port("[::1]:80"), "::1");
        assert_eq!(host_without_port("localhost"), "localhost");
    }
}
