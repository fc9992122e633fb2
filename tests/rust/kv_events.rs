//! KV events end to end (spec tiers-events-conductor.md §2): the `mooncake_master`
//! binary with `--enable_kv_events`, driven over its RPC port, watched by a ZMTP SUB
//! written here from the spec (`kv_events_support`). Every event is compared whole
//! (keys, order, nil or absent) with what upstream's publisher writes; sequence numbers
//! and event ids must run without gaps; operations upstream does not announce must
//! publish nothing (checked with a marker put: one worker publishes in order, so the
//! marker's event comes right after whatever came before it); `/kv_events/status` must
//! count exactly what was published. Also: the switches, a master whose publisher
//! cannot start, and HA (only the leader publishes; a promotion opens a term:
//! `cleared`, then the restored objects, numbered from the new view).

#[path = "store_support/cluster.rs"]
mod cluster;
mod kv_events_support;
mod kv_servers;

use cluster::{eventually, free_ports, master_exe, Master, Proc};
use kv_events_support::{expected_map, Batch, Expect, Shape, Sub, V};
use mooncake::wire::master_api::{
    ErrorCode, MasterApi, ObjectMeta, ReplicaType, ReplicateConfig, Segment, Uuid,
};
use mooncake::wire::rpc_client::MasterRpcClient;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::time::{Duration, Instant};

const T: &str = "default";
const CLIENT: Uuid = Uuid {
    first: 7,
    second: 7,
};
const MIB: u64 = 1 << 20;
const SMALL: u64 = 4096;

/// A `mooncake_master` child and an RPC client to it.
struct KvMaster {
    proc: Proc,
    rpc: MasterRpcClient,
    metrics_port: u16,
}

impl KvMaster {
    /// A master on free loopback ports with `flags` (besides ports and a long client
    /// TTL), once it answers RPCs.
    fn start(flags: &[&str]) -> KvMaster {
        let master = Master::start_with_flags(3600, flags);
        let rpc = master.rpc();
        let Master {
            proc, metrics_port, ..
        } = master;
        KvMaster {
            proc,
            rpc,
            metrics_port,
        }
    }

    /// The address the publisher bound, from the master's log.
    fn kv_addr(&self) -> SocketAddr {
        kv_addr_in_log(&self.proc)
    }

    fn status(&self) -> String {
        http_get(self.metrics_port, "/kv_events/status")
    }

    fn mount(&self, size: u64) {
        self.rpc.mount_segment(&segment(size), CLIENT).unwrap();
    }

    fn put(&self, key: &str, len: u64, group: &str) -> Result<(), ErrorCode> {
        put_via(&self.rpc, key, len, group)
    }
}

/// `KV events published on <addr>` from `proc`'s log.
fn kv_addr_in_log(proc: &Proc) -> SocketAddr {
    let mut found = None;
    eventually(
        "the master logs its KV-event address",
        || {
            let log = std::fs::read_to_string(&proc.log).unwrap_or_default();
            found = log
                .lines()
                .find_map(|l| l.strip_prefix("KV events published on "))
                .and_then(|a| a.trim().parse().ok());
            found.is_some()
        },
        || proc.log_tail(),
    );
    found.unwrap()
}

fn http_get(port: u16, path: &str) -> String {
    let url = format!("http://127.0.0.1:{port}{path}");
    match ureq::get(&url).timeout(Duration::from_secs(10)).call() {
        Ok(r) => r.into_string().unwrap(),
        Err(e) => panic!("GET {url}: {e}"),
    }
}

/// The exact `/kv_events/status` body.
fn status_body(enabled: bool, batches: u64, events: u64, dropped: u64, skipped: u64) -> String {
    format!(
        "{{\"enabled\":{enabled},\"published_batches\":{batches},\"published_events\":{events},\
         \"dropped_events\":{dropped},\"skipped_unparsed_keys\":{skipped}}}"
    )
}

fn segment(size: u64) -> Segment {
    Segment {
        id: Uuid {
            first: 9,
            second: 9,
        },
        name: "127.0.0.1:1".into(),
        base: 1 << 40,
        size,
        te_endpoint: "127.0.0.1:1".into(),
        protocol: "tcp".into(),
        host_id: String::new(),
    }
}

