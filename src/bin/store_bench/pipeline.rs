//! A raw coro_rpc connection to a master that keeps several calls in flight: the
//! calls of a round are written back to back and their replies read in order, the
//! way a busy client fleet loads a master. Used by `master_load --pipeline=N`.

use mooncake::wire::codec::{encode_args, Rpc};
use mooncake::wire::coro_rpc;
use mooncake::wire::struct_pack;
use std::io::{BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// One connection with a round of calls being built.
pub struct Pipe {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    next_seq: u32,
    frames: Vec<u8>,
    queued: usize,
}

impl Pipe {
    /// Connects to the master at `addr`; every read and write is bounded by `timeout`.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Pipe, String> {
        let target = addr
            .to_socket_addrs()
            .map_err(|e| format!("resolving {addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("{addr} resolved to nothing"))?;
        let s = TcpStream::connect_timeout(&target, timeout)
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        let setup = s
            .set_nodelay(true)
            .and_then(|_| s.set_read_timeout(Some(timeout)))
            .and_then(|_| s.set_write_timeout(Some(timeout)))
            .and_then(|_| s.try_clone());
        let reader = setup.map_err(|e| format!("setting up the connection: {e}"))?;
        Ok(Pipe {
            writer: s,
            reader: BufReader::with_capacity(256 << 10, reader),
            next_seq: 0,
            frames: Vec::new(),
            queued: 0,
        })
    }

    /// Adds a call of `R` to the round.
    pub fn push<R: Rpc>(&mut self, args: &R::Args) {
        let frame = coro_rpc::encode_request(self.next_seq, R::METHOD.id(), &encode_args(args));
        self.frames.extend_from_slice(&frame);
        self.next_seq = self.next_seq.wrapping_add(1);
        self.queued += 1;
    }

    /// Sends the round and returns each reply body in call order; a transport error
    /// code or a reply out of order is an error.
    pub fn round(&mut self) -> Result<Vec<Vec<u8>>, String> {
        let first = self.next_seq.wrapping_sub(self.queued as u32);
        let n = std::mem::take(&mut self.queued);
        let frames = std::mem::take(&mut self.frames);
        self.writer
            .write_all(&frames)
            .map_err(|e| format!("sending {n} calls: {e}"))?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let (h, body) = coro_rpc::read_response(&mut self.reader, coro_rpc::MAX_RESPONSE)
                .map_err(|e| format!("reading reply {i} of {n}: {e}"))?
                .ok_or_else(|| "the master closed the connection".to_string())?;
            if h.seq != first.wrapping_add(i as u32) {
                return Err(format!("reply {} out of order", h.seq));
            }
            if h.err_code != coro_rpc::ERR_OK {
                return Err(format!(
                    "transport error {}: {}",
                    h.err_code,
                    coro_rpc::error_message(&body)
                ));
            }
            out.push(body);
        }
        Ok(out)
    }
}

/// Decodes a reply of `R`.
pub fn decode<R: Rpc>(body: &[u8]) -> Result<R::Ret, String> {
    struct_pack::deserialize::<R::Ret>(body).map_err(|e| format!("{} reply: {e}", R::METHOD.name()))
}
