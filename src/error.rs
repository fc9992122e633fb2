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
    /// A system call failed: it counts as its [`ErrorKind`] and keeps the errno it set.
    Os(OsError),
}

/// The family an [`Error`] belongs to: its name and its two upstream codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// [`Error::InvalidArgument`].
    InvalidArgument,
    /// [`Error::TooManyRequests`].
    TooManyRequests,
    /// [`Error::AddressNotRegistered`].
    AddressNotRegistered,
    /// [`Error::BatchBusy`].
    BatchBusy,
    /// [`Error::AddressOverlapped`].
    AddressOverlapped,
    /// [`Error::NotSupportedTransport`].
    NotSupportedTransport,
    /// [`Error::Dns`].
    Dns,
    /// [`Error::Socket`].
    Socket,
    /// [`Error::MalformedJson`].
    MalformedJson,
    /// [`Error::RejectHandshake`].
    RejectHandshake,
    /// [`Error::Metadata`].
    Metadata,
    /// [`Error::NotImplemented`].
    NotImplemented,
}

/// A failed system call: what was being done and the errno the call set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsError {
    kind: ErrorKind,
    message: String,
    errno: i32,
}

impl ErrorKind {
    /// The one code table: printed name, upstream's negative `ERR_*` code (`error.h`)
    /// and its positive `Status::Code` (`status.h`).
    fn codes(self) -> (&'static str, i32, i32) {
        match self {
            ErrorKind::InvalidArgument => ("invalid argument", -1, 1),
            ErrorKind::TooManyRequests => ("too many requests", -2, 2),
            ErrorKind::AddressNotRegistered => ("address not registered", -3, 3),
            ErrorKind::BatchBusy => ("batch busy", -4, 4),
            ErrorKind::AddressOverlapped => ("address overlapped", -7, 7),
            ErrorKind::NotSupportedTransport => ("transport not supported", -1, 8),
            ErrorKind::Dns => ("dns", -101, 101),
            ErrorKind::Socket => ("socket", -102, 102),
            ErrorKind::MalformedJson => ("malformed json", -103, 103),
            ErrorKind::RejectHandshake => ("handshake rejected", -104, 104),
            ErrorKind::Metadata => ("metadata", -200, 200),
            ErrorKind::NotImplemented => ("not implemented", -303, 999),
        }
    }
}

impl Error {
    /// The family this error belongs to.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::TooManyRequests(_) => ErrorKind::TooManyRequests,
            Error::AddressNotRegistered(_) => ErrorKind::AddressNotRegistered,
            Error::BatchBusy(_) => ErrorKind::BatchBusy,
            Error::AddressOverlapped(_) => ErrorKind::AddressOverlapped,
            Error::NotSupportedTransport(_) => ErrorKind::NotSupportedTransport,
            Error::Dns(_) => ErrorKind::Dns,
            Error::Socket(_) => ErrorKind::Socket,
            Error::MalformedJson(_) => ErrorKind::MalformedJson,
            Error::RejectHandshake(_) => ErrorKind::RejectHandshake,
            Error::Metadata(_) => ErrorKind::Metadata,
            Error::NotImplemented(_) => ErrorKind::NotImplemented,
            Error::Os(e) => e.kind,
        }
    }

    /// Upstream's negative `ERR_*` code for this error (`error.h`).
    pub fn err_code(&self) -> i32 {
        self.kind().codes().1
    }

    /// Upstream's positive `Status::Code` for this error (`status.h`).
    pub fn status_code(&self) -> i32 {
        self.kind().codes().2
    }

    /// The OS errno behind this error, when it came from a system call: the one stored
    /// by [`Error::os`] (and [`Error::socket`]), else the one an I/O error's text
    /// printed into the message (a socket error rewrapped with more context), else 0.
    pub fn errno(&self) -> i32 {
        if let Error::Os(e) = self {
            return e.errno;
        }
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
            Error::Os(e) => &e.message,
        }
    }

    /// Wraps an I/O error as a socket error with context: an [`Error::os`] of family
    /// [`ErrorKind::Socket`], so it keeps the errno (match on [`Error::kind`]).
    pub fn socket(context: impl fmt::Display, err: std::io::Error) -> Error {
        Error::os(ErrorKind::Socket, context, err)
    }

    /// Wraps a failed system call's I/O error as an [`Error::Os`] of family `kind`,
    /// keeping its errno (0 when the error did not come from the OS); it prints as
    /// `"{context}: {err}"`.
    pub fn os(kind: ErrorKind, context: impl fmt::Display, err: std::io::Error) -> Error {
        Error::Os(OsError {
            kind,
            message: format!("{context}: {err}"),
            errno: err.raw_os_error().unwrap_or(0),
        })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind().codes().0, self.message())
    }
}

impl std::error::Error for Error {}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_kind() {
        let e = Error::NotImplemented("x".into());
        assert_eq!((e.err_code(), e.status_code()), (-303, 999));
        assert_eq!(e.to_string(), "not implemented: x");
        let e = Error::NotSupportedTransport("y".into());
        assert_eq!((e.err_code(), e.status_code()), (-1, 8));
    }

    #[test]
    fn os_errors_keep_their_errno_and_print_like_socket_errors() {
        let io = || std::io::Error::from_raw_os_error(libc::EADDRINUSE);
        let os = Error::os(ErrorKind::Socket, "bind 1.2.3.4:5", io());
        let socket = Error::socket("bind 1.2.3.4:5", io());
        assert_eq!(os.to_string(), socket.to_string());
        assert_eq!(os.errno(), libc::EADDRINUSE);
        assert_eq!(socket.errno(), libc::EADDRINUSE);
        assert_eq!(socket, os);
        let rewrapped = Error::Socket(format!("reply: {}", socket.message()));
        assert_eq!(rewrapped.errno(), libc::EADDRINUSE);
        assert_eq!((os.err_code(), os.status_code()), (-102, 102));
        assert_eq!(os.kind(), ErrorKind::Socket);
        let custom = Error::os(ErrorKind::Dns, "x", std::io::Error::other("(os error 5)"));
        assert_eq!(custom.errno(), 0);
    }
}
