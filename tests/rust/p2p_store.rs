//! The P2P Store in one process: nodes with real Transfer Engines (TCP and the
//! same-host path on loopback, P2PHANDSHAKE) sharing one in-memory versioned metadata
//! store. Registering, fetching by several receivers at once (bytes verified, every
//! receiver published as a source of every shard), a dead source pruned, a source
//! serving wrong bytes caught by CRC-32C and pruned, a failed fetch resumed without
//! refetching what landed, and bad input refused without touching the metadata.

use mooncake::error::Result as EngineResult;
use mooncake::metadata::versioned::{InMemoryVersionedStore, Versioned, VersionedStore};
use mooncake::p2p::meta::{key, Meta};
use mooncake::p2p::payload::{Location, Payload};
use mooncake::p2p::{GetOptions, P2pConfig, P2pError, P2pStore};
use mooncake::te::TransferEngine;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One in-memory metadata store several nodes share.
#[derive(Clone, Default)]
struct SharedMeta(Arc<InMemoryVersionedStore>);

impl VersionedStore for SharedMeta {
    fn get_versioned(&self, key: &str) -> EngineResult<Option<Versioned>> {
        self.0.get_versioned(key)
    }
    fn create(&self, key: &str, value: &[u8]) -> EngineResult<bool> {
        self.0.create(key, value)
    }
    fn put(&self, key: &str, value: &[u8]) -> EngineResult<()> {
        self.0.put(key, value)
    }
    fn compare_and_swap(
        &self,
        key: &str,
        version: u64,
        value: Option<&[u8]>,
    ) -> EngineResult<bool> {
        self.0.compare_and_swap(key, version, value)
    }
    fn list(&self, prefix: &str) -> EngineResult<Vec<(String, Versioned)>> {
        self.0.list(prefix)
    }
}

fn engine() -> Arc<TransferEngine> {
    let e = TransferEngine::new("P2PHANDSHAKE", "127.0.0.1", false).expect("engine");
    e.install("tcp", None).expect("tcp");
    Arc::new(e)
}

fn node(meta: &SharedMeta, config: &P2pConfig) -> P2pStore {
    P2pStore::over(engine(), Meta::new(Box::new(meta.clone())), config.clone())
}

fn config(shard: u64) -> P2pConfig {
    P2pConfig {
        shard_size: shard,
        no_source_retries: 1,
        ..P2pConfig::default()
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

fn payload_of(meta: &SharedMeta, name: &str) -> Payload {
    let v = meta
        .get_versioned(&key(name))
        .unwrap()
        .expect("the object's key");
    Payload::decode(name, &v.value).unwrap()
}

#[test]
fn several_receivers_fetch_at_once_and_each_becomes_a_source() {
    let meta = SharedMeta::default();
    let cfg = config(64 << 10);
    let seed = node(&meta, &cfg);
    let data = pattern((1 << 20) + 123, 7);
    seed.put("ckpt/model", &data).unwrap();
    let receivers: Vec<P2pStore> = (0..3).map(|_| node(&meta, &cfg)).collect();
    std::thread::scope(|s| {
        for r in &receivers {
            let data = &data;
            s.spawn(move || assert!(r.get("ckpt/model").unwrap() == *data));
        }
    });
    let p = payload_of(&meta, "ckpt/model");
    assert_eq!(p.shards.len(), 17);
    for (i, shard) in p.shards.iter().enumerate() {
        assert_eq!(shard.gold.len(), 1, "shard {i}");
        for r in &receivers {
            assert!(shard.held_by(r.local_server_name()), "shard {i}");
        }
    }
    let listed = seed.list("ckpt/").unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].size, data.len() as u64);
    let mut peers = seed.discover_peers("ckpt/").unwrap();
    let mut expected: Vec<String> = receivers
        .iter()
        .chain([&seed])
        .map(|n| n.local_server_name().to_string())
        .collect();
    peers.sort();
    expected.sort();
    assert_eq!(peers, expected);

    // Departures: replicas first, then the gold copy; the key goes with the last.
    for r in &receivers {
        r.delete_replica("ckpt/model").unwrap();
        assert!(!payload_of(&meta, "ckpt/model").shards[0].held_by(r.local_server_name()));
    }
    assert!(matches!(
        seed.delete_replica("ckpt/model"),
        Err(P2pError::NotHeld(_))
    ));
    seed.unregister("ckpt/model").unwrap();
    assert!(meta.get_versioned(&key("ckpt/model")).unwrap().is_none());
}

