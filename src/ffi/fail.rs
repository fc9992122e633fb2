//! How a C call fails: the [`FfiError`] an exported function's body returns, and the
//! [`FailureValue`] of each C return type that the boundary hands back for it.
//!
//! Upstream's conventions give every return type one failure value (`int` and
//! `int64_t`: -1, pointers: NULL, `void`: nothing); the few functions whose upstream
//! failure value differs (status codes, `INVALID_BATCH`, a 0 address) say so where
//! they call `ffi_boundary!`.

use crate::error::Error;
use crate::store::{ErrorCode, StoreError};
use std::ffi::c_int;

/// Why a call failed at the boundary.
#[derive(Debug)]
pub(crate) enum FfiError {
    /// Rejected before reaching the engine (NULL pointer, bad handle, bad length), or a
    /// failure the function reports with its failure value.
    Failed {
        /// What was wrong.
        what: String,
        /// The errno reported through `mooncake_last_error_errno`.
        errno: c_int,
    },
    /// The engine returned an error; the function maps it onto its return code.
    Engine(Error),
    /// The store returned an error code, which the function returns as its value.
    Code {
        /// The code returned (`ErrorCode`'s number).
        code: ErrorCode,
        /// What the last error says.
        what: String,
    },
}

impl From<Error> for FfiError {
    fn from(e: Error) -> Self {
        FfiError::Engine(e)
    }
}

impl From<ErrorCode> for FfiError {
    fn from(code: ErrorCode) -> Self {
        FfiError::Code {
            what: code.to_string(),
            code,
        }
    }
}

impl From<StoreError> for FfiError {
    fn from(e: StoreError) -> Self {
        FfiError::Code {
            what: e.to_string(),
            code: e.code,
        }
    }
}

/// An invalid-argument failure (`EINVAL`).
pub(crate) fn invalid(what: impl Into<String>) -> FfiError {
    FfiError::Failed {
        what: what.into(),
        errno: libc::EINVAL,
    }
}

/// A failure with the function's failure value and no errno.
pub(crate) fn failed(what: impl Into<String>) -> FfiError {
    FfiError::Failed {
        what: what.into(),
        errno: 0,
    }
}

/// A C return type's value on failure, and how it carries a store error code.
pub(crate) trait FailureValue: Copy {
    /// Returned for a rejected argument, an engine error the function does not map,
    /// or a panic.
    const FAILURE: Self;

    /// Returned when the store fails with `code`.
    fn from_code(code: ErrorCode) -> Self;
}

impl FailureValue for c_int {
    const FAILURE: Self = -1;

    fn from_code(code: ErrorCode) -> Self {
        code.0
    }
}

impl FailureValue for i64 {
    const FAILURE: Self = -1;

    fn from_code(code: ErrorCode) -> Self {
        i64::from(code.0)
    }
}

impl FailureValue for () {
    const FAILURE: Self = ();

    fn from_code(_: ErrorCode) -> Self {}
}

impl<T> FailureValue for *mut T {
    const FAILURE: Self = std::ptr::null_mut();

    fn from_code(_: ErrorCode) -> Self {
        Self::FAILURE
    }
}

impl<T> FailureValue for *const T {
    const FAILURE: Self = std::ptr::null();

    fn from_code(_: ErrorCode) -> Self {
        Self::FAILURE
    }
}

/// The failure value of `R` (for macros, where `R` is inferred).
pub(crate) fn failure<R: FailureValue>() -> R {
    R::FAILURE
}