fn config(group: &str) -> ReplicateConfig {
    ReplicateConfig {
        group_ids: (!group.is_empty()).then(|| vec![group.to_string()]),
        ..ReplicateConfig::default()
    }
}

fn meta(key: &str) -> ObjectMeta {
    ObjectMeta {
        key: key.into(),
        checksum: None,
    }
}

fn put_via(rpc: &MasterRpcClient, key: &str, len: u64, group: &str) -> Result<(), ErrorCode> {
    rpc.put_start(CLIENT, key, len, &config(group), T)?;
    rpc.put_end(CLIENT, &meta(key), ReplicaType::Memory, T)
}

/// The events of one subscriber, checked as they are read: sequence numbers from one
/// batch to the next and event ids from one event to the next without gaps, every
/// event's timestamp its batch's.
struct Events {
    sub: Sub,
    shape: Shape,
    queue: VecDeque<(V, u64)>,
    last_seq: u64,
    last_id: u64,
    /// Events read whose key is not a hash (empty `seq_hashes`).
    unparsed: u64,
}

impl Events {
    /// Subscribes to everything at `addr` and waits until the subscription is in
    /// effect: every event published from then on is read here.
    fn open(addr: SocketAddr, shape: Shape) -> Events {
        let mut sub = Sub::connect(addr);
        sub.subscribe_all();
        sub.sync();
        Events {
            sub,
            shape,
            queue: VecDeque::new(),
            last_seq: 0,
            last_id: 0,
            unparsed: 0,
        }
    }

    fn next(&mut self) -> V {
        while self.queue.is_empty() {
            let Batch {
                seq,
                timestamp,
                events,
            } = self.sub.recv();
            assert_eq!(seq, self.last_seq + 1, "sequence numbers run without gaps");
            self.last_seq = seq;
            assert!(!events.is_empty() && events.len() <= 64);
            self.queue
                .extend(events.into_iter().map(|e| (e, timestamp)));
        }
        let (event, timestamp) = self.queue.pop_front().unwrap();
        let id = event.get("event_id").expect("event_id").uint();
        assert_eq!(id, self.last_id + 1, "event ids run without gaps");
        self.last_id = id;
        assert_eq!(event.get("timestamp"), Some(&V::U(timestamp)));
        // A `cleared` event has no hashes at all.
        if event
            .get("seq_hashes")
            .is_some_and(|hashes| hashes.array().is_empty())
        {
            self.unparsed += 1;
        }
        event
    }

    /// Reads one event and checks it is exactly `e`'s map.
    fn expect(&mut self, e: &Expect<'_>) -> V {
        let event = self.next();
        let id = event.get("event_id").unwrap().uint();
        let ts = event.get("timestamp").unwrap().uint();
        assert_eq!(event, expected_map(e, id, ts, &self.shape), "for {e:?}");
        event
    }

    fn expect_all(&mut self, es: &[Expect<'_>]) {
        for e in es {
            self.expect(e);
        }
    }
}

fn stored<'a>(key: &'a str, hash: Option<u64>) -> Expect<'a> {
    Expect {
        stored: true,
        key,
        hash,
        group: "",
    }
}

fn removed<'a>(key: &'a str, hash: Option<u64>) -> Expect<'a> {
    Expect {
        stored: false,
        ..stored(key, hash)
    }
}

/// The keys of an eviction fill: each one's group, and those announced as removed.
#[derive(Default)]
struct Fill {
    groups: HashMap<String, String>,
    gone: HashSet<String>,
}

impl Fill {
    /// Reads events up to the `stored` one of `marker`, checking each whole; returns
    /// the other keys announced as stored, in order.
    fn read_until(&mut self, ev: &mut Events, marker: &str) -> Vec<String> {
        let mut stored_keys = Vec::new();
        loop {
            let (key, is_stored) = self.read_one(ev);
            if !is_stored {
                continue;
            } else if key == marker {
                return stored_keys;
            } else {
                stored_keys.push(key);
            }
        }
    }

