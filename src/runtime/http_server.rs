//! A small blocking HTTP/1.1 server on `std::net`, shared by the metadata server and the
//! master's admin service.
//!
//! Written here rather than taken from `tiny_http`: tiny_http 0.12 aborts the whole
//! process when a request that declared a huge `Content-Length` is dropped before its
//! body was read (its `EqualReader::drop` allocates the remaining length in one go), so a
//! single bad request could kill the master. Here every length a peer sends is checked
//! against a cap before anything is allocated.
//!
//! One thread accepts; each connection gets its own thread (at most
//! [`MAX_CONNECTIONS`], [`MAX_CONNECTIONS_PER_PEER`] from one host; more are answered
//! 503), with HTTP/1.1 keep-alive, an idle timeout and a per-request deadline.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind::Socket, Result};
use crate::runtime::conn_threads::ConnLimits;
use crate::runtime::tcp_acceptor::{StreamTimeouts, TcpAcceptor};

/// Largest request body accepted; bigger ones get 413.
pub const MAX_BODY_BYTES: usize = 64 << 20;
/// Largest request head (request line plus headers) accepted; bigger ones get 431.
pub const MAX_HEAD_BYTES: usize = 64 << 10;
/// Most connections served at once; further ones get 503 and are closed.
pub const MAX_CONNECTIONS: usize = 512;
/// Most connections one host may hold at once; further ones get 503 and are closed.
pub const MAX_CONNECTIONS_PER_PEER: usize = 128;
/// The name of the thread that serves each connection.
pub const CONNECTION_THREAD: &str = "mc-http";
/// Most header lines in one request.
const MAX_HEADERS: usize = 128;
/// How long an idle keep-alive connection is kept open.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one request may take to arrive once its first byte was seen.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Write timeout for responses.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Answers requests: `method` as sent, `target` the request target (origin- or
/// absolute-form), `body` the request body.
pub trait HttpHandler: Send + Sync + 'static {
    /// Produces the reply to one request.
    fn handle(&self, method: &str, target: &str, body: &[u8]) -> HttpReply;

    /// Produces the reply to one request given its header fields (`headers`, names and
    /// values as sent, values trimmed), with extra response header fields; by default
    /// [`handle`](Self::handle), ignoring the request's headers and adding none.
    fn handle_with_headers(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> HeadedReply {
        let _ = headers;
        HeadedReply::from(self.handle(method, target, body))
    }
}

/// A reply with header fields beyond the ones every reply has (`Content-Type`,
/// `Content-Length`, `Connection`); a field whose name or value holds CR or LF is not
/// sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadedReply {
    /// The status, content type and body.
    pub reply: HttpReply,
    /// The extra header fields, in order.
    pub headers: Vec<(&'static str, String)>,
}

impl From<HttpReply> for HeadedReply {
    fn from(reply: HttpReply) -> Self {
        HeadedReply {
            reply,
            headers: Vec::new(),
        }
    }
}

/// A response produced by an [`HttpHandler`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type` header value.
    pub content_type: &'static str,
    /// Response body.
    pub body: Vec<u8>,
}

impl HttpReply {
    /// A plain-text reply.
    pub fn text(status: u16, body: &str) -> Self {
        HttpReply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }
}

/// A running HTTP server. Dropping it (or calling [`stop`](Self::stop)) stops
/// accepting, closes every connection and joins every thread.
pub struct HttpServer {
    acceptor: TcpAcceptor,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.acceptor.local_addr())
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Binds `bind` (port 0 picks a free port) and serves every request with `handler`;
    /// `name` prefixes error messages.
    pub fn start(
        bind: SocketAddr,
        name: &str,
        handler: Arc<dyn HttpHandler>,
    ) -> Result<HttpServer> {
        let listener = TcpListener::bind(bind)
            .map_err(|e| Error::os(Socket, format_args!("{name}: bind {bind} failed"), e))?;
        let timeouts = StreamTimeouts {
            read: Some(READ_TICK),
            write: Some(WRITE_TIMEOUT),
        };
        let acceptor = TcpAcceptor::start_refusing_with(
            listener,
            CONNECTION_THREAD,
            ConnLimits::new(MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER),
            timeouts,
            move |stream, _| serve_connection(stream, handler.as_ref()),
            reject_busy,
        )
        .map_err(|e| {
            Error::os(
                Socket,
                format_args!("{name}: starting the acceptor failed"),
                e,
            )
        })?;
        Ok(HttpServer { acceptor })
    }

    /// The address actually bound (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.acceptor.local_addr()
    }

    /// Stops the server and joins its threads (same as dropping it).
    pub fn stop(mut self) {
        self.acceptor.stop();
    }
}

