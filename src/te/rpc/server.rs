//! The RPC daemon's server side (spec §3.2 and §3.3).
//!
//! One acceptor thread waits on the listener (with `poll(2)` and a short timeout so it
//! sees a stop request promptly) and serves each accepted connection on a thread of its
//! own, within [`ConnLimits`] (in all and per peer host; a connection over them is
//! closed at once), so a peer that floods the daemon or sends slowly holds only its own
//! connections. Per connection: read one frame within 5 s, parse its JSON (closing
//! without a reply on failure), dispatch it to the [`RpcHandler`], write the reply frame
//! (same type; untyped for legacy frames), half-close, wait up to 5 s for the peer's
//! EOF, and close.

use std::io::{self, Read};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::io::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{json, Value};

use super::frame::{DeadlineReader, Frame};
use super::MsgType;
use crate::error::{Error, Result};
use crate::util::conn_threads::{ConnLimits, ConnThreads};

/// How long the acceptor sleeps in `poll(2)` before rechecking the stop flag.
const ACCEPT_POLL_MS: i32 = 50;
/// Upstream's `SO_RCVTIMEO` on a served connection; also our deadline for the request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait for the peer's EOF after the reply (upstream: 5 s).
const LINGER_TIMEOUT: Duration = Duration::from_secs(5);
/// Per-write timeout for the reply, so a peer that never reads cannot hold its thread.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the engine answers; implemented by the engine.
pub trait RpcHandler: Send + Sync + 'static {
    /// Type 1: return this engine's local segment descriptor JSON, or None if it has none
    /// (the reply is then `null`).
    fn local_descriptor(&self) -> Option<Value>;
    /// Type 2: a notify arrived.
    fn on_notify(&self, name: String, msg: String);
    /// Type 0 (and legacy frames): a connection/QP handshake request; return the reply JSON.
    fn on_connection(&self, request: &Value) -> Value;
}

/// State shared by the acceptor, the connection threads and [`RpcServer::stop`].
struct Shared {
    stop: AtomicBool,
    connections: ConnThreads<TcpStream>,
    handler: Arc<dyn RpcHandler>,
    max_frame_len: u64,
}

/// A running RPC daemon. Stops (and joins its threads) on [`RpcServer::stop`] or drop.
pub struct RpcServer {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl RpcServer {
    /// Serves on an already-bound listener until stopped/dropped, at most `limits`
    /// connections at once. Frames longer than `max_frame_len` (config
    /// `handshake_max_length`) are rejected.
    pub fn start(
        listener: TcpListener,
        handler: Arc<dyn RpcHandler>,
        max_frame_len: u64,
        limits: ConnLimits,
    ) -> Result<RpcServer> {
        let port = listener
            .local_addr()
            .map_err(|e| Error::socket("RPC listener address", e))?
            .port();
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::socket("RPC listener non-blocking", e))?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            connections: ConnThreads::new(limits),
            handler,
            max_frame_len,
        });
        let acceptor_shared = Arc::clone(&shared);
        let h = thread::Builder::new()
            .name("mc-rpc-accept".into())
            .spawn(move || accept_loop(listener, acceptor_shared))
            .map_err(|e| Error::socket("spawning RPC acceptor", e))?;
        log::debug!("RPC daemon listening on port {port}");
        Ok(RpcServer {
            port,
            shared,
            acceptor: Some(h),
        })
    }

    /// The port the daemon listens on.
    pub fn local_port(&self) -> u16 {
        self.port
    }

    /// Stops accepting, cuts off connections in flight and joins every thread.
    /// Idempotent; called by `Drop`.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // The acceptor notices within one poll interval and drops the listener (new
        // connections are refused from then on).
        if let Some(h) = self.acceptor.take() {
            if h.thread().id() != thread::current().id() {
                let _ = h.join();
            }
        }
        self.shared.connections.close_all();
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until the listener is readable or `ACCEPT_POLL_MS` passes.
fn wait_readable(listener: &TcpListener) {
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is a valid, initialised pollfd for the duration of the call, and we
    // pass a count of exactly one entry.
    let rc = unsafe { libc::poll(&mut pfd, 1, ACCEPT_POLL_MS) };
    if rc < 0 {
        // EINTR or similar: back off briefly rather than spin.
        thread::sleep(Duration::from_millis(ACCEPT_POLL_MS as u64));
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, peer)) => {
                if let Err(e) = stream.set_nonblocking(false) {
                    log::debug!("RPC: dropping connection from {peer}: {e}");
                    continue;
                }
                let conn_shared = Arc::clone(&shared);
                let spawned = shared.connections.spawn("mc-rpc-conn", stream, move |s| {
                    serve_guarded(s, &conn_shared)
                });
                if let Err((_, why)) = spawned {
                    log::warn!("RPC: closing connection from {peer}: {why}");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_readable(&listener),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                // E.g. EMFILE or ECONNABORTED: log and retry after a pause.
                log::warn!("RPC: accept failed: {e}");
                wait_readable(&listener);
                thread::sleep(Duration::from_millis(ACCEPT_POLL_MS as u64));
            }
        }
    }
}

