//! A subscriber speaking raw ZMTP, for the tests of the PUB socket and its users.

use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::codec::{self, MAX_FRAME};

/// Longest a test read blocks (only reached when something is broken).
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A subscriber speaking raw ZMTP.
pub struct Sub {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Sub {
    /// Connects and sends `bytes`, whatever they are.
    pub fn raw(addr: SocketAddr, bytes: &[u8]) -> Sub {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let _ = (&stream).write_all(bytes);
        Sub {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    /// Connects as a ZMTP 3.`minor` SUB and completes the handshake.
    pub fn connect(addr: SocketAddr, minor: u8) -> Sub {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut g = codec::greeting();
        g[11] = minor;
        (&stream).write_all(&g).unwrap();
        (&stream).write_all(&codec::ready("SUB")).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut theirs = [0u8; codec::GREETING_LEN];
        reader.read_exact(&mut theirs).unwrap();
        assert_eq!(codec::parse_greeting(&theirs).unwrap().major, 3);
        let ready = codec::read_frame(&mut reader, MAX_FRAME).unwrap();
        assert!(ready.command);
        assert_eq!(
            codec::parse_command(&ready.body).unwrap(),
            codec::Command::Ready(vec![(&b"Socket-Type"[..], &b"PUB"[..])])
        );
        Sub { stream, reader }
    }

    /// Sends raw bytes.
    pub fn send(&self, bytes: &[u8]) {
        (&self.stream).write_all(bytes).unwrap();
    }

    /// Subscribes with a ZMTP 3.1 command, or a 3.0 message.
    pub fn subscribe(&mut self, topic: &[u8], as_command: bool) {
        let mut body = Vec::new();
        if as_command {
            body.push(9);
            body.extend_from_slice(b"SUBSCRIBE");
            body.extend_from_slice(topic);
            self.send(&[&[0x04, body.len() as u8][..], &body].concat());
        } else {
            body.push(1);
            body.extend_from_slice(topic);
            self.send(&codec::encode_message(&[&body]));
        }
        self.sync();
    }

    /// PING, then waits for the PONG: everything sent before has been applied.
    pub fn sync(&mut self) {
        self.send(b"\x04\x09\x04PING\x00\x00ok");
        let pong = codec::read_frame(&mut self.reader, MAX_FRAME).unwrap();
        assert_eq!(pong.body, b"\x04PONGok");
    }

    /// The next message's frames.
    pub fn recv(&mut self) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        loop {
            let f = codec::read_frame(&mut self.reader, 1 << 20).unwrap();
            assert!(!f.command);
            frames.push(f.body);
            if !f.more {
                return frames;
            }
        }
    }

    /// Whether the server closed the connection.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 256];
        loop {
            match self.reader.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) => {
                    return e.kind() != io::ErrorKind::WouldBlock
                        && e.kind() != io::ErrorKind::TimedOut
                }
            }
        }
    }
}
