//! Master high availability and snapshots, end to end: our masters with
//! `--enable_ha=true` on a real etcd, our store clients addressing them as
//! `etcd://…`, puts and gets running while the leader is SIGKILLed (two masters, then
//! the new leader with a third standing by), etcd itself restarted under load, and
//! upstream 0.3.13's Python client against our HA masters. Every acknowledged object
//! must stay readable with its exact bytes. Also a master with `--enable_snapshot`
//! killed and restarted on its address. A KV-event subscriber of both masters rebuilds
//! the new leader's state across a failover from the stream alone. Needs etcd
//! (`MOONCAKE_SKIP_KV_SERVERS=1` skips) and, for the upstream client, the peer
//! (`MOONCAKE_SKIP_INTEROP=1`).

mod cut_link;
mod interop_common;
mod kv_events_support;
mod kv_servers;
mod store_interop_common;

use cut_link::CutLink;
use interop_common::{pattern, peer, ChildGuard};
use kv_events_support::{Batch, Sub};
use kv_servers::{Etcd, Redis};
use mooncake::metadata::etcd::EtcdMetadataStore;
use mooncake::metadata::MetadataStore;
use mooncake::store::{Client, ReplicateConfig, SetupConfig};
use mooncake::wire::master_api::{ErrorCode, MasterApi, Segment, Uuid};
use mooncake::wire::rpc_client::MasterRpcClient;
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store_interop_common::*;

const MIB: u64 = 1 << 20;
const VALUE: usize = 64 << 10;

/// One of our masters with `--enable_ha=true`.
struct HaMaster {
    guard: ChildGuard,
    rpc_port: u16,
    metrics_port: u16,
}

impl HaMaster {
    fn start(etcd: &Etcd, extra: &[&str]) -> HaMaster {
        let backend = format!("--etcd_endpoints=127.0.0.1:{}", etcd.port);
        HaMaster::start_with(&[&backend], extra)
    }

    fn start_on_redis(redis: &Redis) -> HaMaster {
        let conn = format!("--ha_backend_connstring={}", redis.url());
        HaMaster::start_with(&["--ha_backend_type=redis", &conn], &[])
    }

    fn start_with(backend: &[&str], extra: &[&str]) -> HaMaster {
        let (rpc, metrics) = (free_port(), free_port());
        let mut cmd = Command::new(our_master_binary());
        cmd.arg("--enable_ha=true")
            .args(backend)
            .args([
                "--rpc_address=127.0.0.1".to_string(),
                format!("--port={rpc}"),
                "--metrics_host=127.0.0.1".into(),
                format!("--metrics_port={metrics}"),
            ])
            .args(extra)
            .stdin(Stdio::null());
        die_with_parent(&mut cmd);
        let m = HaMaster {
            guard: ChildGuard::spawn(cmd, "our-ha-master", false),
            rpc_port: rpc,
            metrics_port: metrics,
        };
        m.wait_for("to start", |h| h.contains("\"status\":\"ok\""));
        m
    }

