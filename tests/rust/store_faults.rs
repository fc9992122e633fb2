//! Fault injection against the real `mooncake_master` binary (spawned on 127.0.0.1
//! with free ports; a 4 s `--client_ttl` where clients must expire, 60 s elsewhere) and
//! store clients, in this process and in `store_node` child processes
//! (`examples/store_node.rs`):
//!
//! 1. a segment owner killed with SIGKILL: its objects disappear once its client TTL
//!    expires, objects on the surviving owner stay readable byte for byte, new puts
//!    keep succeeding on the survivor. A hung owner (SIGSTOP): reads fail instead of
//!    hanging, it expires, and once resumed it remounts an empty segment that takes
//!    data again. A client that dies right after `MountSegment` or `ReMountSegment`
//!    (never pinging) has its segment expired too;
//! 2. the master killed and restarted on the same port: the heartbeat reconnects and
//!    remounts every segment, `health` goes 2 while it is down and 0 after, data moves
//!    again between processes (and what the old master knew is gone);
//! 3. the master hung (SIGSTOP) or dead (SIGKILL): every call of a set-up client
//!    returns RPC_FAIL (-900) or RPC_TIMEOUT (-901) instead of hanging, in-process
//!    (500 ms RPC deadline through `connect_master`) and in a child whose deadline
//!    comes from `MC_RPC_TIMEOUT_MS`; fresh setups against a dead or hung master fail
//!    with an error code; clients recover once the master resumes and close in time;
//! 4. the master fed garbage (random bytes, 4 GiB frame headers, bodies cut off
//!    mid-way, random argument bodies for every method, a flood of silent connections)
//!    keeps serving a real client throughout and answers `ServiceReady` afterwards;
//!    mutated copies of upstream's captured requests never make a handler fail.
//!
//! Nothing asserts on durations: waits poll with generous deadlines, and calls that
//! could hang run under a watchdog that fails the test after [`HANG_LIMIT`].

#[path = "store_support/cluster.rs"]
mod cluster;
#[path = "store_support/node.rs"]
mod node;

use cluster::{eventually, eventually_within, free_ports, Master};
use mooncake::store::{
    connect_master, Client, Code, ErrorCode, Health, ReplicateConfig, SetupConfig, StoreError,
    StoreResult,
};
use mooncake::wire::codec;
use mooncake::wire::coro_rpc::{self, Method};
use mooncake::wire::master_api::{MasterApi, Segment, Uuid};
use mooncake::wire::rpc_client::MasterRpcClient;
use mooncake::wire::struct_pack;
use node::{spawn_node, Node};
use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MIB: u64 = 1 << 20;
/// `--client_ttl` (seconds) where a test waits for clients to expire: small, yet
/// several heartbeat periods (1 s), so a loaded machine does not expire live clients.
const SHORT_TTL: u64 = 4;
/// `--client_ttl` where no client should ever expire (the heartbeats must survive
/// scheduling stalls of a busy 2-core machine).
const LONG_TTL: u64 = 60;
/// A single call that has not returned after this is reported as hung.
const HANG_LIMIT: Duration = Duration::from_secs(30);
/// The same for calls in a child whose RPC deadline is [`CHILD_RPC_TIMEOUT_MS`]
/// (well under upstream's 30 s default, so a child ignoring the variable is caught).
const CHILD_HANG_LIMIT: Duration = Duration::from_secs(20);
/// `MC_RPC_TIMEOUT_MS` / `MC_RPC_CONNECT_TIMEOUT_MS` of children that must fail fast.
const CHILD_RPC_TIMEOUT_MS: &str = "500";
/// RPC deadlines of the in-process clients that must fail fast.
const FAST_RPC: Duration = Duration::from_millis(500);

// ---------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------

/// Same pattern as `store_node`.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

fn on(segment: &str) -> ReplicateConfig {
    ReplicateConfig {
        preferred_segments: vec![segment.to_string()],
        ..ReplicateConfig::default()
    }
}

fn config(master: &str, hostname: &str, segment: u64, local: u64) -> SetupConfig {
    SetupConfig {
        local_hostname: hostname.into(),
        metadata_server: "P2PHANDSHAKE".into(),
        global_segment_size: segment,
        local_buffer_size: local,
        master_server_addr: master.into(),
        ..SetupConfig::default()
    }
}

