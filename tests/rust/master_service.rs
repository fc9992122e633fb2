//! In-process tests of `master::MasterService` (spec store.md §2, §3.1): the put state
//! machine, leases, pins, eviction, placement, client liveness and removal. No
//! networking; no timed assertions — TTLs are made tiny and conditions are polled
//! against generous deadlines.

#[path = "master_support/fixtures.rs"]
mod fixtures;

use std::collections::HashSet;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fixtures::{client, fast, rc, seg};
use mooncake::master::{MasterConfig, MasterService};
use mooncake::wire::master_api::{
    ClientStatus, ErrorCode, MasterApi, MasterResult, ObjectMeta, ReplicaDescriptor,
    ReplicaLocation, ReplicaStatus, ReplicaType, ReplicateConfig, SoftPinAction, Uuid,
};

const T: &str = "default";

/// A config where only explicit `evict_now` calls evict.
fn no_auto_evict() -> MasterConfig {
    MasterConfig {
        eviction_high_watermark_ratio: 1.0,
        eviction_ratio: 0.0,
        ..fast()
    }
}

fn meta(key: &str) -> ObjectMeta {
    ObjectMeta {
        key: key.into(),
        checksum: None,
    }
}

fn put(
    m: &MasterService,
    c: Uuid,
    key: &str,
    len: u64,
    cfg: &ReplicateConfig,
) -> MasterResult<Vec<ReplicaDescriptor>> {
    let descs = m.put_start(c, key, len, cfg, T)?;
    m.put_end(c, &meta(key), ReplicaType::All, T)?;
    Ok(descs)
}

fn mem(d: &ReplicaDescriptor) -> (u64, u64, String) {
    match &d.location {
        ReplicaLocation::Memory(b) => (b.size, b.buffer_address, b.transport_endpoint.clone()),
        other => panic!("not a memory replica: {other:?}"),
    }
}

/// No two readable buffers overlap (they all live in one address space per segment).
fn assert_no_overlap(m: &MasterService) {
    let mut spans: Vec<(u64, u64)> = m
        .all_keys()
        .iter()
        .filter_map(|k| m.query_key(k).ok())
        .flatten()
        .map(|d| {
            let (size, addr, _) = mem(&d);
            (addr, size)
        })
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "overlapping buffers {w:?}");
    }
}

fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

const LONG: Duration = Duration::from_secs(20);

#[test]
fn service_basics_and_mount_validation() {
    let m = MasterService::new(fast());
    assert_eq!(m.service_ready().unwrap(), "2.0.0");
    let sc = m.get_storage_config().unwrap();
    assert_eq!(
        (sc.fsdir.as_str(), sc.enable_disk_eviction, sc.quota_bytes),
        ("", true, 0)
    );
    assert_eq!(m.get_fsdir().unwrap(), "");
    assert!(m.fetch_tasks(client(1), 16).unwrap().is_empty());
    // `--enable_disk_eviction=false` is what clients are told.
    let no_disk_eviction = MasterService::new(MasterConfig {
        enable_disk_eviction: false,
        ..fast()
    });
    assert!(
        !no_disk_eviction
            .get_storage_config()
            .unwrap()
            .enable_disk_eviction
    );

    let mut s = seg(1, 4096);
    s.size = 0;
    assert_eq!(
        m.mount_segment(&s, client(1)),
        Err(ErrorCode::INVALID_PARAMS)
    );
    let mut s = seg(1, 4096);
    s.base = 0;
    assert_eq!(
        m.mount_segment(&s, client(1)),
        Err(ErrorCode::INVALID_PARAMS)
    );
    let mut s = seg(1, 4096);
    s.base = u64::MAX - 10;
    assert_eq!(
        m.mount_segment(&s, client(1)),
        Err(ErrorCode::INVALID_PARAMS)
    );

    m.mount_segment(&seg(1, 4096), client(1)).unwrap();
    m.mount_segment(&seg(1, 4096), client(1)).unwrap(); // idempotent
    assert_eq!(m.total_capacity(), 4096);
    let summary = m.segments_summary();
    assert_eq!(summary.len(), 1);
    assert_eq!(
        (
            summary[0].name.clone(),
            summary[0].base,
            summary[0].size,
            summary[0].used
        ),
        (seg(1, 0).name, seg(1, 0).base, 4096, 0)
    );

    put(&m, client(1), "k", 100, &rc(1)).unwrap();
    assert_eq!(m.allocated_bytes(), 100);
    assert_eq!(m.segments_summary()[0].used, 100);
    // Unmount of an unknown id is OK; unmounting the segment drops its objects.
    m.unmount_segment(
        Uuid {
            first: 9,
            second: 9,
        },
        client(1),
    )
    .unwrap();
    m.unmount_segment(seg(1, 0).id, client(1)).unwrap();
    m.unmount_segment(seg(1, 0).id, client(1)).unwrap();
    assert_eq!(
        m.get_replica_list("k", T).unwrap_err(),
        ErrorCode::OBJECT_NOT_FOUND
    );
    assert_eq!(
        (m.total_capacity(), m.allocated_bytes(), m.key_count()),
        (0, 0, 0)
    );
    assert_eq!(
        m.put_start(client(1), "k", 1, &rc(1), T).unwrap_err(),
        ErrorCode::NO_AVAILABLE_HANDLE
    );

    let metrics = m.metrics();
    assert_eq!(metrics.rpc("MountSegment").unwrap().requests, 5);
    assert_eq!(metrics.rpc("MountSegment").unwrap().failures, 3);
    assert_eq!(metrics.rpc("ServiceReady").unwrap().requests, 1);
    m.shutdown();
    m.shutdown();
}

