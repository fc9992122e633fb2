//! In-process tests of dynamic (hot-object) replication on the master (spec
//! dynamic-replication): a key read often enough gets one copy task to another
//! segment, with a lease its start is checked against, and no more once it has as
//! many memory replicas as allowed. The test plays the source owner's part.

#[path = "master_support/fixtures.rs"]
mod fixtures;

use std::time::{Duration, Instant};

use fixtures::{client, seg};
use mooncake::master::config::DynamicMode;
use mooncake::master::{MasterConfig, MasterService};
use mooncake::wire::master_api::{
    ErrorCode, MasterApi, ObjectMeta, ReplicaType, ReplicateConfig, TaskAssignment, Uuid,
};
use mooncake::wire::task_payload::CopyPayload;

const MB: u64 = 1 << 20;

/// Enforce mode; 3 reads in a minute make a key hot; two memory replicas at most.
fn master() -> std::sync::Arc<MasterService> {
    let m = MasterService::new(MasterConfig {
        dynamic_replication_mode: DynamicMode::Enforce,
        dynamic_replication_heat_window: Duration::from_secs(60),
        dynamic_replication_admission_qps_threshold: 0.05,
        dynamic_replication_max_memory_replicas: 2,
        ..MasterConfig::default()
    });
    for i in 1..=2 {
        m.mount_segment(&seg(i, 64 * MB), client(i)).unwrap();
    }
    m
}

fn put_on(m: &MasterService, key: &str, segment: &str) {
    let cfg = ReplicateConfig {
        replica_num: 1,
        preferred_segment: segment.into(),
        ..ReplicateConfig::default()
    };
    m.put_start(client(1), key, MB, &cfg, "default").unwrap();
    let meta = ObjectMeta {
        key: key.into(),
        checksum: None,
    };
    m.put_end(client(1), &meta, ReplicaType::All, "default")
        .unwrap();
}

/// The next task handed to `c` (10 s at most).
fn next_task(m: &MasterService, c: Uuid) -> TaskAssignment {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(t) = m.fetch_tasks(c, 16).unwrap().pop() {
            return t;
        }
        assert!(Instant::now() < deadline, "no task for {c}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn replicas(m: &MasterService, key: &str) -> usize {
    m.get_replica_list(key, "default").unwrap().replicas.len()
}

#[test]
fn a_hot_key_gets_one_more_replica_under_a_lease() {
    let m = master();
    let (s1, s2) = (seg(1, 64 * MB).name, seg(2, 64 * MB).name);
    put_on(&m, "hot", &s1);
    assert_eq!(replicas(&m, "hot"), 1);
    replicas(&m, "hot");
    replicas(&m, "hot");
    let task = next_task(&m, client(1));
    assert_eq!(task.task_type, 0);
    let p: CopyPayload = serde_json::from_str(&task.payload).unwrap();
    assert_eq!(
        (p.source.as_str(), p.targets.clone()),
        (s1.as_str(), vec![s2.clone()])
    );
    let lease = Uuid {
        first: p.dynamic_replication_lease_id_high,
        second: p.dynamic_replication_lease_id_low,
    };
    assert_ne!(lease.first | lease.second, 0);
    let epoch = p.dynamic_replication_version_epoch;
    let (t, me) = ("default", client(1));
    // While the lease is out, a plain copy of the key is refused.
    assert_eq!(
        m.copy_start(me, "hot", t, &s1, std::slice::from_ref(&s2))
            .map(|_| ()),
        Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK)
    );
    let start = |c: Uuid, l: Uuid, e: u64, targets: &[String]| {
        m.dynamic_replica_copy_start(c, "hot", t, &s1, targets, l, e)
            .map(|r| r.targets.len())
    };
    let other = Uuid {
        first: 1,
        second: 1,
    };
    let tgt = std::slice::from_ref(&s2);
    assert_eq!(
        start(me, other, epoch, tgt),
        Err(ErrorCode::INVALID_VERSION)
    );
    assert_eq!(
        start(me, lease, epoch + 1, tgt),
        Err(ErrorCode::INVALID_VERSION)
    );
    assert_eq!(
        start(me, lease, epoch, std::slice::from_ref(&s1)),
        Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK)
    );
    assert_eq!(
        start(client(2), lease, epoch, tgt),
        Err(ErrorCode::ILLEGAL_CLIENT)
    );
    assert_eq!(start(me, lease, epoch, tgt), Ok(1));
    // The lease is used up; the copy's end must carry it.
    assert_eq!(
        start(me, lease, epoch, tgt),
        Err(ErrorCode::OBJECT_HAS_REPLICATION_TASK)
    );
    assert_eq!(m.copy_end(me, "hot", t), Err(ErrorCode::INVALID_VERSION));
    m.dynamic_replica_copy_end(me, "hot", t, lease, epoch)
        .unwrap();
    assert_eq!(replicas(&m, "hot"), 2);
    // At the cap, reads make no more tasks.
    for _ in 0..10 {
        replicas(&m, "hot");
    }
    put_on(&m, "probe", &s1);
    for _ in 0..3 {
        replicas(&m, "probe");
    }
    let next = next_task(&m, client(1));
    let p: CopyPayload = serde_json::from_str(&next.payload).unwrap();
    assert_eq!(p.key, "probe");
}

#[test]
fn a_revoked_dynamic_copy_leaves_the_object_as_it_was() {
    let m = master();
    let (s1, s2) = (seg(1, 64 * MB).name, seg(2, 64 * MB).name);
    put_on(&m, "k", &s1);
    for _ in 0..3 {
        replicas(&m, "k");
    }
    let p: CopyPayload = serde_json::from_str(&next_task(&m, client(1)).payload).unwrap();
    let lease = Uuid {
        first: p.dynamic_replication_lease_id_high,
        second: p.dynamic_replication_lease_id_low,
    };
    let epoch = p.dynamic_replication_version_epoch;
    let started = m
        .dynamic_replica_copy_start(client(1), "k", "default", &s1, &[s2], lease, epoch)
        .unwrap();
    assert_eq!(started.targets.len(), 1);
    assert_eq!(
        m.copy_revoke(client(1), "k", "default"),
        Err(ErrorCode::INVALID_VERSION)
    );
    m.dynamic_replica_copy_revoke(client(1), "k", "default", lease, epoch)
        .unwrap();
    assert_eq!(replicas(&m, "k"), 1);
    assert_eq!(m.remove("k", true, "default"), Ok(()));
}
