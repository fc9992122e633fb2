//! Our client as an SSD-tier owner (spec tiers-events-conductor.md §1.2-§1.8), on our
//! master served over coro_rpc in-process: the master's offload tasks reach the
//! owner's disk, objects evicted from memory read back from its disk through its
//! offload RPC port, a pool filled five times over loses no acknowledged object, an
//! owner restarted on its directory registers its disk again, `RemoveAll` wipes it,
//! and the disk limit evicts the oldest copies (announced to the master first).

#[path = "store_support/tcp_master.rs"]
mod tcp_master;
#[path = "store_support/temp_dir.rs"]
mod temp_dir;

use mooncake::master::{MasterConfig, MasterService};
use mooncake::store::{
    Client, Code, DiskTierConfig, ErrorCode, ReplicateConfig, SetupConfig, StoreResult,
};
use mooncake::wire::master_api::{ReplicaLocation, ReplicaStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};
use temp_dir::TempDir;

const MIB: u64 = 1 << 20;
/// Longest a test waits for something the owner does on its own.
const PATIENCE: Duration = Duration::from_secs(60);

/// Our master with eager offload, served over coro_rpc; its address.
fn master(extra: impl FnOnce(&mut MasterConfig)) -> (Arc<MasterService>, String) {
    let mut cfg = MasterConfig {
        enable_offload: true,
        default_kv_lease_ttl: Duration::from_millis(200),
        eviction_interval: Duration::from_millis(20),
        ..MasterConfig::default()
    };
    extra(&mut cfg);
    let m = MasterService::new(cfg);
    let addr = tcp_master::serve(m.clone());
    (m, addr)
}

fn setup(master: &str, segment: u64) -> SetupConfig {
    SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: "P2PHANDSHAKE".into(),
        global_segment_size: segment,
        local_buffer_size: 16 * MIB,
        master_server_addr: master.into(),
        ..SetupConfig::default()
    }
}

/// A disk tier in `dir` with a 1 s heartbeat and small buckets.
fn disk(dir: &TempDir) -> DiskTierConfig {
    DiskTierConfig {
        path: dir.0.clone(),
        staging_bytes: 64 * MIB,
        heartbeat_interval: Duration::from_secs(1),
        bucket_keys_limit: 4,
        ..DiskTierConfig::default()
    }
}

fn owner(master: &str, segment: u64, disk_cfg: DiskTierConfig) -> Client {
    Client::setup_with_disk(&setup(master, segment), Some(disk_cfg)).expect("owner setup")
}

fn reader(master: &str) -> Client {
    Client::setup_with_disk(&setup(master, 0), None).expect("reader setup")
}

fn value(key: &str, len: usize) -> Vec<u8> {
    let seed = key
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (0..len)
        .map(|i| (seed.wrapping_add(i as u32).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// (memory, disk) complete replicas of `key`.
fn replicas(c: &Client, key: &str) -> (usize, usize) {
    let Ok(list) = c.get_replica_desc(key) else {
        return (0, 0);
    };
    let complete = |disk: bool| {
        list.iter()
            .filter(|r| r.status == ReplicaStatus::Complete)
            .filter(|r| matches!(r.location, ReplicaLocation::LocalDisk { .. }) == disk)
            .count()
    };
    (complete(false), complete(true))
}

/// Polls `cond` until it holds or `PATIENCE` passes.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Puts `key`, retrying while the pool is full of objects still being offloaded.
fn put_retrying(c: &Client, key: &str, v: &[u8]) -> StoreResult<()> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match c.put(key, v, &ReplicateConfig::default()) {
            Err(e) if e == ErrorCode::NO_AVAILABLE_HANDLE && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

fn disk_files(dir: &TempDir) -> usize {
    std::fs::read_dir(&dir.0)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".bucket"))
        })
        .count()
}

