//! The master's side of replication: attaching a follower (a full dump, then every
//! change) and restoring a service from a [`Mirror`] (promotion, snapshot restart).

use super::changelog::FollowerHandle;
use super::mirror::Mirror;
use super::record::Record;
use crate::master::objects::{Object, Replica, Replicas};
use crate::master::MasterService;
use crate::wire::master_api::Uuid;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// A replica's buffer (address, size) and where it belongs: (object, replica) indexes.
type PlacedRange = ((u64, u64), usize, usize);

impl MasterService {
    /// Attaches a follower: it receives a full dump of segments and objects, then
    /// every change. The dump is taken under the same locks as changes, so applying
    /// everything in order yields the current state.
    pub(crate) fn attach_follower(&self) -> FollowerHandle {
        let handle = self.log.attach();
        self.segments.dump();
        self.objects.dump();
        self.log.append(&Record::DumpDone);
        handle.dump_queued();
        handle
    }

    /// Loads `mirror` into this (empty) service: its segments mounted with the
    /// replicas' buffers allocated where they were, every object with its replicas,
    /// a fresh read lease on each, and the segment owners' liveness clocks started.
    /// Replicas whose buffer overlaps another or lies outside its segment are dropped
    /// (an object left with none is not restored). Returns the number of objects.
    pub fn restore(&self, mirror: &Mirror) -> usize {
        let now = self.now();
        // (segment) -> the (address, size) of each replica on it and whose it is.
        let mut on_segment: HashMap<Uuid, Vec<PlacedRange>> = HashMap::new();
        let objects: Vec<(&(String, String), &super::record::ObjectState)> =
            mirror.objects.iter().collect();
        for (oi, (_, state)) in objects.iter().enumerate() {
            for (ri, r) in state.replicas.iter().enumerate() {
                on_segment
                    .entry(r.segment)
                    .or_default()
                    .push(((r.addr, r.size), oi, ri));
            }
        }
        let mut buffers: HashMap<(usize, usize), crate::master::segments::Buffer> = HashMap::new();
        for (id, (segment, client)) in &mirror.segments {
            let replicas = on_segment.remove(id).unwrap_or_default();
            let ranges: Vec<(u64, u64)> = replicas.iter().map(|(r, _, _)| *r).collect();
            match self.segments.mount_restored(segment, *client, &ranges) {
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
            self.clients.touch(*client, now, self.client_ttl_ns);
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
            if replicas.is_empty() {
                continue;
            }
            let mut o = Object::from_state(state, replicas, now);
            o.grant_lease(now, self.lease_ns);
            self.objects.lock_key(tenant, key).insert(tenant, key, o);
            restored += 1;
        }
        self.next_replica_id
            .fetch_max(max_id + 1, Ordering::Relaxed);
        restored
    }
}
