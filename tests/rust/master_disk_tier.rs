//! In-process tests of the master's disk tier (spec tiers-events-conductor.md §1.3,
//! §1.4): local-disk mounts, offload queues and pins, LOCAL_DISK replicas, eviction
//! that keeps disk copies, unmount/expiry sweeps, remove-all, re-registration and
//! promotion. No networking; eviction runs only when a test asks for it.

use std::time::Duration;

use mooncake::master::{MasterConfig, MasterService};
use mooncake::wire::disk_tier_api::{DiskTierApi, OffloadTaskItem, StorageObjectMetadata};
use mooncake::wire::master_api::{
    ErrorCode, MasterApi, ObjectMeta, ReplicaDescriptor, ReplicaLocation, ReplicaStatus,
    ReplicaType, ReplicateConfig, Segment, Uuid,
};

const T: &str = "default";
const A: Uuid = Uuid {
    first: 0xA,
    second: 1,
};
const B: Uuid = Uuid {
    first: 0xB,
    second: 2,
};
const SIZE: u64 = 4096;

fn seg(i: u64, size: u64) -> Segment {
    let name = format!("127.0.0.1:{}", 13000 + i);
    Segment {
        id: Uuid {
            first: 0xD15C,
            second: i,
        },
        name: name.clone(),
        base: 0x10_0000_0000 * i,
        size,
        te_endpoint: name,
        protocol: "tcp".into(),
        host_id: "host".into(),
    }
}

/// Offload on; eviction only when a test calls `evict_now`; leases of 1 ms.
fn config() -> MasterConfig {
    MasterConfig {
        enable_offload: true,
        eviction_high_watermark_ratio: 1.0,
        eviction_ratio: 0.0,
        eviction_interval: Duration::from_millis(2),
        client_monitor_interval: Duration::from_millis(10),
        default_kv_lease_ttl: Duration::from_millis(1),
        ..MasterConfig::default()
    }
}

/// A master where client A owns a 1 MiB segment and a local disk taking offloads.
fn master(config: MasterConfig) -> std::sync::Arc<MasterService> {
    let m = MasterService::new(config);
    m.mount_segment(&seg(1, 1 << 20), A).unwrap();
    m.mount_local_disk_segment(A, true).unwrap();
    m
}

fn put(m: &MasterService, key: &str) {
    let cfg = ReplicateConfig {
        replica_num: 1,
        ..ReplicateConfig::default()
    };
    m.put_start(A, key, SIZE, &cfg, T).unwrap();
    let meta = ObjectMeta {
        key: key.into(),
        checksum: None,
    };
    m.put_end(A, &meta, ReplicaType::Memory, T).unwrap();
}

fn task(key: &str) -> OffloadTaskItem {
    OffloadTaskItem {
        tenant_id: T.into(),
        key: key.into(),
        size: SIZE as i64,
    }
}

fn landed(size: i64, endpoint: &str) -> StorageObjectMetadata {
    StorageObjectMetadata {
        bucket_id: 1,
        offset: 0,
        key_size: 8,
        data_size: size,
        transport_endpoint: endpoint.into(),
    }
}

/// The offload port A's copies are reported on.
const ENDPOINT: &str = "127.0.0.1:40001";

/// A reports every task of `tasks` copied to its disk.
fn copies_land(m: &MasterService, tasks: &[OffloadTaskItem]) {
    let metas: Vec<_> = tasks
        .iter()
        .map(|_| landed(SIZE as i64, ENDPOINT))
        .collect();
    m.notify_offload_success(A, tasks, &metas).unwrap();
}

/// A's next heartbeat asks for a copy of exactly `keys`, and the copies land.
fn offload(m: &MasterService, keys: &[&str]) {
    let tasks = m.offload_object_heartbeat(A, true).unwrap();
    assert_eq!(tasks, keys.iter().map(|k| task(k)).collect::<Vec<_>>());
    copies_land(m, &tasks);
}

