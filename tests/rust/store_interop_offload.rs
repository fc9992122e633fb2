//! The SSD tier mixed with upstream's client, on OUR master. Upstream's client as the
//! owner: the wheel's `MooncakeDistributedStore` set up with `enable_ssd_offload`
//! mounts its local disk, drains the offload tasks our master queues, writes its
//! bucket files and reports them; objects evicted from memory are read back from its
//! disk through its offload RPC server, by it and by our client. Our client as the
//! owner: upstream's client reads what our owner's disk holds through our offload RPC
//! server. Needs the peer from `bash scripts/upstream-peer.sh`;
//! `MOONCAKE_SKIP_INTEROP=1` skips.

mod interop_common;
mod store_interop_common;
#[path = "store_support/temp_dir.rs"]
mod temp_dir;

use interop_common::{pattern, peer};
use mooncake::store::{Client, DiskTierConfig, ErrorCode, ReplicateConfig, SetupConfig};
use mooncake::wire::master_api::{MasterApi, ReplicaDescriptor, ReplicaLocation, DEFAULT_TENANT};
use mooncake::wire::offload_rpc;
use mooncake::wire::rpc_client::MasterRpcClient;
use serde_json::json;
use std::time::{Duration, Instant};
use store_interop_common::*;
use temp_dir::TempDir;

const SECOND: Duration = Duration::from_secs(1);

/// The upstream owner's replicas of `key`: (memory, elsewhere).
fn replica_kinds(py: &mut PyStore, key: &str) -> (usize, usize) {
    let v = py.cmd(json!({"op": "replica_desc", "key": key}));
    let all = v["replicas"].as_array().cloned().unwrap_or_default();
    let memory = all.iter().filter(|r| r["memory"] == json!(true)).count();
    (memory, all.len() - memory)
}