#[test]
fn offloaded_objects_read_back_from_disk_and_a_5x_fill_loses_nothing() {
    let (_m, addr) = master(|_| {});
    let dir = TempDir::new("disk-fill");
    let a = owner(&addr, 16 * MIB, disk(&dir));
    let b = reader(&addr);
    // Each object gets its disk copy next to its memory replica.
    a.put(
        "early",
        &value("early", 300_000),
        &ReplicateConfig::default(),
    )
    .unwrap();
    eventually("a disk copy of 'early'", || replicas(&b, "early") == (1, 1));
    assert!(disk_files(&dir) >= 1);
    // 80 MiB through a 16 MiB pool: every acknowledged object stays readable.
    let keys: Vec<String> = (0..80).map(|i| format!("fill-{i}")).collect();
    for k in &keys {
        put_retrying(&a, k, &value(k, MIB as usize)).unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    let mut from_disk = 0;
    for k in std::iter::once(&"early".to_string()).chain(&keys) {
        let (mem, on_disk) = replicas(&b, k);
        assert!(mem + on_disk > 0, "{k} was lost");
        if mem == 0 {
            from_disk += 1;
        }
        let len = if k == "early" { 300_000 } else { MIB as usize };
        assert_eq!(
            b.get(k).unwrap_or_else(|e| panic!("{k}: {e}")),
            value(k, len),
            "{k}"
        );
    }
    assert!(
        from_disk > 40,
        "only {from_disk} objects read from disk alone"
    );
    // The owner reads its own disk copies the same way.
    assert_eq!(a.get("fill-0").unwrap(), value("fill-0", MIB as usize));
    // RemoveAll wipes the disk too.
    b.remove_all(true).unwrap();
    eventually("the disk wiped", || disk_files(&dir) == 0);
    assert_eq!(b.get("fill-0").code(), Err(ErrorCode::OBJECT_NOT_FOUND));
}

#[test]
fn a_restarted_owner_registers_its_disk_again() {
    let (_m, addr) = master(|_| {});
    let dir = TempDir::new("disk-restart");
    let b = reader(&addr);
    let keys: Vec<String> = (0..6).map(|i| format!("r-{i}")).collect();
    {
        let a = owner(&addr, 16 * MIB, disk(&dir));
        for k in &keys {
            a.put(k, &value(k, 100_000), &ReplicateConfig::default())
                .unwrap();
        }
        eventually("every disk copy", || {
            keys.iter().all(|k| replicas(&b, k).1 == 1)
        });
        a.close();
    }
    // The memory replicas went with the owner; the disk copies are still listed.
    for k in &keys {
        assert_eq!(replicas(&b, k), (0, 1), "{k}");
    }
    let a2 = owner(&addr, 16 * MIB, disk(&dir));
    for k in &keys {
        assert_eq!(
            b.get(k).unwrap_or_else(|e| panic!("{k}: {e}")),
            value(k, 100_000)
        );
    }
    drop(a2);
}

#[test]
fn the_disk_limit_evicts_the_oldest_copies_announced_first() {
    let (_m, addr) = master(|_| {});
    let dir = TempDir::new("disk-limit");
    let cfg = DiskTierConfig {
        total_size_limit: 2 * MIB,
        ..disk(&dir)
    };
    let a = owner(&addr, 32 * MIB, cfg);
    let b = reader(&addr);
    let keys: Vec<String> = (0..12).map(|i| format!("l-{i}")).collect();
    for k in &keys {
        a.put(k, &value(k, 256 * 1024), &ReplicateConfig::default())
            .unwrap();
    }
    eventually("the newest disk copy", || replicas(&b, "l-11").1 == 1);
    // The oldest copies went from the master before their buckets left the disk; the
    // memory replicas are untouched.
    assert_eq!(replicas(&b, "l-0"), (1, 0));
    for k in &keys {
        assert_eq!(b.get(k).unwrap(), value(k, 256 * 1024), "{k}");
    }
    let on_disk: u64 = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(on_disk <= 2 * MIB, "{on_disk} bytes on disk");
}

#[test]
fn an_owner_without_a_segment_stays_mounted_past_the_client_ttl() {
    let (m, addr) = master(|c| c.client_ttl = Duration::from_secs(4));
    let dir = TempDir::new("disk-ttl");
    let _a = owner(&addr, 0, disk(&dir));
    // It pings like an owner of a segment: its disk is never expired (and re-mounted).
    let until = Instant::now() + Duration::from_secs(7);
    while Instant::now() < until {
        assert_eq!(m.local_disks_summary().len(), 1, "the disk was expired");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn setup_fails_clearly_without_an_offloading_master_or_a_usable_path() {
    let (_m, addr) = master(|c| c.enable_offload = false);
    let dir = TempDir::new("disk-refused");
    let r = Client::setup_with_disk(&setup(&addr, 4 * MIB), Some(disk(&dir)));
    assert_eq!(r.err().map(|e| e.code), Some(ErrorCode::UNABLE_OFFLOAD));
    let (_m, addr) = master(|_| {});
    let bad = DiskTierConfig {
        path: "relative/dir".into(),
        ..disk(&dir)
    };
    let r = Client::setup_with_disk(&setup(&addr, 4 * MIB), Some(bad));
    assert_eq!(r.err().map(|e| e.code), Some(ErrorCode::INVALID_PARAMS));
}

#[test]
fn a_disk_only_object_read_is_promoted_back_to_memory() {
    let (_m, addr) = master(|c| {
        c.promotion_on_hit = true;
        c.promotion_admission_threshold = 1;
    });
    let dir = TempDir::new("disk-promote");
    let a = owner(&addr, 8 * MIB, disk(&dir));
    let b = reader(&addr);
    let keys: Vec<String> = (0..24).map(|i| format!("p-{i}")).collect();
    for k in &keys {
        put_retrying(&a, k, &value(k, MIB as usize)).unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    let cold = keys
        .iter()
        .find(|k| replicas(&b, k) == (0, 1))
        .expect("an object on disk only")
        .clone();
    // The read counts as a hit, staged by the owner from its disk (one offload call);
    // the owner copies the object back on its next tick.
    let staged_before = b.offload_rpc_read_count();
    assert_eq!(b.get(&cold).unwrap(), value(&cold, MIB as usize));
    assert_eq!(b.offload_rpc_read_count(), staged_before + 1);
    eventually("the promoted memory replica", || {
        replicas(&b, &cold) == (1, 1)
    });
    // Now memory serves it: no call to the owner.
    assert_eq!(b.get(&cold).unwrap(), value(&cold, MIB as usize));
    assert_eq!(b.offload_rpc_read_count(), staged_before + 1);
}