#[test]
fn put_state_machine() {
    let m = MasterService::new(fast());
    let (a, b) = (client(1), client(2));
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();

    for (key, len, cfg) in [("", 10, rc(1)), ("k", 0, rc(1)), ("k", 10, rc(0))] {
        assert_eq!(
            m.put_start(a, key, len, &cfg, T).unwrap_err(),
            ErrorCode::INVALID_PARAMS
        );
    }
    let descs = m.put_start(a, "k", 1000, &rc(1), T).unwrap();
    assert_eq!(descs.len(), 1);
    assert_eq!(descs[0].status, ReplicaStatus::Processing);
    let (size, addr, ep) = mem(&descs[0]);
    let s = seg(1, 1 << 20);
    assert_eq!(size, 1000);
    assert!(addr >= s.base && addr + size <= s.base + s.size);
    assert_eq!(ep, s.te_endpoint);
    if let ReplicaLocation::Memory(bd) = &descs[0].location {
        assert_eq!(bd.protocol, "tcp");
    }

    // In progress: not readable, not existing, not removable.
    assert_eq!(
        m.get_replica_list("k", T).unwrap_err(),
        ErrorCode::REPLICA_IS_NOT_READY
    );
    assert!(!m.exist_key("k", T).unwrap());
    assert_eq!(
        m.remove("k", true, T).unwrap_err(),
        ErrorCode::REPLICA_IS_NOT_READY
    );
    assert_eq!(
        m.put_start(b, "k", 1000, &rc(1), T).unwrap_err(),
        ErrorCode::OBJECT_ALREADY_EXISTS
    );

    // Only the writer may end it.
    assert_eq!(
        m.put_end(b, &meta("k"), ReplicaType::All, T).unwrap_err(),
        ErrorCode::ILLEGAL_CLIENT
    );
    assert_eq!(
        m.put_end(a, &meta("nope"), ReplicaType::All, T)
            .unwrap_err(),
        ErrorCode::OBJECT_NOT_FOUND
    );
    let with_sum = ObjectMeta {
        key: "k".into(),
        checksum: Some(0xABCD),
    };
    m.put_end(a, &with_sum, ReplicaType::All, T).unwrap();
    m.put_end(a, &with_sum, ReplicaType::All, T).unwrap(); // idempotent

    let r = m.get_replica_list("k", T).unwrap();
    assert_eq!(r.replicas.len(), 1);
    assert_eq!(r.replicas[0].status, ReplicaStatus::Complete);
    assert_eq!(mem(&r.replicas[0]).1, addr);
    assert_eq!(r.lease_ttl_ms, 10_000);
    assert_eq!(r.checksum, Some(0xABCD));
    assert!(m.exist_key("k", T).unwrap());
    assert!(!m.exist_key("missing", T).unwrap());
    assert_eq!(m.query_key("k").unwrap().len(), 1);
    assert_eq!(
        m.put_start(b, "k", 1000, &rc(1), T).unwrap_err(),
        ErrorCode::OBJECT_ALREADY_EXISTS
    );
    assert_eq!(
        m.put_revoke(a, "k", ReplicaType::All, T).unwrap_err(),
        ErrorCode::INVALID_WRITE
    );
    assert_eq!(m.all_keys(), vec!["k".to_string()]);
    assert_eq!(m.key_count(), 1);

    // Batches: per-item results, length mismatch is -600 for every item.
    let keys: Vec<String> = vec!["b1".into(), "k".into(), "".into()];
    let r = m
        .batch_put_start(a, &keys, &[10, 10, 10], &rc(1), T)
        .unwrap();
    assert!(r[0].is_ok());
    assert_eq!(r[1].clone().unwrap_err(), ErrorCode::OBJECT_ALREADY_EXISTS);
    assert_eq!(r[2].clone().unwrap_err(), ErrorCode::INVALID_PARAMS);
    let r = m.batch_put_start(a, &keys, &[10], &rc(1), T).unwrap();
    assert!(r
        .iter()
        .all(|x| x.clone().unwrap_err() == ErrorCode::INVALID_PARAMS));
    let metas: Vec<ObjectMeta> = keys.iter().map(|k| meta(k)).collect();
    let r = m.batch_put_end(a, &metas, ReplicaType::All, T).unwrap();
    assert!(r[0].is_ok() && r[1].is_ok());
    assert_eq!(r[2].unwrap_err(), ErrorCode::OBJECT_NOT_FOUND);
    let e = m.batch_exist_key(&keys, T).unwrap();
    assert_eq!(
        e.into_iter().map(|x| x.unwrap()).collect::<Vec<_>>(),
        vec![true, true, false]
    );
    let g = m.batch_get_replica_list(&keys, T).unwrap();
    assert!(g[0].is_ok() && g[1].is_ok());
    assert_eq!(g[2].clone().unwrap_err(), ErrorCode::OBJECT_NOT_FOUND);
}

#[test]
fn already_exists_preemption_and_zombie_release() {
    let cfg = MasterConfig {
        put_start_discard_timeout_sec: Duration::from_millis(100),
        put_start_release_timeout_sec: Duration::from_millis(300),
        ..fast()
    };
    let m = MasterService::new(cfg);
    let (a, b) = (client(1), client(2));
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();

    m.put_start(a, "z", 1000, &rc(1), T).unwrap();
    // A young in-progress put blocks others...
    assert_eq!(
        m.put_start(b, "z", 1000, &rc(1), T).unwrap_err(),
        ErrorCode::OBJECT_ALREADY_EXISTS
    );
    // ...until the discard timeout: then it is preempted.
    wait_until("preemption", LONG, || {
        m.put_start(b, "z", 500, &rc(1), T).is_ok()
    });
    // The dead writer lost the key; the new writer owns it.
    assert_eq!(
        m.put_end(a, &meta("z"), ReplicaType::All, T).unwrap_err(),
        ErrorCode::ILLEGAL_CLIENT
    );
    m.put_end(b, &meta("z"), ReplicaType::All, T).unwrap();
    // The preempted buffer is parked, then released after the release timeout.
    wait_until("zombie release", LONG, || m.allocated_bytes() == 500);

    // A put that never ends loses its space after the release timeout too.
    m.put_start(a, "dangling", 4096, &rc(1), T).unwrap();
    assert_eq!(m.allocated_bytes(), 4596);
    wait_until("dangling put cleanup", LONG, || m.allocated_bytes() == 500);
    assert_eq!(
        m.get_replica_list("dangling", T).unwrap_err(),
        ErrorCode::OBJECT_NOT_FOUND
    );
    // Both were counted as discarded, then released; nothing stays staged.
    let metrics = m.metrics();
    assert!(metrics.put_start_discards >= 2, "{metrics:?}");
    assert!(metrics.put_start_releases >= 2, "{metrics:?}");
    wait_until("no discarded bytes left", LONG, || {
        m.metrics().discarded_staging_bytes == 0
    });
}

