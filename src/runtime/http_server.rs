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
//!
//! By job: `limits.rs` the sizes, counts and timeouts; `handler.rs` what a user
//! implements ([`HttpHandler`]) and returns ([`HttpReply`], [`HeadedReply`]);
//! `head.rs` and `body.rs` read a request; `response.rs` writes a reply;
//! `connection.rs` serves one connection; this file the accept loop ([`HttpServer`]).

mod body;
mod connection;
mod handler;
mod head;
mod limits;
mod response;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use crate::codec::debug_by_field::debug_by_field;
use crate::error::{Error, ErrorKind::Socket, Result};
use crate::runtime::conn_threads::ConnLimits;
use crate::runtime::tcp_acceptor::{StreamTimeouts, TcpAcceptor};

pub(crate) use body::read_body;
use connection::{reject_busy, serve_connection};
pub use handler::{HeadedReply, HttpHandler, HttpReply};
pub(crate) use head::{read_head, ReadFail};
pub use limits::{
    CONNECTION_THREAD, MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, MAX_HEAD_BYTES,
};
use limits::{READ_TICK, WRITE_TIMEOUT};

/// A running HTTP server. Dropping it (or calling [`stop`](Self::stop)) stops
/// accepting, closes every connection and joins every thread.
pub struct HttpServer {
    acceptor: TcpAcceptor,
}

debug_by_field!(HttpServer, addr = acceptor.local_addr());

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
