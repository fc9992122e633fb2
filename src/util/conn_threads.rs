//! One thread per accepted connection, tracked so that a server can shut every
//! connection down and join every thread when it stops.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A connected socket a server thread serves.
pub trait Connection: Send + Sized + 'static {
    /// A second handle to the same socket.
    fn duplicate(&self) -> io::Result<Self>;
    /// Shuts both directions down (a blocked reader returns).
    fn close(&self);
}

impl Connection for TcpStream {
    fn duplicate(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn close(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

impl Connection for UnixStream {
    fn duplicate(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn close(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

type Live<S> = Arc<Mutex<HashMap<u64, (S, JoinHandle<()>)>>>;

/// The live connections of one server.
pub struct ConnThreads<S: Connection> {
    next: AtomicU64,
    live: Live<S>,
}

impl<S: Connection> Default for ConnThreads<S> {
    fn default() -> Self {
        ConnThreads {
            next: AtomicU64::new(0),
            live: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

impl<S: Connection> ConnThreads<S> {
    /// Serves `stream` with `serve` on a new thread called `name`; the socket is shut
    /// down when `serve` returns. A stream that cannot be tracked is dropped.
    pub fn spawn(&self, name: &str, stream: S, serve: impl FnOnce(&S) + Send + 'static) {
        let Ok(control) = stream.duplicate() else {
            return;
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let live = self.live.clone();
        let mut conns = self.live.lock();
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                serve(&stream);
                stream.close();
                live.lock().remove(&id);
            });
        if let Ok(handle) = spawned {
            conns.insert(id, (control, handle));
        }
        conns.retain(|_, (_, h)| !h.is_finished());
    }

    /// Shuts every connection down and joins its thread.
    pub fn close_all(&self) {
        let conns: Vec<_> = self.live.lock().drain().collect();
        for (_, (stream, handle)) in conns {
            stream.close();
            let _ = handle.join();
        }
    }
}
