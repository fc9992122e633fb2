//! Redis metadata (spec §2.1): `SET`, `GET` and `DEL` of upstream's keys and values over
//! a small blocking RESP client. `MC_REDIS_USERNAME` / `MC_REDIS_PASSWORD` authenticate
//! (`AUTH`) and `MC_REDIS_DB_INDEX` selects the database, as upstream; a lost connection
//! is re-established once per command.

use super::store::MetadataStore;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Per-operation socket timeout (as etcd's).
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest bulk reply accepted (a descriptor is far smaller).
const MAX_BULK: usize = 64 << 20;
/// Upstream's port when the connection string has none (the handshake port default).
const DEFAULT_PORT: u16 = 12001;

/// Credentials and database from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisAuth {
    /// `MC_REDIS_USERNAME` (ACL user; empty: the default user).
    pub username: String,
    /// `MC_REDIS_PASSWORD` (empty: no `AUTH`).
    pub password: String,
    /// `MC_REDIS_DB_INDEX` (0-255).
    pub db: u8,
}

impl RedisAuth {
    /// Reads the `MC_REDIS_*` variables.
    pub fn from_env() -> RedisAuth {
        let var = |n: &str| std::env::var(n).unwrap_or_default();
        let db = match var("MC_REDIS_DB_INDEX").trim() {
            "" => 0,
            v => v.parse().unwrap_or_else(|_| {
                log::warn!("ignoring MC_REDIS_DB_INDEX={v}: not 0-255");
                0
            }),
        };
        RedisAuth {
            username: var("MC_REDIS_USERNAME"),
            password: var("MC_REDIS_PASSWORD"),
            db,
        }
    }
}

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    Status(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
}

/// A Redis server holding the metadata.
pub struct RedisMetadataStore {
    address: String,
    auth: RedisAuth,
    conn: Mutex<Option<BufReader<TcpStream>>>,
}

debug_by_field!(RedisMetadataStore, address);

impl RedisMetadataStore {
    /// A client of `redis://host[:port]` (port 12001 when missing, as upstream); it
    /// connects on first use.
    pub fn new(conn: &str, auth: RedisAuth) -> Result<RedisMetadataStore> {
        let rest = conn.trim().strip_prefix("redis://").unwrap_or(conn.trim());
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') || rest.contains('@') {
            return Err(Error::InvalidArgument(format!(
                "malformed Redis address '{conn}' (redis://host:port; credentials come from \
                 MC_REDIS_USERNAME / MC_REDIS_PASSWORD)"
            )));
        }
        let (host, port) = crate::host::addr::parse_host_port(rest, DEFAULT_PORT);
        Ok(RedisMetadataStore {
            address: crate::host::addr::join_host_port(&host, port),
            auth,
            conn: Mutex::new(None),
        })
    }

    fn connect(&self) -> Result<BufReader<TcpStream>> {
        let addrs: Vec<_> = self
            .address
            .to_socket_addrs()
            .map_err(|e| Error::Dns(format!("redis {}: {e}", self.address)))?
            .collect();
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, OP_TIMEOUT) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    s.set_read_timeout(Some(OP_TIMEOUT))
                        .and_then(|()| s.set_write_timeout(Some(OP_TIMEOUT)))
                        .map_err(|e| Error::socket("redis socket timeouts", e))?;
                    let mut conn = BufReader::new(s);
                    self.handshake(&mut conn)?;
                    return Ok(conn);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(Error::Metadata(format!(
            "cannot connect to redis {}: {}",
            self.address,
            last.map_or_else(|| "no address".into(), |e| e.to_string())
        )))
    }

    fn handshake(&self, conn: &mut BufReader<TcpStream>) -> Result<()> {
        let a = &self.auth;
        if !a.password.is_empty() {
            let reply = if a.username.is_empty() {
                command(conn, &[b"AUTH", a.password.as_bytes()])?
            } else {
                command(
                    conn,
                    &[b"AUTH", a.username.as_bytes(), a.password.as_bytes()],
                )?
            };
            expect_ok(reply, "AUTH")?;
        }
        if a.db != 0 {
            expect_ok(
                command(conn, &[b"SELECT", a.db.to_string().as_bytes()])?,
                "SELECT",
            )?;
        }
        Ok(())
    }

    /// Runs one command, reconnecting once when the connection is gone.
    fn run(&self, args: &[&[u8]]) -> Result<Reply> {
        let mut slot = self.conn.lock();
        for attempt in 0..2 {
            if slot.is_none() {
                *slot = Some(self.connect()?);
            }
            let conn = slot.as_mut().expect("connected above");
            match command(conn, args) {
                Ok(Reply::Error(e)) => return Err(Error::Metadata(format!("redis: {e}"))),
                Ok(reply) => return Ok(reply),
                Err(e) => {
                    *slot = None;
                    if attempt == 1 {
                        return Err(e);
                    }
                }
            }
        }
        unreachable!("the loop returns on its second attempt")
    }
}

fn expect_ok(reply: Reply, what: &str) -> Result<()> {
    match reply {
        Reply::Status(_) => Ok(()),
        Reply::Error(e) => Err(Error::Metadata(format!("redis {what}: {e}"))),
        other => Err(Error::Metadata(format!(
            "redis {what}: unexpected {other:?}"
        ))),
    }
}

/// Writes one command as a RESP array and reads its reply.
fn command(conn: &mut BufReader<TcpStream>, args: &[&[u8]]) -> Result<Reply> {
    let mut req = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        req.extend_from_slice(a);
        req.extend_from_slice(b"\r\n");
    }
    conn.get_mut()
        .write_all(&req)
        .map_err(|e| Error::socket("writing to redis", e))?;
    read_reply(conn)
}

