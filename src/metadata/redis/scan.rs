//! Listing by prefix: `SCAN` with a `MATCH` pattern that matches the prefix literally,
//! round after round until the cursor comes back to 0.

use std::collections::BTreeSet;

use super::connection::Connection;
use super::resp::Reply;
use crate::error::{Error, Result};

/// Keys `SCAN` is asked for per round.
const SCAN_COUNT: &str = "1000";
/// Most `SCAN` rounds one list makes (a server that never ends its cursor is broken).
const MAX_SCAN_ROUNDS: usize = 1 << 20;

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

/// Every key that starts with `prefix` (no version keys, none that is not UTF-8),
/// in order.
pub(super) fn scan_prefix(conn: &Connection, prefix: &str) -> Result<Vec<String>> {
    let pattern = match_prefix(prefix);
    let mut cursor = b"0".to_vec();
    let mut keys = BTreeSet::new();
    for _ in 0..MAX_SCAN_ROUNDS {
        let reply = conn.run(&[
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
        conn.address()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_replies_decode_defensively() {
        let bulk = |b: &[u8]| Reply::Bulk(Some(b.to_vec()));
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
}
