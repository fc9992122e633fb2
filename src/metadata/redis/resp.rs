//! RESP, the Redis protocol: a command written as an array of bulk strings, and a
//! reply read without trusting any length the server announces.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use crate::error::{Error, Result};

/// Largest bulk reply accepted (a descriptor is far smaller).
const MAX_BULK: usize = 64 << 20;
/// Most elements accepted in one array reply.
const MAX_ARRAY: usize = 1 << 20;
/// Deepest nesting of array replies accepted (`SCAN` answers two levels).
const MAX_DEPTH: usize = 4;

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// A simple string (`+OK`).
    Status(String),
    /// An error (`-ERR ...`).
    Error(String),
    /// An integer (`:1`).
    Integer(i64),
    /// A bulk string; `None` for nil.
    Bulk(Option<Vec<u8>>),
    /// An array; `None` for nil.
    Array(Option<Vec<Reply>>),
}

/// Requires a status reply (`+OK`) to `what`.
pub(super) fn expect_ok(reply: Reply, what: &str) -> Result<()> {
    match reply {
        Reply::Status(_) => Ok(()),
        Reply::Error(e) => Err(Error::Metadata(format!("redis {what}: {e}"))),
        other => Err(Error::Metadata(format!(
            "redis {what}: unexpected {other:?}"
        ))),
    }
}

/// Writes one command as a RESP array and reads its reply.
pub(super) fn command(conn: &mut BufReader<TcpStream>, args: &[&[u8]]) -> Result<Reply> {
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
}
