//! [`PgError`]: why a collective or a membership call failed, with the ranks it
//! suspects.

use std::fmt;

/// What kind of failure (the `MOONCAKE_PG_ERR_*` codes of `mooncake_ext.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgErrorKind {
    /// A bad argument on this rank (length, rank, dtype, operator).
    Invalid,
    /// The ranks disagree about the operation (sizes, kind, root).
    Mismatch,
    /// A peer did not answer in time, went away or refused a transfer.
    PeerFailed,
    /// The group's membership changed (or is changing) under the operation.
    MembershipChanged,
    /// This rank is not an active member of the group.
    NotActive,
    /// The rendezvous store or the Transfer Engine failed locally.
    Internal,
}

impl PgErrorKind {
    /// The C code (negative).
    pub fn code(self) -> i32 {
        match self {
            PgErrorKind::Invalid => -1,
            PgErrorKind::Mismatch => -2,
            PgErrorKind::PeerFailed => -3,
            PgErrorKind::MembershipChanged => -4,
            PgErrorKind::NotActive => -5,
            PgErrorKind::Internal => -6,
        }
    }
}

/// A failed PG call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgError {
    /// What kind of failure.
    pub kind: PgErrorKind,
    /// What happened, for people.
    pub message: String,
    /// In-group ranks this rank suspects failed (empty unless `PeerFailed`).
    pub suspects: Vec<usize>,
}

impl PgError {
    /// A failure of `kind`.
    pub fn new(kind: PgErrorKind, message: impl Into<String>) -> PgError {
        PgError {
            kind,
            message: message.into(),
            suspects: Vec::new(),
        }
    }

    /// A bad argument.
    pub fn invalid(message: impl Into<String>) -> PgError {
        PgError::new(PgErrorKind::Invalid, message)
    }

    /// Ranks that disagree.
    pub fn mismatch(message: impl Into<String>) -> PgError {
        PgError::new(PgErrorKind::Mismatch, message)
    }

    /// A local failure.
    pub fn internal(message: impl Into<String>) -> PgError {
        PgError::new(PgErrorKind::Internal, message)
    }

    /// `peer` failed.
    pub fn peer(peer: usize, message: impl Into<String>) -> PgError {
        PgError {
            kind: PgErrorKind::PeerFailed,
            message: message.into(),
            suspects: vec![peer],
        }
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if !self.suspects.is_empty() {
            write!(f, " (suspected ranks: {:?})", self.suspects)?;
        }
        Ok(())
    }
}

impl std::error::Error for PgError {}

/// A PG result.
pub type PgResult<T> = std::result::Result<T, PgError>;