/// Runs `f` on its own thread; fails the test if it has not returned after `limit`.
fn guarded<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(RecvTimeoutError::Timeout) => panic!("{what} hung: no return within {limit:?}"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

/// Reads `key` and checks it is `expect`, byte for byte.
fn assert_reads(client: &Client, key: &str, expect: &[u8]) {
    let mut out = vec![0u8; expect.len()];
    match client.get_into(key, &mut out) {
        Ok(n) => {
            assert_eq!(n, expect.len() as u64, "size of {key}");
            assert!(out == expect, "{key} read back different bytes");
        }
        Err(e) => panic!("get_into({key}): {e}"),
    }
}

fn is_rpc_error(e: &StoreError) -> bool {
    *e == ErrorCode::RPC_FAIL || *e == ErrorCode::RPC_TIMEOUT
}

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

// ---------------------------------------------------------------------------------
// 1. A segment owner is killed
// ---------------------------------------------------------------------------------

#[test]
fn killed_segment_owner_loses_its_objects_and_the_survivor_keeps_serving() {
    let master = Master::start(SHORT_TTL);
    let mut victim = Node::start(&master, 32, &[]);
    let mut survivor = Node::start(&master, 32, &[]);
    let client = Arc::new(
        Client::setup(&config(&master.addr(), "127.0.0.1", 0, 16 * MIB))
            .expect("pure client setup"),
    );
    eventually(
        "both owners are mounted",
        || {
            let s = master.segments();
            s.contains(&victim.hostname) && s.contains(&survivor.hostname)
        },
        || format!("{:?}", master.segments()),
    );

    // Objects pinned to each owner's segment, placement checked on the master.
    let mut on_victim = Vec::new();
    let mut on_survivor = Vec::new();
    for i in 0..6u8 {
        for (owner, list, tag) in [
            (&victim, &mut on_victim, "v"),
            (&survivor, &mut on_survivor, "s"),
        ] {
            let key = format!("{tag}-{i}");
            let seed = i.wrapping_mul(13) ^ 0x55;
            let value = pattern(100_000 + usize::from(i) * 7_001, seed);
            client.put(&key, &value, &on(&owner.hostname)).unwrap();
            assert_eq!(
                master.placement(&key),
                Some(vec![owner.te.clone()]),
                "{key} not on {}",
                owner.hostname
            );
            assert_reads(&client, &key, &value);
            list.push((key, value, seed));
        }
    }
    // The survivor process reads an object held by the victim.
    let (k, v, seed) = &on_victim[0];
    let get = format!("get {k} {} {seed}", v.len());
    assert_eq!(
        survivor.cmd(&get, HANG_LIMIT),
        format!("get {} match", v.len())
    );

    victim.proc.kill();

    // Before the TTL expires, puts aimed at the survivor work.
    let early = pattern(50_000, 99);
    client
        .put("early", &early, &on(&survivor.hostname))
        .unwrap();
    assert_reads(&client, "early", &early);

    // The victim's objects are gone: OBJECT_NOT_FOUND, at once (the master saw the
    // victim's connections drop) or at worst after transfer errors until it expires.
    for (key, value, _) in &on_victim {
        let (c, k, len) = (client.clone(), key.clone(), value.len());
        eventually(
            &format!("{key} is gone after the owner's death"),
            || {
                let (c, k2) = (c.clone(), k.clone());
                let r = guarded(&format!("get_into({k})"), HANG_LIMIT, move || {
                    let mut out = vec![0u8; len];
                    c.get_into(&k2, &mut out)
                });
                assert!(r.is_err(), "{k} readable after its owner died");
                // A read that reached for the dead owner says which segment failed.
                if let Err(e) = &r {
                    if *e == ErrorCode::TRANSFER_FAIL {
                        let segment = format!("segment '{}'", victim.te);
                        assert!(e.cause.contains(&segment), "{e}");
                    }
                }
                r.code() == Err(ErrorCode::OBJECT_NOT_FOUND)
            },
            || format!("last master view: {:?}", master.placement(key)),
        );
        assert_eq!(client.is_exist(key), Ok(false));
        assert_eq!(master.placement(key), None);
    }
    eventually(
        "the dead owner's segment is unmounted",
        || !master.segments().contains(&victim.hostname),
        || format!("{:?}", master.segments()),
    );
    assert!(master.segments().contains(&survivor.hostname));

    // The survivor's objects are intact, through this client and through the survivor.
    for (key, value, _) in &on_survivor {
        assert_reads(&client, key, value);
    }
    assert_reads(&client, "early", &early);
    let (k, v, seed) = &on_survivor[1];
    let get = format!("get {k} {} {seed}", v.len());
    assert_eq!(
        survivor.cmd(&get, HANG_LIMIT),
        format!("get {} match", v.len())
    );

    // New puts keep succeeding, on the survivor (the only segment left), even when
    // they ask for the dead owner's segment.
    for i in 0..4u8 {
        let key = format!("after-{i}");
        let value = pattern(80_000 + usize::from(i), 200 + i);
        let cfg = if i % 2 == 0 {
            ReplicateConfig::default()
        } else {
            on(&victim.hostname)
        };
        client.put(&key, &value, &cfg).unwrap();
        assert_eq!(master.placement(&key), Some(vec![survivor.te.clone()]));
        assert_reads(&client, &key, &value);
    }
    // The survivor itself writes and reads through the master.
    assert_eq!(survivor.code("put from-survivor 3000 7", HANG_LIMIT), 0);
    assert_eq!(
        survivor.cmd("get from-survivor 3000 7", HANG_LIMIT),
        "get 3000 match"
    );
}

#[test]
fn hung_segment_owner_times_out_expires_and_comes_back_empty() {
    let master = Master::start(SHORT_TTL);
    let mut owner = Node::start(&master, 16, &[]);
    // A reader whose transfers give up after 2 s without progress (default 30 s).
    let mut reader = Node::start(
        &master,
        16,
        &[
            ("MC_TCP_PROGRESS_TIMEOUT_SEC", "2"),
            ("MC_TCP_STATUS_TIMEOUT_SEC", "2"),
        ],
    );
    let put = format!("put held 150000 11 {}", owner.hostname);
    assert_eq!(reader.code(&put, HANG_LIMIT), 0);
    assert_eq!(master.placement("held"), Some(vec![owner.te.clone()]));
    assert_eq!(
        reader.cmd("get held 150000 11", HANG_LIMIT),
        "get 150000 match"
    );

    // Hung owner: reads never hang. Over sockets they fail (TRANSFER_FAIL); through
    // this host's mapping of the owner's segment they still return the intact bytes
    // (the reader checks them). Once the master expires the silent owner, the object
    // is gone.
    owner.proc.freeze();
    eventually(
        "the hung owner's object is gone",
        || {
            let reply = reader.cmd("get held 150000 11", CHILD_HANG_LIMIT);
            if reply == "get 150000 match" {
                return false;
            }
            let code: i64 = reply
                .split_whitespace()
                .nth(1)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("unexpected answer {reply:?}"));
            assert!(code < 0, "read from a hung owner returned {reply:?}");
            code == i64::from(ErrorCode::OBJECT_NOT_FOUND.0)
        },
        || format!("{:?}", master.segments()),
    );
    assert!(!master.segments().contains(&owner.hostname));
    assert_eq!(reader.cmd("exist held", HANG_LIMIT), "exist 0");

    // Resumed: its heartbeat remounts the (now empty) segment, which takes data again.
    owner.proc.thaw();
    eventually(
        "the resumed owner is mounted again",
        || master.segments().contains(&owner.hostname),
        || format!("{:?}\n{}", master.segments(), owner.proc.log_tail()),
    );
    eventually(
        "the resumed owner reports healthy",
        || owner.code("health", HANG_LIMIT) == 0,
        String::new,
    );
    assert_eq!(owner.cmd("exist held", HANG_LIMIT), "exist 0");
    let put = format!("put again 90000 12 {}", owner.hostname);
    assert_eq!(reader.code(&put, HANG_LIMIT), 0);
    assert_eq!(master.placement("again"), Some(vec![owner.te.clone()]));
    assert_eq!(
        reader.cmd("get again 90000 12", HANG_LIMIT),
        "get 90000 match"
    );
    assert_eq!(
        owner.cmd("get again 90000 12", HANG_LIMIT),
        "get 90000 match"
    );
}

