//! A node's life: creating it (with an engine of its own, or on an existing one),
//! destroying it, its name, its agent, and asking a peer's agent to fetch a copy.

use super::handle::{node, node_and_name, write_whole, P2pHandle, NODES};
use super::mooncake_p2p_t;
use crate::ffi::args::{c_str, c_str_or};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::ENGINES;
use crate::ffi::fail::invalid;
use crate::ffi::te_types::transfer_engine_t;
use crate::p2p::{agent, Agent, P2pConfig, P2pStore};
use std::ffi::{c_char, c_int};
use std::net::SocketAddr;

/// Creates a P2P Store node named `local_server_name` (`host:port`, unique among the
/// nodes sharing the metadata; other nodes and agents reach it at `host`) with a
/// Transfer Engine of its own, keeping object payloads in the metadata store at
/// `metadata` (`http://host:port/metadata` of our HTTP metadata server, `etcd://...`
/// or a bare etcd `host:port`, `redis://...`; not `P2PHANDSHAKE`, which has no store),
/// as upstream Go's `NewP2PStore`. Data moves over TCP when `nic_priority_matrix` is
/// NULL or `""`, else over RDMA with that NIC priority matrix (JSON). Settings come
/// from the `MC_P2P_*` variables (`MC_P2P_CONCURRENCY`, `MC_P2P_SHARD_SIZE` for
/// `mooncake_p2p_put`, `MC_P2P_CHECKSUM`, `MC_P2P_NO_SOURCE_RETRIES`).
///
/// Returns the handle, or NULL with the reason in the thread's last error (NULL
/// strings, an unusable metadata address, an engine that cannot start).
///
/// # Safety
/// The strings must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_create(
    metadata: *const c_char,
    local_server_name: *const c_char,
    nic_priority_matrix: *const c_char,
) -> mooncake_p2p_t {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let metadata = unsafe { c_str(metadata, "metadata") }?;
        // SAFETY: as above.
        let name = unsafe { c_str(local_server_name, "local_server_name") }?;
        // SAFETY: as above.
        let matrix = unsafe { c_str_or(nic_priority_matrix, "") };
        let store = P2pStore::new(&metadata, &name, Some(&*matrix).filter(|m| !m.is_empty()))?;
        Ok(NODES.insert(P2pHandle::new(store)))
    })
}

/// Creates a P2P Store node that moves data with `engine` (a live handle from
/// `createTransferEngine` or `mooncake_te_create`, created over a metadata store that
/// its peers share, not `P2PHANDSHAKE` unless every node is), named as the engine's
/// segment, with payloads in the metadata store at `metadata` (as
/// `mooncake_p2p_create`). TCP is installed when the engine has no transport yet.
/// The node shares the engine's memory registrations (memory the engine's owner
/// registered stays registered after the node lets it go); the engine lives as long
/// as the node (destroying its handle first is safe).
///
/// Returns the handle, or NULL with the reason in the thread's last error (a bad
/// engine handle, NULL `metadata`, an unusable metadata address).
///
/// # Safety
/// `metadata` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_create_on_engine(
    engine: transfer_engine_t,
    metadata: *const c_char,
) -> mooncake_p2p_t {
    ffi_boundary!({
        let engine = ENGINES.get(engine)?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let metadata = unsafe { c_str(metadata, "metadata") }?;
        if !engine.has_transport("tcp") && !engine.has_transport("rdma") {
            engine.install("tcp", None)?;
        }
        let store = P2pStore::with_engine(engine, &metadata, P2pConfig::from_env())?;
        Ok(NODES.insert(P2pHandle::new(store)))
    })
}

/// Stops the node's agent and withdraws every copy it holds (registered objects and
/// replicas: other nodes stop reading from it, and an object's metadata goes with its
/// last copy); memory the caller registered or fetched into may be freed once this
/// returns. The handle is invalid at once (later calls return -1). Calls already
/// running on other threads fail with `MOONCAKE_P2P_CLOSED` or finish, and a fetch
/// that finishes after the close is not withdrawn: destroy a node once no other thread
/// uses it. NULL or an unknown handle is a no-op (the thread's last error says so).
#[no_mangle]
pub extern "C" fn mooncake_p2p_destroy(p: mooncake_p2p_t) {
    ffi_boundary!({
        NODES.remove(p)?.close();
        Ok(())
    })
}

