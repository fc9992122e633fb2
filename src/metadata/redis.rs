//! Redis metadata (spec §2.1): `SET`, `GET` and `DEL` of upstream's keys and values over
//! a small blocking RESP client. `MC_REDIS_USERNAME` / `MC_REDIS_PASSWORD` authenticate
//! (`AUTH`) and `MC_REDIS_DB_INDEX` selects the database, as upstream; a lost connection
//! is re-established once per command.
//!
//! As a [`VersionedStore`] ([`super::versioned`]) the value of a key stays where a plain
//! `GET` finds it, `<key>`, a string of the raw bytes, and its version beside it, in
//! `<key>\0version` (the key, a NUL byte, `version`), numbered by one counter for the
//! database, `\0mooncake\0versions`, that every versioned write increments (the first
//! is 1). Upstream's clients write keys from C strings, which cannot hold the NUL these
//! names do, so neither collides with theirs; keys given to the versioned calls must not
//! hold a NUL either. Each operation is one Lua script (`EVAL`), so atomic. A value with
//! no version beside it (written by a plain `SET`) reads at version 0; plain writes do
//! not move versions, so keys updated with compare-and-swap should be written only
//! through the versioned calls. A list `SCAN`s for the prefix (glob characters escaped),
//! then reads each key's value and version in one script per key; keys that are not
//! strings are left out.

use super::store::MetadataStore;
use super::versioned::{Versioned, VersionedStore};
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
/// Most elements accepted in one array reply.
const MAX_ARRAY: usize = 1 << 20;
/// Deepest nesting of array replies accepted (`SCAN` answers two levels).
const MAX_DEPTH: usize = 4;

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
    Array(Option<Vec<Reply>>),
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

/// Reads one reply; never trusts a length beyond [`MAX_BULK`] or [`MAX_ARRAY`], nor
/// arrays nested deeper than [`MAX_DEPTH`].
pub(crate) fn read_reply(conn: &mut impl BufRead) -> Result<Reply> {
    read_reply_at(conn, 0)
}

/// Reads the elements of an array reply that announced `text` elements.
fn read_array(conn: &mut impl BufRead, text: &str, depth: usize) -> Result<Reply> {
    let bad = |what: String| Error::Metadata(format!("redis: malformed reply: {what}"));
    let n: i64 = text.parse().map_err(|_| bad(format!("length {text:?}")))?;
    if n < 0 {
        return Ok(Reply::Array(None));
    }
    if depth >= MAX_DEPTH {
        return Err(bad(format!("arrays nested deeper than {MAX_DEPTH}")));
    }
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= MAX_ARRAY)
        .ok_or_else(|| bad(format!("array of {n} elements")))?;
    // Memory grows with the elements that arrive, not with the count announced.
    let mut items = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        items.push(read_reply_at(conn, depth + 1)?);
    }
    Ok(Reply::Array(Some(items)))
}