#[test]
fn caller_buffers_split_at_shard_boundaries_receive_the_object() {
    let meta = SharedMeta::default();
    let cfg = config(4096);
    let seed = node(&meta, &cfg);
    let (a, b) = (pattern(3 * 4096, 1), pattern(4096 + 100, 2));
    let buffers = [
        (a.as_ptr() as u64, a.len() as u64),
        (b.as_ptr() as u64, b.len() as u64),
    ];
    // SAFETY: `a` and `b` outlive the registration (unregistered below).
    unsafe { seed.register("split", &buffers, 4096, "cpu:0", false) }.unwrap();
    let receiver = node(&meta, &cfg);
    let mut into = vec![0u8; a.len() + b.len()];
    let dest = [(into.as_mut_ptr() as u64, into.len() as u64)];
    // SAFETY: `into` outlives the replica (deleted below) and is not touched meanwhile.
    unsafe { receiver.get_replica("split", &dest) }.unwrap();
    assert!(into[..a.len()] == a[..] && into[a.len()..] == b[..]);
    receiver.delete_replica("split").unwrap();
    seed.unregister("split").unwrap();
}

#[test]
fn a_dead_source_is_skipped_and_pruned() {
    let meta = SharedMeta::default();
    let cfg = config(4096);
    let seed = node(&meta, &cfg);
    let data = pattern(8 * 4096, 3);
    seed.put("obj", &data).unwrap();
    // A replica of every shard on a node that does not exist (nothing listens there).
    let mut p = payload_of(&meta, "obj");
    for s in 0..p.shards.len() {
        p.add_replica(
            s,
            Location {
                segment_name: "127.0.0.1:1".into(),
                offset: 4096,
            },
        );
    }
    meta.put(&key("obj"), &p.encode()).unwrap();
    let receiver = node(&meta, &cfg);
    assert!(receiver.get("obj").unwrap() == data);
    let p = payload_of(&meta, "obj");
    assert!(
        p.shards.iter().all(|s| !s.held_by("127.0.0.1:1")),
        "the dead node's locations are pruned"
    );
}

#[test]
fn a_source_serving_wrong_bytes_is_caught_and_pruned() {
    let meta = SharedMeta::default();
    let cfg = config(4096);
    let seed = node(&meta, &cfg);
    let data = pattern(4 * 4096, 4);
    seed.put("obj", &data).unwrap();
    // Another node registers garbage and claims it as a replica of every shard.
    let liar = engine();
    let garbage = vec![0x5Au8; 4096];
    liar.register_memory(garbage.as_ptr() as u64, 4096, "cpu:0", true)
        .unwrap();
    let mut p = payload_of(&meta, "obj");
    let lie = Location {
        segment_name: liar.segment_name().to_string(),
        offset: garbage.as_ptr() as u64,
    };
    for s in 0..p.shards.len() {
        p.add_replica(s, lie.clone());
    }
    meta.put(&key("obj"), &p.encode()).unwrap();
    // One shard at a time: each is asked of the liar first (a replica, as idle as the
    // seed), so every lie is found.
    let one_at_a_time = P2pConfig {
        concurrency: 1,
        ..cfg
    };
    let receiver = node(&meta, &one_at_a_time);
    assert!(receiver.get("obj").unwrap() == data, "checked bytes only");
    let p = payload_of(&meta, "obj");
    assert!(p.shards.iter().all(|s| !s.locations().any(|l| *l == lie)));
    liar.unregister_memory(garbage.as_ptr() as u64).unwrap();
}

