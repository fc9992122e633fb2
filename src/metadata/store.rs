//! [`MetadataStore`]: the narrow trait every metadata store implements.

use crate::error::Result;

/// A key-value store holding metadata (HTTP, etcd or Redis).
pub trait MetadataStore: Send + Sync {
    /// Reads a key; `Ok(None)` when it does not exist.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Writes a key.
    fn set(&self, key: &str, value: &[u8]) -> Result<()>;
    /// Removes a key.
    fn remove(&self, key: &str) -> Result<()>;
}
