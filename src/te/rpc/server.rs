//! The RPC daemon's server side (spec §3.2 and §3.3).
//!
//! A [`TcpAcceptor`] serves each accepted connection on a thread of its own, within
//! [`ConnLimits`] (in all and per peer host; a connection over them is closed at
//! once), so a peer that floods the daemon or sends slowly holds only its own
//! connections. Per connection: read one frame within 5 s, parse its JSON (closing
//! without a reply on failure), dispatch it to the [`RpcHandler`], write the reply frame
//! (same type; untyped for legacy frames), half-close, wait up to 5 s for the peer's
//! EOF, and close.

use std::io::{self, Read};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::frame::{DeadlineReader, Frame};
use super::msg_type::MsgType;
use crate::error::{Error, Result};
use crate::runtime::conn_threads::ConnLimits;
use crate::runtime::tcp_acceptor::{StreamTimeouts, TcpAcceptor};

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

/// A running RPC daemon. Stops (and joins its threads) on [`RpcServer::stop`] or drop.
pub struct RpcServer {
    acceptor: TcpAcceptor,
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
        listener
            .set_nonblocking(false)
            .map_err(|e| Error::socket("RPC listener blocking", e))?;
        let acceptor = TcpAcceptor::start(
            listener,
            "mc-rpc",
            limits,
            StreamTimeouts::default(),
            move |stream, _| serve_guarded(stream, handler.as_ref(), max_frame_len),
        )
        .map_err(|e| Error::socket("starting the RPC acceptor", e))?;
        log::debug!(
            "RPC daemon listening on port {}",
            acceptor.local_addr().port()
        );
        Ok(RpcServer { acceptor })
    }

    /// The port the daemon listens on.
    pub fn local_port(&self) -> u16 {
        self.acceptor.local_addr().port()
    }

    /// Stops accepting, cuts off connections in flight and joins every thread.
    /// Idempotent; dropping the server does the same.
    pub fn stop(&mut self) {
        self.acceptor.stop();
    }
}

/// Serves one connection; a panicking handler closes only this connection.
fn serve_guarded(stream: &TcpStream, handler: &dyn RpcHandler, max_frame_len: u64) {
    let served = catch_unwind(AssertUnwindSafe(|| {
        serve_connection(stream, handler, max_frame_len)
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
