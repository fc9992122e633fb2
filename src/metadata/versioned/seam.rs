//! [`VersionedStore`]: the read-modify-write surface of a metadata store, and
//! [`Versioned`], a value with the version it was read at.

use crate::error::Result;

/// A value with the version it was read at (etcd: its mod_revision; others: their own
/// counter). Versions of one key only grow, across deletes and re-creates too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The value's bytes, as stored.
    pub value: Vec<u8>,
    /// The version the value was read at.
    pub version: u64,
}

/// What [`VersionedStore::swap`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swapped {
    /// The change was written: the key's new version, when the store tells it (`None`
    /// after a delete, or from a store that does not).
    Written(Option<u64>),
    /// The key had changed (or was gone: `None`), so nothing was written: the key as
    /// it now stands.
    Lost(Option<Versioned>),
}

/// A metadata store that can do read-modify-write safely: what the P2P store needs.
pub trait VersionedStore: Send + Sync {
    /// The value of `key` and its version; `None` when absent.
    fn get_versioned(&self, key: &str) -> Result<Option<Versioned>>;
    /// Writes `value` only if `key` does not exist: `false` when it does.
    fn create(&self, key: &str, value: &[u8]) -> Result<bool>;
    /// Writes `key` unconditionally.
    fn put(&self, key: &str, value: &[u8]) -> Result<()>;
    /// Replaces (`Some`) or deletes (`None`) `key` only if its version is still
    /// `version`: `false` when it changed or is gone.
    fn compare_and_swap(&self, key: &str, version: u64, value: Option<&[u8]>) -> Result<bool>;
    /// [`compare_and_swap`](Self::compare_and_swap) that, when the race is lost,
    /// returns the key as it now stands, so a read-modify-write loop needs no read of
    /// its own. Stores that can do both in one round trip (etcd: a transaction whose
    /// failure branch reads the key) override it.
    fn swap(&self, key: &str, version: u64, value: Option<&[u8]>) -> Result<Swapped> {
        if self.compare_and_swap(key, version, value)? {
            Ok(Swapped::Written(None))
        } else {
            Ok(Swapped::Lost(self.get_versioned(key)?))
        }
    }
    /// Every key that starts with `prefix`, with value and version, in key order.
    fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>>;
}
