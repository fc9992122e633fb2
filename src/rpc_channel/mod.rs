//! Upstream's `RpcInterface` channel (Python `mooncake.engine.RpcInterface`): bytes
//! and tensors sent to a peer's server over coro_rpc, interoperable with upstream's
//! client and server (`protocol`). A [`Channel`] is a client, and optionally a server
//! whose received payloads go to one receiver; the C functions are in
//! `ffi/rpc_channel.rs`.

pub mod client;
pub mod protocol;
pub mod server;

use client::Client;
use parking_lot::{Mutex, RwLock};
pub use protocol::Kind;
use server::{Receiver, Server};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// Where a server stands.
enum ServerState {
    /// Not started yet.
    Ready,
    /// Listening.
    Running(Server),
    /// Stopped; it does not start again (as upstream's).
    Stopped,
}

/// A client, and a server on `listen` when one was given.
pub struct Channel {
    listen: Option<String>,
    client: Client,
    server: Mutex<ServerState>,
    receiver: Arc<RwLock<Option<Receiver>>>,
}

impl Channel {
    /// A channel whose server (when `listen` is some) will listen there; calls wait
    /// `timeout` for their replies and keep `pool_size` connections per target.
    pub fn new(listen: Option<String>, timeout: Duration, pool_size: usize) -> Channel {
        Channel {
            listen: listen.filter(|l| !l.trim().is_empty()),
            client: Client::new(pool_size, timeout),
            server: Mutex::new(ServerState::Ready),
            receiver: Arc::new(RwLock::new(None)),
        }
    }

    /// Sets (or clears) where received payloads go.
    pub fn set_receiver(&self, receiver: Option<Receiver>) {
        *self.receiver.write() = receiver;
    }

    /// Starts the server; an error for a client-only channel, a bad or busy address,
    /// one already started, or one stopped.
    pub fn start(&self) -> io::Result<SocketAddr> {
        let mut state = self.server.lock();
        let listen = self.listen.as_deref().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a client-only channel has no server",
            )
        })?;
        match &*state {
            ServerState::Ready => {}
            ServerState::Running(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "the server runs already",
                ))
            }
            ServerState::Stopped => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the server was stopped",
                ))
            }
        }
        let addr = listen_address(listen)?;
        let receiver = self.receiver.clone();
        let forward: Receiver = Arc::new(move |kind, payload| {
            if let Some(r) = receiver.read().clone() {
                r(kind, payload);
            }
        });
        let server = Server::start(addr, forward)?;
        let bound = server.local_addr();
        *state = ServerState::Running(server);
        Ok(bound)
    }

    /// Stops the server (if running) and waits for the calls in progress.
    pub fn stop(&self) {
        let old = std::mem::replace(&mut *self.server.lock(), ServerState::Stopped);
        if let ServerState::Running(mut server) = old {
            server.stop();
        }
    }

    /// Sends `payload` to `target` (`host:port`) as a `kind` call.
    pub fn send(&self, target: &str, kind: Kind, payload: &[u8]) -> io::Result<()> {
        self.client.send(target, kind, payload)
    }
}

/// `host:port`, `:port` (every interface) or `[v6]:port` as a socket address.
fn listen_address(listen: &str) -> io::Result<SocketAddr> {
    let full = match listen.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => listen.to_string(),
    };
    full.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no address in '{listen}'"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_channel_carries_data_and_tensors_in_every_size() {
        let server = Channel::new(Some("127.0.0.1:0".into()), Duration::from_secs(10), 4);
        let (tx, rx) = mpsc::channel::<(Kind, Vec<u8>)>();
        let tx = Mutex::new(tx);
        server.set_receiver(Some(Arc::new(move |k, p: &[u8]| {
            let _ = tx.lock().send((k, p.to_vec()));
        })));
        let addr = server.start().unwrap().to_string();
        assert!(server.start().is_err());
        let client = Channel::new(None, Duration::from_secs(10), 4);
        assert!(client.start().is_err());
        for (kind, payload) in [
            (Kind::Data, b"hello".to_vec()),
            (Kind::Data, vec![b'a'; 1024]),
            (Kind::Data, vec![9u8; 2051]),
            (Kind::Data, Vec::new()),
            (Kind::Data, vec![0xff, 0x00, 0xfe]),
            (Kind::Tensor, vec![1u8; 24]),
            (Kind::Data, b"after".to_vec()),
        ] {
            client.send(&addr, kind, &payload).unwrap();
            assert_eq!(rx.recv().unwrap(), (kind, payload));
        }
        server.stop();
        assert!(client.send(&addr, Kind::Data, b"x").is_err());
        assert!(server.start().is_err());
        assert!(client.send("127.0.0.1:1", Kind::Data, b"x").is_err());
        assert!(client.send("nowhere", Kind::Data, b"x").is_err());
    }
}