    /// Reads one event of the fill and checks it whole (a removal is recorded, and
    /// must be the key's first); returns its key and whether it says stored.
    fn read_one(&mut self, ev: &mut Events) -> (String, bool) {
        let e = ev.next();
        let key = e.get("object_key").unwrap().str().to_string();
        let is_stored = e.get("event_type").unwrap().str() == "stored";
        let group = self
            .groups
            .get(&key)
            .unwrap_or_else(|| panic!("an event for {key}"));
        let want = Expect {
            stored: is_stored,
            key: &key,
            hash: None,
            group,
        };
        let id = e.get("event_id").unwrap().uint();
        let ts = e.get("timestamp").unwrap().uint();
        assert_eq!(e, expected_map(&want, id, ts, &ev.shape));
        if !is_stored {
            assert!(self.gone.insert(key.clone()), "{key} removed twice");
        }
        (key, is_stored)
    }
}

/// One counter of a `/kv_events/status` body.
fn status_counter(body: &str, name: &str) -> u64 {
    let status: serde_json::Value = serde_json::from_str(body).expect("status is JSON");
    status[name]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} in {body}"))
}

/// [`wait_status`] while the eviction thread may still publish: every event the
/// status counts beyond what was read is read too (each must be a removal of a fill
/// key, checked whole), until the status and the subscriber agree.
fn wait_status_reading_evictions(port: u16, ev: &mut Events, fill: &mut Fill) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body = http_get(port, "/kv_events/status");
        let want = status_body(true, ev.last_seq, ev.last_id, 0, ev.unparsed);
        if body == want {
            return;
        }
        if status_counter(&body, "published_events") > ev.last_id {
            let (key, is_stored) = fill.read_one(ev);
            assert!(!is_stored, "{key} announced as stored after the last put");
            continue;
        }
        assert!(
            Instant::now() < deadline,
            "the status counts what was published: want {want}\nhave {body}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn map_len(event: &V) -> usize {
    match event {
        V::M(m) => m.len(),
        other => panic!("not a map: {other:?}"),
    }
}

/// Polls `/kv_events/status` until it shows what `events` read (the counters are
/// updated right after a batch is handed to the socket, possibly after it arrived).
fn wait_status(port: u16, events: &Events, skipped: u64) {
    let want = status_body(true, events.last_seq, events.last_id, 0, skipped);
    eventually(
        "the status counts what was published",
        || http_get(port, "/kv_events/status") == want,
        || format!("want {want}\nhave {}", http_get(port, "/kv_events/status")),
    );
}

