//! The panic boundary every exported function's body runs in: `ffi_boundary!`.
//!
//! The shape is hyper's `ffi_fn!` and rustls-ffi's `PanicOrDefault`: the function's
//! name is written once (in its signature; the macro reads it back from a nested
//! item's type name), its failure value comes from its return type
//! ([`FailureValue`]), panics are caught and the thread's last error is set. The macro
//! wraps the body rather than the whole `extern "C" fn` because cbindgen, which writes
//! the headers, reads the signatures from the source and does not expand macros.
//!
//! The body returns `Result<R, FfiError>`; `?` works inside it. Nothing unwinds
//! across the C boundary.

#[cfg(doc)]
use super::fail::FailureValue;
use super::fail::FfiError;
use super::last_error::{clear_last_error, set_last_error};
use crate::error::Error;
use crate::store::ErrorCode;
use std::panic::UnwindSafe;

/// The name of the exported function a boundary runs in, read from the type name of an
/// item nested in it (`crate::ffi::store::mooncake_store_put::here`) and cut down to
/// its last segment only when an error is recorded.
#[derive(Clone, Copy)]
pub(crate) struct FnName(&'static str);

impl FnName {
    /// The name of the function `item` is nested in.
    pub(crate) fn of<F>(_item: F) -> FnName {
        FnName(std::any::type_name::<F>())
    }

    /// The exported function's C name.
    pub(crate) fn get(self) -> &'static str {
        let path = self.0.rsplit_once("::").map_or(self.0, |(outer, _)| outer);
        path.rsplit_once("::").map_or(path, |(_, name)| name)
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Drops a caught panic's payload without letting a panicking destructor unwind out of
/// the boundary: a payload whose drop panics is leaked instead (only that one).
fn drop_payload(payload: Box<dyn std::any::Any + Send>) {
    if let Err(nested) =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload)))
    {
        std::mem::forget(nested);
    }
}

/// Runs `body` with panics caught; maps failures onto the function's return value.
///
/// `fail` is returned for boundary failures and panics, `code` turns a store error
/// code into the value, and `map` turns an engine error into the function's code
/// (negative `ERR_*`, positive status, or `fail` again).
pub(crate) fn run<R>(
    function: FnName,
    clear: bool,
    fail: R,
    code: impl FnOnce(ErrorCode) -> R,
    map: impl FnOnce(&Error) -> R,
    body: impl FnOnce() -> Result<R, FfiError> + UnwindSafe,
) -> R {
    if clear {
        clear_last_error();
    }
    match std::panic::catch_unwind(body) {
        Ok(Ok(value)) => value,
        Ok(Err(FfiError::Failed { what, errno })) => {
            set_last_error(function.get(), &what, errno);
            fail
        }
        Ok(Err(FfiError::Engine(e))) => {
            set_last_error(function.get(), &e.to_string(), e.errno());
            map(&e)
        }
        Ok(Err(FfiError::Code { code: c, what })) => {
            set_last_error(function.get(), &what, 0);
            code(c)
        }
        Err(payload) => {
            let text = panic_text(payload.as_ref());
            drop_payload(payload);
            set_last_error(function.get(), &format!("internal panic: {text}"), 0);
            fail
        }
    }
}