/// A segment as a client would mount it (the memory need not exist for the master).
fn fake_segment(n: u64) -> Segment {
    let name = format!("127.0.0.1:{}", 40_000 + n);
    Segment {
        id: Uuid {
            first: 0xfa11,
            second: n,
        },
        name: name.clone(),
        base: 1 << 40,
        size: 64 * MIB,
        te_endpoint: name,
        protocol: "tcp".into(),
        host_id: "127.0.0.1".into(),
    }
}

#[test]
fn segments_of_a_client_that_dies_right_after_mounting_or_remounting_expire() {
    let master = Master::start(SHORT_TTL);
    let rpc = MasterRpcClient::connect(
        &master.addr(),
        Duration::from_secs(10),
        Duration::from_secs(10),
    )
    .expect("connect");
    // One client dies right after MountSegment, another right after ReMountSegment
    // (what a client sends first to a restarted master), neither ever pinging.
    let (mounted, remounted) = (fake_segment(1), fake_segment(2));
    rpc.mount_segment(
        &mounted,
        Uuid {
            first: 1,
            second: 1,
        },
    )
    .unwrap();
    rpc.remount_segment(
        std::slice::from_ref(&remounted),
        Uuid {
            first: 2,
            second: 2,
        },
    )
    .unwrap();
    let listed = master.segments();
    assert!(listed.contains(&mounted.name) && listed.contains(&remounted.name));
    // Upstream's ReMountSegment starts the client's TTL like MountSegment does
    // (client_manager.cpp: "Tell the client monitor thread to start timing for this
    // client"), so both segments must go once the TTL has passed.
    eventually_within(
        Duration::from_secs(20),
        "the mount-only client's segment expires (5x its TTL)",
        || !master.segments().contains(&mounted.name),
        || format!("{:?}", master.segments()),
    );
    eventually_within(
        Duration::from_secs(20),
        "the remount-only client's segment expires (5x its TTL)",
        || !master.segments().contains(&remounted.name),
        || format!("{:?}", master.segments()),
    );
}

// ---------------------------------------------------------------------------------
// 2. The master restarts
// ---------------------------------------------------------------------------------

