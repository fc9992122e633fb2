//! [`P2pError`]: why a P2P Store operation failed, with the object, shard and peer it
//! concerns.

use thiserror::Error;

/// A failed P2P Store operation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum P2pError {
    /// The caller's arguments cannot be used (empty buffer lists, zero sizes, buffers
    /// that do not fit the object).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// This node already holds the object (registered it, or has a replica).
    #[error("'{0}' is already registered or replicated here")]
    AlreadyHeld(String),
    /// This node does not hold the object.
    #[error("'{0}' is not registered or replicated here")]
    NotHeld(String),
    /// No object of that name in the metadata.
    #[error("'{0}' is not in the metadata")]
    NotFound(String),
    /// The object exists and `register` was asked not to overwrite it.
    #[error("'{0}' already exists in the metadata")]
    Exists(String),
    /// The metadata value of an object is not a payload this store can use.
    #[error("the metadata of '{name}' is corrupt: {why}")]
    Corrupt {
        /// The object.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// No source is left for a shard: every location failed or is gone.
    #[error("no source left for shard {shard} of '{name}' (tried: {tried})")]
    NoSource {
        /// The object.
        name: String,
        /// The shard's index.
        shard: usize,
        /// The sources tried, comma-separated (empty: none was listed).
        tried: String,
    },
    /// The metadata store failed.
    #[error("metadata: {0}")]
    Metadata(String),
    /// The Transfer Engine failed (registration, opening a segment, a transfer).
    #[error("transfer engine: {0}")]
    Engine(String),
    /// A local file could not be used (the command's `put`/`get`).
    #[error("{0}")]
    Io(String),
    /// The store was closed.
    #[error("the P2P store is closed")]
    Closed,
}

impl P2pError {
    /// The C return code of this error (`mooncake_ext.h`'s `MOONCAKE_P2P_*`).
    pub fn code(&self) -> i32 {
        match self {
            P2pError::InvalidArgument(_) => -1,
            P2pError::AlreadyHeld(_) => -2,
            P2pError::NotHeld(_) => -3,
            P2pError::NotFound(_) => -4,
            P2pError::Exists(_) => -5,
            P2pError::Corrupt { .. } => -6,
            P2pError::NoSource { .. } => -7,
            P2pError::Metadata(_) => -8,
            P2pError::Engine(_) => -9,
            P2pError::Io(_) => -10,
            P2pError::Closed => -11,
        }
    }
}

impl From<crate::error::Error> for P2pError {
    fn from(e: crate::error::Error) -> P2pError {
        P2pError::Engine(e.to_string())
    }
}

/// The result of a P2P Store operation.
pub type P2pResult<T> = Result<T, P2pError>;
