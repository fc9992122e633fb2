//! Writing a reply: the status line, the header fields every reply has, the handler's
//! extra fields (never one holding a line break) and the body.

use std::io::{self, Write};

use super::handler::HeadedReply;

/// The reason phrase of `status`.
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

/// Writes `headed` as one response on `w`: `Connection: keep-alive` or `close` as
/// `keep_alive` says, the body left out when `head_only` (a `HEAD` request).
pub(super) fn write_reply(
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
    use super::super::handler::HttpReply;
    use super::*;

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
}