#[test]
fn restarted_master_gets_every_segment_remounted() {
    let mut master = Master::start(LONG_TTL);
    let mut node = Node::start(&master, 16, &[]);
    let client = Arc::new(
        Client::setup(&config(&master.addr(), "127.0.0.1", 16 * MIB, 16 * MIB))
            .expect("client setup"),
    );
    let me = client.hostname().to_string();
    // A pure client (no segment): it never pings, so like upstream's it keeps
    // reporting healthy while the master is down; its next call reconnects.
    let pure = Client::setup(&config(&master.addr(), "127.0.0.1", 0, 16 * MIB))
        .expect("pure client setup");
    eventually(
        "both segments are mounted",
        || {
            let s = master.segments();
            s.contains(&me) && s.contains(&node.hostname)
        },
        || format!("{:?}", master.segments()),
    );
    let before = pattern(200_000, 1);
    client.put("before", &before, &on(&node.hostname)).unwrap();
    assert_reads(&client, "before", &before);
    assert_eq!(client.health(), Health::Healthy);

    // Master down: the heartbeats notice, and calls fail (they do not hang).
    master.proc.kill();
    eventually(
        "health reports the master unreachable",
        || client.health() == Health::MasterUnreachable,
        String::new,
    );
    eventually(
        "the node reports the master unreachable",
        || node.code("health", HANG_LIMIT) == 2,
        String::new,
    );
    assert_eq!(pure.health(), Health::Healthy);
    let c = client.clone();
    let r = guarded("put while the master is down", HANG_LIMIT, move || {
        c.put("down", &[1u8; 1000], &ReplicateConfig::default())
    });
    assert!(
        r.as_ref().is_err_and(is_rpc_error),
        "put with the master down: {r:?}"
    );
    let c = client.clone();
    let r = guarded("is_exist while the master is down", HANG_LIMIT, move || {
        c.is_exist("before")
    });
    assert!(
        r.as_ref().is_err_and(is_rpc_error),
        "is_exist with the master down: {r:?}"
    );

    // A new master on the same port: both heartbeats reconnect and remount.
    master.restart();
    eventually(
        "the new master lists both segments",
        || {
            let s = master.segments();
            s.contains(&me) && s.contains(&node.hostname)
        },
        || format!("{:?}\n{}", master.segments(), master.proc.log_tail()),
    );
    eventually(
        "health is back to healthy",
        || client.health() == Health::Healthy,
        String::new,
    );
    eventually(
        "the node is healthy again",
        || node.code("health", HANG_LIMIT) == 0,
        String::new,
    );
    // What the old master knew is gone.
    let mut out = vec![0u8; before.len()];
    assert_eq!(
        client.get_into("before", &mut out).code(),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    // Data moves again, both ways between the processes.
    let after = pattern(300_000, 2);
    client.put("after", &after, &on(&node.hostname)).unwrap();
    assert_eq!(master.placement("after"), Some(vec![node.te.clone()]));
    assert_reads(&client, "after", &after);
    assert_eq!(
        node.cmd("get after 300000 2", HANG_LIMIT),
        "get 300000 match"
    );
    assert_eq!(
        node.code(&format!("put from-node 120000 5 {me}"), HANG_LIMIT),
        0
    );
    assert_eq!(
        master.placement("from-node"),
        Some(vec![client.te_segment_name().unwrap()])
    );
    assert_reads(&client, "from-node", &pattern(120_000, 5));
    assert_reads(&pure, "from-node", &pattern(120_000, 5));
    let v = pattern(40_000, 6);
    pure.put("from-pure", &v, &on(&node.hostname)).unwrap();
    assert_eq!(
        node.cmd("get from-pure 40000 6", HANG_LIMIT),
        "get 40000 match"
    );
}

#[test]
fn restarted_master_with_embedded_metadata_server_gets_metadata_republished() {
    // The docs' quick start: Transfer Engine metadata lives in the master's embedded
    // HTTP metadata server, which a restart empties.
    let mut master = Master::start_with(LONG_TTL, true);
    let mut node = Node::start(&master, 16, &[]);
    let mut cfg = config(&master.addr(), "127.0.0.1", 16 * MIB, 16 * MIB);
    cfg.metadata_server = master.metadata();
    let client = Client::setup(&cfg).expect("client setup");
    let me = client.hostname().to_string();
    let before = pattern(100_000, 21);
    client.put("before", &before, &on(&node.hostname)).unwrap();
    assert_reads(&client, "before", &before);

    master.restart();
    eventually(
        "the new master lists both segments",
        || {
            let s = master.segments();
            s.contains(&me) && s.contains(&node.hostname)
        },
        || format!("{:?}\n{}", master.segments(), master.proc.log_tail()),
    );
    // A client set up after the restart knows neither owner's TE metadata but through
    // the new metadata server: writes to both owners work once they re-published it.
    let mut fresh_cfg = cfg.clone();
    fresh_cfg.global_segment_size = 0;
    let fresh = Client::setup(&fresh_cfg).expect("fresh client setup after the restart");
    for (owner, tag) in [(node.hostname.clone(), "node"), (me.clone(), "client")] {
        let mut attempt = 0u32;
        eventually(
            &format!("a new client writes to the {tag}'s segment"),
            || {
                attempt += 1;
                let v = pattern(50_000, attempt as u8);
                let key = format!("to-{tag}-{attempt}");
                fresh.put(&key, &v, &on(&owner)).is_ok() && {
                    assert_reads(&fresh, &key, &v);
                    true
                }
            },
            || format!("{:?}", master.segments()),
        );
    }
    // The node reads from this client's segment, which it never opened before.
    let v = pattern(70_000, 33);
    fresh.put("for-node", &v, &on(&me)).unwrap();
    assert_eq!(
        master.placement("for-node"),
        Some(vec![client.te_segment_name().unwrap()])
    );
    assert_eq!(
        node.cmd("get for-node 70000 33", HANG_LIMIT),
        "get 70000 match"
    );
}

// ---------------------------------------------------------------------------------
// 3. The master is unreachable
// ---------------------------------------------------------------------------------

/// Every operation of a set-up client, each under the watchdog; each must fail with
/// RPC_FAIL or RPC_TIMEOUT (batch operations: every item).
fn every_call_fails_with_an_rpc_error(client: &Arc<Client>, state: &str) {
    type Call = Box<dyn FnOnce(&Client) -> Vec<StoreResult<()>> + Send>;
    fn one(r: StoreResult<()>) -> Vec<StoreResult<()>> {
        vec![r]
    }
    let calls: Vec<(&str, Call)> = vec![
        (
            "put",
            Box::new(move |c| one(c.put("x-put", &[7u8; 4096], &ReplicateConfig::default()))),
        ),
        (
            "put_from",
            Box::new(move |c| {
                one(c.put_from("x-put-from", &[8u8; 4096], &ReplicateConfig::default()))
            }),
        ),
        (
            "batch_put_from",
            Box::new(|c| {
                let (a, b) = ([1u8; 100], [2u8; 200]);
                c.batch_put_from(
                    &["x-b1", "x-b2"],
                    &[&a[..], &b[..]],
                    &ReplicateConfig::default(),
                )
            }),
        ),
        (
            "get_into",
            Box::new(|c| {
                let mut out = vec![0u8; 4096];
                one(c.get_into("k", &mut out).map(drop))
            }),
        ),
        (
            "batch_get_into",
            Box::new(|c| {
                let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
                c.batch_get_into(&["k", "missing"], &mut [&mut a[..], &mut b[..]])
                    .into_iter()
                    .map(|r| r.map(drop))
                    .collect()
            }),
        ),
        ("is_exist", Box::new(|c| one(c.is_exist("k").map(drop)))),
        (
            "batch_is_exist",
            Box::new(|c| {
                c.batch_is_exist(&["k", "missing"])
                    .into_iter()
                    .map(|r| r.map(drop))
                    .collect()
            }),
        ),
        ("get_size", Box::new(|c| one(c.get_size("k").map(drop)))),
        ("remove", Box::new(|c| one(c.remove("k", false)))),
        (
            "remove_by_regex",
            Box::new(|c| one(c.remove_by_regex("^x-", true).map(drop))),
        ),
        (
            "remove_all",
            Box::new(|c| one(c.remove_all(true).map(drop))),
        ),
    ];
    for (name, call) in calls {
        let c = client.clone();
        let results = guarded(&format!("{name} ({state})"), HANG_LIMIT, move || call(&c));
        for r in results {
            assert!(
                r.as_ref().is_err_and(is_rpc_error),
                "{name} with the master {state}: {r:?} (want -900 or -901)"
            );
        }
    }
}

#[test]
fn calls_fail_fast_and_recover_when_the_master_is_hung_or_dead() {
    let master = Master::start(LONG_TTL);
    // A client with a 500 ms RPC deadline (what MC_RPC_TIMEOUT_MS=500 gives setup).
    let rpc = connect_master(&master.addr(), FAST_RPC, FAST_RPC).expect("connect");
    let client = Arc::new(
        Client::setup_with_master(&config("", "127.0.0.1", 16 * MIB, 16 * MIB), rpc)
            .expect("client setup"),
    );
    let me = client.hostname().to_string();
    let value = pattern(64_000, 3);
    client.put("k", &value, &on(&me)).unwrap();
    assert_reads(&client, "k", &value);

    // Hung master (SIGSTOP): connections are accepted by the kernel, nothing answers.
    master.proc.freeze();
    every_call_fails_with_an_rpc_error(&client, "hung");
    eventually(
        "health reports the hung master",
        || client.health() == Health::MasterUnreachable,
        String::new,
    );

    // Resumed: the client reconnects by itself. Requests stranded on the connections
    // it gave up may still run on the master (remove_all among them), so retry with
    // fresh keys until a whole round trip works.
    master.proc.thaw();
    let mut attempt = 0;
    eventually(
        "a put/get round trip works after the master resumed",
        || {
            attempt += 1;
            let key = format!("resumed-{attempt}");
            let v = pattern(10_000, attempt as u8);
            let mut out = vec![0u8; v.len()];
            client.put(&key, &v, &on(&me)).is_ok()
                && client.get_into(&key, &mut out) == Ok(v.len() as u64)
                && out == v
        },
        String::new,
    );
    eventually(
        "health is back after the master resumed",
        || client.health() == Health::Healthy,
        String::new,
    );

    // Dead master (SIGKILL): connections are refused.
    let addr = master.addr();
    let mut master = master;
    master.proc.kill();
    every_call_fails_with_an_rpc_error(&client, "dead");
    eventually(
        "health reports the dead master",
        || client.health() == Health::MasterUnreachable,
        String::new,
    );

    // Fresh setups against the dead master fail with upstream's codes: -1 with an
    // auto-selected port, -600 with an explicit one.
    let cfg = config(&addr, "127.0.0.1", 16 * MIB, 16 * MIB);
    let r = guarded("setup against a dead master", HANG_LIMIT, move || {
        Client::setup(&cfg).map(drop).code()
    });
    assert_eq!(r, Err(ErrorCode::INTERNAL_ERROR));
    let port = free_ports(1)[0];
    let cfg = config(&addr, &format!("127.0.0.1:{port}"), 0, 16 * MIB);
    let r = guarded("setup against a dead master", HANG_LIMIT, move || {
        Client::setup(&cfg).map(drop).code()
    });
    assert_eq!(r, Err(ErrorCode::INVALID_PARAMS));
    assert_eq!(
        guarded("connect_master to a dead master", HANG_LIMIT, move || {
            connect_master(&addr, FAST_RPC, FAST_RPC).map(drop)
        }),
        Err(ErrorCode::RPC_FAIL)
    );
    // Closing (heartbeat stop, UnmountSegment) with the master gone returns too, and
    // the closed client answers -600.
    let c = client.clone();
    guarded("close with the master dead", HANG_LIMIT, move || c.close());
    assert_eq!(client.health(), Health::NotInitialized);
    assert_eq!(client.is_exist("k").code(), Err(ErrorCode::INVALID_PARAMS));
}

#[test]
fn clients_honour_mc_rpc_timeout_ms_against_a_hung_master() {
    let master = Master::start(LONG_TTL);
    let env = [
        ("MC_RPC_TIMEOUT_MS", CHILD_RPC_TIMEOUT_MS),
        ("MC_RPC_CONNECT_TIMEOUT_MS", CHILD_RPC_TIMEOUT_MS),
    ];
    let mut node = Node::start(&master, 16, &env);
    assert_eq!(node.code("put k 5000 4", HANG_LIMIT), 0);
    assert_eq!(node.cmd("get k 5000 4", HANG_LIMIT), "get 5000 match");

    master.proc.freeze();
    for cmd in ["put k2 5000 4", "get k 5000 4", "exist k"] {
        let code = node.code(cmd, CHILD_HANG_LIMIT);
        assert!(
            code == -900 || code == -901,
            "{cmd} with the master hung: {code} (want -900 or -901)"
        );
    }
    eventually(
        "the child reports the hung master",
        || node.code("health", CHILD_HANG_LIMIT) == 2,
        String::new,
    );
    // A fresh setup against the hung master gives up with an error code.
    let mut fresh = spawn_node(&master, &master.metadata(), 16, &env);
    let line = fresh.line(CHILD_HANG_LIMIT, "setup against a hung master");
    assert_eq!(line, "store_node setup failed -1", "{}", fresh.log_tail());
    // Once the master runs again, the child's client works again.
    master.proc.thaw();
    let mut attempt = 0;
    eventually(
        "the child's round trip works after the master resumed",
        || {
            attempt += 1;
            node.code(&format!("put r{attempt} 7000 9"), HANG_LIMIT) == 0
                && node.cmd(&format!("get r{attempt} 7000 9"), HANG_LIMIT) == "get 7000 match"
        },
        String::new,
    );
    // Hung again: the child still shuts down (heartbeat stop, UnmountSegment) in time.
    master.proc.freeze();
    node.cmd_no_reply("quit");
    let status = node
        .proc
        .wait_exit(CHILD_HANG_LIMIT, "store_node quit with the master hung");
    assert!(status.success(), "store_node exited with {status}");
    master.proc.thaw();
}

// ---------------------------------------------------------------------------------
// 4. The master is fed garbage
// ---------------------------------------------------------------------------------

/// Whether the master closes `s` (EOF or reset) within 10 s; what it sent is ignored.
fn closed_by_peer(mut s: TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) => {
                return matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::BrokenPipe
                )
            }
        }
    }
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connecting to the master");
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn header(seq: u32, function_id: u32, body_len: u32, attach_len: u32) -> [u8; 20] {
    let mut h = coro_rpc::RequestHeader::new(seq, function_id, body_len);
    h.attach_len = attach_len;
    h.to_bytes()
}

