//! The master's coro_rpc listener: one acceptor thread and one thread per client
//! connection, each serving requests in order through [`crate::wire::dispatch`].

use crate::wire::coro_rpc::MAX_FRAME;
use crate::wire::dispatch::serve_stream;
use crate::wire::master_api::MasterApi;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Most client connections served at once; further ones are closed at accept.
pub const MAX_CONNECTIONS: usize = 4096;

struct Shared {
    api: Arc<dyn MasterApi>,
    idle_timeout: Option<Duration>,
    stopping: AtomicBool,
    next_id: AtomicU64,
    connections: Mutex<HashMap<u64, (TcpStream, JoinHandle<()>)>>,
}

/// A running RPC listener; dropping it closes every connection and joins every thread.
pub struct RpcServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl RpcServer {
    /// Binds `bind` (port 0 picks a free port) and serves `api`. A connection that sends
    /// nothing for `idle_timeout` (upstream's `--rpc_conn_timeout_seconds`; `None` = never)
    /// is closed; clients reconnect on their next call.
    pub fn start(
        bind: SocketAddr,
        api: Arc<dyn MasterApi>,
        idle_timeout: Option<Duration>,
    ) -> io::Result<RpcServer> {
        let listener = TcpListener::bind(bind)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            api,
            idle_timeout,
            stopping: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            connections: Mutex::new(HashMap::new()),
        });
        let acceptor_shared = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("mc-master-accept".into())
            .spawn(move || accept_loop(listener, acceptor_shared))?;
        Ok(RpcServer {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes every connection and joins every thread.
    pub fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip([127, 0, 0, 1].into());
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        let _ = acceptor.join();
        let connections: Vec<_> = self.shared.connections.lock().drain().collect();
        for (_, (stream, handle)) in connections {
            let _ = stream.shutdown(Shutdown::Both);
            let _ = handle.join();
        }
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                log::warn!("master rpc accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let mut connections = shared.connections.lock();
        connections.retain(|_, (_, handle)| !handle.is_finished());
        if connections.len() >= MAX_CONNECTIONS {
            log::warn!("master rpc: {MAX_CONNECTIONS} connections open; refusing {peer}");
            continue;
        }
        if stream.set_read_timeout(shared.idle_timeout).is_err() {
            continue;
        }
        let Ok(control) = stream.try_clone() else {
            continue;
        };
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let conn_shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("mc-master-conn".into())
            .spawn(move || {
                if let Err(e) = serve_stream(stream, conn_shared.api.as_ref(), MAX_FRAME) {
                    log::debug!("master rpc connection from {peer} closed: {e}");
                }
                conn_shared.connections.lock().remove(&id);
            });
        if let Ok(handle) = spawned {
            connections.insert(id, (control, handle));
        }
    }
}
