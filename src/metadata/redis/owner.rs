//! The owner's lease on a key, for the HA election: create a key and its companion
//! with a TTL, renew both while the key still holds the owner's value, delete both.

use super::resp::Reply;
use super::scripts::{CREATE_WITH_TTL, DELETE_IF_OWNER, RENEW_IF_OWNER};
use super::store::RedisMetadataStore;
use crate::error::{Error, Result};

impl RedisMetadataStore {
    /// Runs `script` on `keys` with `args`; its integer answer.
    fn eval_integer(&self, script: &str, keys: &[&str], args: &[&[u8]]) -> Result<i64> {
        let n = keys.len().to_string();
        let mut cmd: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), n.as_bytes()];
        cmd.extend(keys.iter().map(|k| k.as_bytes()));
        cmd.extend_from_slice(args);
        match self.conn.run(&cmd)? {
            Reply::Integer(i) => Ok(i),
            other => Err(Error::Metadata(format!("redis EVAL: unexpected {other:?}"))),
        }
    }

    /// Creates `key = value` and `companion = companion_value`, expiring after `ttl`,
    /// unless `key` exists; bumps `counter`. The counter's new value, `None` when `key`
    /// existed.
    pub fn create_with_ttl(
        &self,
        (key, value): (&str, &[u8]),
        (companion, companion_value): (&str, &[u8]),
        counter: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<i64>> {
        let ms = ttl.as_millis().max(1).to_string();
        let n = self.eval_integer(
            CREATE_WITH_TTL,
            &[key, companion, counter],
            &[value, companion_value, ms.as_bytes()],
        )?;
        Ok((n > 0).then_some(n))
    }

    /// Extends `key` and `companion` to `ttl` if `key` still holds `value`; whether it
    /// did.
    pub fn renew_if_owner(
        &self,
        key: &str,
        companion: &str,
        value: &[u8],
        ttl: std::time::Duration,
    ) -> Result<bool> {
        let ms = ttl.as_millis().max(1).to_string();
        Ok(self.eval_integer(RENEW_IF_OWNER, &[key, companion], &[value, ms.as_bytes()])? == 1)
    }

    /// Deletes `key` and `companion` if `key` still holds `value`.
    pub fn delete_if_owner(&self, key: &str, companion: &str, value: &[u8]) -> Result<()> {
        self.eval_integer(DELETE_IF_OWNER, &[key, companion], &[value])
            .map(drop)
    }
}
