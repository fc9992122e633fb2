//! A server on an abstract Unix socket: one acceptor thread and one thread per
//! connection (within [`ConnLimits`]; a connection over them is closed at once), all
//! shut down and joined by [`UnixServer::stop`] (or drop).

use super::conn_threads::{ConnLimits, ConnThreads};
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the acceptor sleeps when no connection is waiting (it polls so that it
/// notices `stop` without a wake-up connection).
const ACCEPT_POLL: Duration = Duration::from_millis(20);

struct Shared {
    stopping: AtomicBool,
    connections: ConnThreads<UnixStream>,
}

/// A running abstract-socket server.
pub struct UnixServer {
    shared: Arc<Shared>,
    name: String,
    acceptor: Option<JoinHandle<()>>,
}

impl UnixServer {
    /// Binds `@name` and serves every accepted connection with `serve` on its own
    /// thread (named `thread`), at most `limits` at once; the connection is shut down
    /// when `serve` returns.
    pub fn start(
        name: &str,
        thread: &str,
        limits: ConnLimits,
        serve: impl Fn(&UnixStream) + Send + Sync + 'static,
    ) -> io::Result<UnixServer> {
        let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(name)?)?;
        listener.set_nonblocking(true)?;
        let shared = Arc::new(Shared {
            stopping: AtomicBool::new(false),
            connections: ConnThreads::new(limits),
        });
        let acceptor_shared = shared.clone();
        let serve = Arc::new(serve);
        let conn_thread = thread.to_string();
        let acceptor = std::thread::Builder::new()
            .name(format!("{thread}-accept"))
            .spawn(move || accept_loop(listener, &acceptor_shared, &conn_thread, serve))?;
        Ok(UnixServer {
            shared,
            name: name.to_string(),
            acceptor: Some(acceptor),
        })
    }

    /// The abstract socket name (without the leading `@`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stops accepting, shuts every connection down and joins every thread.
    pub fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = acceptor.join();
        self.shared.connections.close_all();
    }
}

impl Drop for UnixServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(
    listener: UnixListener,
    shared: &Shared,
    thread: &str,
    serve: Arc<impl Fn(&UnixStream) + Send + Sync + 'static>,
) {
    while !shared.stopping.load(Ordering::SeqCst) {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(_) => {
                // Nothing waiting (non-blocking) or a transient error.
                std::thread::sleep(ACCEPT_POLL);
                continue;
            }
        };
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        let serve = serve.clone();
        if let Err((_, why)) = shared
            .connections
            .spawn(thread, stream, move |stream| serve(stream))
        {
            log::warn!("@{thread}: connection refused: {why}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn serves_each_connection_and_stops_them_all() {
        let name = format!("mooncake-unix-server-test-{}", std::process::id());
        let mut server = UnixServer::start(
            &name,
            "mc-test",
            ConnLimits::new(8, 8),
            |mut s: &UnixStream| {
                let mut b = [0u8; 1];
                while s.read_exact(&mut b).is_ok() {
                    let _ = s.write_all(&b);
                }
            },
        )
        .unwrap();
        assert_eq!(server.name(), name);
        let addr = SocketAddr::from_abstract_name(&name).unwrap();
        let mut c = UnixStream::connect_addr(&addr).unwrap();
        c.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
        server.stop();
        // The connection was shut down, and nothing listens any more.
        assert_eq!(c.read(&mut b).unwrap_or(0), 0);
        assert!(UnixStream::connect_addr(&addr).is_err());
    }
}
