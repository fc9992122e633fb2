//! Our store client with `master_server_addr = "etcd://..."`: it finds the leader in
//! `mooncake-store/<cluster_id>/master_view`, and keeps working through a failover,
//! the call that meets the dead leader waiting for the next one instead of failing.
//! Against upstream 0.3.13's HA masters (their own election in a real etcd), and
//! between two of our masters whose view the test moves itself. Needs etcd and the
//! upstream peer (`MOONCAKE_SKIP_KV_SERVERS=1` / `MOONCAKE_SKIP_INTEROP=1` skip).

mod interop_common;
mod kv_servers;
mod store_interop_common;

use interop_common::{pattern, peer, ChildGuard, Peer};
use kv_servers::Etcd;
use mooncake::metadata::etcd::EtcdMetadataStore;
use mooncake::metadata::MetadataStore;
use mooncake::store::{Client, ReplicateConfig, SetupConfig};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use store_interop_common::*;

const MIB: u64 = 1 << 20;

fn client(etcd: &Etcd) -> Client {
    init_our_client_env();
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: etcd.url(),
        global_segment_size: 64 * MIB,
        local_buffer_size: 16 * MIB,
        protocol: "tcp".into(),
        device_name: String::new(),
        master_server_addr: etcd.url(),
        ..SetupConfig::default()
    };
    Client::setup(&cfg).expect("client setup through the master view")
}

fn get(c: &Client, key: &str, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    c.get_into(key, &mut buf).ok().map(|n| {
        buf.truncate(n as usize);
        buf
    })
}

/// An upstream HA master (standbys do not open their RPC port).
struct UpstreamHaMaster {
    guard: ChildGuard,
    metrics_port: u16,
}

impl UpstreamHaMaster {
    fn start(peer: &Peer, etcd: &Etcd) -> UpstreamHaMaster {
        let (rpc, metrics) = (free_port(), free_port());
        let mut cmd = Command::new(peer.mooncake_dir.join("mooncake_master"));
        cmd.args([
            "--enable_ha=true".to_string(),
            format!("--etcd_endpoints=127.0.0.1:{}", etcd.port),
            "--rpc_address=127.0.0.1".into(),
            format!("--port={rpc}"),
            format!("--metrics_port={metrics}"),
        ])
        .stdin(Stdio::null());
        die_with_parent(&mut cmd);
        let guard = ChildGuard::spawn(cmd, "upstream-ha-master", false);
        let m = UpstreamHaMaster {
            guard,
            metrics_port: metrics,
        };
        m.wait_for(|h| h.contains("\"status\":\"ok\""));
        m
    }

    fn health(&self) -> String {
        http_get(&format!("http://127.0.0.1:{}/health", self.metrics_port))
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    fn wait_for(&self, ok: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ok(&self.health()) {
            assert!(
                Instant::now() < deadline,
                "upstream HA master: {}\n{}",
                self.health(),
                self.guard.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn our_client_rides_out_an_upstream_leader_failover() {
    let Some(peer) = peer("our_client_rides_out_an_upstream_leader_failover") else {
        return;
    };
    let Some(etcd) = Etcd::start("our_client_rides_out_an_upstream_leader_failover") else {
        return;
    };
    let mut first = UpstreamHaMaster::start(&peer, &etcd);
    first.wait_for(|h| h.contains("\"service_ready\":true"));
    let second = UpstreamHaMaster::start(&peer, &etcd);
    second.wait_for(|h| h.contains("\"role\":\"standby\""));

    let c = client(&etcd);
    let before = pattern(300_000, 1);
    c.put("before", &before, &ReplicateConfig::default())
        .unwrap();
    assert_eq!(get(&c, "before", before.len()), Some(before));

    let _ = first.guard.child.kill();
    let _ = first.guard.child.wait();
    // This put meets the dead leader and waits for the election (about 9 s upstream,
    // within the 30 s RPC deadline): it succeeds instead of failing.
    let after = pattern(200_000, 2);
    c.put("after", &after, &ReplicateConfig::default())
        .expect("a put across the failover");
    assert!(second.health().contains("\"role\":\"leader\""));
    assert_eq!(get(&c, "after", after.len()), Some(after));
}

#[test]
fn our_client_follows_the_view_between_our_masters() {
    let Some(etcd) = Etcd::start("our_client_follows_the_view_between_our_masters") else {
        return;
    };
    let mut x = MasterProc::ours(&[]);
    let y = MasterProc::ours(&[]);
    let view = EtcdMetadataStore::new(&etcd.url()).unwrap();
    let key = "mooncake-store/mooncake_cluster/master_view";
    view.set(key, x.rpc_addr().as_bytes()).unwrap();

    let c = client(&etcd);
    let one = pattern(100_000, 3);
    c.put("one", &one, &ReplicateConfig::default()).unwrap();
    assert_eq!(x.admin_lines("/get_all_segments").len(), 1);

    // The view moves and the old leader dies at once: the next put finds Y.
    view.set(key, y.rpc_addr().as_bytes()).unwrap();
    let _ = x.guard.child.kill();
    let two = pattern(100_000, 4);
    c.put("two", &two, &ReplicateConfig::default())
        .expect("a put after the leader moved");
    assert_eq!(get(&c, "two", two.len()), Some(two));
    // Y knows the client's segment now (the heartbeat remounted it).
    assert_eq!(y.admin_lines("/get_all_segments").len(), 1);

    // An election in progress: the leader is gone and no view names another yet.
    // Calls wait for the next leader (a fresh master: it knows no objects, and learns
    // the client's segment before the call reaches it).
    // (Z starts here: a child's parent-death signal follows the thread that spawned it.)
    let z = MasterProc::ours(&[]);
    let z_addr = z.rpc_addr();
    view.remove(key).unwrap();
    let mut y = y;
    let _ = y.guard.child.kill();
    let elect = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        view.set(key, z_addr.as_bytes()).unwrap();
    });
    assert_eq!(c.is_exist("two"), Ok(false), "answered by the next leader");
    elect.join().unwrap();
    assert_eq!(z.admin_lines("/get_all_segments").len(), 1);
    let three = pattern(50_000, 5);
    c.put("three", &three, &ReplicateConfig::default()).unwrap();
    assert_eq!(get(&c, "three", three.len()), Some(three));
    // The client leaves while its leader still runs (it unmounts there).
    drop(c);
    drop(z);
}