/// Reads one reply; never trusts a length beyond [`MAX_BULK`].
pub(crate) fn read_reply(conn: &mut impl BufRead) -> Result<Reply> {
    let bad = |what: String| Error::Metadata(format!("redis: malformed reply: {what}"));
    let mut line = Vec::new();
    conn.by_ref()
        .take(64 << 10)
        .read_until(b'\n', &mut line)
        .map_err(|e| Error::socket("reading from redis", e))?;
    // A type byte, then CRLF: a bare "\r\n" is no reply.
    if line.len() < 3 || !line.ends_with(b"\r\n") {
        return Err(bad(format!("line {:?}", String::from_utf8_lossy(&line))));
    }
    let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    match line[0] {
        b'+' => Ok(Reply::Status(text)),
        b'-' => Ok(Reply::Error(text)),
        b':' => text
            .parse()
            .map(Reply::Integer)
            .map_err(|_| bad(format!("integer {text:?}"))),
        b'$' => {
            let n: i64 = text.parse().map_err(|_| bad(format!("length {text:?}")))?;
            if n < 0 {
                return Ok(Reply::Bulk(None));
            }
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n <= MAX_BULK)
                .ok_or_else(|| bad(format!("bulk of {n} bytes")))?;
            // Memory grows with the bytes that arrive, not with the length announced.
            let mut data = Vec::with_capacity(n.min(64 << 10) + 2);
            conn.by_ref()
                .take(n as u64 + 2)
                .read_to_end(&mut data)
                .map_err(|e| Error::socket("reading from redis", e))?;
            if data.len() != n + 2 {
                let eof = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
                return Err(Error::socket("reading from redis", eof));
            }
            if !data.ends_with(b"\r\n") {
                return Err(bad("bulk without CRLF".into()));
            }
            data.truncate(n);
            Ok(Reply::Bulk(Some(data)))
        }
        other => Err(bad(format!("type byte {other:#x}"))),
    }
}

/// Sets `KEYS[1] = ARGV[1]` (if absent) and `KEYS[2] = ARGV[2]`, both expiring in
/// `ARGV[3]` ms, and bumps the counter `KEYS[3]`; its new value, or 0 when `KEYS[1]`
/// existed.
const CREATE_WITH_TTL: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[3]) then \
     redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3]) \
     return redis.call('INCR', KEYS[3]) else return 0 end";
/// Extends `KEYS[1]` and `KEYS[2]` to `ARGV[2]` ms if `KEYS[1]` holds `ARGV[1]`; 1 if
/// it did.
const RENEW_IF_OWNER: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     redis.call('PEXPIRE', KEYS[1], ARGV[2]) redis.call('PEXPIRE', KEYS[2], ARGV[2]) \
     return 1 else return 0 end";
/// Deletes `KEYS[1]` and `KEYS[2]` if `KEYS[1]` holds `ARGV[1]`.
const DELETE_IF_OWNER: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1], KEYS[2]) else return 0 end";

impl RedisMetadataStore {
    fn eval_integer(&self, script: &str, keys: &[&str], args: &[&[u8]]) -> Result<i64> {
        let n = keys.len().to_string();
        let mut cmd: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), n.as_bytes()];
        cmd.extend(keys.iter().map(|k| k.as_bytes()));
        cmd.extend_from_slice(args);
        match self.run(&cmd)? {
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

impl MetadataStore for RedisMetadataStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        match self.run(&[b"GET", key.as_bytes()])? {
            Reply::Bulk(v) => Ok(v),
            other => Err(Error::Metadata(format!("redis GET: unexpected {other:?}"))),
        }
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        expect_ok(self.run(&[b"SET", key.as_bytes(), value])?, "SET")
    }

    fn remove(&self, key: &str) -> Result<()> {
        match self.run(&[b"DEL", key.as_bytes()])? {
            Reply::Integer(_) => Ok(()),
            other => Err(Error::Metadata(format!("redis DEL: unexpected {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Reply> {
        read_reply(&mut std::io::Cursor::new(bytes.to_vec()))
    }

    #[test]
    fn replies_decode_and_lengths_are_not_trusted() {
        assert_eq!(parse(b"+OK\r\n").unwrap(), Reply::Status("OK".into()));
        assert_eq!(parse(b":3\r\n").unwrap(), Reply::Integer(3));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Reply::Bulk(None));
        assert_eq!(
            parse(b"$3\r\nabc\r\n").unwrap(),
            Reply::Bulk(Some(b"abc".to_vec()))
        );
        assert_eq!(parse(b"-ERR x\r\n").unwrap(), Reply::Error("ERR x".into()));
        for bad in [
            &b"$999999999999\r\n"[..],
            b"$3\r\nab",
            b"$3\r\nabcd\r\n",
            b"*1\r\n",
            b"+OK",
            b"",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn addresses() {
        let a = RedisAuth::default();
        assert_eq!(
            RedisMetadataStore::new("redis://h:6379", a.clone())
                .unwrap()
                .address,
            "h:6379"
        );
        assert_eq!(
            RedisMetadataStore::new("redis://h", a.clone())
                .unwrap()
                .address,
            "h:12001"
        );
        assert!(RedisMetadataStore::new("redis://user:pw@h:1", a.clone()).is_err());
        assert!(RedisMetadataStore::new("redis://", a).is_err());
    }
}
