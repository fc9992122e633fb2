//! Serving one connection: requests read under deadlines ([`DeadlineReader`]), answered
//! by the handler, with keep-alive; the closing after an error reply; and the refusal of
//! a connection over the limits.

use std::io::{self, BufRead, BufReader, Read};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::body::read_body;
use super::handler::{HttpHandler, HttpReply};
use super::head::{read_head, ReadFail};
use super::limits::{IDLE_TIMEOUT, REQUEST_TIMEOUT};
use super::response::write_reply;

/// Answers a connection over the limits with 503 and closes it.
pub(super) fn reject_busy(mut stream: TcpStream) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
    let reply = HttpReply::text(503, "Too many connections");
    let _ = write_reply(&mut stream, &reply.into(), false, false);
    let _ = stream.shutdown(Shutdown::Both);
}

/// A socket reader whose every read is bounded by a deadline: the request's, or the
/// idle timeout's while no request is in progress. The socket's read timeout must be
/// [`READ_TICK`](super::limits::READ_TICK).
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

/// Serves requests on one connection until the peer closes, an error reply ends it,
/// or the server stops (which shuts the socket down). The socket's timeouts are
/// [`READ_TICK`](super::limits::READ_TICK) and
/// [`WRITE_TIMEOUT`](super::limits::WRITE_TIMEOUT).
pub(super) fn serve_connection(stream: &TcpStream, handler: &dyn HttpHandler) {
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::limits::READ_TICK;
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
}
