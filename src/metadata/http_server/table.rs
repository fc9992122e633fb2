//! [`MetadataTable`], the server's key-value table: every key with its version, the
//! `rpc_meta` rule and the preconditions checked under the same lock as the write.

use parking_lot::RwLock;

use super::preconditions::Preconditions;
use crate::metadata::versioned::{Versioned, VersionedMap};

/// What [`MetadataTable::put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The value was stored (new key, or an overwrite allowed by the rules) at this
    /// version.
    Stored(u64),
    /// The key contains `rpc_meta`, already existed at this version, and the body was
    /// identical.
    Unchanged(u64),
    /// The key contains `rpc_meta`, already existed, and the body differed; nothing changed.
    DuplicateRpcMeta,
    /// A precondition failed; nothing changed.
    PreconditionFailed,
}

/// What [`MetadataTable::remove_if`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoveOutcome {
    /// The key was removed; the version it had.
    Removed(u64),
    /// The key did not exist (and no precondition asked for it).
    NotFound,
    /// A precondition failed; nothing changed.
    PreconditionFailed,
}

/// The in-memory key-value table behind the metadata server, shareable with other services
/// (e.g. an embedding master) through an `Arc`. Every key carries a version (see
/// [the server's documentation](crate::metadata::http_server)).
#[derive(Debug, Default)]
pub struct MetadataTable {
    map: RwLock<VersionedMap>,
}

impl MetadataTable {
    /// Creates an empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns a copy of the value stored under `key`.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.map.read().get(key).map(|v| v.value.clone())
    }

    /// Returns a copy of the value stored under `key` with its version.
    pub fn get_versioned(&self, key: &str) -> Option<Versioned> {
        self.map.read().get(key).cloned()
    }

    /// Stores `value` under `key` with upstream's rule: an existing key containing
    /// `rpc_meta` may only be re-put with a byte-identical body.
    pub fn put(&self, key: &str, value: Vec<u8>) -> PutOutcome {
        self.put_if(key, value, &Preconditions::default())
    }

    /// [`put`](Self::put) if `pre` holds for `key` (checked first, under the same lock).
    pub fn put_if(&self, key: &str, value: Vec<u8>, pre: &Preconditions) -> PutOutcome {
        let mut map = self.map.write();
        if !pre.hold(map.version_of(key)) {
            return PutOutcome::PreconditionFailed;
        }
        if key.contains("rpc_meta") {
            if let Some(old) = map.get(key) {
                return if old.value == value {
                    PutOutcome::Unchanged(old.version)
                } else {
                    PutOutcome::DuplicateRpcMeta
                };
            }
        }
        PutOutcome::Stored(map.insert(key, value))
    }

    /// Removes `key`; returns whether it existed.
    pub fn remove(&self, key: &str) -> bool {
        matches!(
            self.remove_if(key, &Preconditions::default()),
            RemoveOutcome::Removed(_)
        )
    }

    /// Removes `key` if `pre` holds for it (checked first, under the same lock).
    pub fn remove_if(&self, key: &str, pre: &Preconditions) -> RemoveOutcome {
        let mut map = self.map.write();
        if !pre.hold(map.version_of(key)) {
            RemoveOutcome::PreconditionFailed
        } else {
            map.remove(key).map_or(RemoveOutcome::NotFound, |v| {
                RemoveOutcome::Removed(v.version)
            })
        }
    }

    /// Every key that starts with `prefix`, with value and version, in key order.
    pub fn list(&self, prefix: &str) -> Vec<(String, Versioned)> {
        self.map.read().list(prefix)
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    /// Whether the table holds no keys.
    pub fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }

    /// All keys, sorted (for diagnostics).
    pub fn keys(&self) -> Vec<String> {
        self.map.read().keys()
    }
}