    fn health(&self) -> String {
        http_get(&format!("http://127.0.0.1:{}/health", self.metrics_port))
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ok(&self.health()) {
            assert!(
                Instant::now() < deadline,
                "HA master on {} {what}: {}\n{}",
                self.rpc_port,
                self.health(),
                self.guard.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_leader(&self) {
        self.wait_for("to lead", |h| h.contains("\"role\":\"leader\""));
    }

    fn wait_in_sync_standby(&self) {
        self.wait_for("to hold a copy", |h| {
            h.contains("\"ha_state\":\"standby\"") && h.contains("\"in_sync\":true")
        });
    }

    fn kill(&mut self) {
        let _ = self.guard.child.kill();
        let _ = self.guard.child.wait();
    }

    /// Sends `sig` (`-STOP`, `-CONT`) to this master's process, by PID.
    fn signal(&self, sig: &str) {
        let pid = self.guard.pid().to_string();
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {pid}");
    }

    fn rpc_addr(&self) -> String {
        format!("127.0.0.1:{}", self.rpc_port)
    }
}

/// A leader and an in-sync standby on `etcd`.
fn pair(etcd: &Etcd) -> (HaMaster, HaMaster) {
    let a = HaMaster::start(etcd, &[]);
    a.wait_leader();
    let b = HaMaster::start(etcd, &[]);
    b.wait_in_sync_standby();
    (a, b)
}

fn client(etcd: &Etcd, segment: u64) -> Client {
    client_of(&etcd.url(), segment)
}

/// A client whose metadata and master view are both in `url` (etcd:// or redis://).
fn client_of(url: &str, segment: u64) -> Client {
    init_our_client_env();
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: url.into(),
        global_segment_size: segment,
        local_buffer_size: 16 * MIB,
        protocol: "tcp".into(),
        device_name: String::new(),
        master_server_addr: url.into(),
        ..SetupConfig::default()
    };
    Client::setup(&cfg).expect("client setup through the master view")
}

fn value_of(key: &str) -> Vec<u8> {
    let seed = key
        .bytes()
        .fold(7u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    pattern(VALUE, seed)
}

/// Puts from several clients until stopped (at most `cap` each, so nothing needs to
/// be evicted), each followed by a read of one of the client's earlier acknowledged
/// objects, checked byte for byte; remembers what was acknowledged.
struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<String>>>,
    failed: Arc<AtomicU64>,
    /// Reads of acknowledged objects that failed or returned other bytes.
    bad_reads: Arc<AtomicU64>,
    reads: Arc<AtomicU64>,
    /// Milliseconds since `t0` of the latest acknowledged put.
    last_ok_ms: Arc<AtomicU64>,
    t0: Instant,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(clients: &[Arc<Client>], prefix: &str, cap: u64) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let failed = Arc::new(AtomicU64::new(0));
        let bad_reads = Arc::new(AtomicU64::new(0));
        let reads = Arc::new(AtomicU64::new(0));
        let last_ok_ms = Arc::new(AtomicU64::new(0));
        let t0 = Instant::now();
        let threads = clients
            .iter()
            .enumerate()
            .map(|(ci, c)| {
                let (c, stop, acked, failed, last) = (
                    c.clone(),
                    stop.clone(),
                    acked.clone(),
                    failed.clone(),
                    last_ok_ms.clone(),
                );
                let (bad_reads, reads) = (bad_reads.clone(), reads.clone());
                let prefix = format!("{prefix}-c{ci}");
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        if i == cap {
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                        let key = format!("{prefix}-{i}");
                        i += 1;
                        match c.put(&key, &value_of(&key), &ReplicateConfig::default()) {
                            Ok(()) => {
                                acked.lock().push(key);
                                last.store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
                            }
                            Err(_) => {
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        // An earlier object of this client, picked by a multiplicative hash.
                        let pick = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % i;
                        let earlier = format!("{prefix}-{pick}");
                        let mut buf = vec![0u8; VALUE];
                        reads.fetch_add(1, Ordering::Relaxed);
                        let good = c
                            .get_into(&earlier, &mut buf)
                            .is_ok_and(|n| n as usize == VALUE)
                            && buf == value_of(&earlier);
                        if !good && acked.lock().contains(&earlier) {
                            bad_reads.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            acked,
            failed,
            bad_reads,
            reads,
            last_ok_ms,
            t0,
            threads,
        }
    }

    fn acked(&self) -> usize {
        self.acked.lock().len()
    }

    fn wait_acked(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.acked() < n {
            assert!(
                Instant::now() < deadline,
                "only {} puts acknowledged",
                self.acked()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the leader with `kill` and waits until puts flow again: more puts
    /// acknowledged than the one each client may have had in flight. The time it took.
    fn across(&self, kill: impl FnOnce()) -> Duration {
        let before = self.acked() + self.threads.len();
        let killed = Instant::now();
        kill();
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.acked() <= before {
            assert!(
                Instant::now() < deadline,
                "no put succeeded after the failover"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let last = Duration::from_millis(self.last_ok_ms.load(Ordering::Relaxed));
        (self.t0 + last).saturating_duration_since(killed)
    }

    /// Stops; the acknowledged keys and the number of failed puts. Panics on a bad
    /// read of an acknowledged object.
    fn stop(self) -> (Vec<String>, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let bad = self.bad_reads.load(Ordering::Relaxed);
        let reads = self.reads.load(Ordering::Relaxed);
        assert_eq!(
            bad, 0,
            "{bad} of {reads} reads of acknowledged objects failed"
        );
        let acked = self.acked.lock().clone();
        (acked, self.failed.load(Ordering::Relaxed))
    }
}

/// Every key in `acked` reads back exactly.
fn assert_all_readable(c: &Client, acked: &[String]) {
    let mut lost = Vec::new();
    for key in acked {
        let mut buf = vec![0u8; VALUE];
        match c.get_into(key, &mut buf) {
            Ok(n) if n as usize == VALUE && buf == value_of(key) => {}
            Ok(n) => panic!("{key}: wrong bytes ({n} read)"),
            Err(e) => lost.push(format!("{key}: {e:?}")),
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged objects lost: {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(10)]
    );
}

#[test]
fn leader_killed_under_load_twice_loses_nothing() {
    let Some(etcd) = Etcd::start("leader_killed_under_load_twice_loses_nothing") else {
        return;
    };
    let (mut a, mut b) = pair(&etcd);
    let clients: Vec<Arc<Client>> = (0..2).map(|_| Arc::new(client(&etcd, 64 * MIB))).collect();
    // 64 MiB segments hold 1024 values each: no eviction with 900 per client.
    let load = Load::start(&clients, "one", 900);
    load.wait_acked(100);
    let first = load.across(|| a.kill());
    b.wait_leader();
    load.wait_acked(load.acked() + 50);

    // A third master joins as a standby; then the new leader dies too.
    let c = HaMaster::start(&etcd, &[]);
    c.wait_in_sync_standby();
    let second = load.across(|| b.kill());
    c.wait_leader();
    load.wait_acked(load.acked() + 50);
    let (acked, failed) = load.stop();
    eprintln!(
        "failovers: {first:?} and {second:?}; {} puts acknowledged, {failed} failed",
        acked.len()
    );
    assert_eq!(failed, 0, "puts failed during the failovers");
    for cl in &clients {
        assert_all_readable(cl, &acked);
    }
    // The clients leave while a leader still runs (they unmount there).
    drop(clients);
}

/// Polls until every key in `acked` reads back exactly through `c`, or `within`
/// passes (then panics as [`assert_all_readable`] does). The time it took.
fn wait_all_readable(c: &Client, acked: &[String], within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let all = acked.iter().all(|key| {
            let mut buf = vec![0u8; VALUE];
            c.get_into(key, &mut buf)
                .is_ok_and(|n| n as usize == VALUE && buf == value_of(key))
        });
        if all {
            return start.elapsed();
        }
        if start.elapsed() > within {
            assert_all_readable(c, acked);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The leader SIGSTOPped for longer than its lease and the clients' `client_ttl`
/// (10 s), then resumed (issue 23 item 7): its process keeps its sockets, so calls to
/// it hang instead of failing. The standby is elected; a get and a put in flight on
/// the stopped leader complete through it while the old one is still stopped (the
/// clients close their connections to a leader the view no longer names); every
/// acknowledged object reads back exactly, before and after the resume; and the
/// resumed old leader acknowledges nothing: a mount queued in its socket while it was
/// stopped is refused.
#[test]
fn leader_paused_past_its_lease_and_client_ttl_loses_nothing() {
    const N: usize = 200;
    const PAUSE: Duration = Duration::from_secs(12);
    let Some(etcd) = Etcd::start("leader_paused_past_its_lease_and_client_ttl_loses_nothing")
    else {
        return;
    };
    let (a, b) = pair(&etcd);
    let clients: Vec<Arc<Client>> = (0..2).map(|_| Arc::new(client(&etcd, 64 * MIB))).collect();
    let mut acked: Vec<String> = (0..N).map(|i| format!("pause-{i}")).collect();
    for (i, key) in acked.iter().enumerate() {
        clients[i % 2]
            .put(key, &value_of(key), &ReplicateConfig::default())
            .unwrap_or_else(|e| panic!("put {key}: {e:?}"));
    }
    // A direct connection to the leader, open (and answered) before it stops; its
    // deadline outlasts the pause, so a refusal is not a timeout.
    let direct = MasterRpcClient::connect_with_pool(
        &a.rpc_addr(),
        Duration::from_secs(300),
        Duration::from_secs(10),
        1,
    )
    .expect("a direct connection to the leader");

    let stopped = Instant::now();
    a.signal("-STOP");
    // Each waits in a socket of the stopped leader.
    let queued_mount = std::thread::spawn(move || {
        let segment = Segment {
            id: Uuid {
                first: 0xFE,
                second: 1,
            },
            name: "127.0.0.1:1".into(),
            base: 1 << 40,
            size: MIB,
            te_endpoint: "127.0.0.1:1".into(),
            protocol: "tcp".into(),
            host_id: "fenced".into(),
        };
        direct.mount_segment(
            &segment,
            Uuid {
                first: 0xFE,
                second: 2,
            },
        )
    });
    let in_flight_get = {
        let c = clients[0].clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; VALUE];
            let r = c.get_into("pause-0", &mut buf);
            (r, buf == value_of("pause-0"), stopped.elapsed())
        })
    };
    let in_flight_put = {
        let c = clients[1].clone();
        std::thread::spawn(move || {
            let key = "pause-in-flight";
            let r = c.put(key, &value_of(key), &ReplicateConfig::default());
            (r, stopped.elapsed())
        })
    };
    b.wait_leader();
    let elected = stopped.elapsed();
    // Both calls return while the leader is still stopped (a call's deadline is 30 s:
    // one still hung on the stopped leader would fail, not succeed).
    let deadline = stopped + Duration::from_secs(45);
    while !(in_flight_get.is_finished() && in_flight_put.is_finished()) {
        assert!(Instant::now() < deadline, "calls in flight never returned");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (got, same, got_after) = in_flight_get.join().unwrap();
    assert_eq!(
        got,
        Ok(VALUE as u64),
        "the get in flight on the stopped leader"
    );
    assert!(same, "the get in flight read other bytes");
    let (put, put_after) = in_flight_put.join().unwrap();
    assert_eq!(put, Ok(()), "the put in flight on the stopped leader");
    acked.push("pause-in-flight".into());
    // Everything is readable through the new leader while the old one is stopped.
    wait_all_readable(&clients[0], &acked, Duration::from_secs(30));
    let all_during = stopped.elapsed();
    // Stopped for PAUSE in all, past the lease and the client TTL.
    while stopped.elapsed() < PAUSE {
        std::thread::sleep(Duration::from_millis(50));
    }
    let resumed = Instant::now();
    a.signal("-CONT");
    let paused_for = resumed - stopped;

    let readable = clients
        .iter()
        .map(|c| wait_all_readable(c, &acked, Duration::from_secs(30)))
        .max()
        .unwrap();
    let mount = queued_mount.join().unwrap();
    assert_eq!(
        mount,
        Err(ErrorCode::RPC_FAIL),
        "the resumed old leader answered a mount sent while it was stopped"
    );
    a.wait_for("to step down", |h| h.contains("\"ha_state\":\"standby\""));
    let stepped_down = resumed.elapsed();
    clients[0]
        .put("after", &value_of("after"), &ReplicateConfig::default())
        .expect("a put after the pause");
    eprintln!(
        "leader stopped {paused_for:?}: standby elected after {elected:?}; the get in \
         flight returned after {got_after:?}, the put after {put_after:?}; all {} objects \
         read back {all_during:?} after SIGSTOP, and again within {readable:?} after \
         SIGCONT; the old leader refused the queued mount ({mount:?}) and was a standby \
         {stepped_down:?} after SIGCONT",
        acked.len()
    );
    drop(clients);
}

#[test]
fn redis_election_fails_over_under_load() {
    let Some(redis) = Redis::start("redis_election_fails_over_under_load", None) else {
        return;
    };
    let mut a = HaMaster::start_on_redis(&redis);
    a.wait_leader();
    let b = HaMaster::start_on_redis(&redis);
    b.wait_in_sync_standby();
    let clients = vec![Arc::new(client_of(&redis.url(), 64 * MIB))];
    let load = Load::start(&clients, "redis", 900);
    load.wait_acked(50);
    let took = load.across(|| a.kill());
    b.wait_leader();
    load.wait_acked(load.acked() + 50);
    let (acked, failed) = load.stop();
    eprintln!("redis failover: {took:?}");
    assert_eq!(failed, 0, "puts failed during the failover");
    assert_all_readable(&clients[0], &acked);
    drop(clients);
}

/// Two masters and a client under load while `disturb` does something to etcd: no put
/// fails, nothing is lost, and one master leads afterwards.
fn etcd_disturbed_under_load(etcd: &mut Etcd, prefix: &str, disturb: impl FnOnce(&mut Etcd)) {
    let (a, b) = pair(etcd);
    let clients = vec![Arc::new(client(etcd, 128 * MIB))];
    let load = Load::start(&clients, prefix, 1800);
    load.wait_acked(50);
    disturb(etcd);
    load.wait_acked((load.acked() + 100).min(1800));
    let (acked, failed) = load.stop();
    assert_eq!(failed, 0, "puts failed while etcd was disturbed");
    assert_all_readable(&clients[0], &acked);
    let leaders = [&a, &b]
        .iter()
        .filter(|m| m.health().contains("\"role\":\"leader\""))
        .count();
    assert_eq!(leaders, 1, "{}\n{}", a.health(), b.health());
    drop(clients);
}

#[test]
fn etcd_restart_under_load_is_ridden_out() {
    let Some(mut etcd) = Etcd::start("etcd_restart_under_load_is_ridden_out") else {
        return;
    };
    etcd_disturbed_under_load(&mut etcd, "etcd", Etcd::restart);
}

#[test]
fn etcd_paused_past_the_lease_under_load_loses_nothing() {
    let Some(mut etcd) = Etcd::start("etcd_paused_past_the_lease_under_load_loses_nothing") else {
        return;
    };
    // Longer than the 3 s lease: the leader stops serving while it cannot renew; when
    // etcd resumes, the expired lease is revoked and a leader is elected again.
    etcd_disturbed_under_load(&mut etcd, "paused", |e| e.pause_for(Duration::from_secs(5)));
}

#[test]
fn a_leader_stopped_gracefully_hands_over_at_once() {
    let Some(etcd) = Etcd::start("a_leader_stopped_gracefully_hands_over_at_once") else {
        return;
    };
    let (mut a, b) = pair(&etcd);
    let clients = vec![Arc::new(client(&etcd, 64 * MIB))];
    let load = Load::start(&clients, "term", 900);
    load.wait_acked(50);
    // SIGTERM: the leader gives its lease back instead of letting it expire, so by the
    // time it has exited the view no longer names it.
    let ok = Command::new("kill")
        .args(["-TERM", &a.guard.child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok);
    let _ = a.guard.child.wait();
    let view = EtcdMetadataStore::new(&etcd.url())
        .unwrap()
        .get("mooncake-store/mooncake_cluster/master_view")
        .unwrap();
    assert_ne!(view, Some(format!("127.0.0.1:{}", a.rpc_port).into_bytes()));
    b.wait_leader();
    load.wait_acked(load.acked() + 50);
    let (acked, failed) = load.stop();
    assert_eq!(failed, 0);
    assert_all_readable(&clients[0], &acked);
    drop(clients);
}

/// Puts `n` fresh keys `<prefix>-<i>` on `c`, retrying each (the client may still be
/// finding the leader) until acknowledged; the keys.
fn put_until_acked(c: &Client, prefix: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    (0..n)
        .map(|i| {
            let key = format!("{prefix}-{i}");
            loop {
                match c.put(&key, &value_of(&key), &ReplicateConfig::default()) {
                    // An earlier try went through after all: the same bytes are there.
                    Ok(()) => break,
                    Err(e) if e.code == ErrorCode::OBJECT_ALREADY_EXISTS => break,
                    Err(e) => {
                        assert!(
                            Instant::now() < deadline,
                            "put {key} never acknowledged: {e:?}"
                        );
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
            key
        })
        .collect()
}

/// The leader reaches etcd through a link the test cuts, the standby and the clients
/// reach it directly (a partition between the leader and etcd alone): the leader's
/// lease runs out while it still streams to the standby, and the standby must take
/// over while the cut lasts, not when it heals; nothing acknowledged is lost, and once
/// healed the old leader stands by.
#[test]
fn a_leader_cut_off_from_etcd_hands_over_while_the_cut_lasts() {
    let Some(etcd) = Etcd::start("a_leader_cut_off_from_etcd_hands_over_while_the_cut_lasts")
    else {
        return;
    };
    let link = CutLink::to(etcd.port);
    let a = HaMaster::start_with(
        &[&format!("--etcd_endpoints=127.0.0.1:{}", link.port())],
        &[],
    );
    a.wait_leader();
    let b = HaMaster::start(&etcd, &[]);
    b.wait_in_sync_standby();
    let clients = vec![Arc::new(client(&etcd, 64 * MIB))];
    let load = Load::start(&clients, "cut", 600);
    load.wait_acked(50);
    link.cut();
    b.wait_leader();
    assert!(
        !a.health().contains("\"role\":\"leader\""),
        "two leaders: the one cut off from etcd still says it leads"
    );
    // The load may have reached its cap meanwhile: stop it, and put afresh on the new
    // leader while the cut lasts.
    let (mut acked, _failed) = load.stop();
    acked.extend(put_until_acked(&clients[0], "cut-after", 20));
    link.heal();
    a.wait_for("to stand by after the cut healed", |h| {
        h.contains("\"ha_state\":\"standby\"")
    });
    acked.extend(put_until_acked(&clients[0], "healed", 20));
    assert_all_readable(&clients[0], &acked);
    drop(clients);
}

#[test]
fn upstream_python_client_against_our_ha_masters() {
    let Some(peer) = peer("upstream_python_client_against_our_ha_masters") else {
        return;
    };
    let Some(etcd) = Etcd::start("upstream_python_client_against_our_ha_masters") else {
        return;
    };
    let (mut a, b) = pair(&etcd);
    // The data lives in our client's segment, which survives the failover.
    let owner = client(&etcd, 64 * MIB);
    let mut py = PyStore::start(
        &peer,
        "upstream-py-ha",
        &etcd.url(),
        &etcd.url(),
        0,
        16 * MIB,
        MIB,
    );
    for i in 0..100u64 {
        assert_eq!(
            py.put(
                &format!("py-{i}"),
                val(VALUE as u64, i as u8),
                default_cfg()
            ),
            0
        );
    }
    a.kill();
    b.wait_leader();
    // Upstream's client finds the new leader through the view and reads everything.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (n, ok) = py.get("py-0", val(VALUE as u64, 0));
        if n == VALUE as u64 && ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "upstream client never read after failover"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for i in 0..100u64 {
        let (n, ok) = py.get(&format!("py-{i}"), val(VALUE as u64, i as u8));
        assert!(n == VALUE as u64 && ok, "py-{i} lost");
    }
    let mut buf = vec![0u8; VALUE];
    assert_eq!(owner.get_into("py-7", &mut buf), Ok(VALUE as u64));
    py.quit();
    drop(owner);
}

#[test]
fn snapshot_restart_serves_every_object() {
    let dir = std::env::temp_dir().join(format!("mc-snapshot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let snap = format!("--snapshot_backup_dir={}", dir.display());
    let mut m = MasterProc::ours(&["--enable_snapshot=true", &snap]);
    let c = our_client(&m, 64 * MIB, 16 * MIB);
    let keys: Vec<String> = (0..200).map(|i| format!("snap-{i}")).collect();
    for k in &keys {
        c.put(k, &value_of(k), &ReplicateConfig::default()).unwrap();
    }
    c.remove("snap-0", false).unwrap();
    m.restart();
    let mut buf = vec![0u8; VALUE];
    assert_eq!(
        c.get_into("snap-0", &mut buf).ok(),
        None,
        "a removed object came back"
    );
    assert_all_readable(&c, &keys[1..]);
    // And the restarted master keeps writing its snapshot.
    c.put("after", &value_of("after"), &ReplicateConfig::default())
        .unwrap();
    m.restart();
    assert_all_readable(&c, &["after".to_string(), keys[5].clone()]);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A KV-event subscriber of every master, following the procedure README gives: a
/// batch of a term older than the newest seen is a deposed leader's and is ignored; a
/// `cleared` starts the index afresh; `stored` and `removed` add and drop keys.
struct FollowingIndex {
    subs: Vec<Sub>,
    term: u64,
    keys: BTreeSet<String>,
    ignored: u64,
}

impl FollowingIndex {
    fn connect(endpoints: &[u16]) -> FollowingIndex {
        let subs = endpoints
            .iter()
            .map(|port| {
                let mut sub = Sub::connect(([127, 0, 0, 1], *port).into());
                sub.subscribe_all();
                sub.sync();
                sub
            })
            .collect();
        FollowingIndex {
            subs,
            term: 0,
            keys: BTreeSet::new(),
            ignored: 0,
        }
    }

    fn apply(&mut self, batch: &Batch) {
        let term = batch.seq >> 32;
        if term < self.term {
            self.ignored += 1;
            return;
        }
        self.term = term;
        for event in &batch.events {
            let key = || event.get("object_key").map(|k| k.str().to_string());
            match event.get("event_type").map(|t| t.str()) {
                Some("cleared") => self.keys.clear(),
                Some("stored") => {
                    self.keys.insert(key().expect("object_key"));
                }
                Some("removed") => {
                    self.keys.remove(&key().expect("object_key"));
                }
                other => panic!("unexpected event type {other:?}"),
            }
        }
    }

    /// Reads what has arrived until the index holds exactly `want`, from a term of
    /// `min_term` or later.
    fn converge_to(&mut self, want: &BTreeSet<String>, min_term: u64, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.keys != *want || self.term < min_term {
            assert!(
                Instant::now() < deadline,
                "{what}: the index has {} keys, the leader {} (term {}; missing {:?}, extra {:?})",
                self.keys.len(),
                want.len(),
                self.term,
                want.difference(&self.keys).take(5).collect::<Vec<_>>(),
                self.keys.difference(want).take(5).collect::<Vec<_>>()
            );
            let mut batches = Vec::new();
            for sub in &mut self.subs {
                if let Some(b) = sub.try_recv(Duration::from_millis(20)) {
                    batches.push(b);
                }
            }
            for b in &batches {
                self.apply(b);
            }
        }
    }
}

/// Every key the leader behind `metrics_port` holds.
fn leader_keys(m: &HaMaster) -> BTreeSet<String> {
    let (code, body) = http_get(&format!("http://127.0.0.1:{}/get_all_keys", m.metrics_port))
        .expect("get_all_keys");
    assert_eq!(code, 200, "{body}");
    body.lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// Two HA masters publishing KV events, a subscriber connected to both: puts and
/// removes on the first leader, then the leader paused past its lease; the new leader
/// starts its term with `cleared` and its whole state under a higher term number, so
/// the subscriber's index is the new leader's key set, before and after more writes
/// and after the old leader resumes.
#[test]
fn a_kv_event_subscriber_follows_the_leader_across_a_failover() {
    let Some(etcd) = Etcd::start("a_kv_event_subscriber_follows_the_leader_across_a_failover")
    else {
        return;
    };
    let events = [free_port(), free_port()];
    let flags = |port: u16| {
        vec![
            "--enable_kv_events=true".to_string(),
            format!("--kv_events_bind_endpoint=tcp://127.0.0.1:{port}"),
            "--kv_events_backend_id=pool".into(),
        ]
    };
    let (fa, fb) = (flags(events[0]), flags(events[1]));
    let a = HaMaster::start(&etcd, &fa.iter().map(String::as_str).collect::<Vec<_>>());
    a.wait_leader();
    let b = HaMaster::start(&etcd, &fb.iter().map(String::as_str).collect::<Vec<_>>());
    b.wait_in_sync_standby();
    let mut index = FollowingIndex::connect(&events);
    let c = client(&etcd, 64 * MIB);
    let keys = put_until_acked(&c, "first", 30);
    for key in &keys[..5] {
        c.remove(key, false).expect("remove");
    }
    index.converge_to(&leader_keys(&a), 1, "on the first leader");
    let first_term = index.term;

    a.signal("-STOP");
    b.wait_leader();
    // The new leader's term numbers higher: its resync replaces the index.
    index.converge_to(&leader_keys(&b), first_term + 1, "after the failover");
    let more = put_until_acked(&c, "second", 10);
    c.remove(&more[0], false).expect("remove");
    a.signal("-CONT");
    a.wait_for("to stand by after it resumed", |h| {
        h.contains("\"ha_state\":\"standby\"")
    });
    let after = put_until_acked(&c, "third", 5);
    let want = leader_keys(&b);
    assert!(want.contains(&after[4]) && !want.contains(&more[0]));
    index.converge_to(&want, first_term + 1, "after the old leader resumed");
    drop(c);
}
