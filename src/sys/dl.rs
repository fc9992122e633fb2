//! A shared library opened at run time (`dlopen`) and its symbols (`dlsym`): how the
//! library reaches libibverbs and the CUDA driver without linking them, so that it
//! loads on hosts that have neither.

use std::ffi::{c_void, CStr, CString};
use std::fmt;

/// An opened shared library. It is never closed: its functions may be called until the
/// process exits, and the handles it hands out live in process-wide tables.
pub struct Library {
    handle: *mut c_void,
    name: String,
}

/// Why no library could be opened. Prints what `dlerror` said for each name, after
/// the environment variable that named the file when one did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlError {
    /// The environment variable that named the file, when one did.
    pub variable: Option<String>,
    /// Each name tried and what `dlerror` said about it.
    pub tried: Vec<(String, String)>,
}

impl fmt::Display for DlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(var) = &self.variable {
            write!(f, "{var}: ")?;
        }
        let reasons: Vec<&str> = self.tried.iter().map(|(_, why)| why.as_str()).collect();
        f.write_str(&reasons.join("; "))
    }
}

impl std::error::Error for DlError {}

// SAFETY: a dlopen handle is a process-wide token; dlsym is thread-safe.
unsafe impl Send for Library {}
// SAFETY: as above; the struct holds no mutable state.
unsafe impl Sync for Library {}

impl Library {
    /// Opens the first of `names` that loads (`RTLD_NOW | RTLD_LOCAL`); the error
    /// lists what `dlerror` said for each.
    pub fn open(names: &[&str]) -> Result<Library, DlError> {
        let mut tried = Vec::new();
        for name in names {
            let Ok(c) = CString::new(*name) else { continue };
            // SAFETY: a valid NUL-terminated name; dlopen has no other precondition.
            let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if !handle.is_null() {
                return Ok(Library {
                    handle,
                    name: name.to_string(),
                });
            }
            tried.push((name.to_string(), last_dl_error()));
        }
        Err(DlError {
            variable: None,
            tried,
        })
    }

    /// Opens the file named by environment variable `var` when it is set (and only
    /// that), else the first of `defaults` that loads.
    pub fn open_configured(var: &str, defaults: &[&str]) -> Result<Library, DlError> {
        match std::env::var(var).ok().filter(|p| !p.trim().is_empty()) {
            Some(path) => Library::open(&[path.as_str()]).map_err(|e| DlError {
                variable: Some(var.to_string()),
                ..e
            }),
            None => Library::open(defaults),
        }
    }

    /// The library's file name as it was opened.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address of symbol `name`, or `None` when the library does not export it.
    pub fn address(&self, name: &CStr) -> Option<*mut c_void> {
        // SAFETY: the handle is open for the process's lifetime; `name` is valid.
        let p = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    }

    /// Symbol `name` as a function pointer of type `F`.
    ///
    /// # Safety
    /// `F` must be an `extern "C" fn` type matching the symbol's real signature.
    pub unsafe fn function<F: Copy>(&self, name: &CStr) -> Option<F> {
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
        let p = self.address(name)?;
        // SAFETY: same size (asserted); the caller guarantees the signature.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }
}

/// The thread's last `dlerror` message.
fn last_dl_error() -> String {
    // SAFETY: dlerror returns NULL or a thread-local NUL-terminated string.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-NULL NUL-terminated string owned by libdl.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}
