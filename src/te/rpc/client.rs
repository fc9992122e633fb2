//! The RPC daemon's client side (spec §3.2): resolve, connect with a deadline, write one
//! request frame, read one reply frame of the same type, close. No keep-alive.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{json, Value};

use super::frame::{DeadlineReader, Frame};
use super::msg_type::MsgType;
use crate::error::{Error, Result};

/// Upstream's `SO_RCVTIMEO` on the client socket (each read waits at most this long).
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Upstream's cap on reading a whole reply.
const READ_TOTAL: Duration = Duration::from_secs(300);
/// Per-write timeout for the request.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// Used when a zero connect timeout is configured (upstream's default).
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends one-shot requests to peers' RPC daemons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcClient {
    connect_timeout: Duration,
    max_frame_len: u64,
}

impl RpcClient {
    /// A client connecting within `connect_timeout` (zero means upstream's 5 s) and
    /// accepting replies up to `max_frame_len` bytes (config `handshake_max_length`).
    pub fn new(connect_timeout: Duration, max_frame_len: u64) -> RpcClient {
        RpcClient {
            connect_timeout: if connect_timeout.is_zero() {
                DEFAULT_CONNECT_TIMEOUT
            } else {
                connect_timeout
            },
            max_frame_len,
        }
    }

    /// Type 1: sends our own descriptor JSON, returns the peer's descriptor JSON value.
    /// A `null` reply (the peer has no local segment) or any non-object reply is an
    /// [`Error::MalformedJson`].
    pub fn exchange_metadata(&self, host: &str, port: u16, own: &Value) -> Result<Value> {
        match self.call(host, port, MsgType::Metadata, own)? {
            v @ Value::Object(_) => Ok(v),
            Value::Null => Err(Error::MalformedJson(format!(
                "peer {host}:{port} has no local segment descriptor (replied null)"
            ))),
            other => Err(Error::MalformedJson(format!(
                "peer {host}:{port} replied a non-object descriptor: {other}"
            ))),
        }
    }

    /// Type 2: delivers a notification. A reply whose `notify_msg` is empty or missing
    /// means the peer rejected it: [`Error::Metadata`].
    pub fn send_notify(&self, host: &str, port: u16, name: &str, msg: &str) -> Result<()> {
        let request = json!({"name": name, "notify_msg": msg});
        let reply = self.call(host, port, MsgType::Notify, &request)?;
        match reply.get("notify_msg").and_then(Value::as_str) {
            Some(s) if !s.is_empty() => Ok(()),
            _ => Err(Error::Metadata(format!(
                "peer {host}:{port} rejected notify: {reply}"
            ))),
        }
    }

    /// Type 3: liveness probe. Succeeds when a well-formed reply frame of type 3 with
    /// parseable JSON comes back.
    pub fn probe(&self, host: &str, port: u16) -> Result<()> {
        self.call(host, port, MsgType::Probe, &json!({})).map(drop)
    }

    /// Type 0: a connection (RDMA QP) handshake; returns the peer's reply JSON as is
    /// (the caller checks `reply_msg`). A peer that sends nothing for `read_timeout`
    /// fails the call.
    pub fn handshake(
        &self,
        host: &str,
        port: u16,
        req: &Value,
        read_timeout: Duration,
    ) -> Result<Value> {
        self.call_within(host, port, MsgType::Connection, req, read_timeout)
    }

    /// Sends `body` as a `msg_type` frame to each resolved address in turn until one
    /// answers; a malformed reply stops the loop (as upstream).
    fn call(&self, host: &str, port: u16, msg_type: MsgType, body: &Value) -> Result<Value> {
        self.call_within(host, port, msg_type, body, READ_TIMEOUT)
    }

    fn call_within(
        &self,
        host: &str,
        port: u16,
        msg_type: MsgType,
        body: &Value,
        read_timeout: Duration,
    ) -> Result<Value> {
        let addrs = resolve(host, port)?;
        let bytes = Frame::from_value(msg_type, body).encode();
        let mut last = None;
        for addr in addrs {
            match self.call_one(addr, msg_type, &bytes, read_timeout) {
                Ok(v) => return Ok(v),
                Err(e @ Error::MalformedJson(_)) => return Err(e),
                Err(e) => {
                    log::debug!("RPC {msg_type:?} to {addr} failed: {e}");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::Dns(format!("{host}: no addresses"))))
    }

    fn call_one(
        &self,
        addr: SocketAddr,
        msg_type: MsgType,
        request: &[u8],
        read_timeout: Duration,
    ) -> Result<Value> {
        let stream = TcpStream::connect_timeout(&addr, self.connect_timeout)
            .map_err(|e| Error::socket(format_args!("connecting to {addr}"), e))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_write_timeout(Some(WRITE_TIMEOUT))
            .map_err(|e| Error::socket("setting RPC write timeout", e))?;
        let mut writer = &stream;
        std::io::Write::write_all(&mut writer, request)
            .map_err(|e| Error::socket(format_args!("sending RPC request to {addr}"), e))?;
        let mut reader = DeadlineReader::new(&stream, read_timeout, READ_TOTAL.max(read_timeout));
        let reply = Frame::read_from(&mut reader, self.max_frame_len)
            .map_err(|e| Error::Socket(format!("RPC reply from {addr}: {}", e.message())))?;
        if reply.msg_type != msg_type {
            return Err(Error::Socket(format!(
                "RPC reply from {addr} has type {:?}, expected {msg_type:?}",
                reply.msg_type
            )));
        }
        serde_json::from_slice(&reply.json)
            .map_err(|e| Error::MalformedJson(format!("RPC reply from {addr}: {e}")))
    }
}

/// Resolves `host` (a name, an IPv4 address, or an IPv6 address with or without
/// brackets) and `port`; failure or no result is an [`Error::Dns`].
fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if bare.is_empty() {
        return Err(Error::Dns("empty host name".into()));
    }
    let addrs: Vec<SocketAddr> = (bare, port)
        .to_socket_addrs()
        .map_err(|e| Error::Dns(format!("resolving {host}: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(Error::Dns(format!("{host}: no addresses")));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_literals_and_brackets() {
        let v4 = resolve("127.0.0.1", 7).unwrap();
        assert_eq!(v4, vec!["127.0.0.1:7".parse().unwrap()]);
        let v6 = resolve("[::1]", 9).unwrap();
        assert_eq!(v6, vec!["[::1]:9".parse().unwrap()]);
        let v6 = resolve("::1", 9).unwrap();
        assert_eq!(v6, vec!["[::1]:9".parse().unwrap()]);
        assert!(matches!(resolve("", 1), Err(Error::Dns(_))));
        assert!(matches!(resolve("[]", 1), Err(Error::Dns(_))));
    }

    #[test]
    fn zero_connect_timeout_uses_default() {
        let c = RpcClient::new(Duration::ZERO, 1);
        assert_eq!(c.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
    }
}
