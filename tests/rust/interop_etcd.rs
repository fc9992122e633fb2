//! Interop with the upstream Mooncake 0.3.13 peer through one etcd (started by the
//! test): upstream's engines (its Go etcd client) and ours (etcd's JSON gateway) publish
//! into and read from the same keys, both directions, bytes verified. Needs the peer
//! (`bash scripts/upstream-peer.sh`) and etcd; `MOONCAKE_SKIP_INTEROP=1` /
//! `MOONCAKE_SKIP_KV_SERVERS=1` skip. (Upstream's wheel is built without Redis.)

mod interop_common;
mod kv_servers;

use interop_common::scenarios;
use interop_common::*;
use kv_servers::Etcd;

/// Our initiator -> upstream python target.
#[test]
fn etcd_rust_initiator_to_upstream_target() {
    let Some(peer) = peer("etcd_rust_initiator_to_upstream_target") else {
        return;
    };
    let Some(etcd) = Etcd::start("etcd_rust_initiator_to_upstream_target") else {
        return;
    };
    let url = etcd.url();
    let ours = our_http_engine(&url, &unique("rust-initiator"));
    scenarios::rust_initiator_to_upstream_target(&peer, &url, &unique("py-target"), &ours);
}

/// Upstream `transfer_engine_bench` initiator (write, then read) -> our target.
#[test]
fn etcd_upstream_bench_initiator_to_rust_target() {
    let Some(peer) = peer("etcd_upstream_bench_initiator_to_rust_target") else {
        return;
    };
    let Some(etcd) = Etcd::start("etcd_upstream_bench_initiator_to_rust_target") else {
        return;
    };
    let url = etcd.url();
    let ours = our_http_engine(&url, &unique("rust-target"));
    scenarios::bench_against_rust_target(&peer, &url, |op| unique(&format!("bench-{op}")), &ours);
}

/// Upstream python initiator -> our target.
#[test]
fn etcd_upstream_python_initiator_to_rust_target() {
    let Some(peer) = peer("etcd_upstream_python_initiator_to_rust_target") else {
        return;
    };
    let Some(etcd) = Etcd::start("etcd_upstream_python_initiator_to_rust_target") else {
        return;
    };
    let url = etcd.url();
    let ours = our_http_engine(&url, &unique("rust-target"));
    scenarios::python_initiator_to_rust_target(&peer, &url, &unique("py-initiator"), &ours);
}
