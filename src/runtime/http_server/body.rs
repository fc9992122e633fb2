//! Reading a request body: by `Content-Length` or chunked, within [`MAX_BODY_BYTES`],
//! answering `Expect: 100-continue` first.

use std::io::{self, BufRead, Read, Write};

use super::head::{read_line, Head, ReadFail};
use super::limits::{MAX_BODY_BYTES, MAX_HEAD_BYTES};

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