/// Sends `bodies` as pipelined requests of `method` on one connection and checks every
/// reply: matching sequence number and a transport `err_code` in `allowed`. Then a
/// `ServiceReady` on the same connection must still succeed.
fn fuzz_method(addr: &str, method: Method, bodies: &[Vec<u8>], allowed: &[u8]) {
    let s = connect(addr);
    s.set_read_timeout(Some(HANG_LIMIT)).unwrap();
    let mut frames = Vec::new();
    for (i, b) in bodies.iter().enumerate() {
        frames.extend(coro_rpc::encode_request(i as u32, method.id(), b));
    }
    let n = bodies.len() as u32;
    frames.extend(coro_rpc::encode_request(n, Method::ServiceReady.id(), &[]));
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&frames))
    };
    let mut r = BufReader::new(s.try_clone().unwrap());
    for i in 0..=n {
        let (h, body) = coro_rpc::read_response(&mut r, 1 << 24)
            .unwrap_or_else(|e| panic!("{method:?} request {i}: connection failed: {e}"))
            .unwrap_or_else(|| panic!("{method:?} request {i}: connection closed"));
        assert_eq!(h.seq, i, "{method:?}: replies out of order");
        if i < n {
            assert!(
                allowed.contains(&h.err_code),
                "{method:?} with body {:02x?}: err_code {} ({})",
                bodies[i as usize],
                h.err_code,
                coro_rpc::error_message(&body)
            );
        } else {
            assert_eq!(h.err_code, coro_rpc::ERR_OK, "ServiceReady after garbage");
        }
    }
    writer.join().unwrap().expect("writing the requests");
    let _ = s.shutdown(Shutdown::Both);
}

