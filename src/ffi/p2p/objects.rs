//! Objects in the caller's memory: registering them (gold copies), fetching them into
//! the caller's buffers (replicas), and letting either go.

use super::handle::{node_and_name, P2pHandle};
use super::mooncake_p2p_t;
use crate::ffi::args::{c_slice, c_str, c_str_or};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::{invalid, FfiError};
use crate::p2p::{GetOptions, P2pResult, P2pStore};
use std::borrow::Cow;
use std::ffi::{c_char, c_int};
use std::sync::Arc;

/// A live node, an object name and the buffers `(address, size)` of a call.
type ObjectArgs<'a> = (Arc<P2pHandle>, Cow<'a, str>, Vec<(u64, u64)>);

/// The node behind `p`, the object name `name` and the `count` buffers
/// `(addrs[i], sizes[i])`, checked in that order.
///
/// # Safety
/// `name` NULL or NUL-terminated, outliving the call; `addrs` and `sizes` NULL or
/// holding `count` entries.
unsafe fn object_args<'a>(
    p: mooncake_p2p_t,
    name: *const c_char,
    addrs: *const u64,
    sizes: *const u64,
    count: usize,
) -> Result<ObjectArgs<'a>, FfiError> {
    // SAFETY: forwarded contract.
    let (h, name) = unsafe { node_and_name(p, name) }?;
    // SAFETY: `count` entries, per the contract.
    let addrs = unsafe { c_slice(addrs, count, "addrs") }?;
    // SAFETY: as above.
    let sizes = unsafe { c_slice(sizes, count, "sizes") }?;
    let buffers = addrs.iter().copied().zip(sizes.iter().copied()).collect();
    Ok((h, name, buffers))
}

/// Publishes object `name` made of the `count` buffers `(addrs[i], sizes[i])` of this
/// process (in order; the object's bytes are them end to end), cut into shards of at
/// most `max_shard_size` bytes, which other nodes read from this memory at `location`
/// (NULL: `"cpu:0"`; `"cuda:N"` for GPU memory), as upstream Go's `Register`. With a
/// CRC-32C per shard unless `MC_P2P_CHECKSUM=0`. An existing object of that name is
/// refused unless `force` (then it is replaced).
///
/// Returns 0; -1 for a bad handle, NULL arrays or name, no buffers, a NULL or empty
/// buffer, a shard size of 0, or a buffer overlapping one registered before without
/// being the same; `MOONCAKE_P2P_EXISTS`, `MOONCAKE_P2P_ALREADY_HELD` (this node holds
/// `name`), `MOONCAKE_P2P_ENGINE` (registration failed), `MOONCAKE_P2P_METADATA`,
/// `MOONCAKE_P2P_CLOSED`.
///
/// # Safety
/// `name` and `location` NULL or NUL-terminated; `addrs` and `sizes` NULL or holding
/// `count` entries. Every buffer must stay valid and unchanged until
/// `mooncake_p2p_unregister(p, name)` or `mooncake_p2p_destroy(p)` returns.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mooncake_p2p_register(
    p: mooncake_p2p_t,
    name: *const c_char,
    addrs: *const u64,
    sizes: *const u64,
    count: usize,
    max_shard_size: u64,
    location: *const c_char,
    force: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let (h, name, buffers) = unsafe { object_args(p, name, addrs, sizes, count) }?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let location = unsafe { c_str_or(location, "cpu:0") };
        // SAFETY: the caller keeps the buffers valid and unchanged until the object is
        // unregistered or the node destroyed.
        unsafe {
            h.store
                .register(&name, &buffers, max_shard_size, &location, force != 0)
        }?;
        Ok(0)
    })
}

/// Withdraws this node's registered copy of `name` (upstream's `Unregister`): it is
/// no longer read from here, its buffers are unregistered (the caller may free them
/// once this returns), and the object's metadata goes once no node holds a copy.
/// Returns 0; -1 for a bad handle or NULL name; `MOONCAKE_P2P_NOT_HELD` when this node
/// did not register `name`; `MOONCAKE_P2P_METADATA`.
///
/// # Safety
/// `name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_unregister(p: mooncake_p2p_t, name: *const c_char) -> c_int {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        unsafe { withdraw(p, name, P2pStore::unregister) }
    })
}

/// Withdraws this node's replica of `name` (fetched by `mooncake_p2p_get_replica*`,
/// `mooncake_p2p_get` or an agent; upstream's `DeleteReplica`): it is no longer read
/// from here and the caller may free its buffers once this returns. Returns 0; -1 for
/// a bad handle or NULL name; `MOONCAKE_P2P_NOT_HELD` when this node holds no replica
/// of `name`; `MOONCAKE_P2P_METADATA`.
///
/// # Safety
/// `name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_delete_replica(
    p: mooncake_p2p_t,
    name: *const c_char,
) -> c_int {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        unsafe { withdraw(p, name, P2pStore::delete_replica) }
    })
}

