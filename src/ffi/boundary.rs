//! The C boundary's plumbing: the thread-local last error, the one panic-catching
//! macro every exported function runs its body in, and argument checks.
//!
//! Every exported function body is `ffi_boundary!("name", fail = VALUE, ...)`. The body
//! returns `Result<R, FfiError>`; the macro clears the calling thread's last error, runs
//! the body under `catch_unwind`, and turns an error or a panic into the function's
//! upstream failure value while recording who failed, why, and the errno. Nothing
//! unwinds across the C boundary.

use crate::error::Error;
use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::UnwindSafe;

/// Why a call failed at the boundary.
#[derive(Debug)]
pub(crate) enum FfiError {
    /// Rejected before reaching the engine: NULL pointer, bad handle, bad length.
    Invalid {
        /// What was wrong.
        what: String,
        /// The errno reported through `mooncake_last_error_errno`.
        errno: c_int,
    },
    /// The engine returned an error; the function maps it onto its return code.
    Engine(Error),
}

impl From<Error> for FfiError {
    fn from(e: Error) -> Self {
        FfiError::Engine(e)
    }
}

/// An invalid-argument failure (`EINVAL`).
pub(crate) fn invalid(what: impl Into<String>) -> FfiError {
    FfiError::Invalid {
        what: what.into(),
        errno: libc::EINVAL,
    }
}

/// The calling thread's last error, kept as C strings so pointers can be handed out.
struct LastError {
    function: CString,
    message: CString,
    errno: c_int,
}

thread_local! {
    static LAST_ERROR: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

/// Strips interior NULs so the text always fits in a C string.
fn c_string(text: String) -> CString {
    CString::new(text).unwrap_or_else(|e| {
        let mut bytes = e.into_vec();
        bytes.retain(|b| *b != 0);
        CString::new(bytes).unwrap_or_default()
    })
}

/// Records a failure of `function` for the calling thread.
pub(crate) fn set_last_error(function: &str, what: &str, errno: c_int) {
    let entry = LastError {
        function: c_string(function.to_string()),
        message: c_string(format!("{function}: {what}")),
        errno,
    };
    // A thread that is being torn down has no TLS left; dropping the record is fine.
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = Some(entry));
}

/// Forgets the calling thread's last error.
pub(crate) fn clear_last_error() {
    let _ = LAST_ERROR.try_with(|slot| slot.borrow_mut().take());
}

/// Pointer to the last error message (`""` when none); valid until the thread's next
/// call into the library, other than the `mooncake_last_error_*` getters.
pub(crate) fn last_error_message() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ref().map(|e| e.message.as_ptr()))
        .ok()
        .flatten()
        .unwrap_or(c"".as_ptr())
}

/// Pointer to the name of the function that failed last (`""` when none).
pub(crate) fn last_error_function() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ref().map(|e| e.function.as_ptr()))
        .ok()
        .flatten()
        .unwrap_or(c"".as_ptr())
}

/// The errno of the last error (0 when none, or when no system call was involved).
pub(crate) fn last_error_errno() -> c_int {
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ref().map_or(0, |e| e.errno))
        .unwrap_or(0)
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
/// `fail` is returned for boundary rejections and panics; `map` turns an engine error
/// into the function's code (negative `ERR_*`, positive status, or `fail` again).
pub(crate) fn run<R>(
    function: &str,
    clear: bool,
    fail: R,
    map: impl FnOnce(&Error) -> R,
    body: impl FnOnce() -> Result<R, FfiError> + UnwindSafe,
) -> R {
    if clear {
        clear_last_error();
    }
    match std::panic::catch_unwind(body) {
        Ok(Ok(value)) => value,
        Ok(Err(FfiError::Invalid { what, errno })) => {
            set_last_error(function, &what, errno);
            fail
        }
        Ok(Err(FfiError::Engine(e))) => {
            set_last_error(function, &e.to_string(), e.errno());
            map(&e)
        }
        Err(payload) => {
            let text = panic_text(payload.as_ref());
            drop_payload(payload);
            set_last_error(function, &format!("internal panic: {text}"), 0);
            fail
        }
    }
}

