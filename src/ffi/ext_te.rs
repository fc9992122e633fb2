//! `mooncake_te_*`: Transfer Engine extensions that upstream's C API lacks (declared in
//! `mooncake_ext.h`), used by the Python package (`mooncake.engine`).
//!
//! They take the same engine handles and batch ids as `transfer_engine_c.h`, validate
//! them like the upstream functions do here, and follow its return conventions:
//! negative `ERR_*` codes for engine-level calls, positive status codes for the batch
//! status call.

use super::args::{c_str, require_out};
use super::boundary::ffi_boundary;
use super::engines::{engine_and_name, ENGINES};
use super::fail::invalid;
use super::te_types::*;
use crate::error::Error;
use crate::te::TransferEngine;
use std::ffi::{c_char, c_int};
use std::time::Duration;

/// Creates an engine like createTransferEngine, with transport discovery limited to
/// the devices in `device_filter` (comma-separated; NULL or empty: all), as upstream's
/// Python `initialize(..., device_name)`. With `auto_discover` 0 no transport is
/// installed (installTransport then chooses one).
///
/// Returns the engine handle, or NULL with the reason in the thread's last error.
///
/// # Safety
/// The strings must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_te_create(
    metadata_conn_string: *const c_char,
    local_server_name: *const c_char,
    device_filter: *const c_char,
    auto_discover: c_int,
) -> transfer_engine_t {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let metadata = unsafe { c_str(metadata_conn_string, "metadata_conn_string") }?;
        // SAFETY: as above.
        let name = unsafe { c_str(local_server_name, "local_server_name") }?;
        let filter = if device_filter.is_null() {
            Vec::new()
        } else {
            // SAFETY: as above.
            let text = unsafe { c_str(device_filter, "device_filter") }?;
            crate::config::comma_list(&text)
        };
        let engine = TransferEngine::new(&metadata, &name, false)?;
        if auto_discover != 0 {
            engine.auto_install_with(&filter)?;
        }
        Ok(ENGINES.insert(engine))
    })
}

/// Reads buffer `index` of a segment's descriptor as this engine has it cached:
/// `segment_id` is an id from openSegment, or LOCAL_SEGMENT for the engine's own
/// segment. Writes the buffer's absolute address and length to `addr_out` and
/// `length_out` (either may be NULL) when `index` is below the buffer count, and leaves
/// them untouched otherwise. Buffers are in descriptor order.
///
/// Returns the number of buffers in the descriptor (0 or more; 0 for the local segment
/// before a transport is installed), or -1 for a bad handle or a segment id that is not
/// open.
///
/// # Safety
/// `addr_out` and `length_out` must each be NULL or point to a writable uint64_t.
#[no_mangle]
pub unsafe extern "C" fn mooncake_te_segment_buffer(
    engine: transfer_engine_t,
    segment_id: segment_id_t,
    index: usize,
    addr_out: *mut u64,
    length_out: *mut u64,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        let desc = match e.segment_descriptor(segment_id) {
            Some(d) => d,
            None if segment_id == LOCAL_SEGMENT => return Ok(0),
            None => return Err(invalid(format!("segment id {segment_id} is not open"))),
        };
        if let Some(b) = desc.buffers.get(index) {
            if !addr_out.is_null() {
                // SAFETY: a writable uint64_t, per the contract.
                unsafe { addr_out.write(b.addr) };
            }
            if !length_out.is_null() {
                // SAFETY: as above.
                unsafe { length_out.write(b.length) };
            }
        }
        c_int::try_from(desc.buffers.len())
            .map_err(|_| invalid(format!("{} buffers do not fit an int", desc.buffers.len())))
    })
}

/// Probes a peer's RPC daemon (an RPC type-3 message) by segment name, as upstream's
/// Python `send_probe`: the address comes from the name itself in P2PHANDSHAKE mode,
/// else from the peer's published `rpc_meta`.
///
/// Returns 0 when the peer answered, else a negative ERR_* code: -101 (name does not
/// resolve), -102 (connection failed), -103 (malformed reply), -200 (no `rpc_meta`),
/// or -1 for a bad handle or a NULL or empty name.
///
/// # Safety
/// `peer_server_name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_te_send_probe(
    engine: transfer_engine_t,
    peer_server_name: *const c_char,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (e, name) = unsafe { engine_and_name(engine, peer_server_name, "peer_server_name") }?;
        if name.is_empty() {
            return Err(invalid("peer_server_name is empty"));
        }
        e.probe(&name)?;
        Ok(0)
    })
}

/// Longest single native wait; longer timeouts wait in steps of this.
const WAIT_STEP_MS: u64 = 3_600_000;

/// Blocks the calling thread until every task submitted to the batch so far is
/// terminal (COMPLETED or FAILED), or `timeout_ms` milliseconds pass. A condition
/// variable wakes it as soon as the last task finishes; nothing spins. It does not
/// count as observing the tasks: call getTransferStatus (or mooncake_te_batch_status)
/// afterwards before freeBatchID.
///
/// Returns 1 when every task is terminal (also for an empty batch), 0 on timeout,
/// -1 for a bad handle or an unknown batch id.
///
/// # Safety
/// Always safe to call; handle and batch id are validated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_te_wait_batch(
    engine: transfer_engine_t,
    batch_id: batch_id_t,
    timeout_ms: u64,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        let mut left = timeout_ms;
        loop {
            let step = left.min(WAIT_STEP_MS);
            if e.wait_batch(batch_id, Duration::from_millis(step))? {
                return Ok(1);
            }
            left -= step;
            if left == 0 {
                return Ok(0);
            }
        }
    })
}

