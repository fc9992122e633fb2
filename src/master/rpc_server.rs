//! The master's coro_rpc listener: one acceptor thread and one thread per client
//! connection, each serving requests in order through [`crate::wire::dispatch`].
//!
//! Bounded by [`RpcLimits`]: connections in all and per peer host (more are closed at
//! accept), request bodies of at most [`MAX_FRAME`], an optional idle timeout, and a
//! write timeout so a client that stops reading its replies gives up its connection.
//!
//! With [`ConnectionEvents`], it also reports which clients each connection carries
//! (those that ping or mount over it) and, when the connection ends, whether the peer
//! went away (closed or reset it) — how the master notices a dead segment owner at
//! once instead of after its TTL.

use crate::runtime::conn_threads::ConnLimits;
use crate::runtime::tcp_acceptor::{StreamTimeouts, TcpAcceptor};
use crate::wire::codec::{self, rpc, Rpc};
use crate::wire::coro_rpc::{Method, MAX_FRAME};
use crate::wire::dispatch::serve_stream_observed;
use crate::wire::master_api::{MasterApi, Uuid};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Default for `--rpc_max_connections`: client connections served at once.
pub const MAX_CONNECTIONS: usize = 4096;
/// Default for `--rpc_max_connections_per_peer`: connections one client host may hold.
pub const MAX_CONNECTIONS_PER_PEER: usize = 1024;
/// How long writing a reply may block before the connection is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// How the master's RPC listener bounds its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcLimits {
    /// A connection that sends nothing this long is closed; clients reconnect on their
    /// next call (upstream's `--rpc_conn_timeout_seconds`; `None` = never).
    pub idle_timeout: Option<Duration>,
    /// `--rpc_max_connections` and `--rpc_max_connections_per_peer`.
    pub connections: ConnLimits,
}

impl Default for RpcLimits {
    fn default() -> Self {
        RpcLimits {
            idle_timeout: None,
            connections: ConnLimits::new(MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER),
        }
    }
}

/// Told which clients the server's connections carry.
pub trait ConnectionEvents: Send + Sync {
    /// `client` pinged or mounted over a connection (first time on that connection).
    fn client_connected(&self, client: Uuid);
    /// A connection that carried `client` ended; `peer_gone` when the peer closed or
    /// reset it (not an idle timeout, a protocol error or this server stopping).
    fn client_disconnected(&self, client: Uuid, peer_gone: bool);
}

struct Shared {
    api: Arc<dyn MasterApi>,
    events: Option<Arc<dyn ConnectionEvents>>,
    /// Raised by the acceptor when the server stops.
    stopping: Arc<AtomicBool>,
}

/// A running RPC listener; dropping it closes every connection and joins every thread.
pub struct RpcServer {
    acceptor: TcpAcceptor,
}

impl RpcServer {
    /// Binds `bind` (port 0 picks a free port) and serves `api` within `limits`.
    pub fn start(
        bind: SocketAddr,
        api: Arc<dyn MasterApi>,
        limits: RpcLimits,
    ) -> io::Result<RpcServer> {
        RpcServer::start_with_events(bind, api, None, limits)
    }

    /// [`RpcServer::start`], reporting connections to `events`.
    pub fn start_with_events(
        bind: SocketAddr,
        api: Arc<dyn MasterApi>,
        events: Option<Arc<dyn ConnectionEvents>>,
        limits: RpcLimits,
    ) -> io::Result<RpcServer> {
        let listener = TcpListener::bind(bind)?;
        let stopping = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            api,
            events,
            stopping: stopping.clone(),
        });
        let acceptor = TcpAcceptor::start(
            listener,
            "mc-master-rpc",
            limits.connections,
            StreamTimeouts {
                read: limits.idle_timeout,
                write: Some(WRITE_TIMEOUT),
            },
            move |stream, peer| {
                if let Ok(stream) = stream.try_clone() {
                    serve_connection(stream, peer, &shared);
                }
            },
        )?
        .raising_on_stop(stopping);
        Ok(RpcServer { acceptor })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.acceptor.local_addr()
    }

    /// Stops accepting, closes every connection and joins every thread.
    pub fn stop(&mut self) {
        self.acceptor.stop();
    }
}

/// Serves one connection, reporting the clients it carries to the events, if any.
fn serve_connection(stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    let mut carried: Vec<Uuid> = Vec::new();
    let mut observe = |function_id: u32, body: &[u8]| {
        let Some(events) = &shared.events else { return };
        if let Some(client) = client_of(function_id, body) {
            if !carried.contains(&client) {
                carried.push(client);
                events.client_connected(client);
            }
        }
    };
    let result = serve_stream_observed(stream, shared.api.as_ref(), MAX_FRAME, &mut observe);
    let peer_gone = !shared.stopping.load(Ordering::SeqCst)
        && match &result {
            Ok(()) => true,
            Err(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::UnexpectedEof
            ),
        };
    if let Err(e) = &result {
        log::debug!("master rpc connection from {peer} closed: {e}");
    }
    if let Some(events) = &shared.events {
        for client in carried {
            events.client_disconnected(client, peer_gone);
        }
    }
}

/// The client a liveness request (Ping, MountSegment, ReMountSegment) is from.
fn client_of(function_id: u32, body: &[u8]) -> Option<Uuid> {
    fn args<R: Rpc>(body: &[u8]) -> Option<R::Args> {
        codec::decode_args::<R::Args>(body).ok()
    }
    match Method::from_id(function_id)? {
        Method::Ping => args::<rpc::Ping>(body).map(|(c,)| c),
        Method::MountSegment => args::<rpc::MountSegment>(body).map(|(_, c)| c),
        Method::ReMountSegment => args::<rpc::ReMountSegment>(body).map(|(_, c)| c),
        _ => None,
    }
}