/// The panic boundary every exported function's body runs in.
///
/// * `ffi_boundary!("name", fail = V, { body })`: errors and panics return `V`.
/// * `ffi_boundary!("name", fail = V, map = |e| ..., { body })`: engine errors return
///   `map(&e)`, boundary rejections and panics return `V`.
/// * `ffi_boundary!(@keep "name", fail = V, { body })`: like the first form but leaves the
///   thread's last error as it is (the `mooncake_last_error_*` getters).
///
/// The body is a block evaluating to `Result<R, FfiError>`; `?` works inside it.
macro_rules! ffi_boundary {
    ($name:literal, fail = $fail:expr, map = $map:expr, $body:block) => {
        $crate::ffi::boundary::run(
            $name,
            true,
            $fail,
            $map,
            ::std::panic::AssertUnwindSafe(
                || -> ::std::result::Result<_, $crate::ffi::boundary::FfiError> { $body },
            ),
        )
    };
    ($name:literal, fail = $fail:expr, $body:block) => {{
        let fail = $fail;
        $crate::ffi::boundary::run(
            $name,
            true,
            fail,
            |_: &$crate::error::Error| fail,
            ::std::panic::AssertUnwindSafe(
                || -> ::std::result::Result<_, $crate::ffi::boundary::FfiError> { $body },
            ),
        )
    }};
    (@keep $name:literal, fail = $fail:expr, $body:block) => {{
        let fail = $fail;
        $crate::ffi::boundary::run(
            $name,
            false,
            fail,
            |_: &$crate::error::Error| fail,
            ::std::panic::AssertUnwindSafe(
                || -> ::std::result::Result<_, $crate::ffi::boundary::FfiError> { $body },
            ),
        )
    }};
}
pub(crate) use ffi_boundary;

/// Reads a NUL-terminated argument; NULL is an invalid argument.
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn c_str<'a>(ptr: *const c_char, what: &str) -> Result<Cow<'a, str>, FfiError> {
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(ptr) }.to_string_lossy())
}

/// Reads an optional NUL-terminated string; NULL reads as `default`.
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn c_str_or<'a>(ptr: *const c_char, default: &'a str) -> Cow<'a, str> {
    if ptr.is_null() {
        return Cow::Borrowed(default);
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy()
}

/// Views `count` elements at `ptr`; a zero count is an empty slice whatever `ptr` is,
/// and NULL, misaligned or impossibly long arrays are invalid arguments.
///
/// # Safety
/// A non-NULL `ptr` must point to `count` initialised elements that outlive the call.
pub(crate) unsafe fn c_slice<'a, T>(
    ptr: *const T,
    count: usize,
    what: &str,
) -> Result<&'a [T], FfiError> {
    if count == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL but its count is {count}")));
    }
    if count > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(invalid(format!(
            "{what}: count {count} is larger than any array"
        )));
    }
    if (ptr as usize) % std::mem::align_of::<T>() != 0 {
        return Err(invalid(format!("{what} ({ptr:p}) is not aligned")));
    }
    // SAFETY: non-NULL, aligned, length bounded; the caller guarantees the elements.
    Ok(unsafe { std::slice::from_raw_parts(ptr, count) })
}

/// `snprintf(buf, len, "%s", text)`: copies what fits, always NUL-terminates when
/// `len > 0`, and never writes past `len` bytes.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes.
pub(crate) unsafe fn write_truncated(buf: *mut c_char, len: usize, text: &str) {
    if len == 0 || buf.is_null() {
        return;
    }
    let n = text.len().min(len - 1);
    // SAFETY: n + 1 <= len bytes, which the caller guarantees are writable.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> String {
        // SAFETY: the pointer is a live NUL-terminated string of this thread.
        unsafe { CStr::from_ptr(last_error_message()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn panics_become_the_failure_value() {
        let r: i32 = run(
            "f",
            true,
            -1,
            |_| -2,
            || -> Result<i32, FfiError> { panic!("boom") },
        );
        assert_eq!(r, -1);
        assert_eq!(message(), "f: internal panic: boom");
        let r = run(
            "g",
            true,
            -1,
            |e: &Error| e.err_code(),
            || Err(Error::AddressOverlapped("x".into()).into()),
        );
        assert_eq!(r, -7);
        assert!(message().starts_with("g: address overlapped"));
        let r = run("h", true, -1, |_| -2, || Ok(5));
        assert_eq!(r, 5);
        assert_eq!(message(), "");
        assert_eq!(last_error_errno(), 0);
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
        let r: i32 = run(
            "f",
            true,
            -1,
            |_| -2,
            || -> Result<i32, FfiError> { std::panic::panic_any(PanicsOnDrop) },
        );
        assert_eq!(r, -1);
        assert_eq!(message(), "f: internal panic: unknown panic payload");
    }

    #[test]
    fn truncation_is_snprintf_like() {
        let mut buf = [0x55 as c_char; 6];
        // SAFETY: buf has 6 bytes; only 4 are offered.
        unsafe { write_truncated(buf.as_mut_ptr(), 4, "abcdef") };
        assert_eq!(&buf[..5], &[97, 98, 99, 0, 0x55]);
    }

    #[test]
    fn slices_reject_null_and_huge_counts() {
        // SAFETY: the checks reject every pointer before it is read.
        unsafe {
            assert!(c_slice::<u64>(std::ptr::null(), 1, "a").is_err());
            assert!(c_slice::<u64>(std::ptr::null(), 0, "a").unwrap().is_empty());
            let x = [1u64];
            assert!(c_slice(x.as_ptr(), usize::MAX, "a").is_err());
            assert_eq!(c_slice(x.as_ptr(), 1, "a").unwrap(), &[1]);
        }
    }
}
