//! [`RedisMetadataStore`] as a [`VersionedStore`]: each operation one Lua script (see
//! `scripts.rs`) on a key, its version key and the database's version counter.

use super::resp::Reply;
use super::scan::scan_prefix;
use super::scripts::{
    CREATE, CURRENT, DELETE_IF, GET_VERSIONED, PUT, SWAP, VERSION_COUNTER, VERSION_SUFFIX, WRITE,
};
use super::store::RedisMetadataStore;
use crate::error::{Error, Result};
use crate::metadata::versioned::{Versioned, VersionedStore};

/// A `GET_VERSIONED` reply: `None` for nil, else the value and its version.
fn decode_versioned(key: &str, reply: Reply) -> Result<Option<Versioned>> {
    let bad = |r: &Reply| Error::Metadata(format!("redis: get of '{key}': unexpected {r:?}"));
    let items = match reply {
        Reply::Bulk(None) | Reply::Array(None) => return Ok(None),
        Reply::Array(Some(items)) => items,
        other => return Err(bad(&other)),
    };
    match items.as_slice() {
        [Reply::Bulk(Some(value)), Reply::Bulk(Some(version))] => {
            let version = std::str::from_utf8(version)
                .ok()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad(&items[1]))?;
            Ok(Some(Versioned {
                value: value.clone(),
                version,
            }))
        }
        _ => Err(bad(&Reply::Array(Some(items)))),
    }
}

impl RedisMetadataStore {
    /// Runs a versioned script on `key`: its keys are `key`, its version's key and the
    /// counter; `CURRENT` and `WRITE` come first. `what` names it in errors.
    fn eval_versioned(&self, script: &str, key: &str, args: &[&[u8]], what: &str) -> Result<Reply> {
        if key.contains('\0') {
            return Err(Error::InvalidArgument(format!(
                "redis {what} of {key:?}: a versioned key cannot hold a NUL byte"
            )));
        }
        let source = format!("{CURRENT}{WRITE}{script}");
        let companion = format!("{key}{VERSION_SUFFIX}");
        let mut cmd: Vec<&[u8]> = vec![
            b"EVAL",
            source.as_bytes(),
            b"3",
            key.as_bytes(),
            companion.as_bytes(),
            VERSION_COUNTER.as_bytes(),
        ];
        cmd.extend_from_slice(args);
        self.conn.run(&cmd).map_err(|e| {
            Error::Metadata(format!(
                "redis {what} of '{key}' at {}: {e}",
                self.conn.address()
            ))
        })
    }

    /// A versioned script that answers 1 (done) or 0 (its condition failed).
    fn eval_flag(&self, script: &str, key: &str, args: &[&[u8]], what: &str) -> Result<bool> {
        match self.eval_versioned(script, key, args, what)? {
            Reply::Integer(n) => Ok(n == 1),
            other => Err(Error::Metadata(format!(
                "redis {what} of '{key}': unexpected {other:?}"
            ))),
        }
    }
}

impl VersionedStore for RedisMetadataStore {
    fn get_versioned(&self, key: &str) -> Result<Option<Versioned>> {
        let reply = self.eval_versioned(GET_VERSIONED, key, &[], "get")?;
        decode_versioned(key, reply)
    }

    fn create(&self, key: &str, value: &[u8]) -> Result<bool> {
        self.eval_flag(CREATE, key, &[value], "create")
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<()> {
        self.eval_flag(PUT, key, &[value], "put").map(drop)
    }

    fn compare_and_swap(&self, key: &str, version: u64, value: Option<&[u8]>) -> Result<bool> {
        let version = version.to_string();
        match value {
            Some(value) => {
                self.eval_flag(SWAP, key, &[value, version.as_bytes()], "compare-and-swap")
            }
            None => self.eval_flag(DELETE_IF, key, &[version.as_bytes()], "compare-and-delete"),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>> {
        let mut out = Vec::new();
        for key in scan_prefix(&self.conn, prefix)
            .map_err(|e| Error::Metadata(format!("redis list of prefix '{prefix}': {e}")))?
        {
            // Gone since the scan, or no string: not listed.
            if let Some(versioned) = self.get_versioned(&key)? {
                out.push((key, versioned));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_replies_decode_defensively() {
        let bulk = |b: &[u8]| Reply::Bulk(Some(b.to_vec()));
        let pair = Reply::Array(Some(vec![bulk(b"v"), bulk(b"7")]));
        assert_eq!(
            decode_versioned("k", pair).unwrap(),
            Some(Versioned {
                value: b"v".to_vec(),
                version: 7
            })
        );
        assert_eq!(decode_versioned("k", Reply::Bulk(None)).unwrap(), None);
        for bad in [
            Reply::Integer(1),
            Reply::Array(Some(vec![bulk(b"v")])),
            Reply::Array(Some(vec![bulk(b"v"), bulk(b"-1")])),
            Reply::Array(Some(vec![bulk(b"v"), Reply::Integer(1)])),
        ] {
            assert!(decode_versioned("k", bad).is_err());
        }
    }
}