/// The kinds of `key`'s replicas, in the order the master lists them.
fn kinds(m: &MasterService, key: &str) -> Vec<&'static str> {
    match m.query_key(key) {
        Err(_) => Vec::new(),
        Ok(descs) => descs.iter().map(kind).collect(),
    }
}

fn kind(d: &ReplicaDescriptor) -> &'static str {
    match (&d.location, d.status) {
        (ReplicaLocation::Memory(_), ReplicaStatus::Complete) => "memory",
        (ReplicaLocation::Memory(_), _) => "memory-processing",
        (ReplicaLocation::LocalDisk { .. }, _) => "local_disk",
        _ => "other",
    }
}

/// Evicts everything evictable (after letting 1 ms leases run out).
fn evict_all(m: &MasterService) {
    std::thread::sleep(Duration::from_millis(5));
    m.evict_now(1.0);
}

#[test]
fn without_enable_offload_every_disk_tier_call_is_unable_offload() {
    let m = MasterService::new(MasterConfig::default());
    let off = Err(ErrorCode::UNABLE_OFFLOAD);
    assert_eq!(m.mount_local_disk_segment(A, true), off);
    assert_eq!(
        m.offload_object_heartbeat(A, true),
        off.map(|()| Vec::new())
    );
    assert_eq!(m.poll_remove_all(A), Err(ErrorCode::UNABLE_OFFLOAD));
    assert_eq!(m.report_ssd_capacity(A, 1), off);
    assert_eq!(m.notify_offload_success(A, &[], &[]), off);
    assert_eq!(
        m.batch_evict_disk_replica(A, &["k".into()], T, ReplicaType::LocalDisk),
        Err(ErrorCode::UNABLE_OFFLOAD)
    );
}

#[test]
fn eager_offload_pins_until_the_copy_lands_then_eviction_keeps_it_on_disk() {
    let m = master(config());
    put(&m, "k");
    let census = |m: &MasterService| {
        let c = m.census();
        (c.in_memory, c.on_disk)
    };
    assert_eq!(census(&m), (1, 0));
    // Queued at PutEnd: eviction must not drop it before its copy lands.
    evict_all(&m);
    assert_eq!(kinds(&m, "k"), ["memory"]);
    let tasks = m.offload_object_heartbeat(A, true).unwrap();
    assert_eq!(tasks, vec![task("k")]);
    assert!(
        m.offload_object_heartbeat(A, true).unwrap().is_empty(),
        "drained"
    );
    evict_all(&m);
    assert_eq!(kinds(&m, "k"), ["memory"], "in flight: still pinned");
    copies_land(&m, &tasks);
    assert_eq!(kinds(&m, "k"), ["memory", "local_disk"]);
    assert_eq!(census(&m), (1, 1));
    let disk = m.query_key("k").unwrap().pop().unwrap();
    assert_eq!(
        disk.location,
        ReplicaLocation::LocalDisk {
            client_id: A,
            object_size: SIZE,
            transport_endpoint: ENDPOINT.into()
        }
    );
    evict_all(&m);
    assert_eq!(
        kinds(&m, "k"),
        ["local_disk"],
        "memory freed, disk copy kept"
    );
    assert_eq!(census(&m), (0, 1));
    assert!(m.exist_key("k", T).unwrap());
    let got = m.get_replica_list("k", T).unwrap();
    assert_eq!(got.replicas, vec![disk]);
    let metrics = m.metrics();
    assert_eq!(metrics.evicted_to_disk, 1);
    // Served from the disk tier: upstream's file cache hit.
    assert_eq!((metrics.gets, metrics.valid_gets), (1, 1));
    assert_eq!((metrics.disk_hits, metrics.disk_hit_bytes), (1, SIZE));
    assert_eq!(metrics.memory_hits, 0);
    // A put of the same key finds it.
    let cfg = ReplicateConfig {
        replica_num: 1,
        ..ReplicateConfig::default()
    };
    assert_eq!(
        m.put_start(A, "k", SIZE, &cfg, T),
        Err(ErrorCode::OBJECT_ALREADY_EXISTS)
    );
    std::thread::sleep(Duration::from_millis(5));
    m.remove("k", false, T).unwrap();
    assert_eq!(m.query_key("k"), Err(ErrorCode::OBJECT_NOT_FOUND));
    assert_eq!(census(&m), (0, 0));
}

