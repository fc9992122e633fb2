//! Dummy clients (upstream's Python `setup_dummy` and `alloc_from_mem_pool`): a store
//! handle that forwards to a real client (`mooncake_client`) on the same host.

use crate::ffi::boundary::{c_str, ffi_boundary, set_last_error};
use crate::ffi::store::mooncake_store_t;
use crate::ffi::store::support::{client, code, setup_dummy_handle};
use crate::store::ErrorCode;
use std::ffi::{c_char, c_int};

/// Sets `store` up as a dummy client of the real client at `server_address`
/// (`host:port` of a `mooncake_client` on this host; it listens on the abstract
/// socket `@mooncake_client_<port>.sock`). The dummy owns no segment and no Transfer
/// Engine: operations run in the real client, which maps the dummy's shared memory (a
/// local buffer of `local_buffer_size` bytes, which stages `put`/`get` of bytes, and
/// every `mooncake_store_alloc_from_mem_pool` allocation) and moves data to and from
/// it in place. `mem_pool_size` is accepted as upstream, which does not use it.
/// Returns 0; -1 when the real client cannot be reached or refuses this process
/// (another user); -600 when `store` is already set up or `server_address` names no
/// port; -1 for a bad handle or a NULL address.
///
/// # Safety
/// `server_address` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_setup_dummy(
    store: mooncake_store_t,
    mem_pool_size: u64,
    local_buffer_size: u64,
    server_address: *const c_char,
) -> c_int {
    ffi_boundary!("mooncake_store_setup_dummy", fail = -1, {
        // SAFETY: per the contract.
        let address = unsafe { c_str(server_address, "server_address") }?;
        setup_dummy_handle(
            "mooncake_store_setup_dummy",
            store,
            mem_pool_size,
            local_buffer_size,
            &address,
        )
    })
}

/// Allocates `size` bytes of shared memory a dummy client's real client can map
/// (register it with `mooncake_store_register_buffer` to move data in place); freed
/// when the store is closed or destroyed. Returns the address, or 0: `size` is 0, the
/// memory cannot be created, the store is not a set-up dummy client (a real client
/// has no memory pool, as upstream), or a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_store_alloc_from_mem_pool(store: mooncake_store_t, size: u64) -> u64 {
    ffi_boundary!("mooncake_store_alloc_from_mem_pool", fail = 0, {
        let Some(c) = client(store)? else {
            code(
                "mooncake_store_alloc_from_mem_pool",
                ErrorCode::INVALID_PARAMS,
            );
            return Ok(0);
        };
        if size == 0 {
            set_last_error("mooncake_store_alloc_from_mem_pool", "size is 0", 0);
            return Ok(0);
        }
        Ok(c.alloc_from_mem_pool(size).unwrap_or_else(|e| {
            code("mooncake_store_alloc_from_mem_pool", e);
            0
        }))
    })
}