fn reject_busy(mut stream: TcpStream) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
    let reply = HttpReply::text(503, "Too many connections");
    let _ = write_reply(&mut stream, &reply.into(), false, false);
    let _ = stream.shutdown(Shutdown::Both);
}

/// The socket's read timeout: a blocked read wakes this often to check its deadline.
/// Set once per connection (not per read, which would cost a system call each), so a
/// deadline is kept to within one tick.
const READ_TICK: Duration = Duration::from_secs(1);

/// A socket reader whose every read is bounded by a deadline: the request's, or the
/// idle timeout's while no request is in progress. The socket's read timeout must be
/// [`READ_TICK`].
struct DeadlineReader {
    stream: TcpStream,
    deadline: Instant,
}

impl Read for DeadlineReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if Instant::now() >= self.deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "request deadline"));
            }
            match self.stream.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                result => return result,
            }
        }
    }
}

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
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) keep_alive: bool,
    /// Every header field, as sent (values trimmed).
    pub(crate) headers: Vec<(String, String)>,
    content_length: Option<usize>,
    chunked: bool,
    expect_continue: bool,
}

/// Serves requests on one connection until the peer closes, an error reply ends it,
/// or the server stops (which shuts the socket down). The socket's timeouts are
/// [`READ_TICK`] and [`WRITE_TIMEOUT`].
fn serve_connection(stream: &TcpStream, handler: &dyn HttpHandler) {
    let _ = stream.set_nodelay(true);
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut writer = stream;
    let mut reader = BufReader::new(DeadlineReader {
        stream: read_half,
        deadline: Instant::now() + IDLE_TIMEOUT,
    });
    loop {
        // Wait (idle timeout) for the first byte of the next request; one already
        // buffered (pipelined) costs no read.
        if reader.buffer().is_empty() {
            reader.get_mut().deadline = Instant::now() + IDLE_TIMEOUT;
        }
        match reader.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(_) => {}
        }
        reader.get_mut().deadline = Instant::now() + REQUEST_TIMEOUT;
        let request = read_head(&mut reader)
            .and_then(|head| Ok((read_body(&mut reader, &mut writer, &head)?, head)));
        let (body, head) = match request {
            Ok(r) => r,
            Err(ReadFail::Closed) => return,
            Err(ReadFail::Reply(status, msg)) => {
                let reply = HttpReply::text(status, msg).into();
                let _ = write_reply(&mut writer, &reply, false, false);
                linger_close(reader.into_inner().stream);
                return;
            }
        };
        let reply = handler.handle_with_headers(&head.method, &head.target, &head.headers, &body);
        let keep = head.keep_alive;
        let head_only = head.method == "HEAD";
        if write_reply(&mut writer, &reply, keep, head_only).is_err() || !keep {
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Closes after an error reply without resetting the connection: stop writing, then
/// discard what the peer still sends (bounded in bytes and time) so the reply is not lost
/// to a TCP reset.
fn linger_close(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut buf = [0u8; 16 << 10];
    let mut left = 4usize << 20;
    while left > 0 && Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// Reads one line (up to `\n`) into `line`, charging it to `budget`.
fn read_line(
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

/// Reads the body `head` announces (at most [`MAX_BODY_BYTES`]), answering
/// `Expect: 100-continue` on `writer` first.
pub(crate) fn read_body(
    reader: &mut impl BufRead,
    writer: &mut impl Write,
    head: &Head,
) -> std::result::Result<Vec<u8>, ReadFail> {
    let too_large = ReadFail::Reply(413, "metadata too large");
    if !head.chunked && head.content_length.unwrap_or(0) == 0 {
        return Ok(Vec::new());
    }
    if head.content_length.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large);
    }
    if head.expect_continue {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    if let Some(n) = head.content_length {
        let mut body = Vec::new();
        read_exactly(reader, &mut body, n)?;
        return Ok(body);
    }
    // Chunked.
    let mut body = Vec::new();
    let mut line = Vec::new();
    loop {
        let mut budget = 1024;
        read_line(reader, &mut line, &mut budget)?;
        let text = std::str::from_utf8(&line).map_err(|_| ReadFail::Reply(400, "Bad chunk"))?;
        let size = text.split(';').next().unwrap_or("").trim();
        if size.is_empty() || size.len() > 16 {
            return Err(ReadFail::Reply(400, "Bad chunk size"));
        }
        let size =
            usize::from_str_radix(size, 16).map_err(|_| ReadFail::Reply(400, "Bad chunk size"))?;
        if size == 0 {
            break;
        }
        if size > MAX_BODY_BYTES - body.len() {
            return Err(too_large);
        }
        read_exactly(reader, &mut body, size)?;
        let mut budget = 2;
        read_line(reader, &mut line, &mut budget)?;
        if !line.is_empty() {
            return Err(ReadFail::Reply(400, "Bad chunk terminator"));
        }
    }
    // Trailers, up to the empty line.
    let mut budget = MAX_HEAD_BYTES;
    loop {
        read_line(reader, &mut line, &mut budget)?;
        if line.is_empty() {
            return Ok(body);
        }
    }
}

/// Appends exactly `n` bytes from `reader` to `body`. Memory grows with the bytes that
/// arrive, so a peer announcing a large body without sending it costs nothing.
fn read_exactly(reader: &mut impl BufRead, body: &mut Vec<u8>, n: usize) -> io::Result<()> {
    body.reserve(n.min(64 << 10));
    let got = (&mut *reader).take(n as u64).read_to_end(body)?;
    if got != n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        412 => "Precondition Failed",
        413 => "Payload Too Large",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

fn write_reply(
    w: &mut impl Write,
    headed: &HeadedReply,
    keep_alive: bool,
    head_only: bool,
) -> io::Result<()> {
    let reply = &headed.reply;
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type,
        reply.body.len(),
        if keep_alive { "keep-alive" } else { "close" },
    )
    .into_bytes();
    if reply.status == 405 {
        out.extend_from_slice(b"Allow: GET, PUT, DELETE\r\n");
    }
    let safe = |s: &str| !s.contains(['\r', '\n']);
    for (name, value) in &headed.headers {
        if safe(name) && safe(value) {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
    }
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(&reply.body);
    }
    w.write_all(&out)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_wait_past_the_socket_tick_until_their_deadline() {
        let (mut client, server) = crate::host::net::loopback_pair();
        server.set_read_timeout(Some(READ_TICK)).unwrap();
        let deadline = Instant::now() + READ_TICK + READ_TICK / 2;
        let mut reader = DeadlineReader {
            stream: server,
            deadline,
        };
        let mut buf = [0u8; 8];
        // Silence: the ticks pass, the read goes on until the deadline.
        let e = reader.read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(Instant::now() >= deadline);
        // Bytes that arrived are read at once, and a new deadline is honoured.
        client.write_all(b"abc").unwrap();
        reader.deadline = Instant::now() + IDLE_TIMEOUT;
        assert_eq!(reader.read(&mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"abc");
    }

    #[test]
    fn writes_extra_headers_but_never_a_line_break() {
        let reply = HeadedReply {
            reply: HttpReply::text(412, "no"),
            headers: vec![
                ("ETag", "\"7\"".into()),
                ("X-Bad", "a\r\nInjected: 1".into()),
            ],
        };
        let mut out = Vec::new();
        write_reply(&mut out, &reply, true, false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 412 Precondition Failed\r\n"),
            "{text}"
        );
        assert!(text.contains("\r\nETag: \"7\"\r\n"), "{text}");
        assert!(
            !text.contains("Injected") && !text.contains("X-Bad"),
            "{text}"
        );
        assert!(text.ends_with("\r\n\r\nno"), "{text}");
    }

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
