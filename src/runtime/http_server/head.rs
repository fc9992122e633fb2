//! Reading a request head: the request line and header fields, read line by line under
//! [`MAX_HEAD_BYTES`] and [`MAX_HEADERS`] and parsed with `httparse`, and the fields that
//! frame the body (`Content-Length`, `Transfer-Encoding`, `Connection`, `Expect`).

use std::io::{self, BufRead, Read};

use super::limits::{MAX_HEADERS, MAX_HEAD_BYTES};

/// Why a request could not be read; each maps to a final reply before closing.
pub(crate) enum ReadFail {
    /// The peer closed (or the socket failed) cleanly between requests: no reply.
    Closed,
    /// Reply with this status and message, then close.
    Reply(u16, &'static str),
}

impl From<io::Error> for ReadFail {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
                ReadFail::Reply(408, "Request timeout")
            }
            _ => ReadFail::Closed,
        }
    }
}

/// A parsed request head.
pub(crate) struct Head {
    /// The method, as sent.
    pub(crate) method: String,
    /// The request target, as sent.
    pub(crate) target: String,
    /// Whether the connection stays open after this request.
    pub(crate) keep_alive: bool,
    /// Every header field, as sent (values trimmed).
    pub(crate) headers: Vec<(String, String)>,
    /// `Content-Length`, saturated at `usize::MAX`.
    pub(super) content_length: Option<usize>,
    /// Whether the body is chunked.
    pub(super) chunked: bool,
    /// Whether the client waits for `100 Continue` before sending the body.
    pub(super) expect_continue: bool,
}