#[test]
fn revoke() {
    let m = MasterService::new(fast());
    let (a, b) = (client(1), client(2));
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    m.put_start(a, "r", 1000, &rc(1), T).unwrap();
    assert_eq!(
        m.put_revoke(b, "r", ReplicaType::All, T).unwrap_err(),
        ErrorCode::ILLEGAL_CLIENT
    );
    assert_eq!(
        m.put_revoke(a, "nope", ReplicaType::All, T).unwrap_err(),
        ErrorCode::OBJECT_NOT_FOUND
    );
    m.put_revoke(a, "r", ReplicaType::All, T).unwrap();
    assert_eq!(
        m.get_replica_list("r", T).unwrap_err(),
        ErrorCode::OBJECT_NOT_FOUND
    );
    assert_eq!((m.allocated_bytes(), m.key_count()), (0, 0));
    // The key is free again at once.
    put(&m, b, "r", 10, &rc(1)).unwrap();
    let r = m
        .batch_put_revoke(b, &["r".to_string()], ReplicaType::All, T)
        .unwrap();
    assert_eq!(r[0].unwrap_err(), ErrorCode::INVALID_WRITE);
}

#[test]
fn lease_blocks_remove_then_expires() {
    let cfg = MasterConfig {
        default_kv_lease_ttl: Duration::from_millis(200),
        ..fast()
    };
    let m = MasterService::new(cfg);
    let a = client(1);
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    put(&m, a, "l", 10, &rc(1)).unwrap();
    put(&m, a, "f", 10, &rc(1)).unwrap();
    // PutEnd grants a zero lease: removable at once.
    assert_eq!(
        m.remove("missing", false, T).unwrap_err(),
        ErrorCode::OBJECT_NOT_FOUND
    );
    assert_eq!(m.get_replica_list("l", T).unwrap().lease_ttl_ms, 200);
    assert_eq!(
        m.remove("l", false, T).unwrap_err(),
        ErrorCode::OBJECT_HAS_LEASE
    );
    assert!(m.exist_key("f", T).unwrap());
    assert_eq!(
        m.remove("f", false, T).unwrap_err(),
        ErrorCode::OBJECT_HAS_LEASE
    );
    m.remove("f", true, T).unwrap(); // force ignores the lease
    wait_until("lease expiry", LONG, || m.remove("l", false, T).is_ok());
    assert_eq!(m.key_count(), 0);
    assert_eq!(m.allocated_bytes(), 0);

    // BatchRemove: per-key results.
    put(&m, a, "x", 10, &rc(1)).unwrap();
    m.exist_key("x", T).unwrap();
    let r = m.batch_remove(&["x".into(), "y".into()], false, T).unwrap();
    assert_eq!(r[0].unwrap_err(), ErrorCode::OBJECT_HAS_LEASE);
    assert_eq!(r[1].unwrap_err(), ErrorCode::OBJECT_NOT_FOUND);
    let r = m.batch_remove(&["x".into()], true, T).unwrap();
    assert!(r[0].is_ok());
}

#[test]
fn hard_pin_never_evicted_but_remove_all_takes_it() {
    let m = MasterService::new(fast());
    let a = client(1);
    m.mount_segment(&seg(1, 10 * 1024), a).unwrap();
    let pinned = ReplicateConfig {
        with_hard_pin: true,
        ..rc(1)
    };
    for i in 0..10 {
        put(&m, a, &format!("h{i}"), 1024, &pinned).unwrap();
    }
    // Full: the allocation fails and eviction is requested, but nothing may go.
    assert_eq!(
        m.put_start(a, "more", 1024, &rc(1), T).unwrap_err(),
        ErrorCode::NO_AVAILABLE_HANDLE
    );
    m.evict_now(1.0);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(m.key_count(), 10);
    assert!(m.metrics().eviction_runs >= 1);
    assert_eq!(m.remove_all(false, T).unwrap(), 10);
    assert_eq!((m.key_count(), m.allocated_bytes()), (0, 0));
}

#[test]
fn soft_pin_evicted_only_in_fallback() {
    let m = MasterService::new(no_auto_evict());
    let a = client(1);
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    let soft = ReplicateConfig {
        soft_pin_action: SoftPinAction::Enable,
        ..rc(1)
    };
    for i in 0..10 {
        put(&m, a, &format!("s{i}"), 100, &soft).unwrap();
        put(&m, a, &format!("p{i}"), 100, &rc(1)).unwrap();
    }
    let count = |prefix: &str| {
        m.all_keys()
            .iter()
            .filter(|k| k.starts_with(prefix))
            .count()
    };
    // base 20, target 0.5: the 10 plain objects go first, soft-pinned ones stay.
    m.evict_now(0.5);
    assert_eq!((count("p"), count("s")), (0, 10));
    // Only soft-pinned left: the first pass finds nothing, the fallback takes some.
    m.evict_now(0.5);
    let left = count("s");
    assert!(left < 10 && left > 0, "left {left}");

    // A TTL above the maximum is rejected; a TTL with PRESERVE too.
    let too_long = ReplicateConfig {
        soft_pin_action: SoftPinAction::Enable,
        soft_pin_ttl_ms: Some(u64::MAX),
        ..rc(1)
    };
    assert_eq!(
        m.put_start(a, "t", 1, &too_long, T).unwrap_err(),
        ErrorCode::INVALID_PARAMS
    );
    let bad = ReplicateConfig {
        soft_pin_ttl_ms: Some(5),
        ..rc(1)
    };
    assert_eq!(
        m.put_start(a, "t", 1, &bad, T).unwrap_err(),
        ErrorCode::INVALID_PARAMS
    );

    // With allow_evict_soft_pinned_objects=false they are never evicted.
    let m = MasterService::new(MasterConfig {
        allow_evict_soft_pinned_objects: false,
        ..no_auto_evict()
    });
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    for i in 0..10 {
        put(&m, a, &format!("s{i}"), 100, &soft).unwrap();
    }
    m.evict_now(1.0);
    m.evict_now(1.0);
    assert_eq!(m.key_count(), 10);

    // A soft pin with TTL 0 is no pin; a short TTL expires.
    let m = MasterService::new(MasterConfig {
        allow_evict_soft_pinned_objects: false,
        ..no_auto_evict()
    });
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    let zero = ReplicateConfig {
        soft_pin_action: SoftPinAction::Enable,
        soft_pin_ttl_ms: Some(0),
        ..rc(1)
    };
    let short = ReplicateConfig {
        soft_pin_ttl_ms: Some(100),
        ..zero.clone()
    };
    put(&m, a, "zero", 100, &zero).unwrap();
    put(&m, a, "short", 100, &short).unwrap();
    m.evict_now(1.0);
    assert_eq!(m.all_keys(), vec!["short".to_string()]);
    wait_until("soft pin expiry", LONG, || {
        m.evict_now(1.0);
        m.key_count() == 0
    });
}

