//! `mooncake_p2p_*` (declared in `mooncake_ext.h`): the P2P Store (`crate::p2p`) from
//! C. A `mooncake_p2p_t` is one node: it registers objects from the caller's memory,
//! fetches objects other nodes hold into the caller's buffers (serving them from there
//! as replicas), puts and gets bytes through memory it keeps itself, lists objects and
//! peers, and runs an agent through which other nodes ask it to fetch a copy.
//!
//! Conventions: functions returning `int` return 0 on success, a `MOONCAKE_P2P_*` code
//! on failure (the P2P Store's error, `P2pError::code`) and -1 for a bad handle or a
//! rejected argument (NULL pointers, impossible lengths), which is also
//! `MOONCAKE_P2P_INVALID_ARGUMENT`. Functions returning `int64_t` return a size or a
//! length, or those negative codes. The thread's last error always says why
//! (`mooncake_last_error_message`). Handles are tokens of their own table: a P2P
//! handle is never taken for an engine or a store, nor the reverse.
//!
//! One file per job: `handle` (the table and what a handle holds), `node` (creating,
//! destroying, the agent, `replicate_to`), `objects` (registering and fetching into
//! the caller's memory), `bytes` (size, put and get through the node's memory),
//! `query` (the JSON listings).

use std::ffi::{c_int, c_void};

#[allow(non_camel_case_types)]
/// An opaque P2P Store node handle (`typedef void *`), from `mooncake_p2p_create` or
/// `mooncake_p2p_create_on_engine`, until `mooncake_p2p_destroy`.
pub type mooncake_p2p_t = *mut c_void;

/// Success.
pub const MOONCAKE_P2P_OK: c_int = 0;
/// A bad handle, a NULL or impossible argument, or arguments the store cannot use
/// (no buffers, a shard size of 0, buffers that do not fit the object).
pub const MOONCAKE_P2P_INVALID_ARGUMENT: c_int = -1;
/// This node already holds the object (registered it, or holds a replica).
pub const MOONCAKE_P2P_ALREADY_HELD: c_int = -2;
/// This node does not hold the object (or holds it the other way: a replica given to
/// `mooncake_p2p_unregister`, a registered object to `mooncake_p2p_delete_replica`).
pub const MOONCAKE_P2P_NOT_HELD: c_int = -3;
/// No object of that name in the metadata.
pub const MOONCAKE_P2P_NOT_FOUND: c_int = -4;
/// The object exists and `mooncake_p2p_register` was not asked to replace it (or
/// `mooncake_p2p_put` found one).
pub const MOONCAKE_P2P_EXISTS: c_int = -5;
/// The object's metadata (or a peer's agent address) is not usable.
pub const MOONCAKE_P2P_CORRUPT: c_int = -6;
/// No node is left to fetch a shard from.
pub const MOONCAKE_P2P_NO_SOURCE: c_int = -7;
/// The metadata store failed.
pub const MOONCAKE_P2P_METADATA: c_int = -8;
/// The Transfer Engine failed (registration, a transfer), or a peer's agent could not
/// fetch the object.
pub const MOONCAKE_P2P_ENGINE: c_int = -9;
/// A local socket or file failed (serving the agent, reaching a peer's agent).
pub const MOONCAKE_P2P_IO: c_int = -10;
/// The node was closed.
pub const MOONCAKE_P2P_CLOSED: c_int = -11;

// The header declares the functions in this order.
pub(crate) mod handle;
pub mod node;
pub mod objects;

pub mod bytes;
pub mod query;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p2p::P2pError;

    #[test]
    fn the_header_constants_are_the_store_codes() {
        let s = || String::from("x");
        let cases = [
            (
                P2pError::InvalidArgument(s()),
                MOONCAKE_P2P_INVALID_ARGUMENT,
            ),
            (P2pError::AlreadyHeld(s()), MOONCAKE_P2P_ALREADY_HELD),
            (P2pError::NotHeld(s()), MOONCAKE_P2P_NOT_HELD),
            (P2pError::NotFound(s()), MOONCAKE_P2P_NOT_FOUND),
            (P2pError::Exists(s()), MOONCAKE_P2P_EXISTS),
            (
                P2pError::Corrupt {
                    name: s(),
                    why: s(),
                },
                MOONCAKE_P2P_CORRUPT,
            ),
            (
                P2pError::NoSource {
                    name: s(),
                    shard: 0,
                    tried: s(),
                },
                MOONCAKE_P2P_NO_SOURCE,
            ),
            (P2pError::Metadata(s()), MOONCAKE_P2P_METADATA),
            (P2pError::Engine(s()), MOONCAKE_P2P_ENGINE),
            (P2pError::Io(s()), MOONCAKE_P2P_IO),
            (P2pError::Closed, MOONCAKE_P2P_CLOSED),
        ];
        for (e, code) in cases {
            assert_eq!(e.code(), code, "{e}");
            assert_ne!(code, MOONCAKE_P2P_OK);
        }
    }
}