#[test]
fn a_failed_copy_is_asked_for_again_and_only_force_evict_drops_it() {
    let m = master(config());
    put(&m, "k");
    let tasks = m.offload_object_heartbeat(A, true).unwrap();
    m.notify_offload_success(A, &tasks, &[landed(-1, "")])
        .unwrap();
    evict_all(&m);
    assert_eq!(kinds(&m, "k"), ["memory"], "kept, a copy asked for again");
    assert_eq!(m.offload_object_heartbeat(A, true).unwrap(), tasks);

    // A queue of one: the second object cannot be queued; without force it stays.
    let small = MasterConfig {
        offloading_queue_limit: 1,
        ..config()
    };
    let m = master(small.clone());
    put(&m, "a");
    put(&m, "b");
    evict_all(&m);
    assert_eq!(
        (kinds(&m, "a"), kinds(&m, "b")),
        (vec!["memory"], vec!["memory"])
    );
    let forced = MasterConfig {
        offload_force_evict: true,
        ..small
    };
    let m = master(forced);
    put(&m, "a");
    put(&m, "b");
    evict_all(&m);
    assert_eq!(kinds(&m, "a"), ["memory"], "queued: pinned");
    assert!(kinds(&m, "b").is_empty(), "forced out without a copy");
}

#[test]
fn offload_on_evict_queues_when_eviction_picks_the_object() {
    let m = master(MasterConfig {
        offload_on_evict: true,
        ..config()
    });
    put(&m, "k");
    assert!(m.offload_object_heartbeat(A, true).unwrap().is_empty());
    evict_all(&m);
    assert_eq!(kinds(&m, "k"), ["memory"]);
    offload(&m, &["k"]);
    evict_all(&m);
    assert_eq!(kinds(&m, "k"), ["local_disk"]);
}

#[test]
fn offloading_turned_off_cancels_tasks_and_the_object_is_evicted_as_usual() {
    let m = master(config());
    put(&m, "k");
    assert!(m.offload_object_heartbeat(A, false).unwrap().is_empty());
    evict_all(&m);
    assert!(kinds(&m, "k").is_empty());
}

#[test]
fn a_copy_of_a_value_written_again_since_is_not_registered() {
    let m = master(config());
    put(&m, "k");
    let tasks = m.offload_object_heartbeat(A, true).unwrap();
    // Rewritten in place while its owner copies the old value.
    let cfg = ReplicateConfig {
        replica_num: 1,
        ..ReplicateConfig::default()
    };
    m.upsert_start(A, "k", SIZE, &cfg, T).unwrap();
    let meta = ObjectMeta {
        key: "k".into(),
        checksum: None,
    };
    m.upsert_end(A, &meta, ReplicaType::Memory, T).unwrap();
    copies_land(&m, &tasks);
    assert_eq!(
        kinds(&m, "k"),
        ["memory"],
        "the old value's copy was ignored"
    );
    // The new value is asked for afresh.
    assert_eq!(
        m.offload_object_heartbeat(A, true).unwrap(),
        vec![task("k")]
    );
}

#[test]
fn copies_go_with_their_disk_and_objects_with_their_last_copy() {
    let m = master(config());
    put(&m, "k");
    offload(&m, &["k"]);
    evict_all(&m);
    assert_eq!(kinds(&m, "k"), ["local_disk"]);
    m.unmount_local_disk_segment(A).unwrap();
    assert_eq!(m.query_key("k"), Err(ErrorCode::OBJECT_NOT_FOUND));
    assert_eq!(
        m.offload_object_heartbeat(A, true),
        Err(ErrorCode::SEGMENT_NOT_FOUND),
        "the client mounts again on this"
    );
    assert_eq!(
        m.notify_offload_success(A, &[task("x")], &[landed(1, "")]),
        Err(ErrorCode::SEGMENT_NOT_FOUND)
    );
    assert_eq!(
        m.notify_offload_success(A, &[task("x")], &[]),
        Err(ErrorCode::INVALID_PARAMS)
    );
}

