//! The conductor's index fed by a real master's KV events: our `mooncake_master` with
//! `--enable_kv_events`, objects put and removed over its RPC port, the conductor
//! subscribed to the master's publisher. Keys that are block hashes appear under the
//! store instance (and leave when removed); other keys are read through
//! `--kv_events_key_regex`; a global-cache-aware placement pulls a prefix from the
//! store; and the subscription survives a master restart. With HA masters, a new
//! leader's term (`cleared` and its state under a higher term number) replaces the
//! index, and a deposed leader's late batch is ignored.

#[path = "store_support/cluster.rs"]
mod cluster;

use cluster::{eventually, free_ports, Master, DEADLINE};
use mooncake::codec::zmtp::{PubLimits, PubSocket};
use mooncake::conductor::events::KeyReader;
use mooncake::conductor::sources::SourceSpec;
use mooncake::conductor::{Conductor, ConductorConfig, InstanceSpec, Role, ScheduleRequest};
use mooncake::master::kv_events::payload::{
    encode_batch, EventKind, Medium, Numbered, PendingEvent, Shape,
};
use mooncake::runtime::conn_threads::ConnLimits;
use mooncake::wire::master_api::{
    MasterApi, ObjectMeta, ReplicaType, ReplicateConfig, Segment, Uuid,
};
use mooncake::wire::rpc_client::MasterRpcClient;
use std::time::{Duration, Instant};

const CLIENT: Uuid = Uuid {
    first: 5,
    second: 5,
};

/// A master child with KV events on, and an RPC client with a fake segment mounted.
struct KvMaster {
    master: Master,
    rpc: MasterRpcClient,
}

impl KvMaster {
    /// A master publishing its KV events on `kv_port`.
    fn start(kv_port: u16) -> KvMaster {
        let endpoint = format!("--kv_events_bind_endpoint=tcp://127.0.0.1:{kv_port}");
        let master = Master::start_with_flags(
            3600,
            &[
                "--enable_kv_events",
                &endpoint,
                "--kv_events_backend_id=pool",
            ],
        );
        let rpc = master.rpc();
        let m = KvMaster { master, rpc };
        m.mount();
        m
    }

    /// Kills the master and starts a new one on the same ports.
    fn restart(&mut self) {
        self.master.restart();
        self.rpc = self.master.rpc();
        self.mount();
    }

    fn mount(&self) {
        let segment = Segment {
            id: Uuid {
                first: 9,
                second: 9,
            },
            name: "127.0.0.1:1".into(),
            base: 1 << 40,
            size: 64 << 20,
            te_endpoint: "127.0.0.1:1".into(),
            protocol: "tcp".into(),
            host_id: String::new(),
        };
        self.rpc.mount_segment(&segment, CLIENT).unwrap();
    }

    fn put(&self, key: &str) {
        let cfg = ReplicateConfig::default();
        self.rpc
            .put_start(CLIENT, key, 4096, &cfg, "default")
            .unwrap();
        let meta = ObjectMeta {
            key: key.into(),
            checksum: None,
        };
        self.rpc
            .put_end(CLIENT, &meta, ReplicaType::Memory, "default")
            .unwrap();
    }
}

/// A free port for the publisher (bound by the master, so it must be known up front
/// for the conductor to reconnect to the same place after a restart).
fn free_port() -> u16 {
    free_ports(1)[0]
}

fn prefix_on(c: &Conductor, instance: &str, blocks: &[u64]) -> usize {
    c.with(|s| {
        s.instances
            .slot_of(instance)
            .map_or(0, |slot| s.index.prefix_of(slot, blocks, u8::MAX))
    })
}