/// Writes the node's name (its segment name, what other nodes, `replicate_to` and the
/// `holders` of `mooncake_p2p_list` call it) and a NUL into `buf`. Returns 0, or -1
/// for a bad handle, a NULL `buf`, or a `buf` of `len` bytes that cannot hold it all
/// (nothing written; the last error says how many bytes it needs).
///
/// # Safety
/// `buf` must be NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_local_server_name(
    p: mooncake_p2p_t,
    buf: *mut c_char,
    len: usize,
) -> c_int {
    ffi_boundary!({
        let h = node(p)?;
        // SAFETY: per the contract.
        unsafe { write_whole(buf, len, h.store.local_server_name(), "buf") }?;
        Ok(0)
    })
}

/// Starts the node's agent: an HTTP endpoint bound to `bind` (`"ip:port"`; NULL:
/// `"0.0.0.0:0"`, any free port) through which other nodes' `mooncake_p2p_replicate_to`
/// ask this node to fetch a copy of an object (kept in memory the node owns and served
/// as a replica until the node is destroyed). Its address (the node's host with the
/// bound port) is published in the metadata and written with a NUL into `address_out`
/// unless that is NULL. The agent runs until `mooncake_p2p_destroy`.
///
/// Returns 0; -1 for a bad handle, a `bind` that is not `ip:port`, an agent already
/// running, or an `address_out` of `len` bytes too small for the address (the agent is
/// stopped again; the last error says the size needed); `MOONCAKE_P2P_IO` when the
/// address cannot be bound, `MOONCAKE_P2P_METADATA` when it cannot be published,
/// `MOONCAKE_P2P_CLOSED`.
///
/// # Safety
/// `bind` NULL or NUL-terminated; `address_out` NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_start_agent(
    p: mooncake_p2p_t,
    bind: *const c_char,
    address_out: *mut c_char,
    len: usize,
) -> c_int {
    ffi_boundary!({
        let h = node(p)?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let bind = unsafe { c_str_or(bind, "0.0.0.0:0") };
        let bind: SocketAddr = bind
            .trim()
            .parse()
            .map_err(|_| invalid(format!("bind '{bind}' is not ip:port")))?;
        h.store.check_open()?;
        let mut slot = h.agent.lock();
        if let Some(running) = &*slot {
            return Err(invalid(format!(
                "an agent already runs at {}",
                running.address()
            )));
        }
        let agent = Agent::start(h.store.clone(), bind)?;
        if !address_out.is_null() {
            // SAFETY: writable for `len` bytes, per the contract. On failure `agent`
            // drops here, which stops and unpublishes it.
            unsafe { write_whole(address_out, len, agent.address(), "address_out") }?;
        }
        *slot = Some(agent);
        Ok(0)
    })
}

/// Asks node `peer` (its name, as `mooncake_p2p_local_server_name` gives it) to fetch
/// a copy of object `name` through the agent it runs, and returns once the peer holds
/// one (it then serves it as a replica). Returns 0 (also when the peer held it
/// already); -1 for a bad handle, NULL strings, or a peer that runs no agent;
/// `MOONCAKE_P2P_NOT_FOUND` when the object is unknown, `MOONCAKE_P2P_ENGINE` when
/// the peer could not fetch it, `MOONCAKE_P2P_IO` when its agent cannot be reached,
/// `MOONCAKE_P2P_CORRUPT`, `MOONCAKE_P2P_METADATA`, `MOONCAKE_P2P_CLOSED`.
///
/// # Safety
/// `name` and `peer` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_replicate_to(
    p: mooncake_p2p_t,
    name: *const c_char,
    peer: *const c_char,
) -> c_int {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (h, name) = unsafe { node_and_name(p, name) }?;
        // SAFETY: as above.
        let peer = unsafe { c_str(peer, "peer") }?;
        agent::replicate_to(&h.store, &name, &peer)?;
        Ok(0)
    })
}