#[test]
fn events_follow_upstreams_triggers() {
    let m = KvMaster::start(&[
        "--enable_kv_events",
        "--kv_events_bind_endpoint=tcp://127.0.0.1:0",
        "--kv_events_backend_id=node0",
    ]);
    assert_eq!(m.status(), status_body(true, 0, 0, 0, 0));
    let mut ev = Events::open(
        m.kv_addr(),
        Shape {
            backend: "node0".into(),
            legacy: true,
            object_key: true,
        },
    );
    m.mount(16 * MIB);

    // Puts: hash keys (decimal, hex, u64 max, 2^63), others, a group, a batch.
    let keys: [(&str, Option<u64>); 5] = [
        ("12345", Some(12345)),
        ("0x2A", Some(42)),
        ("abc-not-hash", None),
        ("18446744073709551615", Some(u64::MAX)),
        ("9223372036854775808", Some(1 << 63)),
    ];
    for (k, h) in keys {
        m.put(k, SMALL, "").unwrap();
        let e = ev.expect(&stored(k, h));
        assert_eq!(map_len(&e), 20);
    }
    m.put("grouped", SMALL, "g1").unwrap();
    ev.expect(&Expect {
        group: "g1",
        ..stored("grouped", None)
    });
    let batch = ["batch-1".to_string(), "batch-2".to_string()];
    let cfg = ReplicateConfig::default();
    for r in m
        .rpc
        .batch_put_start(CLIENT, &batch, &[SMALL, SMALL], &cfg, T)
        .unwrap()
    {
        r.unwrap();
    }
    let metas = [meta("batch-1"), meta("batch-2")];
    for r in m
        .rpc
        .batch_put_end(CLIENT, &metas, ReplicaType::Memory, T)
        .unwrap()
    {
        r.unwrap();
    }
    ev.expect_all(&[stored("batch-1", None), stored("batch-2", None)]);

    // A put of an existing key fails; a repeated PutEnd changes nothing; an upsert of
    // an existing key is a new value.
    assert_eq!(
        m.put("12345", SMALL, ""),
        Err(ErrorCode::OBJECT_ALREADY_EXISTS)
    );
    m.rpc
        .put_end(CLIENT, &meta("0x2A"), ReplicaType::Memory, T)
        .unwrap();
    m.rpc.upsert_start(CLIENT, "0x2A", SMALL, &cfg, T).unwrap();
    m.rpc
        .upsert_end(CLIENT, &meta("0x2A"), ReplicaType::Memory, T)
        .unwrap();
    ev.expect(&stored("0x2A", Some(42)));

    // Remove announces; batch remove, remove by regex and remove all do not.
    m.rpc.remove("12345", true, T).unwrap();
    let e = ev.expect(&removed("12345", Some(12345)));
    assert_eq!(map_len(&e), 17);
    m.rpc.remove("grouped", true, T).unwrap();
    ev.expect(&Expect {
        group: "g1",
        ..removed("grouped", None)
    });
    let gone = ["0x2A".to_string(), "abc-not-hash".to_string()];
    for r in m.rpc.batch_remove(&gone, true, T).unwrap() {
        r.unwrap();
    }
    assert_eq!(m.rpc.remove_by_regex("^1844", true, T), Ok(1));
    assert_eq!(m.rpc.remove_all(true, T), Ok(3));
    for (k, _) in keys {
        assert_eq!(m.rpc.exist_key(k, T), Ok(false), "{k}");
    }
    m.put("marker-1", SMALL, "").unwrap();
    ev.expect(&stored("marker-1", None));

    // An eviction fill: 40 x 1 MiB into 16 MiB. Every put is announced, and every
    // object evicted entirely (grouped ones together) is announced as removed.
    let mut fill = Fill::default();
    fill.groups.insert("marker-1".into(), String::new());
    let mut puts = Vec::new();
    for i in 0..40 {
        let key = format!("fill-{i}");
        let group = if i < 4 { "gfill" } else { "" };
        m.put(&key, MIB, group).unwrap();
        fill.groups.insert(key.clone(), group.to_string());
        puts.push(key);
    }
    m.put("marker-2", SMALL, "").unwrap();
    fill.groups.insert("marker-2".into(), String::new());
    assert_eq!(
        fill.read_until(&mut ev, "marker-2"),
        puts,
        "every put announced, in order"
    );
    let removed_by_fill = fill.gone.clone();
    assert!(!removed_by_fill.is_empty(), "the fill evicted something");
    // What was announced as removed is gone; what is gone was announced (by the
    // next marker: the eviction thread may still be at work).
    let exists: Vec<(String, bool)> = fill
        .groups
        .keys()
        .map(|k| (k.clone(), m.rpc.exist_key(k, T).unwrap()))
        .collect();
    m.put("marker-3", SMALL, "").unwrap();
    fill.groups.insert("marker-3".into(), String::new());
    fill.read_until(&mut ev, "marker-3");
    for (key, there) in exists {
        if removed_by_fill.contains(&key) {
            assert!(!there, "{key} announced as removed but still there");
        }
        if !there {
            assert!(fill.gone.contains(&key), "{key} is gone unannounced");
        }
    }
    let grouped_gone = (0..4)
        .filter(|i| fill.gone.contains(&format!("fill-{i}")))
        .count();
    assert!(
        grouped_gone == 0 || grouped_gone == 4,
        "a group goes together"
    );

    // The eviction thread may publish more batches after the last marker: the status
    // may run ahead of what was read, never behind it for long.
    wait_status_reading_evictions(m.metrics_port, &mut ev, &mut fill);
}

