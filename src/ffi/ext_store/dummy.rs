//! Dummy clients (upstream's Python `setup_dummy` and `alloc_from_mem_pool`): a store
//! handle that forwards to a real client (`mooncake_client`) on the same host.

use crate::ffi::args::c_str;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::{failed, invalid, FfiError};
use crate::ffi::store::handle::{client, set_up, setup_dummy_handle};
use crate::ffi::store::mooncake_store_t;
use crate::store::{host_memory, ErrorCode};
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
    ffi_boundary!({
        // SAFETY: per the contract.
        let address = unsafe { c_str(server_address, "server_address") }?;
        setup_dummy_handle(store, mem_pool_size, local_buffer_size, &address)
    })
}

/// Allocates `size` bytes of shared memory a dummy client's real client can map
/// (register it with `mooncake_store_register_buffer` to move data in place); freed
/// when the store is closed or destroyed. Returns the address, or 0: `size` is 0, the
/// memory cannot be created, the store is not a set-up dummy client (a real client
/// has no memory pool, as upstream), or a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_store_alloc_from_mem_pool(store: mooncake_store_t, size: u64) -> u64 {
    ffi_boundary!(fail = 0, {
        let c = set_up(client(store)?)?;
        if size == 0 {
            return Err(failed("size is 0"));
        }
        Ok(c.alloc_from_mem_pool(size)?)
    })
}

/// Allocates `size` bytes of page-aligned, zeroed host memory for buffers to register
/// (upstream's Python `MooncakeHostMemAllocator.alloc`): sealed shared memory, so a
/// dummy client registers any sub-range of it with its real client and moves data in
/// place, while a real client registers it as any memory. Lives until
/// `mooncake_store_host_mem_free`, independent of any store. Returns the address, or
/// 0 (`size` is 0, or the memory cannot be created; the last error says why).
#[no_mangle]
pub extern "C" fn mooncake_store_host_mem_alloc(size: u64) -> u64 {
    ffi_boundary!(fail = 0, {
        if size == 0 {
            return Err(failed("size is 0"));
        }
        host_memory::alloc(size).map_err(|e| FfiError::Failed {
            what: format!("mapping {size} bytes of shared memory: {e}"),
            errno: e.raw_os_error().unwrap_or(0),
        })
    })
}

/// Frees memory from `mooncake_store_host_mem_alloc` by its address (stores that
/// registered it must have unregistered it, as for any memory). Returns 0, or -1
/// when `addr` is not the address of a live allocation.
#[no_mangle]
pub extern "C" fn mooncake_store_host_mem_free(addr: u64) -> c_int {
    ffi_boundary!({
        if host_memory::free(addr) {
            return Ok(0);
        }
        Err(invalid(format!(
            "{addr:#x} is not the address of memory from mooncake_store_host_mem_alloc"
        )))
    })
}

/// Whether a dummy client moves `[addr, addr + len)` in place: 1 when its real client
/// has all of it mapped (memory from `mooncake_store_alloc_from_mem_pool` or
/// `mooncake_store_host_mem_alloc` registered with `mooncake_store_register_buffer`),
/// 0 when transfers of it are staged through the local buffer (any other memory).
/// -600 when `store` is not a set-up dummy client (a real client moves every buffer
/// in place), -1 for a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_store_dummy_moves_in_place(
    store: mooncake_store_t,
    addr: u64,
    len: u64,
) -> c_int {
    ffi_boundary!({
        let c = set_up(client(store)?)?;
        let mapped = c
            .moves_in_place(addr, len)
            .map_err(|_| ErrorCode::INVALID_PARAMS)?;
        Ok(c_int::from(mapped))
    })
}