#[test]
fn master_survives_garbage_and_keeps_serving() {
    let master = Master::start(LONG_TTL);
    let addr = master.addr();
    let client = Arc::new(
        Client::setup(&config(&addr, "127.0.0.1", 16 * MIB, 16 * MIB)).expect("client setup"),
    );

    // Silent connections held open for the whole test, plus one stalled mid-body.
    let mut flood: Vec<TcpStream> = (0..200).map(|_| connect(&addr)).collect();
    let mut stalled = connect(&addr);
    stalled
        .write_all(&header(1, Method::Ping.id(), 1000, 0))
        .unwrap();
    stalled.write_all(&[0u8; 10]).unwrap();
    flood.push(stalled);

    // A real client doing put/get round trips the whole time.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let worker = {
        let (c, stop, failures, done) =
            (client.clone(), stop.clone(), failures.clone(), done.clone());
        std::thread::spawn(move || {
            let me = c.hostname().to_string();
            let mut i = 0u32;
            while !stop.load(Ordering::SeqCst) || i < 3 {
                i += 1;
                let key = format!("rt-{i}");
                let v = pattern(20_000 + (i as usize % 7) * 1000, i as u8);
                let mut out = vec![0u8; v.len()];
                let r = c
                    .put(&key, &v, &on(&me))
                    .and_then(|()| c.get_into(&key, &mut out))
                    .and_then(|n| {
                        if n == v.len() as u64 && out == v {
                            c.remove(&key, true)
                        } else {
                            Err(ErrorCode::INVALID_READ.into())
                        }
                    });
                match r {
                    Ok(()) => {
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => failures.lock().unwrap().push(format!("{key}: {e}")),
                }
            }
        })
    };

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Random bytes (never a valid magic): the master drops the connection.
    for i in 0..20 {
        let mut s = connect(&addr);
        let len = 64 + (rng.next() % 4000) as usize;
        let mut junk = rng.bytes(len);
        if junk[0] == coro_rpc::MAGIC {
            junk[0] = 0;
        }
        let _ = s.write_all(&junk);
        assert!(
            closed_by_peer(s),
            "random bytes #{i}: the master kept the connection"
        );
    }
    // Oversized frames: a 4 GiB body or attachment is refused, not awaited.
    for (body, attach) in [(u32::MAX, 0), (0, u32::MAX), (u32::MAX, u32::MAX)] {
        let mut s = connect(&addr);
        s.write_all(&header(7, Method::ServiceReady.id(), body, attach))
            .unwrap();
        assert!(
            closed_by_peer(s),
            "body_len {body:#x}, attach_len {attach:#x}: connection kept"
        );
    }
    // Valid headers, then the client goes away mid-body.
    for i in 0..20u32 {
        let mut s = connect(&addr);
        let m = Method::ALL[i as usize % Method::ALL.len()];
        let _ = s.write_all(&header(i, m.id(), 1 << 20, 0));
        let _ = s.write_all(&rng.bytes(1000 + i as usize * 100));
        drop(s);
    }
    // A header cut short, then gone.
    let mut s = connect(&addr);
    let _ = s.write_all(&header(3, Method::Ping.id(), 0, 0)[..11]);
    drop(s);
    // Unknown function id: err_code 11, and the connection still serves.
    {
        let mut s = connect(&addr);
        s.set_read_timeout(Some(HANG_LIMIT)).unwrap();
        s.write_all(&coro_rpc::encode_request(5, 0xdead_beef, b"xyz"))
            .unwrap();
        s.write_all(&coro_rpc::encode_request(6, Method::ServiceReady.id(), &[]))
            .unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let (h, _) = coro_rpc::read_response(&mut r, 1 << 20).unwrap().unwrap();
        assert_eq!(
            (h.seq, h.err_code),
            (5, coro_rpc::ERR_FUNCTION_NOT_REGISTERED)
        );
        let (h, _) = coro_rpc::read_response(&mut r, 1 << 20).unwrap().unwrap();
        assert_eq!((h.seq, h.err_code), (6, coro_rpc::ERR_OK));
    }
    // Random argument bodies for every method: with a wrong type hash they are
    // "invalid rpc arg" (err_code 4); with the right hash and random payloads the
    // master decodes or rejects them, but never fails in the handler (err_code 10)
    // or drops the connection. Zero-argument methods ignore their body.
    for &m in Method::ALL {
        let zero_args = codec::request_literal(m).is_none();
        let wrong_hash: Vec<Vec<u8>> = (0..8)
            .map(|_| {
                let len = 1 + (rng.next() % 64) as usize;
                let mut b = rng.bytes(len);
                if let Some(lit) = codec::request_literal(m) {
                    let hash = struct_pack::literal_hash(&lit);
                    if b.len() >= 4 && u32::from_le_bytes([b[0], b[1], b[2], b[3]]) & !1 == hash {
                        b[0] ^= 2;
                    }
                }
                b
            })
            .collect();
        let ok_or_invalid: &[u8] = if zero_args {
            &[coro_rpc::ERR_OK]
        } else {
            &[coro_rpc::ERR_INVALID_ARGUMENTS]
        };
        fuzz_method(&addr, m, &wrong_hash, ok_or_invalid);
        let Some(lit) = codec::request_literal(m) else {
            continue;
        };
        let hash = struct_pack::literal_hash(&lit);
        let right_hash: Vec<Vec<u8>> = (0..24)
            .map(|i| {
                // Half with a metainfo byte (random container length widths).
                let meta = i % 2 == 1;
                let mut b = (hash | u32::from(meta)).to_le_bytes().to_vec();
                if meta {
                    b.push((rng.next() as u8) & 0x18);
                }
                let len = (rng.next() % 48) as usize;
                b.extend(rng.bytes(len));
                b
            })
            .collect();
        // Destructive methods may decode a random payload into a valid call; none of
        // them can name this test's tenant, segment or client by chance.
        fuzz_method(
            &addr,
            m,
            &right_hash,
            &[coro_rpc::ERR_OK, coro_rpc::ERR_INVALID_ARGUMENTS],
        );
    }

    // While all that is open, a brand-new client connects and is served.
    let a = addr.clone();
    let version = guarded("ServiceReady during the flood", HANG_LIMIT, move || {
        MasterRpcClient::connect(&a, Duration::from_secs(10), Duration::from_secs(10))
            .and_then(|m| m.service_ready())
    });
    assert_eq!(version.as_deref(), Ok("2.0.0"));

    stop.store(true, Ordering::SeqCst);
    guarded("the round-trip worker", HANG_LIMIT, move || {
        worker.join().unwrap()
    });
    let failures = failures.lock().unwrap().clone();
    assert!(failures.is_empty(), "round trips failed: {failures:?}");
    assert!(done.load(Ordering::SeqCst) >= 3);

    // The flood leaves; the master is still alive and answering.
    for s in &flood {
        let _ = s.shutdown(Shutdown::Both);
    }
    drop(flood);
    let mut master = master;
    assert!(
        master.proc.alive(),
        "master died\n{}",
        master.proc.log_tail()
    );
    let a = addr.clone();
    let version = guarded("ServiceReady after the garbage", HANG_LIMIT, move || {
        MasterRpcClient::connect(&a, Duration::from_secs(10), Duration::from_secs(10))
            .and_then(|m| m.service_ready())
    });
    assert_eq!(version.as_deref(), Ok("2.0.0"));
    assert_eq!(master.http("/health").0, 200);
    let v = pattern(500_000, 42);
    client.put("final", &v, &on(client.hostname())).unwrap();
    assert_reads(&client, "final", &v);
}

