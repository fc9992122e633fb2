//! `mooncake_rpc_channel_*`: upstream's `RpcInterface` data/tensor channel (see
//! `rpc_channel`), for the Python package's `mooncake.engine.RpcInterface`. A handle
//! is a client and, when created with a listen address, a server whose received
//! payloads go to one callback.

use super::args::{c_slice, c_str, c_str_or};
use super::boundary::ffi_boundary;
use super::fail::{failed, invalid};
use super::handles::HandleTable;
use crate::rpc_channel::{Channel, Kind};
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;
use std::time::Duration;

#[allow(non_camel_case_types)]
/// An opaque channel handle (`typedef void *`), from `mooncake_rpc_channel_create`
/// until `mooncake_rpc_channel_destroy`.
pub type mooncake_rpc_channel_t = *mut c_void;

#[allow(non_camel_case_types)]
/// Called with each received payload: the `user` pointer given with it, the call it
/// came by (0 data, 1 tensor), the bytes (valid during the call). It runs on a thread
/// of the server's, before the sender is answered.
pub type mooncake_rpc_receive_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, kind: c_int, data: *const u8, len: usize)>;

/// Every live channel; tokens start with "MCRC".
static CHANNELS: HandleTable<Channel> = HandleTable::new(
    0x4D43_5243_0000_0000,
    "RPC channel handle",
    "is not a live RPC channel (destroyed, or not from mooncake_rpc_channel_create)",
);

/// The callback and its `user` pointer, which the caller made safe to use from any
/// thread.
struct Callback(
    unsafe extern "C" fn(*mut c_void, c_int, *const u8, usize),
    *mut c_void,
);

impl Callback {
    /// Hands one payload to the callback.
    fn call(&self, kind: c_int, payload: &[u8]) {
        // SAFETY: the caller made the callback callable from any thread with `user`;
        // the bytes are valid for the call.
        unsafe { (self.0)(self.1, kind, payload.as_ptr(), payload.len()) }
    }
}

// SAFETY: `mooncake_rpc_channel_set_callback`'s contract makes `user` usable from any
// thread for as long as the callback is set.
unsafe impl Send for Callback {}
// SAFETY: as above.
unsafe impl Sync for Callback {}

/// Creates a channel whose calls wait `timeout_seconds` (at least 1) for replies and
/// keep `pool_size` connections per target; with a `listen_address` (`host:port`,
/// `:port`; NULL or "" for a client only) it has a server, started by
/// `mooncake_rpc_channel_start`. Returns NULL with the reason in the thread's last
/// error only for a bad argument.
///
/// # Safety
/// `listen_address` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_rpc_channel_create(
    listen_address: *const c_char,
    timeout_seconds: c_int,
    pool_size: c_int,
) -> mooncake_rpc_channel_t {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated per the contract.
        let listen = unsafe { c_str_or(listen_address, "") }.into_owned();
        let timeout = Duration::from_secs(u64::try_from(timeout_seconds.max(1)).unwrap_or(1));
        let pool = usize::try_from(pool_size.max(1)).unwrap_or(1);
        Ok(CHANNELS.insert(Channel::new(Some(listen), timeout, pool)))
    })
}

/// Stops the channel's server (waiting for the callbacks in progress) and frees the
/// handle. Returns 0, or -1 for a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_rpc_channel_destroy(channel: mooncake_rpc_channel_t) -> c_int {
    ffi_boundary!({
        CHANNELS.remove(channel)?.stop();
        Ok(0)
    })
}

/// Sets where received payloads go (a NULL `callback` drops them).
///
/// # Safety
/// `callback` must be safe to call from any thread with `user` until it is replaced
/// or the channel is destroyed.
#[no_mangle]
pub unsafe extern "C" fn mooncake_rpc_channel_set_callback(
    channel: mooncake_rpc_channel_t,
    callback: mooncake_rpc_receive_fn,
    user: *mut c_void,
) -> c_int {
    ffi_boundary!({
        let ch = CHANNELS.get(channel)?;
        let receiver = callback.map(|f| {
            let cb = Callback(f, user);
            Arc::new(move |kind: Kind, payload: &[u8]| {
                let k = match kind {
                    Kind::Data => 0,
                    Kind::Tensor => 1,
                };
                cb.call(k, payload)
            }) as crate::rpc_channel::server::Receiver
        });
        ch.set_receiver(receiver);
        Ok(0)
    })
}

/// Starts the channel's server; returns the port it listens on, or -1 (the reason
/// in the thread's last error) for a client-only channel, a bad or busy address, a
/// server already started, or one stopped.
#[no_mangle]
pub extern "C" fn mooncake_rpc_channel_start(channel: mooncake_rpc_channel_t) -> c_int {
    ffi_boundary!({
        let addr = CHANNELS
            .get(channel)?
            .start()
            .map_err(|e| failed(format!("starting the RPC channel's server: {e}")))?;
        Ok(c_int::from(addr.port()))
    })
}

/// Stops the channel's server, waiting for the callbacks in progress. Returns 0, or
/// -1 for a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_rpc_channel_stop(channel: mooncake_rpc_channel_t) -> c_int {
    ffi_boundary!({
        CHANNELS.get(channel)?.stop();
        Ok(0)
    })
}

/// Sends `len` bytes at `data` to the server at `target` (`host:port`) as data
/// (`kind` 0) or a tensor (1) and waits for its reply. Returns 0, or -1 when no
/// connection could be made, the connection broke, the peer answered an error or
/// did not answer in time (the reason in the thread's last error).
///
/// # Safety
/// `target` NUL-terminated; `data` readable for `len` bytes (NULL when `len` is 0).
#[no_mangle]
pub unsafe extern "C" fn mooncake_rpc_channel_send(
    channel: mooncake_rpc_channel_t,
    target: *const c_char,
    kind: c_int,
    data: *const u8,
    len: usize,
) -> c_int {
    ffi_boundary!({
        let ch = CHANNELS.get(channel)?;
        // SAFETY: NUL-terminated per the contract.
        let target = unsafe { c_str(target, "target") }?;
        let kind = match kind {
            0 => Kind::Data,
            1 => Kind::Tensor,
            _ => return Err(invalid("kind must be 0 (data) or 1 (tensor)")),
        };
        // SAFETY: readable for `len` bytes per the contract.
        let payload = unsafe { c_slice(data, len, "data") }?;
        ch.send(&target, kind, payload)
            .map_err(|e| failed(format!("sending to {target}: {e}")))?;
        Ok(0)
    })
}
