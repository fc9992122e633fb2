//! Segment metadata: descriptors, key layout, and the stores that hold them.

pub mod descriptor;
pub mod descriptor_rdma;
pub mod http;
pub mod http_server;
pub mod keys;

use crate::error::{Error, Result};

pub use descriptor::{BufferDesc, SegmentDesc};
pub use descriptor_rdma::{RdmaBuffer, RdmaDevice, RdmaPart};
pub use keys::KeyLayout;

/// A key-value store holding metadata (HTTP today; etcd and Redis later).
pub trait MetadataStore: Send + Sync {
    /// Reads a key; `Ok(None)` when it does not exist.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Writes a key.
    fn set(&self, key: &str, value: &[u8]) -> Result<()>;
    /// Removes a key.
    fn remove(&self, key: &str) -> Result<()>;
}

/// Where segment metadata comes from, parsed from the connection string (spec §2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataSource {
    /// `P2PHANDSHAKE`: descriptors are pulled from peers over the RPC daemon.
    P2p,
    /// `http://...` or `https://...`: the whole string is the URL prefix.
    Http(String),
}

impl MetadataSource {
    /// Parses a connection string; etcd and Redis are reported as not yet supported.
    pub fn parse(conn: &str) -> Result<MetadataSource> {
        let conn = conn.trim();
        if conn == "P2PHANDSHAKE" {
            return Ok(MetadataSource::P2p);
        }
        if conn.starts_with("http://") || conn.starts_with("https://") {
            return Ok(MetadataSource::Http(conn.to_string()));
        }
        let scheme = conn.split_once("://").map_or("etcd", |(s, _)| s);
        match scheme {
            "etcd" | "redis" => Err(Error::NotImplemented(format!(
                "metadata backend '{scheme}' ({conn}) is not supported yet; \
                 use P2PHANDSHAKE or an http:// metadata server"
            ))),
            _ => Err(Error::InvalidArgument(format!(
                "unknown metadata connection string '{conn}'"
            ))),
        }
    }

    /// Opens the store behind this source (`None` for P2P).
    pub fn open(&self) -> Result<Option<Box<dyn MetadataStore>>> {
        match self {
            MetadataSource::P2p => Ok(None),
            MetadataSource::Http(url) => Ok(Some(Box::new(http::HttpMetadataStore::new(url)?))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_connection_strings() {
        assert_eq!(
            MetadataSource::parse("P2PHANDSHAKE").unwrap(),
            MetadataSource::P2p
        );
        assert_eq!(
            MetadataSource::parse("http://h:1/metadata").unwrap(),
            MetadataSource::Http("http://h:1/metadata".into())
        );
        assert!(matches!(
            MetadataSource::parse("etcd://h:2379"),
            Err(Error::NotImplemented(_))
        ));
        assert!(matches!(
            MetadataSource::parse("h:2379"),
            Err(Error::NotImplemented(_))
        ));
        assert!(matches!(
            MetadataSource::parse("redis://h"),
            Err(Error::NotImplemented(_))
        ));
        assert!(matches!(
            MetadataSource::parse("zk://h"),
            Err(Error::InvalidArgument(_))
        ));
    }
}