/// The panic boundary every exported function's body runs in.
///
/// * `ffi_boundary!({ body })`: failures and panics return the return type's
///   [`FailureValue::FAILURE`], store error codes are returned as the value.
/// * `ffi_boundary!(fail = V, { body })`: every failure returns `V` (upstream's value
///   where it is not the type's).
/// * `ffi_boundary!(map = F, { body })` / `ffi_boundary!(fail = V, map = F, { body })`:
///   engine errors return `F(&e)`.
/// * `ffi_boundary!(@keep, fail = V, { body })`: leaves the thread's last error as it
///   is (the `mooncake_last_error_*` getters).
/// * `ffi_boundary!(name = n, ...)` before any of these binds `n` to the function's
///   [`FnName`] for a body that records a last error and still succeeds.
macro_rules! ffi_boundary {
    (name = $name:ident, $($rest:tt)*) => {
        $crate::ffi::boundary::ffi_boundary!(@named $name, $($rest)*)
    };
    (@named $name:ident, @keep, fail = $fail:expr, $body:block) => {{
        let fail = $fail;
        $crate::ffi::boundary::ffi_boundary!(@run $name, false, fail, |_| fail, |_| fail, $body)
    }};
    (@named $name:ident, fail = $fail:expr, map = $map:expr, $body:block) => {{
        let fail = $fail;
        $crate::ffi::boundary::ffi_boundary!(@run $name, true, fail, |_| fail, $map, $body)
    }};
    (@named $name:ident, fail = $fail:expr, $body:block) => {{
        let fail = $fail;
        $crate::ffi::boundary::ffi_boundary!(@run $name, true, fail, |_| fail, |_| fail, $body)
    }};
    (@named $name:ident, map = $map:expr, $body:block) => {
        $crate::ffi::boundary::ffi_boundary!(
            @run $name,
            true,
            $crate::ffi::fail::failure(),
            $crate::ffi::fail::FailureValue::from_code,
            $map,
            $body
        )
    };
    (@named $name:ident, $body:block) => {
        $crate::ffi::boundary::ffi_boundary!(
            @run $name,
            true,
            $crate::ffi::fail::failure(),
            $crate::ffi::fail::FailureValue::from_code,
            |_| $crate::ffi::fail::failure(),
            $body
        )
    };
    (@run $name:ident, $clear:literal, $fail:expr, $code:expr, $map:expr, $body:block) => {{
        fn here() {}
        let $name = $crate::ffi::boundary::FnName::of(here);
        $crate::ffi::boundary::run(
            $name,
            $clear,
            $fail,
            $code,
            $map,
            ::std::panic::AssertUnwindSafe(
                || -> ::std::result::Result<_, $crate::ffi::fail::FfiError> { $body },
            ),
        )
    }};
    ($($rest:tt)*) => {
        $crate::ffi::boundary::ffi_boundary!(@named function, $($rest)*)
    };
}
pub(crate) use ffi_boundary;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::last_error::{last_error_errno, last_error_message};
    use std::ffi::CStr;

    fn message() -> String {
        // SAFETY: the pointer is a live NUL-terminated string of this thread.
        unsafe { CStr::from_ptr(last_error_message()) }
            .to_string_lossy()
            .into_owned()
    }

    fn named(name: &'static str) -> FnName {
        FnName(name)
    }

    /// Runs `body` as `name` with failure value -1 and every error mapped to -2.
    fn run_as(
        name: &'static str,
        body: impl FnOnce() -> Result<i32, FfiError> + std::panic::UnwindSafe,
    ) -> i32 {
        run(named(name), true, -1, |c| c.0, |_| -2, body)
    }

    #[test]
    fn panics_become_the_failure_value() {
        let r = run_as("m::f::here", || panic!("boom"));
        assert_eq!(r, -1);
        assert_eq!(message(), "f: internal panic: boom");
        let r = run(
            named("m::g::here"),
            true,
            -1,
            |c| c.0,
            |e: &Error| e.err_code(),
            || Err(Error::AddressOverlapped("x".into()).into()),
        );
        assert_eq!(r, -7);
        assert!(message().starts_with("g: address overlapped"));
        let r = run_as("m::c::here", || Err(ErrorCode::OBJECT_NOT_FOUND.into()));
        assert_eq!(r, ErrorCode::OBJECT_NOT_FOUND.0);
        assert_eq!(message(), format!("c: {}", ErrorCode::OBJECT_NOT_FOUND));
        let r = run_as("m::h::here", || Ok(5));
        assert_eq!(r, 5);
        assert_eq!(message(), "");
        assert_eq!(last_error_errno(), 0);
    }

    #[test]
    fn the_name_is_the_enclosing_function() {
        fn mooncake_example() -> FnName {
            fn here() {}
            FnName::of(here)
        }
        assert_eq!(mooncake_example().get(), "mooncake_example");
    }

    /// A panic payload whose destructor panics too.
    struct PanicsOnDrop;

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("payload drop");
        }
    }

    #[test]
    // The second payload is leaked on purpose, which Miri's leak check reports.
    #[cfg_attr(miri, ignore)]
    fn a_payload_whose_drop_panics_stays_inside() {
        let r = run_as("m::f::here", || std::panic::panic_any(PanicsOnDrop));
        assert_eq!(r, -1);
        assert_eq!(message(), "f: internal panic: unknown panic payload");
    }
}
