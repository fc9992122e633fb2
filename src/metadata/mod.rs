//! Segment metadata: descriptors, key layout, and the stores that hold them.

mod buffer_desc;
pub mod descriptor;
pub mod descriptor_rdma;
pub mod etcd;
pub mod http;
pub mod http_server;
pub(crate) mod json;
pub mod keys;
pub mod redis;
mod store;
pub mod versioned;

use crate::error::{Error, Result};

pub use buffer_desc::BufferDesc;
pub use descriptor::{SameHostDesc, SegmentDesc};
pub use descriptor_rdma::{RdmaBuffer, RdmaDevice, RdmaPart};
pub use keys::KeyLayout;
pub use store::MetadataStore;

/// Where segment metadata comes from, parsed from the connection string (spec §2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataSource {
    /// `P2PHANDSHAKE`: descriptors are pulled from peers over the RPC daemon.
    P2p,
    /// `http://...` or `https://...`: the whole string is the URL prefix.
    Http(String),
    /// `etcd://h1:2379,h2:2379` (`;` also separates), or a bare `host:port`.
    Etcd(String),
    /// `redis://host:port`.
    Redis(String),
}

impl MetadataSource {
    /// Parses a connection string (a string without a scheme is an etcd endpoint list,
    /// as upstream).
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
            "etcd" => {
                etcd::parse_endpoints(conn)?;
                Ok(MetadataSource::Etcd(conn.to_string()))
            }
            "redis" => Ok(MetadataSource::Redis(conn.to_string())),
            _ => Err(Error::InvalidArgument(format!(
                "unknown metadata connection string '{conn}' \
                 (P2PHANDSHAKE, http://, etcd:// or redis://)"
            ))),
        }
    }

    /// Opens the store behind this source (`None` for P2P).
    pub fn open(&self) -> Result<Option<Box<dyn MetadataStore>>> {
        Ok(match self {
            MetadataSource::P2p => None,
            MetadataSource::Http(url) => Some(Box::new(http::HttpMetadataStore::new(url)?)),
            MetadataSource::Etcd(list) => Some(Box::new(etcd::EtcdMetadataStore::new(list)?)),
            MetadataSource::Redis(addr) => Some(Box::new(redis::RedisMetadataStore::new(
                addr,
                redis::RedisAuth::from_env(),
            )?)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_connection_strings() {
        for (conn, want) in [
            ("P2PHANDSHAKE", MetadataSource::P2p),
            (
                "http://h:1/metadata",
                MetadataSource::Http("http://h:1/metadata".into()),
            ),
            (
                "etcd://h:2379",
                MetadataSource::Etcd("etcd://h:2379".into()),
            ),
            (
                "h:2379;g:2379",
                MetadataSource::Etcd("h:2379;g:2379".into()),
            ),
            ("redis://h", MetadataSource::Redis("redis://h".into())),
        ] {
            assert_eq!(MetadataSource::parse(conn).unwrap(), want, "{conn}");
        }
        assert!(matches!(
            MetadataSource::parse("zk://h"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(MetadataSource::parse("etcd://").is_err());
    }
}
