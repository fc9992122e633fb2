//! In-process tests of the master with `--enable_multi_tenants` (spec tenants §2, §3):
//! how each kind of request resolves its tenant, isolation, and the charge each
//! tenant's memory replicas make through every path that adds or drops them (put,
//! revoke, upsert, remove, eviction, a dead client), against its quota.

#[path = "master_support/fixtures.rs"]
mod fixtures;

mod kv_servers;

use std::time::{Duration, Instant};

use fixtures::{client, rc, seg};
use mooncake::master::{MasterConfig, MasterService};
use mooncake::wire::master_api::{ErrorCode, MasterApi, ObjectMeta, ReplicaType};

const MB: u64 = 1 << 20;
const NOT_REGISTERED: ErrorCode = ErrorCode(-1701);
const QUOTA_EXCEEDED: ErrorCode = ErrorCode(-1700);

/// A master with tenants `a` (`a_quota`) and `b` (16 MB) and a 32 MB segment of
/// client 1; no automatic eviction. The policy file lives in `dir`.
fn master(dir: &std::path::Path, a_quota: &str) -> std::sync::Arc<MasterService> {
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\ntenants:\n  - name: a\n    quota: {a_quota}\n  - name: b\n    quota: 16MB\n"
        ),
    )
    .unwrap();
    let m = MasterService::new(MasterConfig {
        enable_multi_tenants: true,
        tenant_quota_connector_uri: policy.display().to_string(),
        eviction_high_watermark_ratio: 1.0,
        eviction_ratio: 0.0,
        client_monitor_interval: Duration::from_millis(10),
        client_ttl: Duration::from_millis(200),
        ..MasterConfig::default()
    });
    m.mount_segment(&seg(1, 32 * MB), client(1)).unwrap();
    m
}

fn put(m: &MasterService, tenant: &str, key: &str, len: u64) -> Result<(), ErrorCode> {
    m.put_start(client(1), key, len, &rc(1), tenant)?;
    let meta = ObjectMeta {
        key: key.into(),
        checksum: None,
    };
    m.put_end(client(1), &meta, ReplicaType::All, tenant)
}

/// A directory of its own for test `tag`, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("mc-tenants-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn charged(m: &MasterService, tenant: &str) -> u64 {
    m.tenant_quota_snapshot(tenant)
        .map_or(0, |s| s.charged_bytes)
}