#[test]
fn census_gauges_and_get_counters_follow_every_change() {
    let m = MasterService::new(no_auto_evict());
    let a = client(1);
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    let census = |m: &MasterService| {
        let c = m.census();
        (c.soft_pinned, c.in_memory, c.on_disk)
    };
    let soft = ReplicateConfig {
        soft_pin_action: SoftPinAction::Enable,
        ..rc(1)
    };
    put(&m, a, "s1", 100, &soft).unwrap();
    put(&m, a, "p1", 100, &rc(1)).unwrap();
    put(&m, a, "p2", 300, &rc(1)).unwrap();
    assert_eq!(census(&m), (1, 3, 0));
    // A put in progress has no COMPLETE replica yet.
    m.put_start(a, "w", 100, &rc(1), T).unwrap();
    assert_eq!(census(&m), (1, 3, 0));
    m.put_end(a, &meta("w"), ReplicaType::All, T).unwrap();
    assert_eq!(census(&m), (1, 4, 0));

    // Every GetReplicaList counts; found ones count as memory hits with their bytes.
    m.get_replica_list("p1", T).unwrap();
    m.batch_get_replica_list(&["p2".into(), "nope".into()], T)
        .unwrap();
    assert!(m.get_replica_list("nope", T).is_err());
    let metrics = m.metrics();
    assert_eq!((metrics.gets, metrics.valid_gets), (4, 2));
    assert_eq!((metrics.memory_hits, metrics.memory_hit_bytes), (2, 400));
    assert_eq!((metrics.disk_hits, metrics.disk_hit_bytes), (0, 0));

    // Removal, upsert to another size, revoke and remove_all move the gauges.
    m.remove("s1", true, T).unwrap();
    assert_eq!(census(&m), (0, 3, 0));
    m.upsert_start(a, "p1", 200, &soft, T).unwrap();
    assert_eq!(census(&m), (0, 2, 0));
    m.upsert_end(a, &meta("p1"), ReplicaType::All, T).unwrap();
    assert_eq!(census(&m), (1, 3, 0));
    m.remove_all(true, T).unwrap();
    assert_eq!(census(&m), (0, 0, 0));

    // Every object a put created, by value size (upstream's 4 KiB..64 MiB buckets).
    put(&m, a, "big", 5000, &rc(1)).unwrap();
    let metrics = m.metrics();
    assert_eq!(metrics.value_sizes, [5, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(metrics.value_size_sum, 100 + 100 + 300 + 100 + 200 + 5000);
}

#[test]
fn put_start_counts_allocation_failures_and_partial_placements() {
    let m = MasterService::new(no_auto_evict());
    let (a, b) = (client(1), client(2));
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    assert_eq!(
        m.put_start(a, "huge", 2 << 20, &rc(1), T).unwrap_err(),
        ErrorCode::NO_AVAILABLE_HANDLE
    );
    // Two segments for three replicas: placed on two, counted as partial.
    m.mount_segment(&seg(2, 1 << 20), b).unwrap();
    assert_eq!(m.put_start(a, "three", 100, &rc(3), T).unwrap().len(), 2);
    assert_eq!(m.put_start(a, "two", 100, &rc(2), T).unwrap().len(), 2);
    let metrics = m.metrics();
    assert_eq!(metrics.put_start_alloc_failures, 1);
    assert_eq!(metrics.put_start_partial_allocations, 1);
}

/// Fills a 64-slot pool with 150 puts: each one that finds the pool full evicts the
/// oldest object to make room, so none is rejected.
fn fill_full_pool(m: &MasterService) {
    let a = client(1);
    m.mount_segment(&seg(1, 64 * 1024), a).unwrap();
    for i in 0..150 {
        let key = format!("e{i:03}");
        put(m, a, &key, 1024, &rc(1)).unwrap_or_else(|e| panic!("put {key}: {e}"));
    }
    assert!(m.key_count() <= 64);
    assert!(m.metrics().evicted_objects >= 150 - 64);
    // The newest object survives; the oldest went first.
    assert!(m.exist_key("e149", T).unwrap());
    assert!(!m.exist_key("e000", T).unwrap());
}

/// Objects never read go in the order they were written (PutEnd starts the lease
/// clock): an eviction pass takes the oldest puts, whatever shard each key hashes to.
#[test]
fn eviction_takes_the_oldest_unread_puts_first() {
    let m = MasterService::new(no_auto_evict());
    let a = client(1);
    m.mount_segment(&seg(1, 64 * 1024), a).unwrap();
    for i in 0..40 {
        put(&m, a, &format!("w{i:02}"), 1024, &rc(1)).unwrap();
    }
    m.evict_now(0.25);
    let kept: Vec<bool> = (0..40)
        .map(|i| m.exist_key(&format!("w{i:02}"), T).unwrap())
        .collect();
    assert_eq!(kept, (0..40).map(|i| i >= 10).collect::<Vec<_>>());
    let before = m.metrics();
    assert!(before.successful_evictions >= 1 && before.evicted_objects >= 10);
    assert!(before.evicted_bytes >= 10 * 1024, "{before:?}");
    assert!(before.eviction_runs >= before.successful_evictions);
    // A run with nothing left to evict is attempted, not successful (an empty table
    // gives no run anything to evict or release).
    m.remove_all(true, T).unwrap();
    m.evict_now(0.25);
    let after = m.metrics();
    assert!(after.eviction_runs > before.eviction_runs);
    assert_eq!(after.successful_evictions, before.successful_evictions);
}

#[test]
fn puts_into_a_full_pool_evict_and_succeed() {
    // Watermark-triggered background eviction, and writes making room themselves.
    fill_full_pool(&MasterService::new(fast()));
    // No background eviction at all: every put past the 64th makes its own room.
    let m = MasterService::new(no_auto_evict());
    fill_full_pool(&m);
    assert!(m.metrics().room_evictions >= 150 - 64);

    // Eviction order: the object read last (lease renewed) outlives older ones that
    // were never read; a value larger than any segment fails at once, evicting
    // nothing.
    let m = MasterService::new(MasterConfig {
        default_kv_lease_ttl: Duration::from_millis(1),
        ..no_auto_evict()
    });
    let a = client(1);
    m.mount_segment(&seg(1, 4 * 1024), a).unwrap();
    for i in 0..4 {
        put(&m, a, &format!("o{i}"), 1024, &rc(1)).unwrap();
    }
    m.get_replica_list("o0", T).unwrap();
    thread::sleep(Duration::from_millis(5));
    put(&m, a, "new", 1024, &rc(1)).unwrap();
    assert!(
        m.exist_key("o0", T).unwrap(),
        "the object read last was evicted"
    );
    assert!(!m.exist_key("o1", T).unwrap(), "the oldest object survived");
    assert_eq!(
        m.put_start(a, "huge", 8 * 1024, &rc(1), T).unwrap_err(),
        ErrorCode::NO_AVAILABLE_HANDLE
    );
    assert_eq!(m.key_count(), 4);
}

/// Leases and tracked reads hold objects: a full pool whose objects are all held
/// rejects puts (-200) rather than evicting them. A tracked read
/// (`BatchBeginRead`) holds only until `BatchEndRead`, a lease for its whole TTL; an
/// end for an object written again since is ignored.
#[test]
fn held_objects_are_not_evicted_and_tracked_reads_end() {
    let m = MasterService::new(no_auto_evict());
    let a = client(1);
    m.mount_segment(&seg(1, 2 * 1024), a).unwrap();
    put(&m, a, "leased", 1024, &rc(1)).unwrap();
    put(&m, a, "tracked", 1024, &rc(1)).unwrap();
    m.get_replica_list("leased", T).unwrap();
    let keys = vec!["tracked".to_string()];
    let begun = m.batch_begin_read(&keys, T).unwrap();
    let id = begun[0].as_ref().unwrap().replicas[0].id;
    assert_eq!(
        m.put_start(a, "new", 1024, &rc(1), T).unwrap_err(),
        ErrorCode::NO_AVAILABLE_HANDLE
    );
    assert_eq!(
        m.remove("tracked", false, T).unwrap_err(),
        ErrorCode::OBJECT_HAS_LEASE
    );
    // Two tracked reads in flight: the first end leaves it held.
    m.batch_begin_read(&keys, T).unwrap();
    m.batch_end_read(&keys, &[id], T).unwrap();
    assert_eq!(
        m.put_start(a, "new", 1024, &rc(1), T).unwrap_err(),
        ErrorCode::NO_AVAILABLE_HANDLE
    );
    // The second end frees it: the put evicts it, not the leased object.
    m.batch_end_read(&keys, &[id], T).unwrap();
    put(&m, a, "new", 1024, &rc(1)).unwrap();
    assert!(m.exist_key("leased", T).unwrap());
    assert!(m.query_key("tracked").is_err());

    // A late end for a replaced object does not release the new one's reader.
    m.remove("new", true, T).unwrap();
    put(&m, a, "tracked", 1024, &rc(1)).unwrap();
    m.batch_begin_read(&keys, T).unwrap();
    m.batch_end_read(&keys, &[id], T).unwrap();
    assert_eq!(
        m.remove("tracked", false, T).unwrap_err(),
        ErrorCode::OBJECT_HAS_LEASE
    );
    assert_eq!(
        m.batch_end_read(&keys, &[], T).unwrap_err(),
        ErrorCode::INVALID_PARAMS
    );

    // A reader that never ends its read holds the object for the lease TTL only.
    let m = MasterService::new(MasterConfig {
        default_kv_lease_ttl: Duration::from_millis(20),
        ..no_auto_evict()
    });
    m.mount_segment(&seg(1, 1024), a).unwrap();
    put(&m, a, "orphan", 1024, &rc(1)).unwrap();
    m.batch_begin_read(&["orphan".to_string()], T).unwrap();
    wait_until("the orphaned read to run out", LONG, || {
        m.remove("orphan", false, T).is_ok()
    });
}

#[test]
fn replicas_on_distinct_segments_best_effort() {
    let m = MasterService::new(fast());
    let (a, b, c) = (client(1), client(2), client(3));
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    m.mount_segment(&seg(2, 1 << 20), b).unwrap();
    // Two segments with one name count as one name.
    let mut twin = seg(2, 1 << 20);
    twin.id.second = 22;
    twin.base = 0x99_0000_0000;
    m.mount_segment(&twin, b).unwrap();
    m.mount_segment(&seg(3, 1 << 20), c).unwrap();

    for n in [1u64, 2, 3, 1000, u64::MAX] {
        let key = format!("r{n}");
        let d = put(&m, a, &key, 100, &rc(n)).unwrap();
        let names: HashSet<String> = d.iter().map(|x| mem(x).2).collect();
        assert_eq!(d.len() as u64, n.min(3));
        assert_eq!(names.len(), d.len(), "distinct names");
        assert_eq!(m.get_replica_list(&key, T).unwrap().replicas.len(), d.len());
    }
    // Only one segment has room for a big object: best effort gives one replica.
    let big = (1 << 20) - 1000;
    let d = m
        .put_start(
            a,
            "big",
            big,
            &ReplicateConfig {
                preferred_segments: vec![seg(3, 0).name],
                ..rc(3)
            },
            T,
        )
        .unwrap();
    assert_eq!(d.len(), 3); // every segment still has room for one
                            // Segments 1 and 3 are now full, but name 2 has a twin mount with room.
    let d2 = m.put_start(a, "big2", big, &rc(3), T).unwrap();
    assert_eq!(d2.len(), 1);
    assert_eq!(mem(&d2[0]).2, seg(2, 0).name);
    assert_eq!(
        m.put_start(a, "big3", big, &rc(3), T).unwrap_err(),
        ErrorCode::NO_AVAILABLE_HANDLE
    );
}

#[test]
fn preferred_segments_first() {
    let m = MasterService::new(fast());
    for i in 1..=4 {
        m.mount_segment(&seg(i, 1 << 20), client(i)).unwrap();
    }
    for round in 0..20 {
        let cfg = ReplicateConfig {
            preferred_segments: vec!["unknown:1".into(), seg(3, 0).name, seg(1, 0).name],
            ..rc(2)
        };
        let d = put(&m, client(1), &format!("p{round}"), 10, &cfg).unwrap();
        let names: Vec<String> = d.iter().map(|x| mem(x).2).collect();
        assert_eq!(names, vec![seg(3, 0).name, seg(1, 0).name]);
        // The deprecated single field wins over the list.
        let cfg = ReplicateConfig {
            preferred_segment: seg(4, 0).name,
            preferred_segments: vec![seg(2, 0).name],
            ..rc(1)
        };
        let d = put(&m, client(1), &format!("q{round}"), 10, &cfg).unwrap();
        assert_eq!(mem(&d[0]).2, seg(4, 0).name);
        // Same-node preference picks a segment of the writer's host.
        let cfg = ReplicateConfig {
            prefer_alloc_in_same_node: true,
            host_id: "host-2".into(),
            ..rc(1)
        };
        let d = put(&m, client(1), &format!("h{round}"), 10, &cfg).unwrap();
        assert_eq!(mem(&d[0]).2, seg(2, 0).name);
    }
}

#[test]
fn client_ttl_expiry_drops_only_that_clients_objects() {
    let cfg = MasterConfig {
        client_ttl: Duration::from_millis(300),
        ..fast()
    };
    let m = MasterService::new(cfg);
    let (a, b) = (client(1), client(2));
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    m.mount_segment(&seg(2, 1 << 20), b).unwrap();
    let on = |i: u64| ReplicateConfig {
        preferred_segments: vec![seg(i, 0).name],
        ..rc(1)
    };
    for k in 0..5 {
        put(&m, a, &format!("a{k}"), 100, &on(1)).unwrap();
        put(&m, b, &format!("b{k}"), 100, &on(2)).unwrap();
    }
    // An object with replicas on both survives, with one replica left.
    put(&m, a, "both", 100, &rc(2)).unwrap();

    // b keeps pinging, a stops.
    let mb = m.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let pinger = thread::spawn(move || {
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            mb.ping(b).unwrap();
            thread::sleep(Duration::from_millis(20));
        }
    });
    wait_until("client a expiry", LONG, || {
        m.get_replica_list("a0", T).is_err()
    });
    for k in 0..5 {
        assert_eq!(
            m.get_replica_list(&format!("a{k}"), T).unwrap_err(),
            ErrorCode::OBJECT_NOT_FOUND
        );
        assert!(m.exist_key(&format!("b{k}"), T).unwrap());
    }
    let both = m.get_replica_list("both", T).unwrap();
    assert_eq!(both.replicas.len(), 1);
    assert_eq!(mem(&both.replicas[0]).2, seg(2, 0).name);
    let names: Vec<String> = m.segments_summary().into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec![seg(2, 0).name]);
    // New puts preferring the dead segment land on the live one.
    let d = put(&m, b, "after", 100, &on(1)).unwrap();
    assert_eq!(mem(&d[0]).2, seg(2, 0).name);
    assert_eq!(
        m.batch_query_ip(&[a, b]).unwrap(),
        vec![(b, vec!["127.0.0.2".to_string()])]
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    pinger.join().unwrap();
}

#[test]
fn need_remount_then_ok_after_remount() {
    let cfg = MasterConfig {
        client_ttl: Duration::from_millis(200),
        ..fast()
    };
    let m = MasterService::new(cfg);
    let a = client(1);
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    assert_eq!(m.ping(a).unwrap().client_status, ClientStatus::NeedRemount);
    assert_eq!(m.ping(a).unwrap().view_version_id, 0);
    assert_eq!(m.active_clients(), 0);
    m.remount_segment(&[seg(1, 1 << 20)], a).unwrap();
    assert_eq!(m.ping(a).unwrap().client_status, ClientStatus::Ok);
    assert_eq!(m.active_clients(), 1);
    // Remounting someone else's segment id, or a changed one, is -600.
    assert_eq!(
        m.remount_segment(&[seg(1, 1 << 20)], client(2))
            .unwrap_err(),
        ErrorCode::INVALID_PARAMS
    );
    assert_eq!(
        m.remount_segment(&[seg(1, 1 << 19)], a).unwrap_err(),
        ErrorCode::INVALID_PARAMS
    );
    // After expiry the client must remount again, which restores its segment.
    wait_until("expiry", LONG, || m.total_capacity() == 0);
    assert_eq!(m.active_clients(), 0);
    assert_eq!(m.ping(a).unwrap().client_status, ClientStatus::NeedRemount);
    m.remount_segment(&[seg(1, 1 << 20)], a).unwrap();
    assert_eq!(m.ping(a).unwrap().client_status, ClientStatus::Ok);
    assert_eq!(m.total_capacity(), 1 << 20);
}

#[test]
fn graceful_unmount() {
    let m = MasterService::new(fast());
    let (a, b) = (client(1), client(2));
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    put(&m, a, "g", 10, &rc(1)).unwrap();
    assert_eq!(
        m.graceful_unmount_segment(seg(1, 0).id, b, 10).unwrap_err(),
        ErrorCode::SEGMENT_NOT_FOUND
    );
    m.mount_segment(&seg(2, 1 << 20), b).unwrap();
    assert_eq!(
        m.graceful_unmount_segment(seg(1, 0).id, b, 10).unwrap_err(),
        ErrorCode::INVALID_PARAMS
    );
    m.graceful_unmount_segment(seg(1, 0).id, a, 100).unwrap();
    // Draining: readable, but takes no new allocations.
    let d = put(
        &m,
        a,
        "h",
        10,
        &ReplicateConfig {
            preferred_segments: vec![seg(1, 0).name],
            ..rc(1)
        },
    )
    .unwrap();
    assert_eq!(mem(&d[0]).2, seg(2, 0).name);
    wait_until("graceful unmount", LONG, || {
        m.get_replica_list("g", T).is_err()
    });
    assert_eq!(m.total_capacity(), 1 << 20);
}

#[test]
fn remove_by_regex_and_remove_all() {
    let cfg = MasterConfig {
        default_kv_lease_ttl: Duration::from_secs(600),
        ..fast()
    };
    let m = MasterService::new(cfg);
    let a = client(1);
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    for k in ["a/1", "a/2", "b/1", "xa/9", "leased-a/3"] {
        put(&m, a, k, 10, &rc(1)).unwrap();
    }
    m.put_start(a, "a/processing", 10, &rc(1), T).unwrap();
    m.get_replica_list("leased-a/3", T).unwrap();

    assert_eq!(
        m.remove_by_regex("(", false, T).unwrap_err(),
        ErrorCode::INVALID_PARAMS
    );
    let hits = m.get_replica_list_by_regex("^b/", T).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].0, "b/1");
    // Substring match: "a/" hits a/1, a/2, xa/9 and (leased, skipped) leased-a/3;
    // the in-progress a/processing is skipped too.
    assert_eq!(m.remove_by_regex("a/", false, T).unwrap(), 3);
    // b/1 was leased by the by-regex query above.
    assert_eq!(m.remove_by_regex("^b", false, T).unwrap(), 0);
    assert_eq!(m.remove_by_regex("^b", true, T).unwrap(), 1);
    assert_eq!(m.remove_by_regex("nothing", true, T).unwrap(), 0);
    let mut keys = m.all_keys();
    keys.sort();
    assert_eq!(
        keys,
        vec!["a/processing".to_string(), "leased-a/3".to_string()]
    );
    assert_eq!(m.remove_all(false, T).unwrap(), 0);
    assert_eq!(m.remove_all(true, T).unwrap(), 1);
    assert_eq!(m.all_keys(), vec!["a/processing".to_string()]);
}

