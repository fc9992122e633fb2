//! Writers of per-key results into the caller's arrays, and the results of a batch
//! on a store that is not set up.

use crate::ffi::boundary::FnName;
use crate::ffi::last_error::set_last_error;
use crate::store::{ErrorCode, StoreError, StoreResult};
use std::ffi::c_int;

/// Writes `results` into `out` (which holds `count` entries).
///
/// # Safety
/// `out` must be writable for `count` entries.
pub(in crate::ffi) unsafe fn write_out<T>(
    out: *mut T,
    count: usize,
    results: impl IntoIterator<Item = T>,
) {
    for (i, r) in results.into_iter().enumerate().take(count) {
        // SAFETY: i < count entries.
        unsafe { *out.add(i) = r };
    }
}

/// `count` results of -600, the last error of `function` saying so when there is any.
pub(in crate::ffi) fn not_set_up<T: Clone>(
    function: FnName,
    count: usize,
) -> Vec<Result<T, ErrorCode>> {
    let e = ErrorCode::INVALID_PARAMS;
    if count > 0 {
        set_last_error(function.get(), &e.to_string(), 0);
    }
    vec![Err(e); count]
}

/// The codes of per-key results. The first failure with a cause becomes the last
/// error of `function` when one is given (the extensions); upstream's `store_c.h`
/// functions (`None`) return the codes alone, the causes going to the log.
pub(in crate::ffi) fn codes<R>(
    function: Option<FnName>,
    results: Vec<StoreResult<R>>,
) -> Vec<Result<R, ErrorCode>> {
    let mut recorded = false;
    let mut code = |e: StoreError| match function {
        None => e.logged(),
        Some(f) => {
            if !recorded && !e.cause.is_empty() {
                set_last_error(f.get(), &e.to_string(), 0);
                recorded = true;
            }
            e.code
        }
    };
    results.into_iter().map(|r| r.map_err(&mut code)).collect()
}

/// 0 or the error code.
pub(in crate::ffi) fn code_of(r: Result<(), ErrorCode>) -> c_int {
    r.map_or_else(|e| e.0, |()| 0)
}

/// A size as `int64_t`, or the error code.
pub(in crate::ffi) fn size_or_code(r: Result<u64, ErrorCode>) -> i64 {
    r.map_or_else(|e| i64::from(e.0), |n| n as i64)
}
