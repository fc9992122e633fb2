//! [`RedisMetadataStore`], a Redis server holding the metadata, and its plain
//! operations (`GET`, `SET`, `DEL` of upstream's keys and values).

use super::auth::RedisAuth;
use super::connection::Connection;
use super::resp::{expect_ok, Reply};
use crate::codec::debug_by_field::debug_by_field;
use crate::error::{Error, Result};
use crate::metadata::store::MetadataStore;

/// A Redis server holding the metadata.
pub struct RedisMetadataStore {
    /// The server and the connection to it.
    pub(super) conn: Connection,
}

// The address only: the connection also holds the credentials.
debug_by_field!(RedisMetadataStore, address = conn.address());

impl RedisMetadataStore {
    /// A client of `redis://host[:port]` (port 12001 when missing, as upstream); it
    /// connects on first use.
    pub fn new(conn: &str, auth: RedisAuth) -> Result<RedisMetadataStore> {
        Ok(RedisMetadataStore {
            conn: Connection::new(conn, auth)?,
        })
    }
}

impl MetadataStore for RedisMetadataStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        match self.conn.run(&[b"GET", key.as_bytes()])? {
            Reply::Bulk(v) => Ok(v),
            other => Err(Error::Metadata(format!("redis GET: unexpected {other:?}"))),
        }
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        expect_ok(self.conn.run(&[b"SET", key.as_bytes(), value])?, "SET")
    }

    fn remove(&self, key: &str) -> Result<()> {
        match self.conn.run(&[b"DEL", key.as_bytes()])? {
            Reply::Integer(_) => Ok(()),
            other => Err(Error::Metadata(format!("redis DEL: unexpected {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_the_address_not_the_credentials() {
        let auth = RedisAuth {
            username: "user".into(),
            password: "hunter2".into(),
            db: 3,
        };
        let store = RedisMetadataStore::new("redis://h:6379", auth).unwrap();
        let shown = format!("{store:?}");
        assert_eq!(shown, "RedisMetadataStore { address: \"h:6379\", .. }");
        assert!(!shown.contains("hunter2"));
    }
}