/// The whole batch's status, like upstream's C++ `getBatchTransferStatus`: COMPLETED
/// when every task completed (or the batch is empty), FAILED when any task failed,
/// else WAITING; `transferred_bytes` sums the completed tasks. Every task is observed
/// as getTransferStatus would observe it, so once all are terminal freeBatchID accepts
/// the batch, and a completion notify from submitTransferWithNotify is sent here.
/// (Unlike upstream, a failed task does not stop the scan, so the others are
/// observed too.)
///
/// Returns 0 and fills `*status`, or 1 (bad handle or batch id, NULL `status`) leaving
/// it untouched.
///
/// # Safety
/// `status` must be NULL or point to a writable transfer_status_t.
#[no_mangle]
pub unsafe extern "C" fn mooncake_te_batch_status(
    engine: transfer_engine_t,
    batch_id: batch_id_t,
    status: *mut transfer_status_t,
) -> c_int {
    ffi_boundary!(fail = 1, map = Error::status_code, {
        let e = ENGINES.get(engine)?;
        require_out(status, "status")?;
        let (state, bytes) = e.batch_status(batch_id)?;
        let out = transfer_status {
            status: state as c_int,
            transferred_bytes: bytes,
        };
        // SAFETY: status is writable, per the contract.
        unsafe { status.write(out) };
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::TransferEngine;
    use std::ffi::CString;

    /// A live engine handle for one test, destroyed when it goes out of scope.
    struct TestEngine(transfer_engine_t);

    impl TestEngine {
        fn new() -> TestEngine {
            let e = TransferEngine::new("P2PHANDSHAKE", "127.0.0.1", true).expect("engine");
            TestEngine(ENGINES.insert(e))
        }
    }

    impl Drop for TestEngine {
        fn drop(&mut self) {
            drop(ENGINES.remove(self.0));
        }
    }

    #[test]
    fn segment_buffers_of_the_local_segment() {
        let engine = TestEngine::new();
        let h = engine.0;
        let mut region = vec![0u8; 4096];
        let addr = region.as_mut_ptr() as u64;
        let e = ENGINES.get(h).unwrap();
        e.register_memory(addr, 4096, "*", true).unwrap();
        let (mut a, mut n) = (0u64, 0u64);
        // SAFETY: valid out pointers; the handle is live.
        unsafe {
            assert_eq!(
                mooncake_te_segment_buffer(h, LOCAL_SEGMENT, 0, &mut a, &mut n),
                1
            );
            assert_eq!((a, n), (addr, 4096));
            assert_eq!(
                mooncake_te_segment_buffer(
                    h,
                    LOCAL_SEGMENT,
                    1,
                    std::ptr::null_mut(),
                    std::ptr::null_mut()
                ),
                1
            );
            assert_eq!(mooncake_te_segment_buffer(h, 7, 0, &mut a, &mut n), -1);
            assert_eq!(
                mooncake_te_segment_buffer(std::ptr::null_mut(), 0, 0, &mut a, &mut n),
                -1
            );
        }
        e.unregister_memory(addr).unwrap();
    }

    #[test]
    fn wait_and_status_of_batches() {
        let engine = TestEngine::new();
        let h = engine.0;
        let e = ENGINES.get(h).unwrap();
        let batch = e.allocate_batch(4);
        let mut st = transfer_status {
            status: -1,
            transferred_bytes: 9,
        };
        // SAFETY: valid pointers; handles and ids are validated.
        unsafe {
            assert_eq!(mooncake_te_wait_batch(h, batch, 10), 1);
            assert_eq!(mooncake_te_wait_batch(h, batch ^ 0xFFFF, 10), -1);
            assert_eq!(
                mooncake_te_wait_batch(std::ptr::null_mut(), batch, u64::MAX),
                -1
            );
            assert_eq!(mooncake_te_batch_status(h, batch, &mut st), 0);
            assert_eq!((st.status, st.transferred_bytes), (STATUS_COMPLETED, 0));
            assert_eq!(mooncake_te_batch_status(h, batch, std::ptr::null_mut()), 1);
            assert_eq!(mooncake_te_batch_status(h, batch ^ 0xFFFF, &mut st), 1);
        }
        e.free_batch(batch).unwrap();
    }

    #[test]
    fn probe_by_segment_name() {
        let engine = TestEngine::new();
        let h = engine.0;
        let own = CString::new(ENGINES.get(h).unwrap().segment_name()).unwrap();
        // SAFETY: NUL-terminated strings; the handle is validated.
        unsafe {
            assert_eq!(mooncake_te_send_probe(h, own.as_ptr()), 0);
            assert_eq!(mooncake_te_send_probe(h, c"".as_ptr()), -1);
            assert_eq!(mooncake_te_send_probe(h, std::ptr::null()), -1);
            assert_eq!(mooncake_te_send_probe(h, c"127.0.0.1:1".as_ptr()), -102);
        }
    }
}
