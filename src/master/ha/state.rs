//! The master's side of replication: attaching a follower (a full dump, then every
//! change) and restoring the tables from a [`Mirror`] (promotion, snapshot restart).

use super::changelog::FollowerHandle;
use super::mirror::Mirror;
use super::record::{ObjectState, Record};
use crate::master::clients::{Clients, RESTORED_CLIENT_GRACE};
use crate::master::local_disk::{DiskReplica, LocalDisks};
use crate::master::object::Object;
use crate::master::replica::{Replica, Replicas};
use crate::master::segments::Buffer;
use crate::master::tables::{dur_ns, Tables};
use crate::wire::master_api::Uuid;
use std::collections::HashMap;

/// A replica's buffer (address, size) and where it belongs: (object, replica) indexes.
type PlacedRange = ((u64, u64), usize, usize);

/// Attaches a follower to `t`: it receives a full dump of segments and objects, then
/// every change. The dump is taken under the same locks as changes, so applying
/// everything in order yields the current state.
pub(in crate::master) fn attach_follower(t: &Tables) -> FollowerHandle {
    let handle = t.log.attach();
    t.segments.dump();
    t.objects.dump();
    t.log.append(&Record::DumpDone);
    handle.dump_queued();
    handle
}

/// Loads `mirror` into the (empty) tables `t`: its segments mounted with the
/// replicas' buffers allocated where they were, every object with its replicas
/// (disk copies on their clients' disks, mounted again until those clients expire),
/// a fresh read lease on each, and the segment owners' liveness clocks started
/// with `client_ttl` plus `RESTORED_CLIENT_GRACE` (30 s) to find this master.
/// Replicas whose buffer overlaps another or lies outside its segment are dropped
/// (an object left with none is not restored). Returns the number of objects.
pub(in crate::master) fn restore(
    t: &Tables,
    clients: &Clients,
    disks: &LocalDisks,
    mirror: &Mirror,
) -> usize {
    let now = t.now();
    let client_ttl = t
        .client_ttl_ns
        .saturating_add(dur_ns(RESTORED_CLIENT_GRACE));
    // (segment) -> the (address, size) of each replica on it and whose it is.
    let mut on_segment: HashMap<Uuid, Vec<PlacedRange>> = HashMap::new();
    let objects: Vec<(&(String, String), &ObjectState)> = mirror.objects.iter().collect();
    for (oi, (_, state)) in objects.iter().enumerate() {
        for (ri, r) in state.replicas.iter().enumerate() {
            on_segment
                .entry(r.segment)
                .or_default()
                .push(((r.addr, r.size), oi, ri));
        }
    }
    let mut buffers: HashMap<(usize, usize), Buffer> = HashMap::new();
    for (id, (segment, client)) in &mirror.segments {
        let replicas = on_segment.remove(id).unwrap_or_default();
        let ranges: Vec<(u64, u64)> = replicas.iter().map(|(r, _, _)| *r).collect();
        match t.segments.mount_restored(segment, *client, &ranges) {
            Ok(bufs) => {
                for ((_, oi, ri), buf) in replicas.iter().zip(bufs) {
                    match buf {
                        Some(b) => {
                            buffers.insert((*oi, *ri), b);
                        }
                        None => log::warn!(
                            "master: restoring '{}': a replica overlaps another; dropped",
                            objects[*oi].0 .1
                        ),
                    }
                }
            }
            Err(e) => log::warn!("master: restoring segment '{}': {e}", segment.name),
        }
        clients.touch(*client, now, client_ttl);
    }
    let mut max_id = 0;
    let mut restored = 0;
    for (oi, ((tenant, key), state)) in objects.iter().enumerate() {
        let replicas: Replicas = state
            .replicas
            .iter()
            .enumerate()
            .filter_map(|(ri, r)| {
                let buf = buffers.remove(&(oi, ri))?;
                max_id = max_id.max(r.id);
                Some(Replica::new(r.id, r.status, buf))
            })
            .collect();
        let mut o = Object::from_state(state, replicas, now);
        for d in &state.disk_replicas {
            max_id = max_id.max(d.id);
            clients.touch(d.client, now, client_ttl);
            o.add_disk_replica(DiskReplica {
                id: d.id,
                disk: disks.restored(d.client),
                size: d.size,
                endpoint: d.endpoint.as_str().into(),
            });
        }
        if o.is_empty() {
            continue;
        }
        o.grant_lease(now, t.lease_ns);
        t.objects.lock_key(tenant, key).insert(tenant, key, o);
        restored += 1;
    }
    t.replica_ids_above(max_id);
    restored
}

#[cfg(test)]
#[path = "state_tests.rs"]
pub(super) mod tests;
