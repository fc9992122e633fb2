//! [`StoreError`]: why a store operation failed, carried to the caller together with
//! the code upstream returns for it, so that the C layer can return the code and
//! record the cause as the thread's last error instead of the store logging it.

use crate::wire::master_api::ErrorCode;
use std::fmt;

/// A failed store operation: upstream's code (what C and Python callers get back) and
/// what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    /// The code the operation returns.
    pub code: ErrorCode,
    /// What went wrong (empty when the code says it all).
    pub cause: String,
}

/// The result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    /// `code`, because of `cause`.
    pub fn new(code: ErrorCode, cause: impl Into<String>) -> StoreError {
        StoreError {
            code,
            cause: cause.into(),
        }
    }

    /// `INVALID_PARAMS` (-600), because of `cause`.
    pub fn invalid(cause: impl Into<String>) -> StoreError {
        StoreError::new(ErrorCode::INVALID_PARAMS, cause)
    }

    /// `INTERNAL_ERROR` (-1), because of `cause`.
    pub fn internal(cause: impl Into<String>) -> StoreError {
        StoreError::new(ErrorCode::INTERNAL_ERROR, cause)
    }

    /// The same code, its cause prefixed with what was being done.
    pub fn context(self, doing: impl fmt::Display) -> StoreError {
        let cause = match self.cause.is_empty() {
            true => doing.to_string(),
            false => format!("{doing}: {}", self.cause),
        };
        StoreError { cause, ..self }
    }

    /// The code alone, for callers that only return codes; the cause (if any) goes to
    /// the log, the one place it can still be seen.
    pub fn logged(self) -> ErrorCode {
        if !self.cause.is_empty() {
            log::error!("store: {self}");
        }
        self.code
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cause.is_empty() {
            true => write!(f, "{}", self.code),
            false => write!(f, "{}: {}", self.cause, self.code),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<ErrorCode> for StoreError {
    fn from(code: ErrorCode) -> StoreError {
        StoreError::new(code, "")
    }
}

impl PartialEq<ErrorCode> for StoreError {
    fn eq(&self, code: &ErrorCode) -> bool {
        self.code == *code
    }
}

/// Per-key codes (the master's, or the dummy protocol's) as results whose code says
/// it all.
pub(crate) fn from_codes<T>(results: Vec<Result<T, ErrorCode>>) -> Vec<StoreResult<T>> {
    results
        .into_iter()
        .map(|r| r.map_err(StoreError::from))
        .collect()
}

/// The codes alone of per-key results, for a caller that passes only codes on (the
/// dummy protocol's replies): each cause goes to the log, the one place it can still
/// be seen.
pub(crate) fn logged_codes<T>(results: Vec<StoreResult<T>>) -> Vec<Result<T, ErrorCode>> {
    results
        .into_iter()
        .map(|r| r.map_err(StoreError::logged))
        .collect()
}

/// The code alone of a store result (or of each of a batch's), its cause dropped: for
/// callers that compare codes.
pub trait Code {
    /// The result with codes for errors.
    type Coded;
    /// The result with its cause (or their causes) dropped.
    fn code(self) -> Self::Coded;
}

impl<T> Code for StoreResult<T> {
    type Coded = Result<T, ErrorCode>;
    fn code(self) -> Result<T, ErrorCode> {
        self.map_err(|e| e.code)
    }
}

impl<T> Code for Vec<StoreResult<T>> {
    type Coded = Vec<Result<T, ErrorCode>>;
    fn code(self) -> Vec<Result<T, ErrorCode>> {
        self.into_iter().map(Code::code).collect()
    }
}

/// A master call's (or other code-only) result, with what was being done as its cause.
pub(crate) trait Doing<T> {
    /// The error as a [`StoreError`] whose cause is `doing`.
    fn doing(self, doing: impl fmt::Display) -> StoreResult<T>;
}

impl<T> Doing<T> for Result<T, ErrorCode> {
    fn doing(self, doing: impl fmt::Display) -> StoreResult<T> {
        self.map_err(|code| StoreError::from(code).context(doing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_leads_and_the_code_follows() {
        let e = StoreError::invalid("local_hostname is empty");
        assert_eq!(
            e.to_string(),
            "local_hostname is empty: INVALID_PARAMS (-600)"
        );
        assert_eq!(e, ErrorCode::INVALID_PARAMS);
        let e: StoreResult<()> = Err(ErrorCode::RPC_FAIL).doing("MountSegment");
        let e = e.unwrap_err().context("setup");
        assert_eq!(e.to_string(), "setup: MountSegment: RPC_FAIL (-900)");
        assert_eq!(
            StoreError::from(ErrorCode::OBJECT_NOT_FOUND).to_string(),
            "OBJECT_NOT_FOUND (-704)"
        );
        assert_eq!(StoreError::invalid("x").logged(), ErrorCode::INVALID_PARAMS);
        let batch = vec![Ok(1), Err(StoreError::invalid("y"))];
        assert_eq!(batch.code(), vec![Ok(1), Err(ErrorCode::INVALID_PARAMS)]);
    }
}