#[test]
fn switches_off_shrink_maps_and_leave_out_keys_that_are_not_hashes() {
    let m = KvMaster::start(&[
        "--enable_kv_events=true",
        "--kv_events_bind_endpoint=tcp://127.0.0.1:0",
        "--kv_events_backend_id=pool-7",
        "--kv_events_emit_legacy_compat=false",
        "--nokv_events_emit_object_key",
        "--kv_events_model_name=ignored",
        "--kv_events_block_size=16",
    ]);
    let mut ev = Events::open(
        m.kv_addr(),
        Shape {
            backend: "pool-7".into(),
            legacy: false,
            object_key: false,
        },
    );
    m.mount(16 * MIB);
    m.put("0x10", SMALL, "").unwrap();
    assert_eq!(map_len(&ev.expect(&stored("0x10", Some(16)))), 16);
    m.put("not-a-hash", SMALL, "").unwrap();
    m.rpc.remove("not-a-hash", true, T).unwrap();
    m.rpc.remove("0x10", true, T).unwrap();
    assert_eq!(map_len(&ev.expect(&removed("0x10", Some(16)))), 14);
    m.put("777", SMALL, "").unwrap();
    ev.expect(&stored("777", Some(777)));
    // Both events of "not-a-hash" were left out, and counted.
    wait_status(m.metrics_port, &ev, 2);
}

#[test]
fn a_publisher_that_cannot_start_reports_disabled() {
    let off = status_body(false, 0, 0, 0, 0);
    let m = KvMaster::start(&[]);
    assert_eq!(m.status(), off);
    m.mount(16 * MIB);
    m.put("1", SMALL, "").unwrap();
    assert_eq!(m.status(), off);
    drop(m);

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = format!(
        "--kv_events_bind_endpoint=tcp://127.0.0.1:{}",
        taken.local_addr().unwrap().port()
    );
    for (flags, why) in [
        (
            vec![
                "--enable_kv_events",
                "--kv_events_bind_endpoint=tcp://127.0.0.1:0",
            ],
            "kv_events_backend_id is empty",
        ),
        (
            vec!["--enable_kv_events", "--kv_events_backend_id=b"],
            "kv_events_bind_endpoint is empty",
        ),
        (
            vec!["--enable_kv_events", "--kv_events_backend_id=b", &busy],
            "binding tcp://127.0.0.1:",
        ),
        (
            vec![
                "--enable_kv_events",
                "--kv_events_backend_id=b",
                "--kv_events_bind_endpoint=ipc:///tmp/mc-kv",
            ],
            "ipc:// transport is not supported",
        ),
    ] {
        let m = KvMaster::start(&flags);
        assert_eq!(m.status(), off, "{flags:?}");
        let log = std::fs::read_to_string(&m.proc.log).unwrap();
        assert!(log.contains(why), "{flags:?}: no {why:?} in\n{log}");
        // The master serves anyway.
        m.mount(16 * MIB);
        m.put("1", SMALL, "").unwrap();
    }
}

/// An HA master on Redis with KV events.
struct HaKv {
    proc: Proc,
    rpc_port: u16,
    metrics_port: u16,
}

impl HaKv {
    fn start(redis: &kv_servers::Redis, backend_id: &str) -> HaKv {
        let ports = free_ports(2);
        let mut cmd = Command::new(master_exe());
        cmd.args([
            "--enable_ha=true".to_string(),
            "--ha_backend_type=redis".into(),
            format!("--ha_backend_connstring={}", redis.url()),
            "--ha_lease_ttl_sec=1".into(),
            format!("--port={}", ports[0]),
            "--rpc_address=127.0.0.1".into(),
            format!("--metrics_port={}", ports[1]),
            "--metrics_host=127.0.0.1".into(),
            "--client_ttl=3600".into(),
            "--enable_kv_events".into(),
            "--kv_events_bind_endpoint=tcp://127.0.0.1:0".into(),
            format!("--kv_events_backend_id={backend_id}"),
        ]);
        let proc = Proc::spawn(cmd, backend_id, &[], false);
        HaKv {
            proc,
            rpc_port: ports[0],
            metrics_port: ports[1],
        }
    }