#[test]
fn upsert_in_place_and_resized() {
    let m = MasterService::new(fast());
    let (a, b) = (client(1), client(2));
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    let d1 = m.upsert_start(a, "u", 100, &rc(1), T).unwrap();
    m.upsert_end(a, &meta("u"), ReplicaType::All, T).unwrap();
    // Same size: same buffer, unreadable until UpsertEnd, any client may take over.
    let d2 = m.upsert_start(b, "u", 100, &rc(1), T).unwrap();
    assert_eq!(mem(&d1[0]).1, mem(&d2[0]).1);
    assert_eq!(
        m.get_replica_list("u", T).unwrap_err(),
        ErrorCode::REPLICA_IS_NOT_READY
    );
    assert_eq!(
        m.upsert_end(a, &meta("u"), ReplicaType::All, T)
            .unwrap_err(),
        ErrorCode::ILLEGAL_CLIENT
    );
    m.upsert_end(b, &meta("u"), ReplicaType::All, T).unwrap();
    assert_eq!(m.allocated_bytes(), 100);
    // Different size: new buffer; the old one is parked until the release timeout.
    let d3 = m.upsert_start(b, "u", 200, &rc(1), T).unwrap();
    assert_eq!(mem(&d3[0]).0, 200);
    m.upsert_end(b, &meta("u"), ReplicaType::All, T).unwrap();
    assert_eq!(mem(&m.get_replica_list("u", T).unwrap().replicas[0]).0, 200);
    // Revoking an in-place upsert drops the object.
    m.upsert_start(a, "u", 200, &rc(1), T).unwrap();
    m.upsert_revoke(a, "u", ReplicaType::All, T).unwrap();
    assert_eq!(
        m.get_replica_list("u", T).unwrap_err(),
        ErrorCode::OBJECT_NOT_FOUND
    );
    let r = m
        .batch_upsert_start(a, &["v".into(), "w".into()], &[1, 2], &rc(1), T)
        .unwrap();
    assert!(r.iter().all(|x| x.is_ok()));
    let r = m.batch_upsert_end(a, &[meta("v"), meta("w")], T).unwrap();
    assert!(r.iter().all(|x| x.is_ok()));
    m.batch_upsert_start(a, &["v".into()], &[1], &rc(1), T)
        .unwrap();
    let r = m.batch_upsert_revoke(a, &["v".into()], T).unwrap();
    assert!(r[0].is_ok());
}

