//! `mooncake_store_batch_replica_clear` (upstream's Python `batch_replica_clear`).

use crate::ffi::args::c_str_or;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::store::keys::KeyBatch;
use crate::ffi::store::mooncake_store_t;
use crate::ffi::store::results::write_out;
use crate::store::ErrorCode;
use std::collections::HashMap;
use std::ffi::{c_char, c_int};

/// Per key of `keys`, 1 when it is one of `cleared` (each cleared name marks one
/// occurrence, the first not yet marked), else 0.
fn cleared_flags(keys: &[String], cleared: &[String]) -> Vec<c_int> {
    let mut left: HashMap<&str, usize> = HashMap::new();
    for c in cleared {
        *left.entry(c.as_str()).or_default() += 1;
    }
    keys.iter()
        .map(|k| match left.get_mut(k.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                1
            }
            _ => 0,
        })
        .collect()
}

/// Drops this client's objects among `keys` whose read leases have expired: their
/// replicas on `segment_name` (a segment name, i.e. a client's hostname), or every
/// replica when it is NULL or empty. Per key, `cleared_out[i]` is 1 when it was
/// cleared, 0 when it was left alone (missing, leased, being written, another
/// client's, no replica there). Returns 0, -600 when the store is not set up, another
/// negative code when the master call fails (`cleared_out` all 0 then), or -1 for a
/// bad handle, a NULL array or a NULL key.
///
/// # Safety
/// `keys` and `cleared_out` hold `count` entries; keys and `segment_name` (when not
/// NULL) are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_replica_clear(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    segment_name: *const c_char,
    cleared_out: *mut c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let (batch, segment) = unsafe {
            (
                KeyBatch::read(store, keys, count, cleared_out, "cleared_out")?,
                c_str_or(segment_name, ""),
            )
        };
        let result = batch
            .with_client(|c, keys| c.batch_replica_clear(keys, &segment))
            .unwrap_or_else(|| Err(ErrorCode::INVALID_PARAMS.into()));
        let flags = match &result {
            Ok(cleared) => cleared_flags(batch.keys(), cleared),
            Err(_) => vec![0; count],
        };
        // SAFETY: cleared_out holds `count` entries.
        unsafe { write_out(cleared_out, count, flags) };
        result?;
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::cleared_flags;

    #[test]
    fn flags_mark_one_occurrence_per_cleared_key() {
        let s = |v: &[&str]| v.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        let keys = s(&["a", "b", "a", "c", "a"]);
        assert_eq!(
            cleared_flags(&keys, &s(&["a", "c", "a"])),
            vec![1, 0, 1, 1, 0]
        );
        assert_eq!(cleared_flags(&keys, &[]), vec![0; 5]);
    }
}