/// Every request frame upstream's client sent in the captured sessions
/// (`tests/data/wire_golden/`): function id and body.
fn captured_requests() -> Vec<(u32, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/wire_golden");
    let mut out = Vec::new();
    for name in ["golden_frames_session1.txt", "golden_frames_session2.txt"] {
        let p = dir.join(name);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        for line in text.lines().filter(|l| l.starts_with("REQ ")) {
            let field = |key: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .unwrap_or_else(|| panic!("no {key} in {line}"))
            };
            let fid = field("fid=0x");
            let fid = u32::from_str_radix(&fid[..8], 16).expect("function id");
            let hex = field("body=");
            let body = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex body"))
                .collect();
            out.push((fid, body));
        }
    }
    assert!(out.len() > 20, "too few captured requests");
    out
}

/// `body` with one to three random edits: bit flips, random or extreme bytes (length
/// prefixes, tags), truncation, inserted or repeated bytes.
fn mutate(rng: &mut Rng, body: &[u8]) -> Vec<u8> {
    let mut b = body.to_vec();
    let edits = 1 + rng.next() % 3;
    for _ in 0..edits {
        let at = |rng: &mut Rng, b: &Vec<u8>| (rng.next() % (b.len() as u64 + 1)) as usize;
        match rng.next() % 6 {
            0 if !b.is_empty() => {
                let i = at(rng, &b).min(b.len() - 1);
                b[i] ^= 1 << (rng.next() % 8);
            }
            1 if !b.is_empty() => {
                let i = at(rng, &b).min(b.len() - 1);
                b[i] = rng.next() as u8;
            }
            2 if !b.is_empty() => {
                let i = at(rng, &b).min(b.len() - 1);
                b[i] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff][(rng.next() % 6) as usize];
            }
            3 => {
                let i = at(rng, &b);
                b.truncate(i);
            }
            4 => {
                let i = at(rng, &b);
                let n = (rng.next() % 9) as usize;
                let junk = rng.bytes(n);
                b.splice(i..i, junk);
            }
            _ => {
                let i = at(rng, &b);
                let j = (i + (rng.next() % 16) as usize).min(b.len());
                let piece = b[i..j].to_vec();
                b.splice(j..j, piece);
            }
        }
    }
    b
}