#[test]
fn a_failed_fetch_resumes_without_refetching_what_landed() {
    let meta = SharedMeta::default();
    let cfg = config(4096);
    let seed = node(&meta, &cfg);
    let data = pattern(8 * 4096, 5);
    seed.put("obj", &data).unwrap();
    // A second node holds the first four shards only.
    let half = node(&meta, &cfg);
    let mut part = data[..4 * 4096].to_vec();
    half.engine()
        .register_memory(part.as_mut_ptr() as u64, part.len() as u64, "cpu:0", true)
        .unwrap();
    let mut p = payload_of(&meta, "obj");
    for s in 0..4 {
        p.add_replica(
            s,
            Location {
                segment_name: half.local_server_name().into(),
                offset: part.as_ptr() as u64 + s as u64 * 4096,
            },
        );
    }
    meta.put(&key("obj"), &p.encode()).unwrap();

    let receiver = node(&meta, &cfg);
    let mut into = vec![0u8; data.len()];
    let dest = [(into.as_mut_ptr() as u64, into.len() as u64)];
    let only = [half.local_server_name().to_string()];
    let limited = GetOptions {
        only: Some(&only),
        ..GetOptions::default()
    };
    // SAFETY: `into` outlives the replica (deleted below).
    match unsafe { receiver.get_replica_with("obj", &dest, limited) } {
        Err(P2pError::NoSource { shard, .. }) => assert!(shard >= 4),
        other => panic!("expected no source for the second half: {other:?}"),
    }
    assert!(
        !payload_of(&meta, "obj").shards[0].held_by(receiver.local_server_name()),
        "a failed fetch withdraws what it published"
    );
    let first_report = AtomicU64::new(0);
    let progress = |landed: u64, _total: u64| {
        let _ = first_report.compare_exchange(0, landed, Ordering::SeqCst, Ordering::SeqCst);
    };
    let resumed = GetOptions {
        progress: Some(&progress),
        ..GetOptions::default()
    };
    // SAFETY: as above.
    unsafe { receiver.get_replica_with("obj", &dest, resumed) }.unwrap();
    assert!(into == data);
    assert_eq!(
        first_report.load(Ordering::SeqCst),
        5 * 4096,
        "the first shard fetched again came on top of the four that had landed"
    );
    assert!(payload_of(&meta, "obj")
        .shards
        .iter()
        .all(|s| s.held_by(receiver.local_server_name())));
    receiver.delete_replica("obj").unwrap();
    half.engine()
        .unregister_memory(part.as_ptr() as u64)
        .unwrap();
}

#[test]
fn bad_input_is_refused_and_leaves_the_metadata_alone() {
    let meta = SharedMeta::default();
    let cfg = config(4096);
    let seed = node(&meta, &cfg);
    seed.put("obj", &pattern(3 * 4096, 6)).unwrap();
    let before = meta.get_versioned(&key("obj")).unwrap().unwrap();
    let receiver = node(&meta, &cfg);
    let mut small = vec![0u8; 4096];
    let dest = [(small.as_mut_ptr() as u64, small.len() as u64)];
    let get = |name: &str, buffers: &[(u64, u64)]| {
        // SAFETY: `small` outlives the calls, and a refused call writes nothing.
        unsafe { receiver.get_replica(name, buffers) }
    };
    let refusals = [
        (get("missing", &dest), "not in the metadata"),
        (get("obj", &dest), "hold 4096 bytes"),
        (get("obj", &[]), "no buffers"),
        (get("", &dest), "name is empty"),
        (receiver.put("obj", b"x"), "already exists"),
        (receiver.put("empty", b""), "no bytes"),
        (seed.put("obj", b"x"), "already registered"),
        (receiver.unregister("obj"), "not registered"),
    ];
    for (outcome, why) in refusals {
        let e = outcome.expect_err(why);
        assert!(e.to_string().contains(why), "{e}");
    }
    assert_eq!(meta.get_versioned(&key("obj")).unwrap().unwrap(), before);
    meta.put(&key("corrupt"), b"{\"name\":").unwrap();
    match get("corrupt", &dest) {
        Err(e @ P2pError::Corrupt { .. }) => assert!(e.to_string().contains("corrupt")),
        other => panic!("{other:?}"),
    }
    assert!(small.iter().all(|&b| b == 0), "refused calls wrote nothing");
}