/// Reads one line (up to `\n`) into `line`, charging it to `budget`.
pub(super) fn read_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    budget: &mut usize,
) -> std::result::Result<(), ReadFail> {
    line.clear();
    let limit = (*budget as u64).saturating_add(1);
    let n = (&mut *reader).take(limit).read_until(b'\n', line)?;
    if n == 0 {
        return Err(ReadFail::Closed);
    }
    if n > *budget {
        return Err(ReadFail::Reply(431, "Request header too large"));
    }
    *budget -= n;
    if line.last() != Some(&b'\n') {
        // EOF in the middle of a line.
        return Err(ReadFail::Closed);
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(())
}

/// Reads and checks one request head (request line and headers, within
/// [`MAX_HEAD_BYTES`] and [`MAX_HEADERS`]). Our loop reads the lines under those
/// limits; `httparse` parses them. A bad request line is answered before any header
/// is read.
pub(crate) fn read_head(reader: &mut impl BufRead) -> std::result::Result<Head, ReadFail> {
    let mut budget = MAX_HEAD_BYTES;
    let mut line = Vec::new();
    // Tolerate stray empty lines before the request line (RFC 9112 §2.2).
    loop {
        read_line(reader, &mut line, &mut budget)?;
        if !line.is_empty() {
            break;
        }
    }
    let mut raw = Vec::with_capacity(1024);
    raw.extend_from_slice(&line);
    raw.extend_from_slice(b"\r\n");
    // The request line alone parses as a partial request, or fails as it is.
    parse_head(&raw, &mut [])?;
    let mut count = 0usize;
    loop {
        read_line(reader, &mut line, &mut budget)?;
        raw.extend_from_slice(&line);
        raw.extend_from_slice(b"\r\n");
        if line.is_empty() {
            break;
        }
        count += 1;
        if count > MAX_HEADERS {
            return Err(ReadFail::Reply(431, "Too many headers"));
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    parse_head(&raw, &mut headers)?.ok_or(ReadFail::Reply(400, "Bad request"))
}

/// Parses a request head with `httparse` (into `headers`) and reads the headers that
/// frame the body; `None` while `raw` holds only the request line.
fn parse_head<'b>(
    raw: &'b [u8],
    headers: &mut [httparse::Header<'b>],
) -> std::result::Result<Option<Head>, ReadFail> {
    let bad = ReadFail::Reply(400, "Bad request");
    let mut request = httparse::Request::new(headers);
    match request.parse(raw) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::Version) => {
            let request_line = raw.split(|&b| b == b'\r').next().unwrap_or_default();
            let version = request_line.splitn(3, |&b| b == b' ').nth(2);
            if version.is_some_and(|v| v.starts_with(b"HTTP/")) {
                return Err(ReadFail::Reply(505, "HTTP version not supported"));
            }
            return Err(bad);
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(ReadFail::Reply(431, "Too many headers"))
        }
        Err(httparse::Error::HeaderName | httparse::Error::HeaderValue) => {
            return Err(ReadFail::Reply(400, "Bad header"))
        }
        Err(_) => return Err(bad),
    }
    let (Some(method), Some(target), Some(minor)) = (request.method, request.path, request.version)
    else {
        return Err(bad);
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) || target.is_empty() {
        return Err(bad);
    }
    let http11 = minor == 1;
    let mut head = Head {
        method: method.to_string(),
        target: target.to_string(),
        keep_alive: http11,
        headers: Vec::with_capacity(request.headers.len()),
        content_length: None,
        chunked: false,
        expect_continue: false,
    };
    let mut transfer_encoding = false;
    for header in request.headers.iter() {
        let name = header.name;
        let value =
            std::str::from_utf8(header.value).map_err(|_| ReadFail::Reply(400, "Bad header"))?;
        let value = value.trim_matches([' ', '\t']);
        head.headers.push((name.to_string(), value.to_string()));
        if name.eq_ignore_ascii_case("content-length") {
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ReadFail::Reply(400, "Bad Content-Length"));
            }
            // Saturate instead of failing: anything this long is over the cap anyway.
            let n = value.parse::<usize>().unwrap_or(usize::MAX);
            if head.content_length.is_some_and(|old| old != n) {
                return Err(ReadFail::Reply(400, "Conflicting Content-Length"));
            }
            head.content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            let last = value.rsplit(',').next().unwrap_or("").trim();
            if !last.eq_ignore_ascii_case("chunked") {
                return Err(ReadFail::Reply(501, "Unsupported Transfer-Encoding"));
            }
            head.chunked = true;
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',') {
                let token = token.trim();
                if token.eq_ignore_ascii_case("close") {
                    head.keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") && !http11 {
                    head.keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("expect") {
            if !value.eq_ignore_ascii_case("100-continue") {
                return Err(ReadFail::Reply(417, "Expectation failed"));
            }
            head.expect_continue = http11;
        }
    }
    if transfer_encoding && head.content_length.is_some() {
        // Ambiguous framing (request smuggling risk): refuse.
        return Err(ReadFail::Reply(
            400,
            "Both Transfer-Encoding and Content-Length",
        ));
    }
    Ok(Some(head))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_heads() {
        let raw = b"\r\nPUT /metadata?key=a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\
                    Expect: 100-continue\r\n\r\nabc";
        let mut r = &raw[..];
        let h = read_head(&mut r).ok().unwrap();
        assert_eq!(h.method, "PUT");
        assert_eq!(h.target, "/metadata?key=a");
        assert_eq!(h.content_length, Some(3));
        assert!(h.keep_alive && h.expect_continue && !h.chunked);
        assert_eq!(h.headers[0], ("Host".to_string(), "x".to_string()));
        assert_eq!(h.headers.len(), 3);
        assert_eq!(r, b"abc");

        let raw = b"GET / HTTP/1.0\r\nContent-Length: 99999999999999999999999999\r\n\r\n";
        let h = read_head(&mut &raw[..]).ok().unwrap();
        assert_eq!(h.content_length, Some(usize::MAX));
        assert!(!h.keep_alive);

        let status = |raw: &[u8]| match read_head(&mut &raw[..]) {
            Err(ReadFail::Reply(s, _)) => s,
            Err(ReadFail::Closed) => 0,
            Ok(_) => 200,
        };
        assert_eq!(status(b"GET / HTTP/2.0\r\n\r\n"), 505);
        assert_eq!(status(b"GET /\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            501
        );
        assert_eq!(status(b"GET / HTTP/1.1\r\nExpect: x\r\n\r\n"), 417);
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost x\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: x\r\n"), 0);
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_HEAD_BYTES + 10, b'a');
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(status(&big), 431);
    }
}