#[test]
fn master_survives_mutated_upstream_requests() {
    let master = Master::start(LONG_TTL);
    let addr = master.addr();
    let mut rng = Rng(0xddc0_ffee_1234_5678);
    let mut by_method: Vec<(Method, Vec<Vec<u8>>)> = Vec::new();
    for (fid, body) in captured_requests() {
        let m = Method::from_id(fid).unwrap_or_else(|| panic!("unknown id {fid:#x}"));
        let mutants: Vec<Vec<u8>> = (0..150).map(|_| mutate(&mut rng, &body)).collect();
        match by_method.iter_mut().find(|(k, _)| *k == m) {
            Some((_, v)) => v.extend(mutants),
            None => by_method.push((m, mutants)),
        }
    }
    // Whatever the mutants decode to, the master answers each one on the same
    // connection, with a result or "invalid rpc arg", never a handler failure.
    for (m, bodies) in &by_method {
        fuzz_method(
            &addr,
            *m,
            bodies,
            &[coro_rpc::ERR_OK, coro_rpc::ERR_INVALID_ARGUMENTS],
        );
    }
    let mut master = master;
    assert!(
        master.proc.alive(),
        "master died\n{}",
        master.proc.log_tail()
    );
    let version = guarded("ServiceReady after the mutants", HANG_LIMIT, move || {
        MasterRpcClient::connect(&addr, Duration::from_secs(10), Duration::from_secs(10))
            .and_then(|m| m.service_ready())
    });
    assert_eq!(version.as_deref(), Ok("2.0.0"));
    // Whatever segments and objects the mutants created, the admin views still render
    // and a new client still stores and reads data on its own segment.
    for path in [
        "/health",
        "/metrics",
        "/metrics/summary",
        "/get_all_segments",
        "/get_all_keys",
        "/get_segments_detail",
    ] {
        assert_eq!(master.http(path).0, 200, "{path}");
    }
    // The mutants mounted fake segments named 127.0.0.1:<port in the store clients'
    // range>; an explicit port from the OS's ephemeral range keeps the new client's name
    // distinct from them.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("ephemeral port")
        .port();
    let name = format!("127.0.0.1:{port}");
    assert!(
        !master.segments().contains(&name),
        "{name} is already a segment"
    );
    let client = Client::setup(&config(&master.addr(), &name, 16 * MIB, 16 * MIB))
        .expect("client setup after the mutants");
    let v = pattern(300_000, 77);
    client
        .put("after-mutants", &v, &on(client.hostname()))
        .unwrap();
    assert_reads(&client, "after-mutants", &v);
}