/// Puts `marker` until the conductor has seen it (the subscription is in effect).
fn sync(m: &KvMaster, c: &Conductor, marker: u64) {
    let deadline = Instant::now() + DEADLINE;
    while prefix_on(c, "pool", &[marker]) == 0 {
        assert!(
            Instant::now() < deadline,
            "the conductor never saw the marker"
        );
        let _ = m.rpc.remove(&marker.to_string(), true, "default");
        m.put(&marker.to_string());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_index_follows_a_real_masters_events() {
    let kv_port = free_port();
    let mut m = KvMaster::start(kv_port);
    let conductor = Conductor::new(ConductorConfig::default());
    let keys = KeyReader {
        pattern: Some(regex::Regex::new(r"^model-a@(\d+)$").unwrap()),
    };
    let spec = SourceSpec {
        endpoint: format!("tcp://127.0.0.1:{kv_port}"),
        instance: "pool".into(),
        tenant: "default".into(),
        dp_rank: 0,
        kind: "Mooncake".into(),
    };
    conductor.sources.add(&conductor, spec, keys).unwrap();
    sync(&m, &conductor, 999_999);

    for key in ["11", "12", "0xd", "model-a@14", "not-a-block"] {
        m.put(key);
    }
    eventually(
        "the stored blocks reach the index",
        || prefix_on(&conductor, "pool", &[11, 12, 13, 14]) == 4,
        || format!("{}", conductor.sources.stats()),
    );
    m.rpc.remove("12", false, "default").unwrap();
    eventually(
        "a removed block leaves the index",
        || prefix_on(&conductor, "pool", &[11, 12]) == 1,
        String::new,
    );
    let stats = conductor.sources.stats();
    assert_eq!(stats[0]["instance"], "pool");
    assert!(stats[0]["skipped_events"].as_u64().unwrap() >= 1, "{stats}");

    // A prefill instance without the prefix pulls it from the store.
    conductor.with(|s| {
        for (id, role) in [("p0", Role::Prefill), ("d0", Role::Decode)] {
            let spec = InstanceSpec {
                id: id.into(),
                role,
                kv_capacity_blocks: 0,
                max_batch: 0,
            };
            s.register(spec, 0.0).unwrap();
        }
    });
    m.put("12");
    eventually(
        "the block is back",
        || prefix_on(&conductor, "pool", &[11, 12, 13, 14]) == 4,
        String::new,
    );
    let placed = conductor
        .schedule(&ScheduleRequest {
            request_id: "r".into(),
            hash_ids: vec![11, 12, 13, 14, 15],
            input_length: 5 * 512,
            output_length_hint: None,
            ttft_slo_ms: None,
            tbt_slo_ms: None,
            now_ms: Some(0.0),
        })
        .unwrap();
    assert_eq!(placed.prefill, "p0");
    assert_eq!(placed.transfer_from.as_deref(), Some("pool"));
    assert_eq!(placed.transfer_blocks, 4);

    // The master restarts on the same ports: the subscription reconnects.
    m.restart();
    sync(&m, &conductor, 888_888);
    m.put("16");
    eventually(
        "events after the restart arrive",
        || prefix_on(&conductor, "pool", &[16]) == 1,
        String::new,
    );
    assert!(conductor.sources.stats()[0]["connects"].as_u64().unwrap() >= 2);
    conductor.shutdown();
}

/// One HA master's publisher, as the conductor sees it: batches numbered within a term.
struct TermPublisher {
    socket: PubSocket,
    next: u64,
}

impl TermPublisher {
    fn bind() -> TermPublisher {
        let limits = PubLimits {
            high_water_mark: 1000,
            max_queued_bytes: 1 << 20,
            connections: ConnLimits::new(4, 4),
        };
        let socket = PubSocket::bind("127.0.0.1:0".parse().unwrap(), limits).unwrap();
        TermPublisher { socket, next: 1 }
    }

    fn endpoint(&self) -> String {
        format!("tcp://{}", self.socket.local_addr())
    }

    /// Publishes one batch of `events` (kind and block hash) in `term`.
    fn publish(&mut self, term: u64, events: &[(EventKind, u64)]) {
        let pending: Vec<PendingEvent> = events
            .iter()
            .map(|(kind, hash)| PendingEvent {
                kind: *kind,
                key: if *kind == EventKind::Cleared {
                    String::new()
                } else {
                    hash.to_string()
                },
                medium: Medium::Cpu,
                tenant: "default".into(),
                group: String::new(),
            })
            .collect();
        let numbered: Vec<Numbered<'_>> = pending
            .iter()
            .zip(events)
            .map(|(event, (kind, hash))| Numbered {
                event,
                id: 1,
                hash: (*kind != EventKind::Cleared).then_some(*hash),
            })
            .collect();
        let shape = Shape {
            backend_id: "pool".into(),
            legacy: true,
            object_key: true,
        };
        let payload = encode_batch(0, &numbered, &shape);
        let seq = term << 32 | self.next;
        self.next += 1;
        self.socket.send(&[b"", &seq.to_be_bytes(), &payload]);
    }
}

fn stale_batches(c: &Conductor) -> u64 {
    let stats = c.sources.stats();
    stats
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stale_batches"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_new_leaders_term_replaces_the_index_and_a_deposed_leader_is_ignored() {
    let (mut old, mut new) = (TermPublisher::bind(), TermPublisher::bind());
    let conductor = Conductor::new(ConductorConfig::default());
    for (rank, p) in [&old, &new].into_iter().enumerate() {
        let spec = SourceSpec {
            endpoint: p.endpoint(),
            instance: "pool".into(),
            tenant: "default".into(),
            dp_rank: rank as i64,
            kind: "Mooncake".into(),
        };
        let keys = KeyReader { pattern: None };
        conductor.sources.add(&conductor, spec, keys).unwrap();
    }
    // The old leader's term 5: published until the conductor has it (its subscription
    // is in effect from then on).
    let deadline = Instant::now() + DEADLINE;
    while prefix_on(&conductor, "pool", &[101]) == 0 {
        assert!(Instant::now() < deadline, "the first term never arrived");
        old.publish(5, &[(EventKind::Stored, 101)]);
        std::thread::sleep(Duration::from_millis(50));
    }
    // The new leader's term 6: everything it holds after `cleared`, again until seen.
    while prefix_on(&conductor, "pool", &[202]) == 0 {
        assert!(Instant::now() < deadline, "the new term never arrived");
        new.publish(6, &[(EventKind::Cleared, 0), (EventKind::Stored, 202)]);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        prefix_on(&conductor, "pool", &[101]),
        0,
        "cleared by the new term"
    );
    // A late batch of the deposed leader is ignored, whenever it arrives.
    old.publish(5, &[(EventKind::Stored, 303)]);
    eventually(
        "the deposed leader's batch is counted as stale",
        || stale_batches(&conductor) >= 1,
        || format!("{}", conductor.sources.stats()),
    );
    assert_eq!(prefix_on(&conductor, "pool", &[303]), 0);
    new.publish(6, &[(EventKind::Removed, 202), (EventKind::Stored, 404)]);
    eventually(
        "the new term goes on",
        || prefix_on(&conductor, "pool", &[404]) == 1,
        String::new,
    );
    assert_eq!(prefix_on(&conductor, "pool", &[202]), 0);
    let stats = conductor.sources.stats();
    let lost: u64 = stats
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["lost_batches"].as_u64().unwrap())
        .sum();
    assert_eq!(lost, 0, "a new term is no gap: {stats}");
}