/// [`read_reply`] of a reply nested `depth` arrays deep.
fn read_reply_at(conn: &mut impl BufRead, depth: usize) -> Result<Reply> {
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
        b'*' => read_array(conn, &text, depth),
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

/// What follows a key in the name of the key that holds its version.
const VERSION_SUFFIX: &str = "\0version";
/// The counter that numbers every versioned write.
const VERSION_COUNTER: &str = "\0mooncake\0versions";
/// Keys `SCAN` is asked for per round.
const SCAN_COUNT: &str = "1000";
/// Most `SCAN` rounds one list makes (a server that never ends its cursor is broken).
const MAX_SCAN_ROUNDS: usize = 1 << 20;

/// The script prelude: `current()`, the version of the string `KEYS[1]` (from
/// `KEYS[2]`, `'0'` when none), `nil` when it is absent or no string.
const CURRENT: &str = "local function current() \
     if redis.call('TYPE', KEYS[1]).ok ~= 'string' then return nil end \
     return redis.call('GET', KEYS[2]) or '0' end ";
/// The script epilogue: `write()`, which writes `KEYS[1] = ARGV[1]` with the next
/// number of the counter `KEYS[3]` as its version in `KEYS[2]`.
const WRITE: &str = "local function write() redis.call('INCR', KEYS[3]) \
     redis.call('SET', KEYS[1], ARGV[1]) \
     redis.call('SET', KEYS[2], redis.call('GET', KEYS[3])) return 1 end ";
/// `{value, version}` of `KEYS[1]`, nil when absent (or no string).
const GET_VERSIONED: &str = "local v = current() if not v then return false end \
     return {redis.call('GET', KEYS[1]), v}";
/// Writes `KEYS[1] = ARGV[1]` if `KEYS[1]` does not exist: 1, or 0.
const CREATE: &str = "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end return write()";
/// Writes `KEYS[1] = ARGV[1]`: 1.
const PUT: &str = "return write()";
/// Writes `KEYS[1] = ARGV[1]` if its version is `ARGV[2]`: 1, or 0.
const SWAP: &str = "if current() ~= ARGV[2] then return 0 end return write()";
/// Deletes `KEYS[1]` and its version if its version is `ARGV[1]`: 1, or 0.
const DELETE_IF: &str = "if current() ~= ARGV[1] then return 0 end \
     redis.call('DEL', KEYS[1], KEYS[2]) return 1";

/// `prefix` as a `SCAN MATCH` pattern that matches it literally, then anything.
fn match_prefix(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

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

/// A `SCAN` reply: the next cursor and the keys of this round.
fn decode_scan(reply: Reply) -> Result<(Vec<u8>, Vec<Vec<u8>>)> {
    let bad = |r: &Reply| Error::Metadata(format!("redis SCAN: unexpected {r:?}"));
    let Reply::Array(Some(mut parts)) = reply else {
        return Err(bad(&reply));
    };
    let (Some(Reply::Array(Some(keys))), Some(Reply::Bulk(Some(cursor))), None) =
        (parts.pop(), parts.pop(), parts.pop())
    else {
        return Err(bad(&Reply::Array(Some(parts))));
    };
    let keys = keys
        .into_iter()
        .map(|k| match k {
            Reply::Bulk(Some(k)) => Ok(k),
            other => Err(bad(&other)),
        })
        .collect::<Result<_>>()?;
    Ok((cursor, keys))
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
        self.run(&cmd).map_err(|e| {
            Error::Metadata(format!("redis {what} of '{key}' at {}: {e}", self.address))
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

    /// Every key that starts with `prefix` (no version keys, none that is not UTF-8),
    /// in order.
    fn scan_prefix(&self, prefix: &str) -> Result<Vec<String>> {
        let pattern = match_prefix(prefix);
        let mut cursor = b"0".to_vec();
        let mut keys = std::collections::BTreeSet::new();
        for _ in 0..MAX_SCAN_ROUNDS {
            let reply = self.run(&[
                b"SCAN",
                &cursor,
                b"MATCH",
                pattern.as_bytes(),
                b"COUNT",
                SCAN_COUNT.as_bytes(),
            ])?;
            let (next, found) = decode_scan(reply)?;
            let found = found.into_iter().filter_map(|k| String::from_utf8(k).ok());
            keys.extend(found.filter(|k| k.starts_with(prefix) && !k.contains('\0')));
            if next == b"0" {
                return Ok(keys.into_iter().collect());
            }
            cursor = next;
        }
        Err(Error::Metadata(format!(
            "redis {}: SCAN for prefix '{prefix}' did not end in {MAX_SCAN_ROUNDS} rounds",
            self.address
        )))
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
        for key in self
            .scan_prefix(prefix)
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
    fn arrays_decode_within_limits() {
        assert_eq!(
            parse(b"*2\r\n$1\r\n5\r\n*1\r\n$1\r\na\r\n").unwrap(),
            Reply::Array(Some(vec![
                Reply::Bulk(Some(b"5".to_vec())),
                Reply::Array(Some(vec![Reply::Bulk(Some(b"a".to_vec()))])),
            ]))
        );
        assert_eq!(parse(b"*-1\r\n").unwrap(), Reply::Array(None));
        assert_eq!(parse(b"*0\r\n").unwrap(), Reply::Array(Some(vec![])));
        let deep = b"*1\r\n".repeat(MAX_DEPTH + 1);
        for bad in [&b"*2\r\n:1\r\n"[..], b"*99999999999\r\n", b"*x\r\n", &deep] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

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
        let scan = Reply::Array(Some(vec![
            bulk(b"17"),
            Reply::Array(Some(vec![bulk(b"a")])),
        ]));
        assert_eq!(
            decode_scan(scan).unwrap(),
            (b"17".to_vec(), vec![b"a".to_vec()])
        );
        for bad in [
            Reply::Array(Some(vec![bulk(b"0")])),
            Reply::Array(Some(vec![
                bulk(b"0"),
                Reply::Array(Some(vec![Reply::Integer(1)])),
            ])),
            Reply::Array(Some(vec![bulk(b"0"), Reply::Array(None), bulk(b"x")])),
            Reply::Status("OK".into()),
        ] {
            assert!(decode_scan(bad).is_err());
        }
    }

    #[test]
    fn prefixes_match_literally() {
        assert_eq!(
            match_prefix("mooncake/checkpoint/"),
            "mooncake/checkpoint/*"
        );
        assert_eq!(match_prefix(r"a*b?[c]\d"), r"a\*b\?\[c\]\\d*");
        assert_eq!(match_prefix(""), "*");
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