#[test]
fn evict_disk_replica_drops_the_copy_and_the_object_with_its_last_one() {
    let m = master(config());
    put(&m, "k");
    offload(&m, &["k"]);
    assert_eq!(
        m.evict_disk_replica(B, "k", T, ReplicaType::LocalDisk),
        Err(ErrorCode::REPLICA_NOT_FOUND)
    );
    m.evict_disk_replica(A, "k", T, ReplicaType::LocalDisk)
        .unwrap();
    assert_eq!(kinds(&m, "k"), ["memory"]);
    // Eviction asks for a copy again; it lands, and memory is freed: the disk copy
    // is the last one.
    evict_all(&m);
    assert_eq!(kinds(&m, "k"), ["memory"]);
    offload(&m, &["k"]);
    evict_all(&m);
    let r = m
        .batch_evict_disk_replica(A, &["k".into(), "nope".into()], T, ReplicaType::LocalDisk)
        .unwrap();
    assert_eq!(r, vec![Ok(()), Err(ErrorCode::OBJECT_NOT_FOUND)]);
    assert_eq!(m.query_key("k"), Err(ErrorCode::OBJECT_NOT_FOUND));
}

#[test]
fn a_restarted_owner_re_registers_only_what_a_copy_on_its_host_vouches_for() {
    let m = master(config());
    put(&m, "k");
    put(&m, "fresh");
    let tasks = m.offload_object_heartbeat(A, true).unwrap();
    let k = tasks.iter().position(|t| t.key == "k").unwrap();
    m.notify_offload_success(A, &tasks[k..=k], &[landed(SIZE as i64, ENDPOINT)])
        .unwrap();
    evict_all(&m);
    // Owner A restarts as B on the same host, with what it has on disk.
    m.mount_local_disk_segment(B, true).unwrap();
    let on_disk = [task("k"), task("fresh"), task("forgotten")];
    let metas = [
        landed(SIZE as i64, "127.0.0.1:40002"),
        landed(SIZE as i64, "127.0.0.1:40002"),
        landed(SIZE as i64, "127.0.0.1:40002"),
    ];
    m.notify_offload_success(B, &on_disk, &metas).unwrap();
    // B takes its old self's copy over: readers go to B's address only.
    let taken = m.query_key("k").unwrap();
    assert!(matches!(
        &taken[..],
        [ReplicaDescriptor {
            location: ReplicaLocation::LocalDisk { client_id, transport_endpoint, .. },
            ..
        }] if *client_id == B && transport_endpoint == "127.0.0.1:40002"
    ));
    assert_eq!(
        kinds(&m, "fresh"),
        ["memory"],
        "no copy of it anywhere: a leftover file is not trusted"
    );
    assert_eq!(m.query_key("forgotten"), Err(ErrorCode::OBJECT_NOT_FOUND));
    // The old self's unmount leaves the object readable.
    m.unmount_local_disk_segment(A).unwrap();
    let left = m.query_key("k").unwrap();
    assert!(matches!(
        &left[..],
        [ReplicaDescriptor { location: ReplicaLocation::LocalDisk { client_id, .. }, .. }]
            if *client_id == B
    ));
}

#[test]
fn remove_all_asks_disks_to_wipe_themselves_once() {
    let m = master(config());
    put(&m, "k");
    offload(&m, &["k"]);
    assert_eq!(m.poll_remove_all(A), Ok(false));
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(m.remove_all(false, T), Ok(1));
    assert_eq!(m.poll_remove_all(A), Ok(true));
    assert_eq!(m.poll_remove_all(A), Ok(false));
}