#[test]
fn tenants_resolve_as_upstream_and_keys_stay_apart() {
    let dir = Scratch::new("resolve");
    let m = master(dir.path(), "8MB");
    put(&m, "a", "k", 100).unwrap();
    // Starts need a registered, valid tenant; reads and ends only a valid one.
    for t in ["", "_x", "c", "default", "bad\u{1}"] {
        assert_eq!(
            m.put_start(client(1), "k2", 10, &rc(1), t),
            Err(NOT_REGISTERED),
            "{t:?}"
        );
    }
    assert_eq!(m.exist_key("k", "_x"), Err(ErrorCode::INVALID_PARAMS));
    assert_eq!(m.exist_key("k", "c"), Ok(false));
    assert_eq!(m.exist_key("k", "b"), Ok(false));
    assert_eq!(m.exist_key("k", "a"), Ok(true));
    assert_eq!(
        m.get_replica_list("k", "b").map(|_| ()),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    assert_eq!(m.remove("k", true, "b"), Err(ErrorCode::OBJECT_NOT_FOUND));
    assert_eq!(
        m.batch_exist_key(&["k".to_string()], "_x").unwrap(),
        vec![Err(ErrorCode::INVALID_PARAMS)]
    );
    // The same key in b is another object; removing all of b leaves a's.
    put(&m, "b", "k", 50).unwrap();
    assert_eq!(m.remove_all(true, "b"), Ok(1));
    assert_eq!(m.remove_all(true, "_x"), Ok(0));
    assert_eq!(m.exist_key("k", "a"), Ok(true));
    // The admin key list is the default tenant's alone.
    assert!(m.all_keys().is_empty());
    // "" removes every tenant's objects.
    assert_eq!(m.remove_all(true, ""), Ok(1));
}

#[test]
fn charges_follow_every_path_and_quotas_hold() {
    let dir = Scratch::new("charges");
    let m = master(dir.path(), "4MB");
    put(&m, "a", "x", MB).unwrap();
    assert_eq!(charged(&m, "a"), MB);
    // A revoked start gives its bytes back.
    m.put_start(client(1), "r", MB, &rc(1), "a").unwrap();
    assert_eq!(charged(&m, "a"), 2 * MB);
    m.put_revoke(client(1), "r", ReplicaType::All, "a").unwrap();
    assert_eq!(charged(&m, "a"), MB);
    // An upsert to another size charges the new size.
    m.upsert_start(client(1), "x", 2 * MB, &rc(1), "a").unwrap();
    let meta = ObjectMeta {
        key: "x".into(),
        checksum: None,
    };
    m.upsert_end(client(1), &meta, ReplicaType::All, "a")
        .unwrap();
    assert_eq!(charged(&m, "a"), 2 * MB);
    // Beyond the quota with nothing evictable of its own (x is leased now): -1700,
    // counted; b is not touched.
    put(&m, "b", "y", 3 * MB).unwrap();
    m.get_replica_list("x", "a").unwrap();
    assert_eq!(put(&m, "a", "z", 3 * MB), Err(QUOTA_EXCEEDED));
    assert_eq!(m.tenant_quota_rejects().get("a"), Some(&1));
    assert_eq!(charged(&m, "b"), 3 * MB);
    // Removal gives the bytes back.
    m.remove("x", true, "a").unwrap();
    assert_eq!(charged(&m, "a"), 0);
    // Unleased objects of the tenant are evicted to make room.
    put(&m, "a", "old", 3 * MB).unwrap();
    put(&m, "a", "new", 3 * MB).unwrap();
    assert_eq!(m.exist_key("old", "a"), Ok(false));
    assert_eq!(charged(&m, "a"), 3 * MB);
    assert_eq!(m.tenant_quota_evicted().get("a"), Some(&(3 * MB)));
    assert_eq!(m.exist_key("y", "b"), Ok(true));
    // A dead client's replicas stop counting once they are dropped.
    m.unmount_segment(seg(1, 0).id, client(1)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while charged(&m, "a") > 0 || charged(&m, "b") > 0 {
        let _ = m.exist_key("new", "a");
        let _ = m.exist_key("y", "b");
        assert!(
            Instant::now() < deadline,
            "charges left: {}",
            charged(&m, "a")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn policies_change_through_the_api_and_persist() {
    let dir = Scratch::new("policy");
    let m = master(dir.path(), "1MB");
    assert_eq!(
        m.put_start(client(1), "k", 10, &rc(1), "c"),
        Err(NOT_REGISTERED)
    );
    let s = m.set_tenant_quota("c", 2 * MB).unwrap();
    assert_eq!(
        (s.requested_quota_bytes, s.effective_quota_bytes),
        (2 * MB, 2 * MB)
    );
    assert!(!s.admission_closed && s.has_explicit_policy && !s.over_quota);
    put(&m, "c", "k", 10).unwrap();
    assert_eq!(m.delete_tenant_quota("c"), Err(ErrorCode(-1702)));
    m.remove("k", true, "c").unwrap();
    m.delete_tenant_quota("c").unwrap();
    assert_eq!(
        m.put_start(client(1), "k", 10, &rc(1), "c"),
        Err(NOT_REGISTERED)
    );
    assert_eq!(m.delete_tenant_quota("c"), Err(ErrorCode::OBJECT_NOT_FOUND));
    m.set_tenant_quota("d", 40 * MB).unwrap();
    let saved = std::fs::read_to_string(dir.path().join("policy.yaml")).unwrap();
    assert!(
        saved.contains("name: \"d\"\n    quota: 41943040"),
        "{saved}"
    );
    // Oversubscribed (1 + 16 + 40 MB on 32 MB): shares of the capacity.
    let all = m.tenant_quota_snapshots().unwrap();
    let total: u64 = all.iter().map(|s| s.effective_quota_bytes).sum();
    assert_eq!(total, 32 * MB);
    assert!(MasterService::new(MasterConfig::default())
        .tenant_quota_snapshots()
        .is_err());
}

#[test]
fn the_policy_lives_in_etcd_when_asked() {
    let Some(etcd) = kv_servers::Etcd::start("master_tenants etcd policy") else {
        return;
    };
    use mooncake::metadata::MetadataStore;
    let store = mooncake::metadata::etcd::EtcdMetadataStore::new(&etcd.url()).unwrap();
    let key = "mooncake-store/cluster-t/tenant_quota_policy";
    store
        .set(key, b"version: 1\ntenants:\n  - name: e\n    quota: 2MB\n")
        .unwrap();
    let m = MasterService::new(MasterConfig {
        enable_multi_tenants: true,
        tenant_quota_connector_type: "etcd".into(),
        tenant_quota_connector_uri: etcd.url(),
        cluster_id: "cluster-t/".into(),
        ..MasterConfig::default()
    });
    m.mount_segment(&seg(1, 32 * MB), client(1)).unwrap();
    put(&m, "e", "k", 10).unwrap();
    assert_eq!(put(&m, "f", "k", 10), Err(NOT_REGISTERED));
    m.set_tenant_quota("f", MB).unwrap();
    put(&m, "f", "k", 10).unwrap();
    let saved = String::from_utf8(store.get(key).unwrap().unwrap()).unwrap();
    assert!(saved.contains("name: \"f\"\n    quota: 1048576"), "{saved}");
}