    fn health(&self) -> String {
        let url = format!("http://127.0.0.1:{}/health", self.metrics_port);
        match ureq::get(&url).timeout(Duration::from_secs(5)).call() {
            Ok(r) => r.into_string().unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) {
        eventually(what, || ok(&self.health()), || self.proc.log_tail());
    }

    fn rpc(&self) -> MasterRpcClient {
        let t = Duration::from_secs(10);
        MasterRpcClient::connect(&format!("127.0.0.1:{}", self.rpc_port), t, t).unwrap()
    }
}

/// The view version a master's `/health` reports.
fn view_version(health: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(health).expect("health is JSON");
    v["view_version"].as_u64().expect("a view version")
}

#[test]
fn with_ha_only_the_leader_publishes_and_a_promotion_opens_a_term_with_its_state() {
    let Some(redis) = kv_servers::Redis::start("kv_events HA", None) else {
        return;
    };
    let shape = |b: &str| Shape {
        backend: b.into(),
        legacy: true,
        object_key: true,
    };
    let mut a = HaKv::start(&redis, "a");
    a.wait_for("a leads", |h| h.contains("\"role\":\"leader\""));
    let b = HaKv::start(&redis, "b");
    b.wait_for("b is an in-sync standby", |h| {
        h.contains("\"ha_state\":\"standby\"") && h.contains("\"in_sync\":true")
    });
    let mut on_a = Events::open(kv_addr_in_log(&a.proc), shape("a"));
    let mut on_b = Events::open(kv_addr_in_log(&b.proc), shape("b"));
    // a's term began before these subscriptions, with a batch holding only `cleared`
    // (a held nothing): numbered from a's view, event 1.
    let view_a = view_version(&a.health());
    (on_a.last_seq, on_a.last_id) = (view_a << 32 | 1, 1);

    let rpc = a.rpc();
    rpc.mount_segment(&segment(16 * MIB), CLIENT).unwrap();
    for k in ["1", "2", "3"] {
        put_via(&rpc, k, SMALL, "").unwrap();
    }
    rpc.remove("2", true, T).unwrap();
    on_a.expect_all(&[
        stored("1", Some(1)),
        stored("2", Some(2)),
        stored("3", Some(3)),
        removed("2", Some(2)),
    ]);
    // The standby holds every change (replies wait for it) and published none.
    assert_eq!(
        http_get(b.metrics_port, "/kv_events/status"),
        status_body(true, 0, 0, 0, 0)
    );
    drop(rpc);

    a.proc.kill();
    b.wait_for("b leads", |h| h.contains("\"role\":\"leader\""));
    let view_b = view_version(&b.health());
    assert!(view_b > view_a, "views {view_a} then {view_b}");
    let rpc = b.rpc();
    assert_eq!(rpc.exist_key("3", T), Ok(true));
    put_via(&rpc, "4", SMALL, "").unwrap();
    // b's term: numbered from its own view; first `cleared`, then a `stored` for each
    // object it restored (in no set order), then its own put.
    on_b.last_seq = view_b << 32;
    let cleared = on_b.next();
    assert_eq!(cleared.get("event_type"), Some(&V::S("cleared".into())));
    assert_eq!(cleared.get("type"), Some(&V::S("AllBlocksCleared".into())));
    assert_eq!(cleared.get("backend_id"), Some(&V::S("b".into())));
    assert_eq!(cleared.get("tenant_id"), Some(&V::Nil));
    assert_eq!(cleared.get("object_key"), None);
    assert_eq!(map_len(&cleared), 13);
    let mut restored: Vec<String> = (0..2)
        .map(|_| {
            let e = on_b.next();
            let key = e.get("object_key").unwrap().str().to_string();
            let id = e.get("event_id").unwrap().uint();
            let ts = e.get("timestamp").unwrap().uint();
            let hash = key.parse().unwrap();
            let want = expected_map(&stored(&key, Some(hash)), id, ts, &on_b.shape);
            assert_eq!(e, want);
            key
        })
        .collect();
    restored.sort();
    assert_eq!(restored, ["1", "3"]);
    assert_eq!(on_b.last_seq, view_b << 32 | 1, "the resync is one batch");
    on_b.expect(&stored("4", Some(4)));
    assert_eq!((on_b.last_seq, on_b.last_id), (view_b << 32 | 2, 4));
    eventually(
        "the status counts the two batches and four events",
        || http_get(b.metrics_port, "/kv_events/status") == status_body(true, 2, 4, 0, 0),
        || http_get(b.metrics_port, "/kv_events/status"),
    );
}
