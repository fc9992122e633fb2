//! The calling thread's last error: who failed, why, and the errno, kept as C strings
//! so that `mooncake_last_error_*` can hand out pointers.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};

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
    last_error_text(|e| &e.message)
}

/// Pointer to the name of the function that failed last (`""` when none).
pub(crate) fn last_error_function() -> *const c_char {
    last_error_text(|e| &e.function)
}

/// Pointer to one string of the last error (`""` when none).
fn last_error_text(field: impl Fn(&LastError) -> &CString) -> *const c_char {
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ref().map(|e| field(e).as_ptr()))
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