/// Body of the two withdrawals: `how` applied to node `p`'s store and object `name`.
///
/// # Safety
/// `name` must be NULL or NUL-terminated.
unsafe fn withdraw(
    p: mooncake_p2p_t,
    name: *const c_char,
    how: impl FnOnce(&P2pStore, &str) -> P2pResult<()>,
) -> Result<c_int, FfiError> {
    // SAFETY: forwarded contract.
    let (h, name) = unsafe { node_and_name(p, name) }?;
    how(&h.store, &name)?;
    Ok(0)
}

/// Fetches object `name` into the `count` buffers `(addrs[i], sizes[i])` (upstream's
/// `GetReplica`): the object's shards land end to end through the buffers, which must
/// hold them all and split them at shard boundaries (one buffer of at least the
/// object's size always does). Shards come from every node holding a copy, several at
/// a time; each shard is published as a source as soon as it lands, and the buffers
/// stay a replica other nodes read from until `mooncake_p2p_delete_replica`. A call
/// that fails withdraws what it published; called again with the same buffers it
/// fetches only what it lacked.
///
/// Returns 0; -1 for a bad handle, NULL arrays or name, buffers that cannot hold the
/// object; `MOONCAKE_P2P_NOT_FOUND`, `MOONCAKE_P2P_ALREADY_HELD` (this node holds
/// `name`), `MOONCAKE_P2P_NO_SOURCE` (a shard no node could serve),
/// `MOONCAKE_P2P_CORRUPT`, `MOONCAKE_P2P_ENGINE`, `MOONCAKE_P2P_METADATA`,
/// `MOONCAKE_P2P_CLOSED`.
///
/// # Safety
/// `name` NULL or NUL-terminated; `addrs` and `sizes` NULL or holding `count`
/// entries. Every buffer must be writable and not otherwise accessed during the call,
/// then stay valid and unchanged until `mooncake_p2p_delete_replica(p, name)` or
/// `mooncake_p2p_destroy(p)` returns (after a failed call: until the buffers are
/// given to another call or freed).
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_get_replica(
    p: mooncake_p2p_t,
    name: *const c_char,
    addrs: *const u64,
    sizes: *const u64,
    count: usize,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let (h, name, buffers) = unsafe { object_args(p, name, addrs, sizes, count) }?;
        // SAFETY: the caller's buffers are ours to write, then kept, per the contract.
        unsafe { h.store.get_replica(&name, &buffers) }?;
        Ok(0)
    })
}

/// `mooncake_p2p_get_replica` with options: `peers` (`peer_count` node names) limits
/// the sources to those nodes (`peer_count` 0: any node; `peers` may then be NULL);
/// `resume_by_checksum` keeps the shards whose bytes already in the buffers match
/// their CRC-32C (a receiver restarted over the same file-backed memory resumes);
/// `kept_out` and `fetched_out` (each may be NULL) receive the bytes kept and the
/// bytes fetched. Returns as `mooncake_p2p_get_replica`; -1 also for a NULL peer
/// name. Nothing is written to the outputs on failure.
///
/// # Safety
/// As `mooncake_p2p_get_replica`; `peers` NULL or holding `peer_count` NUL-terminated
/// strings; `kept_out` and `fetched_out` NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mooncake_p2p_get_replica_ex(
    p: mooncake_p2p_t,
    name: *const c_char,
    addrs: *const u64,
    sizes: *const u64,
    count: usize,
    peers: *const *const c_char,
    peer_count: usize,
    resume_by_checksum: c_int,
    kept_out: *mut u64,
    fetched_out: *mut u64,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let (h, name, buffers) = unsafe { object_args(p, name, addrs, sizes, count) }?;
        // SAFETY: `peer_count` entries, per the contract.
        let peers = unsafe { c_slice(peers, peer_count, "peers") }?;
        let only = peers
            .iter()
            .enumerate()
            .map(|(i, &peer)| {
                // SAFETY: NULL or NUL-terminated, per the contract.
                let peer = unsafe { c_str(peer, "a peer name") };
                peer.map(|s| s.into_owned())
                    .map_err(|_| invalid(format!("peers[{i}] is NULL")))
            })
            .collect::<Result<Vec<String>, FfiError>>()?;
        let options = GetOptions {
            resume_by_checksum: resume_by_checksum != 0,
            progress: None,
            only: (!only.is_empty()).then_some(&only[..]),
        };
        // SAFETY: the caller's buffers are ours to write, then kept, per the contract.
        let fetched = unsafe { h.store.get_replica_with(&name, &buffers, options) }?;
        if !kept_out.is_null() {
            // SAFETY: writable, per the contract.
            unsafe { kept_out.write_unaligned(fetched.kept) };
        }
        if !fetched_out.is_null() {
            // SAFETY: as above.
            unsafe { fetched_out.write_unaligned(fetched.fetched) };
        }
        Ok(0)
    })
}
