//! `mooncake_ext.h`: extensions upstream's C ABI lacks, all named `mooncake_*`.
//!
//! Every exported function records why it failed in a per-thread last error, which
//! these functions read. A successful call clears it. Returned strings belong to the
//! library and stay valid until the same thread's next call into it (other than these
//! getters).

use super::boundary::ffi_boundary;
use super::last_error;
use std::ffi::{c_char, c_int};

/// The calling thread's last error as `"function: message"`, or `""` when its last
/// call succeeded. Valid until the thread's next call into the library.
#[no_mangle]
pub extern "C" fn mooncake_last_error_message() -> *const c_char {
    ffi_boundary!(@keep, fail = c"".as_ptr(), {
        Ok(last_error::last_error_message())
    })
}

/// The errno behind the calling thread's last error: the OS error when a system call
/// failed, EINVAL for a rejected argument, EBADF for a bad engine handle, 0 otherwise
/// (and when the last call succeeded).
#[no_mangle]
pub extern "C" fn mooncake_last_error_errno() -> c_int {
    ffi_boundary!(@keep, fail = 0, {
        Ok(last_error::last_error_errno())
    })
}

/// The name of the function whose failure is the calling thread's last error, or
/// `""`. Valid until the thread's next call into the library.
#[no_mangle]
pub extern "C" fn mooncake_last_error_function() -> *const c_char {
    ffi_boundary!(@keep, fail = c"".as_ptr(), {
        Ok(last_error::last_error_function())
    })
}

/// Forgets the calling thread's last error.
#[no_mangle]
pub extern "C" fn mooncake_clear_last_error() {
    ffi_boundary!(@keep, fail = (), {
        last_error::clear_last_error();
        Ok(())
    })
}

/// The library version, `"major.minor.patch"` (a static string).
#[no_mangle]
pub extern "C" fn mooncake_version() -> *const c_char {
    const VERSION: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
    ) {
        Ok(v) => v,
        Err(_) => c"unknown",
    };
    ffi_boundary!(@keep, fail = VERSION.as_ptr(), {
        Ok(VERSION.as_ptr())
    })
}
