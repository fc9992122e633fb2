//! The subscribing side: a SUB socket's conversation on one TCP connection to a PUB
//! (libzmq's, pyzmq's, or ours): handshake, SUBSCRIBE, then messages, with PINGs
//! answered. Reconnecting is the caller's loop.

use std::io::{self, BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::codec::{self, Command};
use super::endpoint::{bad_port, tcp_host_port, EndpointError};
use super::session;

/// Largest message frame accepted from a publisher.
pub const MAX_MESSAGE_FRAME: usize = 64 << 20;
/// Most frames in one message.
const MAX_FRAMES: usize = 64;

/// Resolves a `tcp://host:port` connect endpoint.
pub fn resolve(endpoint: &str) -> Result<SocketAddr, EndpointError> {
    let (host, port) = tcp_host_port(endpoint)?;
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| bad_port(endpoint, port))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let owned = || endpoint.to_string();
    (host, port)
        .to_socket_addrs()
        .map_err(|source| EndpointError::Resolve {
            endpoint: owned(),
            source,
        })?
        .next()
        .ok_or_else(|| EndpointError::NoAddress { endpoint: owned() })
}

/// One connected subscription.
#[derive(Debug)]
pub struct SubConnection {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl SubConnection {
    /// Connects to the PUB at `addr`, runs the handshake and subscribes to `topic`
    /// (empty: everything). `timeout` bounds the connect and the handshake.
    pub fn connect(addr: SocketAddr, topic: &[u8], timeout: Duration) -> io::Result<SubConnection> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let version = session::handshake_as(&mut reader, &mut &stream, "SUB", &[b"PUB", b"XPUB"])?;
        let subscribe = if version.minor >= 1 {
            codec::subscribe(topic)
        } else {
            let mut body = vec![1u8];
            body.extend_from_slice(topic);
            codec::encode_message(&[&body])
        };
        (&stream).write_all(&subscribe)?;
        stream.set_read_timeout(None)?;
        Ok(SubConnection { stream, reader })
    }

    /// A handle that can shut the connection down from another thread.
    pub fn shutdown_handle(&self) -> io::Result<TcpStream> {
        self.stream.try_clone()
    }

    /// Blocks for the next message (its frames), answering PINGs on the way. An
    /// ERROR from the publisher or a protocol violation ends the connection.
    pub fn recv(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let mut frames = Vec::new();
        loop {
            let f = codec::read_frame(&mut self.reader, MAX_MESSAGE_FRAME)?;
            if f.command {
                match codec::parse_command(&f.body)? {
                    Command::Ping(context) => (&self.stream).write_all(&codec::pong(context))?,
                    Command::Error(reason) => {
                        return Err(io::Error::new(
                            io::ErrorKind::ConnectionAborted,
                            format!("publisher error: {}", String::from_utf8_lossy(reason)),
                        ))
                    }
                    _ => {}
                }
                continue;
            }
            if frames.len() == MAX_FRAMES {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a message of more than {MAX_FRAMES} frames"),
                ));
            }
            frames.push(f.body);
            if !f.more {
                return Ok(frames);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::zmtp::{PubLimits, PubSocket};
    use crate::runtime::conn_threads::ConnLimits;
    use std::time::Instant;

    #[test]
    fn receives_what_our_publisher_sends() {
        let limits = PubLimits {
            high_water_mark: 16,
            max_queued_bytes: 1 << 20,
            connections: ConnLimits::new(4, 4),
        };
        let publisher = PubSocket::bind("127.0.0.1:0".parse().unwrap(), limits).unwrap();
        let endpoint = format!("tcp://{}", publisher.local_addr());
        let mut sub =
            SubConnection::connect(resolve(&endpoint).unwrap(), b"", Duration::from_secs(10))
                .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        // The subscription reaches the publisher asynchronously: publish until it lands.
        while publisher.send(&[b"", b"seq", b"payload"]) == 0 {
            assert!(Instant::now() < deadline, "the subscription never arrived");
            std::thread::sleep(Duration::from_millis(5));
        }
        let frames = sub.recv().unwrap();
        assert_eq!(
            frames,
            vec![b"".to_vec(), b"seq".to_vec(), b"payload".to_vec()]
        );
    }

    #[test]
    fn resolves_only_tcp_endpoints_with_ports() {
        assert_eq!(resolve("tcp://127.0.0.1:5557").unwrap().port(), 5557);
        assert!(resolve("ipc:///tmp/x").is_err());
        assert!(resolve("tcp://127.0.0.1").is_err());
        assert!(resolve("tcp://127.0.0.1:0").is_err());
    }
}
