//! A TCP listener served by one acceptor thread and one thread per connection
//! ([`ConnThreads`], within its limits), stopped by a self-connection that wakes the
//! blocked `accept`: the loop every TCP listener shares (the master's RPC, HTTP and HA
//! replication ports, the engine's RPC daemon and TCP data port, a store owner's offload
//! port, the ZMTP PUB socket).

use super::conn_threads::{ConnLimits, ConnThreads};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Socket timeouts applied to every accepted connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamTimeouts {
    /// A read that waits this long fails (the connection is idle); `None` = never.
    pub read: Option<Duration>,
    /// A write that blocks this long fails (the peer stopped reading); `None` = never.
    pub write: Option<Duration>,
}

/// A running listener; dropping it closes every connection and joins every thread.
pub struct TcpAcceptor {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    /// Raised too on stopping, for the connections that watch it.
    watched: Option<Arc<AtomicBool>>,
    connections: Arc<ConnThreads<TcpStream>>,
    acceptor: Option<JoinHandle<()>>,
}

impl TcpAcceptor {
    /// Serves each connection `listener` accepts with `serve` (on a thread called
    /// `name`, given the accepted stream and the peer's address), within `limits`. A
    /// connection over a limit is closed at once; a served one is shut down when
    /// `serve` returns.
    pub fn start<F>(
        listener: TcpListener,
        name: &'static str,
        limits: ConnLimits,
        timeouts: StreamTimeouts,
        serve: F,
    ) -> io::Result<TcpAcceptor>
    where
        F: Fn(&TcpStream, SocketAddr) + Send + Sync + 'static,
    {
        Self::start_refusing_with(listener, name, limits, timeouts, serve, drop)
    }

    /// As [`start`](Self::start), but a connection over a limit is handed to `refuse`
    /// (on the acceptor thread, so it must not block for long) instead of being closed
    /// at once: a protocol that can say "busy" says it there.
    pub fn start_refusing_with<F, R>(
        listener: TcpListener,
        name: &'static str,
        limits: ConnLimits,
        timeouts: StreamTimeouts,
        serve: F,
        refuse: R,
    ) -> io::Result<TcpAcceptor>
    where
        F: Fn(&TcpStream, SocketAddr) + Send + Sync + 'static,
        R: Fn(TcpStream) + Send + 'static,
    {
        let addr = listener.local_addr()?;
        let stopping = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(ConnThreads::new(limits));
        let (stop, conns) = (stopping.clone(), connections.clone());
        let handlers = Handlers {
            serve: Arc::new(serve),
            refuse,
        };
        let acceptor = std::thread::Builder::new()
            .name(format!("{name}-accept"))
            .spawn(move || accept_loop(&listener, name, &stop, &conns, timeouts, handlers))?;
        Ok(TcpAcceptor {
            addr,
            stopping,
            watched: None,
            connections,
            acceptor: Some(acceptor),
        })
    }

    /// Raises `flag` too on stopping (dropping included), before the connections are
    /// closed: how connections that watch `flag` tell a shutdown from a peer that went
    /// away.
    pub fn raising_on_stop(mut self, flag: Arc<AtomicBool>) -> TcpAcceptor {
        self.watched = Some(flag);
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections being served now.
    pub fn connections(&self) -> usize {
        self.connections.len()
    }

    /// Stops accepting, closes every connection and joins every thread; idempotent.
    pub fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        if let Some(flag) = &self.watched {
            flag.store(true, Ordering::SeqCst);
        }
        self.stopping.store(true, Ordering::SeqCst);
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        let _ = acceptor.join();
        self.connections.close_all();
    }
}

impl Drop for TcpAcceptor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the acceptor does with a connection: serve it, or refuse it over a limit.
struct Handlers<F, R> {
    serve: Arc<F>,
    refuse: R,
}

fn accept_loop<F, R>(
    listener: &TcpListener,
    name: &'static str,
    stopping: &AtomicBool,
    connections: &ConnThreads<TcpStream>,
    timeouts: StreamTimeouts,
    handlers: Handlers<F, R>,
) where
    F: Fn(&TcpStream, SocketAddr) + Send + Sync + 'static,
    R: Fn(TcpStream),
{
    loop {
        let accepted = listener.accept();
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                log::warn!("{name}: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if stream.set_read_timeout(timeouts.read).is_err()
            || stream.set_write_timeout(timeouts.write).is_err()
        {
            continue;
        }
        let serve = handlers.serve.clone();
        let spawned = connections.spawn(name, stream, move |stream| serve(stream, peer));
        if let Err((stream, why)) = spawned {
            log::warn!("{name}: refusing {peer}: {why}");
            (handlers.refuse)(stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn serves_connections_and_stops_with_them_open() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut acceptor = TcpAcceptor::start(
            listener,
            "echo",
            ConnLimits::new(8, 8),
            StreamTimeouts::default(),
            |mut s: &TcpStream, _| {
                let mut b = [0u8; 4];
                while let Ok(n @ 1..) = s.read(&mut b) {
                    if s.write_all(&b[..n]).is_err() {
                        return;
                    }
                }
            },
        )
        .unwrap();
        let mut c = TcpStream::connect(acceptor.local_addr()).unwrap();
        c.write_all(b"ping").unwrap();
        let mut back = [0u8; 4];
        c.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"ping");
        // The idle connection is shut down by stop, not waited for forever.
        acceptor.stop();
        assert_eq!(acceptor.connections(), 0);
        assert_eq!(c.read(&mut back).unwrap_or(0), 0);
    }

    #[test]
    fn a_connection_over_the_limit_goes_to_the_refusal() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let acceptor = TcpAcceptor::start_refusing_with(
            listener,
            "busy",
            ConnLimits::new(1, 1),
            StreamTimeouts::default(),
            |mut s: &TcpStream, _| {
                let mut b = [0u8; 1];
                let _ = s.read(&mut b);
            },
            |mut s: TcpStream| {
                let _ = s.write_all(b"busy");
            },
        )
        .unwrap();
        let _held = TcpStream::connect(acceptor.local_addr()).unwrap();
        // The first connection is served (and waits for a byte); the next is refused.
        let mut refused = TcpStream::connect(acceptor.local_addr()).unwrap();
        let mut answer = String::new();
        refused.read_to_string(&mut answer).unwrap();
        assert_eq!(answer, "busy");
    }
}
