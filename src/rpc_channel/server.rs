//! The receiving side: a coro_rpc listener serving upstream's two `RpcCommunicator`
//! functions, each call's payload handed to the receiver before the reply is sent (as
//! upstream's server does, so a sender returns once its data was taken).

use super::protocol::{request_payload, void_body, Kind, OK_ATTACHMENT};
use crate::runtime::conn_threads::ConnLimits;
use crate::runtime::tcp_acceptor::{StreamTimeouts, TcpAcceptor};
use crate::wire::coro_rpc::{
    encode_response_attached, error_body, read_request_attached, write_frame,
    ERR_FUNCTION_NOT_REGISTERED, ERR_INVALID_ARGUMENTS, ERR_OK, MAX_RESPONSE,
    MSG_FUNCTION_NOT_REGISTERED, MSG_INVALID_ARGUMENTS,
};
use std::io::{self, BufReader, BufWriter};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;

/// Takes each received payload, with the call it came by.
pub type Receiver = Arc<dyn Fn(Kind, &[u8]) + Send + Sync>;

/// Connections served at once, and per peer host.
const MAX_CONNECTIONS: usize = 1024;

/// A listening server; stopped (every connection closed, every thread joined) by
/// [`Server::stop`] or on drop.
pub struct Server(TcpAcceptor);

impl Server {
    /// Listens on `addr` and hands every payload to `receiver`. `threads` is
    /// upstream's I/O thread count; here each connection has a thread of its own.
    pub fn start(addr: SocketAddr, receiver: Receiver) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let limits = ConnLimits::new(MAX_CONNECTIONS, MAX_CONNECTIONS);
        let acceptor = TcpAcceptor::start(
            listener,
            "mc-rpc-channel",
            limits,
            StreamTimeouts::default(),
            move |stream, _| {
                if let Err(e) = serve(stream, &receiver) {
                    log::debug!("rpc channel: connection ended: {e}");
                }
            },
        )?;
        Ok(Server(acceptor))
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local_addr()
    }

    /// Stops listening, closes every connection, joins every thread; idempotent.
    pub fn stop(&mut self) {
        self.0.stop();
    }
}

/// Serves one connection's calls in order until it closes.
fn serve(stream: &TcpStream, receiver: &Receiver) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream.try_clone()?);
    while let Some((header, body, attachment)) = read_request_attached(&mut reader, MAX_RESPONSE)? {
        let seq = header.seq;
        let frame = match Kind::of(header.function_id) {
            None => encode_response_attached(
                seq,
                ERR_FUNCTION_NOT_REGISTERED,
                &error_body(MSG_FUNCTION_NOT_REGISTERED),
                &[],
            ),
            Some(kind) => {
                let attached = !attachment.is_empty();
                match request_payload(kind, &body, attachment) {
                    None => encode_response_attached(
                        seq,
                        ERR_INVALID_ARGUMENTS,
                        &error_body(MSG_INVALID_ARGUMENTS),
                        &[],
                    ),
                    Some(payload) => {
                        receiver(kind, &payload);
                        let reply: &[u8] = if attached && kind == Kind::Data {
                            OK_ATTACHMENT
                        } else {
                            &[]
                        };
                        encode_response_attached(seq, ERR_OK, &void_body(), reply)
                    }
                }
            }
        };
        write_frame(&mut writer, &frame)?;
    }
    Ok(())
}
