//! [`Kv`]: the rendezvous store a group meets in and records its membership in —
//! torch's `c10d::Store` through the Python backend, or one of the Transfer Engine's
//! metadata stores (HTTP, etcd, Redis) through [`MetadataKv`].

use super::error::{PgError, PgResult};
use crate::metadata::MetadataStore;

/// A key-value store shared by every rank of a group.
pub trait Kv: Send + Sync {
    /// Reads `key`; `Ok(None)` while it does not exist.
    fn get(&self, key: &str) -> PgResult<Option<Vec<u8>>>;
    /// Writes `key`.
    fn set(&self, key: &str, value: &[u8]) -> PgResult<()>;
    /// Removes `key` (best effort: a store that cannot remove keeps it).
    fn remove(&self, key: &str) -> PgResult<()>;
}

/// A [`Kv`] over a metadata store.
pub struct MetadataKv(pub Box<dyn MetadataStore>);

impl Kv for MetadataKv {
    fn get(&self, key: &str) -> PgResult<Option<Vec<u8>>> {
        self.0
            .get(key)
            .map_err(|e| PgError::internal(format!("reading {key} from the store: {e}")))
    }

    fn set(&self, key: &str, value: &[u8]) -> PgResult<()> {
        self.0
            .set(key, value)
            .map_err(|e| PgError::internal(format!("writing {key} to the store: {e}")))
    }

    fn remove(&self, key: &str) -> PgResult<()> {
        self.0
            .remove(key)
            .map_err(|e| PgError::internal(format!("removing {key} from the store: {e}")))
    }
}

/// A [`Kv`] in this process's memory (groups of threads, tests).
#[derive(Default)]
pub struct MemoryKv(parking_lot::Mutex<std::collections::HashMap<String, Vec<u8>>>);

impl Kv for MemoryKv {
    fn get(&self, key: &str) -> PgResult<Option<Vec<u8>>> {
        Ok(self.0.lock().get(key).cloned())
    }

    fn set(&self, key: &str, value: &[u8]) -> PgResult<()> {
        self.0.lock().insert(key.to_string(), value.to_vec());
        Ok(())
    }

    fn remove(&self, key: &str) -> PgResult<()> {
        self.0.lock().remove(key);
        Ok(())
    }
}