/// Eager offload (as the spec's measurement on upstream: 32 MiB segment, 1 s
/// heartbeat, 8 x 256 KiB then 60 x 1 MiB): every object gets a disk copy, the fill
/// evicts to disk, and every acknowledged object reads back bit-exact — none lost
/// (upstream's master lost 3 of 39 on this workload).
#[test]
fn upstream_owner_offloads_through_our_master_and_loses_nothing() {
    let Some(peer) = peer("upstream_owner_offloads_through_our_master_and_loses_nothing") else {
        return;
    };
    init_our_client_env();
    let master = MasterProc::ours(&["--enable_offload=true", "--default_kv_lease_ttl=2000"]);
    let disk = TempDir::new("offload-owner");
    let path = disk.0.to_str().unwrap().to_string();
    let mut py = PyStore::start_with_env(
        &peer,
        "py-offload",
        &master.metadata_url(),
        &master.rpc_addr(),
        32 * MIB,
        16 * MIB,
        0,
        &[
            ("PEER_SSD_OFFLOAD_PATH", &path),
            ("MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS", "1"),
            ("MOONCAKE_OFFLOAD_BUCKET_KEYS_LIMIT", "4"),
            ("MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES", "67108864"),
        ],
    );
    let small: Vec<String> = (0..8).map(|i| format!("small-{i}")).collect();
    for (i, k) in small.iter().enumerate() {
        assert_eq!(py.put(k, val(256 * KIB, i as u8), default_cfg()), 0, "{k}");
    }
    // Every object gets its disk copy (one heartbeat later).
    let deadline = Instant::now() + Duration::from_secs(30);
    for k in &small {
        loop {
            let kinds = replica_kinds(&mut py, k);
            if kinds == (1, 1) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{k}: replicas {kinds:?}, no disk copy\n{}",
                master.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let files = std::fs::read_dir(&disk.0).unwrap().count();
    assert!(files >= 2, "bucket files written by the owner: {files}");

    // Fill the 32 MiB pool twice over: eviction moves objects to disk.
    let count = 60u64;
    let v = py.cmd(json!({"op": "fill", "prefix": "big-", "count": count,
                          "value": val(MIB, 77), "max_retries": 600, "retry_sleep_ms": 20}));
    assert_eq!(v["failed"], json!([]), "puts that never succeeded: {v}");
    eprintln!("offload fill: {v}");
    // Every acknowledged object reads back, from memory or from the owner's disk.
    for (i, k) in small.iter().enumerate() {
        assert_eq!(py.get(k, val(256 * KIB, i as u8)), (256 * KIB, true), "{k}");
    }
    let mut on_disk_only = 0;
    for i in 0..count {
        let k = format!("big-{i}");
        assert_eq!(py.get(&k, val(MIB, 77)), (MIB, true), "{k}");
        if replica_kinds(&mut py, &k).0 == 0 {
            on_disk_only += 1;
        }
    }
    assert!(
        on_disk_only > 0,
        "a 32 MiB pool holds fewer than 60 x 1 MiB objects: some must be on disk only"
    );
    let offloaded = master.metric("master_offloaded_objects_total");
    eprintln!("{on_disk_only} objects read from disk only; master counted {offloaded:?}");

    // The owner's offload RPC server, called by our codec: it stages a disk-only
    // object and tells where; the batch is released.
    let m = MasterRpcClient::connect(&master.rpc_addr(), SECOND * 10, SECOND * 5).unwrap();
    let (key, endpoint) = (0..count)
        .find_map(|i| {
            let key = format!("big-{i}");
            let list = m.get_replica_list(&key, DEFAULT_TENANT).ok()?;
            match &list.replicas[..] {
                [ReplicaDescriptor {
                    location:
                        ReplicaLocation::LocalDisk {
                            transport_endpoint, ..
                        },
                    ..
                }] => Some((key, transport_endpoint.clone())),
                _ => None,
            }
        })
        .expect("a disk-only object");
    let staged = offload_rpc::batch_get_offload_object(
        &endpoint,
        &[offload_rpc::storage_key(DEFAULT_TENANT, &key)],
        &[MIB as i64],
        SECOND * 10,
    )
    .unwrap_or_else(|e| panic!("batch_get_offload_object({key}) at {endpoint}: {e}"));
    assert_eq!(staged.pointers.len(), 1);
    assert!(!staged.transfer_engine_addr.is_empty(), "{staged:?}");
    assert_eq!(
        offload_rpc::release_offload_buffer(&endpoint, staged.batch_id, SECOND * 10),
        Ok(true)
    );

    // Our client reads every object, disk-only ones staged by the upstream owner.
    let ours = our_client(&master, 16 * MIB, 16 * MIB);
    for i in 0..count {
        let k = format!("big-{i}");
        let got = ours
            .get(&k)
            .unwrap_or_else(|e| panic!("our get({k}): {e:?}"));
        assert!(got == pattern(MIB as usize, 77), "{k}: bytes differ");
    }
    let keys: Vec<String> = (0..count).map(|i| format!("big-{i}")).collect();
    let mut bufs = vec![vec![0u8; MIB as usize]; keys.len()];
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut slices: Vec<&mut [u8]> = bufs.iter_mut().map(Vec::as_mut_slice).collect();
    for (k, r) in keys.iter().zip(ours.batch_get_into(&refs, &mut slices)) {
        assert_eq!(r, Ok(MIB), "{k}");
    }
    assert!(bufs.iter().all(|b| *b == pattern(MIB as usize, 77)));
    drop(ours);
    py.quit();
}

/// Our client owns the disk, upstream's reads: 48 x 1 MiB through our owner's 16 MiB
/// segment, every object read back by the wheel's client bit-exact, most from our
/// owner's disk (staged by our offload RPC server, pulled by upstream's Transfer
/// Engine).
#[test]
fn upstream_reader_reads_what_our_owner_keeps_on_disk() {
    let Some(peer) = peer("upstream_reader_reads_what_our_owner_keeps_on_disk") else {
        return;
    };
    init_our_client_env();
    let master = MasterProc::ours(&["--enable_offload=true", "--default_kv_lease_ttl=500"]);
    let disk = TempDir::new("offload-our-owner");
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: master.metadata_url(),
        global_segment_size: 16 * MIB,
        local_buffer_size: 16 * MIB,
        master_server_addr: master.rpc_addr(),
        ..SetupConfig::default()
    };
    let disk_cfg = DiskTierConfig {
        path: disk.0.clone(),
        staging_bytes: 64 * MIB,
        heartbeat_interval: SECOND,
        ..DiskTierConfig::default()
    };
    let owner = Client::setup_with_disk(&cfg, Some(disk_cfg))
        .unwrap_or_else(|e| panic!("our owner: {e}\n{}", master.log_tail()));
    let count = 48u8;
    for i in 0..count {
        let key = format!("ours-{i}");
        let value = pattern(MIB as usize, i);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match owner.put(&key, &value, &ReplicateConfig::default()) {
                Err(e) if e == ErrorCode::NO_AVAILABLE_HANDLE && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                r => {
                    r.unwrap_or_else(|e| panic!("put {key}: {e}"));
                    break;
                }
            }
        }
    }
    let mut py = PyStore::start(
        &peer,
        "py-reader",
        &master.metadata_url(),
        &master.rpc_addr(),
        0,
        16 * MIB,
        0,
    );
    let m = MasterRpcClient::connect(&master.rpc_addr(), SECOND * 10, SECOND * 5).unwrap();
    let mut disk_only = 0;
    for i in 0..count {
        let key = format!("ours-{i}");
        let list = m.get_replica_list(&key, DEFAULT_TENANT).unwrap();
        if list
            .replicas
            .iter()
            .all(|r| matches!(r.location, ReplicaLocation::LocalDisk { .. }))
        {
            disk_only += 1;
        }
        assert_eq!(py.get(&key, val(MIB, i)), (MIB, true), "{key}");
    }
    assert!(disk_only >= 16, "only {disk_only} objects on disk alone");
    py.quit();
    drop(owner);
}
