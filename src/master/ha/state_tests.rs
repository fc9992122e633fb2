//! Tests of attaching a follower and restoring a service from a copy.

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
