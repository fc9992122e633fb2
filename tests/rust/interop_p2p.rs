//! Interop with the upstream Mooncake 0.3.13 peer over P2PHANDSHAKE (no metadata
//! server): descriptors travel over the RPC daemon, data over TCP v2. Needs the peer
//! from `bash scripts/upstream-peer.sh`; `MOONCAKE_SKIP_INTEROP=1` skips.

mod interop_common;

use interop_common::scenarios;
use interop_common::*;

/// Our initiator -> upstream python target: write/read verified byte for byte,
/// rejected out-of-range requests FAILED, the engine keeps working.
#[test]
fn p2p_rust_initiator_to_upstream_target() {
    let Some(peer) = peer("p2p_rust_initiator_to_upstream_target") else {
        return;
    };
    let ours = our_p2p_engine();
    scenarios::rust_initiator_to_upstream_target(&peer, "P2PHANDSHAKE", "127.0.0.1", &ours);
}

/// Upstream `transfer_engine_bench` initiator (write, then read) -> our target.
#[test]
fn p2p_upstream_bench_initiator_to_rust_target() {
    let Some(peer) = peer("p2p_upstream_bench_initiator_to_rust_target") else {
        return;
    };
    let ours = our_p2p_engine();
    // In P2P mode only the host part of the bench's name is used.
    scenarios::bench_against_rust_target(
        &peer,
        "P2PHANDSHAKE",
        |_| "127.0.0.1:12346".into(),
        &ours,
    );
}

/// Upstream python initiator -> our target: sync/batch writes and reads verified on
/// both sides, rejected requests, probe, and notifies both ways.
#[test]
fn p2p_upstream_python_initiator_to_rust_target() {
    let Some(peer) = peer("p2p_upstream_python_initiator_to_rust_target") else {
        return;
    };
    let ours = our_p2p_engine();
    scenarios::python_initiator_to_rust_target(&peer, "P2PHANDSHAKE", "127.0.0.1", &ours);
}