#[test]
fn closing_a_node_withdraws_its_copies() {
    let meta = SharedMeta::default();
    let cfg = config(4096);
    let seed = node(&meta, &cfg);
    seed.put("a", &pattern(4096, 1)).unwrap();
    let receiver = node(&meta, &cfg);
    receiver.get("a").unwrap();
    let name = receiver.local_server_name().to_string();
    drop(receiver);
    assert!(!payload_of(&meta, "a").shards[0].held_by(&name));
    seed.close();
    assert!(meta.get_versioned(&key("a")).unwrap().is_none());
    assert!(matches!(seed.put("b", b"x"), Err(P2pError::Closed)));
}

/// A metadata store that is down for a stretch of calls: calls number `from` to `to`
/// (counting every call) fail, as etcd does while it is briefly unreachable.
struct Flaky {
    inner: SharedMeta,
    calls: AtomicU64,
    from: u64,
    to: u64,
}

impl Flaky {
    fn check(&self) -> EngineResult<()> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if (self.from..=self.to).contains(&n) {
            return Err(mooncake::Error::Metadata(
                "the metadata store is down".into(),
            ));
        }
        Ok(())
    }
}

impl VersionedStore for Flaky {
    fn get_versioned(&self, key: &str) -> EngineResult<Option<Versioned>> {
        self.check()?;
        self.inner.get_versioned(key)
    }
    fn create(&self, key: &str, value: &[u8]) -> EngineResult<bool> {
        self.check()?;
        self.inner.create(key, value)
    }
    fn put(&self, key: &str, value: &[u8]) -> EngineResult<()> {
        self.check()?;
        self.inner.put(key, value)
    }
    fn compare_and_swap(
        &self,
        key: &str,
        version: u64,
        value: Option<&[u8]>,
    ) -> EngineResult<bool> {
        self.check()?;
        self.inner.compare_and_swap(key, version, value)
    }
    fn list(&self, prefix: &str) -> EngineResult<Vec<(String, Versioned)>> {
        self.check()?;
        self.inner.list(prefix)
    }
}

#[test]
fn a_fetch_interrupted_by_the_metadata_store_going_down_completes_or_resumes() {
    let meta = SharedMeta::default();
    let cfg = config(4096);
    let seed = node(&meta, &cfg);
    let data = pattern(16 * 4096, 9);
    seed.put("obj", &data).unwrap();
    let flaky = Flaky {
        inner: meta.clone(),
        calls: AtomicU64::new(0),
        from: 2,
        to: 40,
    };
    let receiver = P2pStore::over(engine(), Meta::new(Box::new(flaky)), cfg.clone());
    let mut into = vec![0u8; data.len()];
    let dest = [(into.as_mut_ptr() as u64, into.len() as u64)];
    let mut attempts = 0;
    loop {
        attempts += 1;
        // SAFETY: `into` outlives the replica (deleted below) and is not touched meanwhile.
        match unsafe { receiver.get_replica_with("obj", &dest, GetOptions::default()) } {
            Ok(_) => break,
            Err(P2pError::Metadata(why)) => {
                assert!(why.contains("down"), "{why}");
                assert!(attempts < 50, "never got through");
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(into == data);
    let p = payload_of(&meta, "obj");
    assert!(p
        .shards
        .iter()
        .all(|s| s.held_by(receiver.local_server_name())));
    receiver.delete_replica("obj").unwrap();
}
