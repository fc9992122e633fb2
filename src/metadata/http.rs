//! HTTP metadata client.
use super::MetadataStore;
use crate::error::{Error, Result};
/// HTTP metadata store client.
pub struct HttpMetadataStore;
impl HttpMetadataStore {
    /// Creates a client.
    pub fn new(_url: &str) -> Result<Self> { Err(Error::NotImplemented("http".into())) }
}
impl MetadataStore for HttpMetadataStore {
    fn get(&self, _key: &str) -> Result<Option<Vec<u8>>> { unimplemented!() }
    fn set(&self, _key: &str, _value: &[u8]) -> Result<()> { unimplemented!() }
    fn remove(&self, _key: &str) -> Result<()> { unimplemented!() }
}
