//! Interop with the upstream Mooncake 0.3.13 peer through an HTTP metadata server,
//! each scenario run against both our in-process `HttpMetadataServer` and upstream's
//! `http_metadata_server.py` (so each side publishes into, and reads from, both
//! servers). Needs the peer from `bash scripts/upstream-peer.sh`;
//! `MOONCAKE_SKIP_INTEROP=1` skips.

mod interop_common;

use interop_common::scenarios;
use interop_common::*;

/// Our initiator -> upstream python target, our metadata server.
#[test]
fn http_ours_rust_initiator_to_upstream_target() {
    let Some(peer) = peer("http_ours_rust_initiator_to_upstream_target") else {
        return;
    };
    let (_server, url) = our_metadata_server();
    let ours = our_http_engine(&url, &unique("rust-initiator"));
    scenarios::rust_initiator_to_upstream_target(&peer, &url, &unique("py-target"), &ours);
}

/// Our initiator -> upstream python target, upstream's metadata server.
#[test]
fn http_upstream_rust_initiator_to_upstream_target() {
    let Some(peer) = peer("http_upstream_rust_initiator_to_upstream_target") else {
        return;
    };
    let server = UpstreamMetadataServer::start(&peer);
    let ours = our_http_engine(&server.url, &unique("rust-initiator"));
    scenarios::rust_initiator_to_upstream_target(&peer, &server.url, &unique("py-target"), &ours);
}

/// Upstream `transfer_engine_bench` initiator (write, then read) -> our target,
/// our metadata server.
#[test]
fn http_ours_upstream_bench_initiator_to_rust_target() {
    let Some(peer) = peer("http_ours_upstream_bench_initiator_to_rust_target") else {
        return;
    };
    let (_server, url) = our_metadata_server();
    let ours = our_http_engine(&url, &unique("rust-target"));
    scenarios::bench_against_rust_target(&peer, &url, |op| unique(&format!("bench-{op}")), &ours);
}

/// Upstream `transfer_engine_bench` initiator (write, then read) -> our target,
/// upstream's metadata server.
#[test]
fn http_upstream_upstream_bench_initiator_to_rust_target() {
    let Some(peer) = peer("http_upstream_upstream_bench_initiator_to_rust_target") else {
        return;
    };
    let server = UpstreamMetadataServer::start(&peer);
    let ours = our_http_engine(&server.url, &unique("rust-target"));
    scenarios::bench_against_rust_target(
        &peer,
        &server.url,
        |op| unique(&format!("bench-{op}")),
        &ours,
    );
}

/// Upstream python initiator -> our target, our metadata server.
#[test]
fn http_ours_upstream_python_initiator_to_rust_target() {
    let Some(peer) = peer("http_ours_upstream_python_initiator_to_rust_target") else {
        return;
    };
    let (_server, url) = our_metadata_server();
    let ours = our_http_engine(&url, &unique("rust-target"));
    scenarios::python_initiator_to_rust_target(&peer, &url, &unique("py-initiator"), &ours);
}

/// Upstream python initiator -> our target, upstream's metadata server.
#[test]
fn http_upstream_upstream_python_initiator_to_rust_target() {
    let Some(peer) = peer("http_upstream_upstream_python_initiator_to_rust_target") else {
        return;
    };
    let server = UpstreamMetadataServer::start(&peer);
    let ours = our_http_engine(&server.url, &unique("rust-target"));
    scenarios::python_initiator_to_rust_target(&peer, &server.url, &unique("py-initiator"), &ours);
}