#[test]
fn disk_only_reads_promote_the_object_back_to_memory() {
    let m = master(MasterConfig {
        promotion_on_hit: true,
        promotion_admission_threshold: 2,
        ..config()
    });
    put(&m, "k");
    offload(&m, &["k"]);
    evict_all(&m);
    m.get_replica_list("k", T).unwrap();
    assert!(
        m.promotion_object_heartbeat(A).unwrap().is_empty(),
        "one read"
    );
    assert_eq!(m.promotion_metrics().rejected_frequency, 1);
    m.get_replica_list("k", T).unwrap();
    let promote = m.promotion_object_heartbeat(A).unwrap();
    assert_eq!(promote, vec![task("k")]);
    let metrics = m.promotion_metrics();
    assert_eq!((metrics.admitted, metrics.in_flight), (1, 1));
    assert_eq!(
        m.promotion_alloc_start(B, "k", T, SIZE, &[]),
        Err(ErrorCode::REPLICA_NOT_FOUND),
        "only the holder of a copy promotes"
    );
    assert_eq!(
        m.promotion_alloc_start(A, "k", T, SIZE + 1, &[]),
        Err(ErrorCode::INVALID_PARAMS)
    );
    let alloc = m.promotion_alloc_start(A, "k", T, SIZE, &[]).unwrap();
    assert_eq!(alloc.memory_descriptor.status, ReplicaStatus::Processing);
    assert_eq!(
        m.get_replica_list("k", T).unwrap().replicas.len(),
        1,
        "the disk copy serves reads meanwhile"
    );
    m.notify_promotion_success(A, "k", T).unwrap();
    assert_eq!(kinds(&m, "k"), ["memory", "local_disk"]);
    let metrics = m.promotion_metrics();
    assert_eq!((metrics.completed, metrics.completed_bytes), (1, SIZE));
    assert_eq!(metrics.in_flight, 0);
    // A failed promotion frees its buffer.
    evict_all(&m);
    m.get_replica_list("k", T).unwrap();
    m.get_replica_list("k", T).unwrap();
    assert_eq!(m.promotion_object_heartbeat(A).unwrap(), vec![task("k")]);
    m.promotion_alloc_start(A, "k", T, SIZE, &[]).unwrap();
    let used = m.allocated_bytes();
    m.notify_promotion_failure(A, "k", T).unwrap();
    assert!(m.allocated_bytes() < used);
    assert_eq!(kinds(&m, "k"), ["local_disk"]);
    let metrics = m.promotion_metrics();
    assert_eq!(
        (metrics.admitted, metrics.failed, metrics.in_flight),
        (2, 1, 0)
    );
    assert_eq!((metrics.cancelled, metrics.expired), (0, 0));
}

#[test]
fn promotions_are_refused_over_the_queue_cap_and_the_memory_watermark() {
    let m = master(MasterConfig {
        promotion_on_hit: true,
        promotion_admission_threshold: 1,
        promotion_queue_limit: 1,
        eviction_high_watermark_ratio: 0.5,
        ..config()
    });
    for key in ["k1", "k2", "k3"] {
        put(&m, key);
    }
    offload(&m, &["k1", "k2", "k3"]);
    evict_all(&m);
    m.get_replica_list("k1", T).unwrap();
    m.get_replica_list("k2", T).unwrap();
    let metrics = m.promotion_metrics();
    assert_eq!((metrics.admitted, metrics.rejected_cap), (1, 1));
    // Puts in progress (never evicted) take memory above the watermark.
    let mut n = 0;
    while m.allocated_bytes() * 2 <= 1 << 20 {
        let cfg = ReplicateConfig {
            replica_num: 1,
            ..ReplicateConfig::default()
        };
        m.put_start(A, &format!("fill{n}"), 64 << 10, &cfg, T)
            .unwrap();
        n += 1;
    }
    m.get_replica_list("k3", T).unwrap();
    let metrics = m.promotion_metrics();
    assert_eq!(metrics.rejected_watermark, 1);
    assert_eq!((metrics.admitted, metrics.in_flight), (1, 1));
    assert_eq!(m.promotion_object_heartbeat(A).unwrap(), vec![task("k1")]);
}