#[test]
fn batch_replica_clear_and_groups() {
    let cfg = MasterConfig {
        default_kv_lease_ttl: Duration::from_millis(150),
        ..no_auto_evict()
    };
    let m = MasterService::new(cfg);
    let (a, b) = (client(1), client(2));
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    m.mount_segment(&seg(2, 1 << 20), b).unwrap();
    put(&m, a, "c1", 10, &rc(2)).unwrap();
    put(&m, a, "c2", 10, &rc(1)).unwrap();
    put(&m, b, "c3", 10, &rc(1)).unwrap();
    m.exist_key("c2", T).unwrap(); // leased: not cleared
    let keys: Vec<String> = ["c1", "c2", "c3", "", "nope"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let cleared = m.batch_replica_clear(&keys, a, &seg(2, 0).name).unwrap();
    assert_eq!(cleared, vec!["c1".to_string()]);
    assert_eq!(m.get_replica_list("c1", T).unwrap().replicas.len(), 1);
    let mut all_cleared = HashSet::new();
    wait_until("lease expiry", LONG, || {
        all_cleared.extend(m.batch_replica_clear(&keys, a, "").unwrap());
        all_cleared.len() == 2
    });
    assert!(all_cleared.contains("c1") && all_cleared.contains("c2"));
    assert_eq!(m.all_keys(), vec!["c3".to_string()]);

    // Groups are leased and evicted together.
    let grouped = ReplicateConfig {
        group_ids: Some(vec!["g".into(), "g".into()]),
        ..rc(1)
    };
    let r = m
        .batch_put_start(a, &["g1".into(), "g2".into()], &[10, 10], &grouped, T)
        .unwrap();
    assert!(r.iter().all(|x| x.is_ok()));
    m.batch_put_end(a, &[meta("g1"), meta("g2")], ReplicaType::All, T)
        .unwrap();
    m.get_replica_list("g1", T).unwrap();
    assert_eq!(
        m.remove("g2", false, T).unwrap_err(),
        ErrorCode::OBJECT_HAS_LEASE
    );
    m.evict_now(1.0);
    assert!(m.exist_key("g1", T).unwrap() && m.exist_key("g2", T).unwrap());
    wait_until("group eviction", LONG, || {
        m.evict_now(1.0);
        m.key_count() == 0
    });
    let bad = ReplicateConfig {
        group_ids: Some(vec!["g".into()]),
        ..rc(1)
    };
    let r = m
        .batch_put_start(a, &["x".into(), "y".into()], &[1, 1], &bad, T)
        .unwrap();
    assert!(r
        .iter()
        .all(|x| x.clone().unwrap_err() == ErrorCode::INVALID_PARAMS));
}

#[test]
fn absurd_inputs_do_not_panic() {
    let m = MasterService::new(fast());
    let a = client(1);
    m.mount_segment(&seg(1, 1 << 20), a).unwrap();
    let huge_key = "k".repeat(1 << 20);
    put(&m, a, &huge_key, 1, &rc(1)).unwrap();
    assert!(m.exist_key(&huge_key, T).unwrap());
    assert_eq!(
        m.put_start(a, "big", u64::MAX, &rc(u64::MAX), T)
            .unwrap_err(),
        ErrorCode::NO_AVAILABLE_HANDLE
    );
    let nof = ReplicateConfig {
        nof_replica_num: 1,
        ..rc(1)
    };
    assert_eq!(
        m.put_start(a, "n", 1, &nof, T).unwrap_err(),
        ErrorCode::INVALID_PARAMS
    );
    let dfs = ReplicateConfig {
        dfs_replica_num: 1,
        ..rc(1)
    };
    assert!(m.put_start(a, "d", 1, &dfs, T).is_err());
    assert!(m.batch_exist_key(&[], T).unwrap().is_empty());
    assert!(m
        .batch_put_start(a, &[], &[], &rc(1), T)
        .unwrap()
        .is_empty());
    assert_eq!(
        m.get_replica_list("", T).unwrap_err(),
        ErrorCode::OBJECT_NOT_FOUND
    );
    assert_eq!(
        m.remove("", true, T).unwrap_err(),
        ErrorCode::OBJECT_NOT_FOUND
    );
    assert_eq!(
        m.get_replica_list_by_regex(&"(".repeat(10_000), T)
            .unwrap_err(),
        ErrorCode::INVALID_PARAMS
    );
    assert!(m.batch_query_ip(&[client(77)]).unwrap().is_empty());
    // Tenants are ignored unless multi-tenancy is on.
    assert!(m.exist_key(&huge_key, "other-tenant").unwrap());
    m.graceful_unmount_segment(seg(1, 0).id, a, u64::MAX)
        .unwrap();
}

#[test]
fn concurrent_puts_and_gets() {
    let m = MasterService::new(fast());
    for i in 1..=4 {
        m.mount_segment(&seg(i, 64 << 20), client(i)).unwrap();
    }
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let m = m.clone();
            thread::spawn(move || {
                for i in 0..200u64 {
                    let key = format!("t{t}-{i}");
                    let len = 1 + (t * 1000 + i) % 4096;
                    put(&m, client(t), &key, len, &rc(2)).unwrap();
                    let r = m.get_replica_list(&key, T).unwrap();
                    assert_eq!(r.replicas.len(), 2);
                    assert!(r.replicas.iter().all(|d| mem(d).0 == len));
                    assert!(m.exist_key(&key, T).unwrap());
                    if i % 3 == 0 {
                        m.remove(&key, true, T).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let expected: u64 = (0..8u64)
        .flat_map(|t| {
            (0..200u64)
                .filter(|i| i % 3 != 0)
                .map(move |i| 2 * (1 + (t * 1000 + i) % 4096))
        })
        .sum();
    assert_eq!(m.allocated_bytes(), expected);
    assert_eq!(m.key_count(), 8 * (200 - 67));
    assert_no_overlap(&m);
    assert_eq!(m.remove_all(true, T).unwrap(), 8 * 133);
    assert_eq!(m.allocated_bytes(), 0);
}

#[test]
fn drop_stops_background_threads() {
    let m = MasterService::new(fast());
    let weak = Arc::downgrade(&m);
    drop(m);
    wait_until("last handle gone", LONG, || weak.upgrade().is_none());
    for _ in 0..20 {
        let m = MasterService::new(fast());
        thread::sleep(Duration::from_millis(3));
        drop(m);
    }
}

/// A tiny xorshift generator for the randomized tests.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Several writers, each over its own keys, put / read (tracked) / remove
/// at random into a pool far smaller than their data: every put succeeds (writes make
/// room by evicting), an object being written is never taken from its writer (PutEnd
/// finds it), and no two live buffers overlap.
#[test]
fn oversubscribed_pool_puts_always_succeed() {
    // The segment owners never ping: a client TTL beyond the slowest run (under
    // ThreadSanitizer on a loaded machine the writers take over a minute).
    let m = MasterService::new(MasterConfig {
        client_ttl: Duration::from_secs(3600),
        ..fast()
    });
    m.mount_segment(&seg(1, 4 << 20), client(1)).unwrap();
    m.mount_segment(&seg(2, 4 << 20), client(2)).unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let m = m.clone();
            thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9 ^ ((t + 1) * 0x1234_5678_9ABC));
                let c = client(10 + t);
                for _ in 0..3000 {
                    let key = format!("w{t}-{}", rng.below(200));
                    match rng.below(100) {
                        0..=44 => {
                            let len = 16 * 1024 + rng.below(240 * 1024);
                            match m.put_start(c, &key, len, &rc(1), T) {
                                Ok(_) => m.put_end(c, &meta(&key), ReplicaType::All, T).unwrap(),
                                Err(ErrorCode::OBJECT_ALREADY_EXISTS) => {}
                                Err(e) => panic!("put {key}: {e}"),
                            }
                        }
                        45..=89 => {
                            let keys = vec![key.clone()];
                            let r = m.batch_begin_read(&keys, T).unwrap();
                            if let Ok(resp) = &r[0] {
                                m.batch_end_read(&keys, &[resp.replicas[0].id], T).unwrap();
                            }
                        }
                        _ => match m.remove(&key, false, T) {
                            Ok(()) => {}
                            Err(ErrorCode::OBJECT_NOT_FOUND | ErrorCode::OBJECT_HAS_LEASE) => {}
                            Err(e) => panic!("remove {key}: {e}"),
                        },
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(m.metrics().room_evictions > 0);
    assert_no_overlap(&m);
}
