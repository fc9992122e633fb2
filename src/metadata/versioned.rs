//! Versioned metadata: stores that can read a key with its version and write it back
//! only if that version still holds, what the P2P store needs to update one JSON value
//! per object (upstream's Go store keeps it in etcd under `mooncake/checkpoint/<name>`
//! and updates it in transactions that compare the key's mod revision).
//!
//! * etcd ([`super::etcd`]): the version is the key's `mod_revision`, so upstream's Go
//!   client and ours see the same keys, bytes and versions.
//! * our HTTP metadata server ([`super::http`], [`super::http_server`]): a table-wide
//!   write counter, carried in `ETag`, `If-Match` and `If-None-Match` headers.
//! * Redis ([`super::redis`]): a write counter kept beside the values, updated by Lua
//!   scripts.
//! * [`InMemoryVersionedStore`]: in this process, for tests.
//!
//! [`VersionedStore`] and [`Versioned`] live in `versioned/seam.rs`, which the backends
//! implement without importing this file (which opens them).

mod memory;
mod seam;

pub use memory::InMemoryVersionedStore;
pub(crate) use memory::VersionedMap;
pub use seam::{Swapped, Versioned, VersionedStore};

use super::{etcd, http, redis, MetadataSource};
use crate::error::{Error, Result};

/// Opens the versioned store a connection string names: `etcd://h:p[;h:p]` or a bare
/// `host:port[,host:port]` (etcd, as upstream's Go store passes it),
/// `http://host:port/metadata` (our HTTP metadata server), `redis://host:port`
/// (credentials and database from `MC_REDIS_*`). `P2PHANDSHAKE` has no store: an
/// [`Error::InvalidArgument`], as is a string that names no store.
pub fn open_versioned(conn: &str) -> Result<Box<dyn VersionedStore>> {
    Ok(match MetadataSource::parse(conn)? {
        MetadataSource::P2p => {
            return Err(Error::InvalidArgument(format!(
                "metadata connection string '{conn}': P2PHANDSHAKE has no metadata store to \
                 keep versioned keys in; use etcd://, http:// or redis://"
            )))
        }
        MetadataSource::Http(url) => Box::new(http::HttpMetadataStore::new(&url)?),
        MetadataSource::Etcd(list) => Box::new(etcd::EtcdMetadataStore::new(&list)?),
        MetadataSource::Redis(addr) => Box::new(redis::RedisMetadataStore::new(
            &addr,
            redis::RedisAuth::from_env(),
        )?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_each_backend_and_refuses_p2p() {
        for conn in [
            "etcd://127.0.0.1:2379;127.0.0.1:2380",
            "127.0.0.1:2379,127.0.0.1:2380",
            "http://127.0.0.1:8080/metadata",
            "redis://127.0.0.1:6379",
        ] {
            assert!(open_versioned(conn).is_ok(), "{conn}");
        }
        match open_versioned("P2PHANDSHAKE") {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("P2PHANDSHAKE"), "{m}"),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("P2PHANDSHAKE opened a store"),
        }
        assert!(matches!(
            open_versioned("zk://h:1"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(open_versioned("etcd://").is_err());
    }
}
