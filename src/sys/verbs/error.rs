//! Why a verbs call failed ([`VerbsError`]) and why the system's libibverbs cannot be
//! used ([`LoadError`]).

use std::fmt;

/// A failed verbs call: which call, the errno it left, and what it was about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsError {
    /// The verbs function that failed.
    pub call: &'static str,
    /// `errno` (0 when none was set).
    pub errno: i32,
    /// What was being done.
    pub detail: String,
}

impl VerbsError {
    /// An error of `call` with `errno` about `detail`.
    pub fn new(call: &'static str, errno: i32, detail: impl Into<String>) -> VerbsError {
        VerbsError {
            call,
            errno,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed", self.call)?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        if self.errno != 0 {
            write!(f, ": {}", std::io::Error::from_raw_os_error(self.errno))?;
        }
        Ok(())
    }
}

impl std::error::Error for VerbsError {}

/// Verbs results.
pub type VResult<T> = std::result::Result<T, VerbsError>;

/// Why the system's libibverbs cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The library could not be opened (the loader's message).
    #[error("libibverbs is not available ({0}); install rdma-core")]
    NotInstalled(crate::sys::dl::DlError),
    /// The library lacks a function this crate calls.
    #[error("{library} does not export {function}")]
    MissingFunction {
        /// The library's name or path.
        library: String,
        /// The missing function.
        function: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_well() {
        let e = VerbsError::new("ibv_reg_mr", libc::EINVAL, "region at 0x1000");
        let s = e.to_string();
        assert!(
            s.starts_with("ibv_reg_mr failed (region at 0x1000): "),
            "{s}"
        );
    }
}
