//! Error type shared by the Transfer Engine layers, and its mapping onto upstream's
//! two return-code families (negative `ERR_*` and positive `Status::Code`).

use std::fmt;

/// What went wrong, with enough context to print a useful message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A caller passed a bad argument (NULL, zero length, unknown id, ...).
    InvalidArgument(String),
    /// A batch's capacity would be exceeded.
    TooManyRequests(String),
    /// An address was not registered (unknown region, or outside every buffer).
    AddressNotRegistered(String),
    /// A batch still has tasks that were not observed terminal.
    BatchBusy(String),
    /// A region overlaps one that is already registered.
    AddressOverlapped(String),
    /// The target segment's protocol has no transport installed here.
    NotSupportedTransport(String),
    /// A host name did not resolve.
    Dns(String),
    /// A socket operation failed (connect, read, write, short read, timeout).
    Socket(String),
    /// JSON could not be parsed or did not have the expected shape.
    MalformedJson(String),
    /// A peer rejected a handshake.
    RejectHandshake(String),
    /// The metadata store failed or returned something unusable.
    Metadata(String),
    /// The operation is not implemented in this build.
    NotImplemented(String),
}

impl Error {
    /// Upstream's negative `ERR_*` code for this error (`error.h`).
    pub fn err_code(&self) -> i32 {
        match self {
            Error::InvalidArgument(_) => -1,
            Error::TooManyRequests(_) => -2,
            Error::AddressNotRegistered(_) => -3,
            Error::BatchBusy(_) => -4,
            Error::AddressOverlapped(_) => -7,
            Error::NotSupportedTransport(_) => -1,
            Error::Dns(_) => -101,
            Error::Socket(_) => -102,
            Error::MalformedJson(_) => -103,
            Error::RejectHandshake(_) => -104,
            Error::Metadata(_) => -200,
            Error::NotImplemented(_) => -303,
        }
    }

    /// Upstream's positive `Status::Code` for this error (`status.h`).
    pub fn status_code(&self) -> i32 {
        match self {
            Error::InvalidArgument(_) => 1,
            Error::TooManyRequests(_) => 2,
            Error::AddressNotRegistered(_) => 3,
            Error::BatchBusy(_) => 4,
            Error::AddressOverlapped(_) => 7,
            Error::NotSupportedTransport(_) => 8,
            Error::Dns(_) => 101,
            Error::Socket(_) => 102,
            Error::MalformedJson(_) => 103,
            Error::RejectHandshake(_) => 104,
            Error::Metadata(_) => 200,
            Error::NotImplemented(_) => 999,
        }
    }

    /// The OS errno behind this error, when it came from a system call.
    pub fn errno(&self) -> i32 {
        let msg = self.message();
        msg.rfind("(os error ")
            .and_then(|at| {
                let rest = &msg[at + "(os error ".len()..];
                rest.split(')').next()?.parse().ok()
            })
            .unwrap_or(0)
    }

    /// The human-readable detail.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument(m)
            | Error::TooManyRequests(m)
            | Error::AddressNotRegistered(m)
            | Error::BatchBusy(m)
            | Error::AddressOverlapped(m)
            | Error::NotSupportedTransport(m)
            | Error::Dns(m)
            | Error::Socket(m)
            | Error::MalformedJson(m)
            | Error::RejectHandshake(m)
            | Error::Metadata(m)
            | Error::NotImplemented(m) => m,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Error::InvalidArgument(_) => "invalid argument",
            Error::TooManyRequests(_) => "too many requests",
            Error::AddressNotRegistered(_) => "address not registered",
            Error::BatchBusy(_) => "batch busy",
            Error::AddressOverlapped(_) => "address overlapped",
            Error::NotSupportedTransport(_) => "transport not supported",
            Error::Dns(_) => "dns",
            Error::Socket(_) => "socket",
            Error::MalformedJson(_) => "malformed json",
            Error::RejectHandshake(_) => "handshake rejected",
            Error::Metadata(_) => "metadata",
            Error::NotImplemented(_) => "not implemented",
        }
    }

    /// Wraps an I/O error as a socket error with context.
    pub fn socket(context: impl fmt::Display, err: std::io::Error) -> Error {
        Error::Socket(format!("{context}: {err}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind(), self.message())
    }
}

impl std::error::Error for Error {}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;