/// Serves one connection; a panicking handler closes only this connection.
fn serve_guarded(stream: &TcpStream, shared: &Shared) {
    if shared.stop.load(Ordering::SeqCst) {
        return;
    }
    let served = catch_unwind(AssertUnwindSafe(|| {
        serve_connection(stream, shared.handler.as_ref(), shared.max_frame_len)
    }));
    match served {
        Ok(Ok(())) => {}
        Ok(Err(e)) => log::debug!("RPC: connection closed: {e}"),
        Err(_) => log::error!("RPC: handler panicked; connection closed"),
    }
}

/// Serves one connection: one request, one reply, then half-close and wait for EOF.
fn serve_connection(stream: &TcpStream, handler: &dyn RpcHandler, max_len: u64) -> Result<()> {
    let _ = stream.set_nodelay(true);
    let mut reader = DeadlineReader::new(stream, REQUEST_TIMEOUT, REQUEST_TIMEOUT);
    let request = Frame::read_from(&mut reader, max_len)?;
    let value: Value = serde_json::from_slice(&request.json)
        .map_err(|e| Error::MalformedJson(format!("RPC request: {e}")))?;
    let reply = dispatch(request.msg_type, &value, handler);
    let frame = if request.legacy {
        Frame::legacy(super::frame::encode_json(&reply))
    } else {
        Frame::from_value(request.msg_type, &reply)
    };
    stream
        .set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(|e| Error::socket("RPC write timeout", e))?;
    let mut writer = stream;
    frame
        .write_to(&mut writer)
        .map_err(|e| Error::socket("writing RPC reply", e))?;
    let _ = stream.shutdown(Shutdown::Write);
    // Like upstream: block until the peer closes (or sends anything, or 5 s pass).
    let mut reader = DeadlineReader::new(stream, LINGER_TIMEOUT, LINGER_TIMEOUT);
    let mut buf = [0u8; 64];
    while let Err(e) = reader.read(&mut buf) {
        if e.kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    Ok(())
}

/// Computes the reply JSON for one request (spec §3.3).
fn dispatch(msg_type: MsgType, request: &Value, handler: &dyn RpcHandler) -> Value {
    match msg_type {
        MsgType::Connection => handler.on_connection(request),
        MsgType::Metadata => handler.local_descriptor().unwrap_or(Value::Null),
        MsgType::Notify => {
            let field = |k: &str| {
                request
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            handler.on_notify(field("name"), field("notify_msg"));
            json!({"name": "", "notify_msg": "success"})
        }
        MsgType::Probe => json!({"status": "success"}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;

    impl RpcHandler for Fixed {
        fn local_descriptor(&self) -> Option<Value> {
            None
        }
        fn on_notify(&self, _name: String, _msg: String) {}
        fn on_connection(&self, request: &Value) -> Value {
            request.clone()
        }
    }

    #[test]
    fn dispatch_replies() {
        let h = Fixed;
        assert_eq!(dispatch(MsgType::Metadata, &json!({}), &h), Value::Null);
        assert_eq!(
            dispatch(MsgType::Notify, &json!([1]), &h),
            json!({"name": "", "notify_msg": "success"})
        );
        assert_eq!(
            dispatch(MsgType::Probe, &Value::Null, &h),
            json!({"status": "success"})
        );
        assert_eq!(
            dispatch(MsgType::Connection, &json!({"a": 1}), &h),
            json!({"a": 1})
        );
    }

    #[test]
    fn stop_is_idempotent() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut s =
            RpcServer::start(listener, Arc::new(Fixed), 1 << 20, ConnLimits::new(8, 8)).unwrap();
        assert_ne!(s.local_port(), 0);
        s.stop();
        s.stop();
    }
}
