//! The master's side of replication: attaching a follower (a full dump, then every
//! change) and restoring a service from a [`Mirror`] (promotion, snapshot restart).

use super::changelog::FollowerHandle;
use super::mirror::Mirror;
use super::record::Record;
use crate::master::clients::RESTORED_CLIENT_GRACE;
use crate::master::local_disk::DiskReplica;
use crate::master::object::Object;
use crate::master::replica::{Replica, Replicas};
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
    /// replicas' buffers allocated where they were, every object with its replicas
    /// (disk copies on their clients' disks, mounted again until those clients expire),
    /// a fresh read lease on each, and the segment owners' liveness clocks started
    /// with `client_ttl` plus `RESTORED_CLIENT_GRACE` (30 s) to find this master.
    /// Replicas whose buffer overlaps another or lies outside its segment are dropped
    /// (an object left with none is not restored). Returns the number of objects.
    pub fn restore(&self, mirror: &Mirror) -> usize {
        let now = self.now();
        let client_ttl = self
            .client_ttl_ns
            .saturating_add(crate::master::dur_ns(RESTORED_CLIENT_GRACE));
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
            self.clients.touch(*client, now, client_ttl);
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
                self.clients.touch(d.client, now, client_ttl);
                o.add_disk_replica(DiskReplica {
                    id: d.id,
                    disk: self.local_disks.restored(d.client),
                    size: d.size,
                    endpoint: d.endpoint.as_str().into(),
                });
            }
            if o.is_empty() {
                continue;
            }
            o.grant_lease(now, self.lease_ns);
            self.objects.lock_key(tenant, key).insert(tenant, key, o);
            restored += 1;
        }
        self.next_replica_id
            .fetch_max(max_id + 1, Ordering::Relaxed);
        restored
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::record::Record;
    use super::super::snapshot::copy_of;
    use crate::master::{MasterConfig, MasterService};
    use crate::wire::master_api::{
        MasterApi, ObjectMeta, ReplicaType, ReplicateConfig, Segment, Uuid, DEFAULT_TENANT,
    };
    use std::time::Duration;

    const CLIENT: Uuid = Uuid {
        first: 1,
        second: 1,
    };

    /// The segment the HA tests mount.
    pub(in crate::master::ha) fn segment() -> Segment {
        Segment {
            id: Uuid {
                first: 9,
                second: 9,
            },
            name: "127.0.0.1:12345".into(),
            base: 1 << 40,
            size: 64 << 20,
            te_endpoint: "127.0.0.1:12345".into(),
            protocol: "tcp".into(),
            host_id: String::new(),
        }
    }

    fn put(m: &MasterService, key: &str, len: u64) {
        m.put_start(
            CLIENT,
            key,
            len,
            &ReplicateConfig::default(),
            DEFAULT_TENANT,
        )
        .unwrap();
        let meta = ObjectMeta {
            key: key.into(),
            checksum: None,
        };
        m.put_end(CLIENT, &meta, ReplicaType::All, DEFAULT_TENANT)
            .unwrap();
    }

    fn drain(f: &super::FollowerHandle) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some(batch) = f.next_batch(usize::MAX, Duration::ZERO) {
            if batch.is_empty() {
                break;
            }
            out.extend(batch.iter().filter_map(|(_, b)| Record::decode(b)));
        }
        out
    }

    #[test]
    fn changes_are_recorded_and_reads_are_not() {
        let m = MasterService::new(MasterConfig::default());
        m.mount_segment(&segment(), CLIENT).unwrap();
        put(&m, "before", 1000);
        let f = m.attach_follower();
        let dump = drain(&f);
        assert!(matches!(dump[0], Record::Mount { .. }));
        assert!(matches!(&dump[1], Record::Object { key, .. } if key == "before"));
        assert_eq!(dump[2], Record::DumpDone);
        assert_eq!(dump.len(), 3);

        put(&m, "after", 2000);
        assert_eq!(m.exist_key("after", DEFAULT_TENANT), Ok(true));
        m.get_replica_list("after", DEFAULT_TENANT).unwrap();
        m.batch_begin_read(&["before".to_string()], DEFAULT_TENANT)
            .unwrap();
        m.remove("before", true, DEFAULT_TENANT).unwrap();
        let keys: Vec<String> = drain(&f)
            .into_iter()
            .map(|r| match r {
                Record::Object { key, .. } => format!("object {key}"),
                Record::Removed { key, .. } => format!("removed {key}"),
                other => format!("{other:?}"),
            })
            .collect();
        // PutStart and PutEnd of "after", the removal of "before"; no read.
        assert_eq!(keys, ["object after", "object after", "removed before"]);
    }

    #[test]
    fn a_restored_service_serves_the_same_objects() {
        let m = MasterService::new(MasterConfig::default());
        m.mount_segment(&segment(), CLIENT).unwrap();
        for i in 0..50 {
            put(&m, &format!("k{i}"), 4096 + i);
        }
        // One put in flight: restored as such, and its PutEnd completes it.
        m.put_start(
            CLIENT,
            "pending",
            100,
            &ReplicateConfig::default(),
            DEFAULT_TENANT,
        )
        .unwrap();
        let copy = copy_of(&m);
        assert!(copy.complete);
        let n = MasterService::new(MasterConfig::default());
        assert_eq!(n.restore(&copy), 51);
        for i in 0..50 {
            let key = format!("k{i}");
            assert_eq!(
                n.get_replica_list(&key, DEFAULT_TENANT).unwrap().replicas,
                m.get_replica_list(&key, DEFAULT_TENANT).unwrap().replicas
            );
        }
        let meta = ObjectMeta {
            key: "pending".into(),
            checksum: None,
        };
        n.put_end(CLIENT, &meta, ReplicaType::All, DEFAULT_TENANT)
            .unwrap();
        assert_eq!(n.exist_key("pending", DEFAULT_TENANT), Ok(true));
        // New puts do not overlap the restored buffers.
        put(&n, "new", 1 << 20);
        let new = n.get_replica_list("new", DEFAULT_TENANT).unwrap().replicas;
        assert_eq!(n.allocated_bytes(), m.allocated_bytes() + (1 << 20));
        assert!(!new.is_empty());
    }

    #[test]
    fn restored_owners_outlive_the_client_ttl_by_the_grace() {
        let m = MasterService::new(MasterConfig::default());
        m.mount_segment(&segment(), CLIENT).unwrap();
        put(&m, "kept", 100);
        let n = MasterService::new(MasterConfig {
            client_ttl: Duration::from_millis(1),
            ..MasterConfig::default()
        });
        assert_eq!(n.restore(&copy_of(&m)), 1);
        // Well past the 1 ms TTL, within the grace: the owner is not expired.
        std::thread::sleep(Duration::from_millis(5));
        n.client_monitor_tick();
        assert_eq!(n.exist_key("kept", DEFAULT_TENANT), Ok(true));
        // A remount does not cut the grace short.
        n.remount_segment(&[segment()], CLIENT).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        n.client_monitor_tick();
        assert_eq!(n.exist_key("kept", DEFAULT_TENANT), Ok(true));
    }

    #[test]
    fn disk_copies_survive_a_restore() {
        use crate::wire::disk_tier_api::{DiskTierApi, StorageObjectMetadata};
        let config = || MasterConfig {
            enable_offload: true,
            default_kv_lease_ttl: Duration::from_millis(1),
            ..MasterConfig::default()
        };
        let m = MasterService::new(config());
        m.mount_segment(&segment(), CLIENT).unwrap();
        m.mount_local_disk_segment(CLIENT, true).unwrap();
        put(&m, "both", 100);
        put(&m, "disk", 200);
        let tasks = m.offload_object_heartbeat(CLIENT, true).unwrap();
        let metas: Vec<StorageObjectMetadata> = tasks
            .iter()
            .map(|t| StorageObjectMetadata {
                bucket_id: 1,
                offset: 0,
                key_size: 4,
                data_size: t.size,
                transport_endpoint: "127.0.0.1:4000".into(),
            })
            .collect();
        m.notify_offload_success(CLIENT, &tasks, &metas).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        // Only "disk" loses its memory replica.
        m.batch_replica_clear(&["disk".to_string()], CLIENT, &segment().name)
            .unwrap();
        assert_eq!(m.query_key("disk").unwrap().len(), 1);
        let n = MasterService::new(config());
        assert_eq!(n.restore(&copy_of(&m)), 2);
        for key in ["both", "disk"] {
            assert_eq!(n.query_key(key), m.query_key(key), "{key}");
        }
        // The restored disk is mounted: its owner's heartbeat is served.
        assert_eq!(n.offload_object_heartbeat(CLIENT, true), Ok(vec![]));
    }
}
