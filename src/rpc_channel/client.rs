//! The sending side: a pool of connections per target (`host:port`), each call sent
//! and its reply read on one connection taken from the pool, as upstream's client
//! does. Unlike upstream's, a call the peer refused or never answered is a failure.

use super::protocol::{request_parts, Kind};
use crate::wire::coro_rpc::{
    encode_request_attached, read_response_attached, ERR_OK, MAX_RESPONSE,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{self, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long connecting to a target may take (upstream gives up after about 4 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// One pooled connection.
struct Conn {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
    seq: u32,
}

/// The connections to every target.
pub struct Client {
    pool: Mutex<HashMap<String, Vec<Conn>>>,
    pool_size: usize,
    timeout: Duration,
}

impl Client {
    /// A client keeping up to `pool_size` idle connections per target, each call
    /// waiting `timeout` at most for its reply.
    pub fn new(pool_size: usize, timeout: Duration) -> Client {
        Client {
            pool: Mutex::new(HashMap::new()),
            pool_size: pool_size.max(1),
            timeout: timeout.max(Duration::from_millis(1)),
        }
    }

    /// Sends `payload` to `target` as a `kind` call and waits for the reply; an error
    /// when no connection could be made, the connection broke or the peer answered
    /// an error.
    pub fn send(&self, target: &str, kind: Kind, payload: &[u8]) -> io::Result<()> {
        let mut conn = match self.pool.lock().get_mut(target).and_then(Vec::pop) {
            Some(c) => c,
            None => self.connect(target)?,
        };
        let result = call(&mut conn, kind, payload);
        if result.is_ok() {
            let mut pool = self.pool.lock();
            let idle = pool.entry(target.to_string()).or_default();
            if idle.len() < self.pool_size {
                idle.push(conn);
            }
        }
        result
    }

    fn connect(&self, target: &str) -> io::Result<Conn> {
        let addrs: Vec<_> = target.to_socket_addrs()?.collect();
        let mut last = io::Error::new(
            io::ErrorKind::NotFound,
            format!("no address for '{target}'"),
        );
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    stream.set_read_timeout(Some(self.timeout))?;
                    stream.set_write_timeout(Some(self.timeout))?;
                    let reader = BufReader::new(stream.try_clone()?);
                    return Ok(Conn {
                        stream,
                        reader,
                        seq: 0,
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// One call on `conn`: the request, then its reply.
fn call(conn: &mut Conn, kind: Kind, payload: &[u8]) -> io::Result<()> {
    let seq = conn.seq;
    conn.seq = conn.seq.wrapping_add(1);
    let (body, attachment) = request_parts(kind, payload);
    let frame = encode_request_attached(seq, kind.function_id(), &body, attachment);
    conn.stream.write_all(&frame)?;
    let (header, _, _) =
        read_response_attached(&mut conn.reader, MAX_RESPONSE)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer closed the connection",
            )
        })?;
    if header.seq != seq {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a reply to another call",
        ));
    }
    if header.err_code != ERR_OK {
        return Err(io::Error::other(format!(
            "the peer answered error {}",
            header.err_code
        )));
    }
    Ok(())
}
